//! Quantization: recognising the method from `quantization_config`, and the role each stored
//! tensor plays in it (a parameter, possibly packed; or a scale that is not a parameter).

use std::borrow::Cow;

use serde_json::Value;

use crate::findings::{Code, Findings};
use crate::verdict::Quantization;

/// What a stored tensor is, for parameter accounting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Parameters: `factor` logical values per stored element (2 for a byte of two 4-bit
    /// values), counted under `dtype` (the stored dtype when `None`).
    Param { factor: u64, dtype: Option<&'static str> },
    /// Quantization metadata (scales, zero points, group indices): bytes, not parameters.
    Scale,
}

/// Suffixes of quantization metadata tensors, each with the suffix of the tensor it scales
/// (when the planner checks that it exists).
const SCALE_SUFFIXES: &[(&str, Option<&str>)] = &[
    (".weight_scale_inv", Some(".weight")),
    ("_scales", Some("_blocks")),
    (".weight_scale_2", None),
    (".weight_scale", None),
    (".input_scale", None),
    (".output_scale", None),
    (".k_scale", None),
    (".v_scale", None),
    (".weight_zero_point", None),
    (".weight_g_idx", None),
    (".weight_shape", None),
    (".weight_global_scale", None),
    (".input_global_scale", None),
    (".qzeros", None),
    (".scales", None),
    (".g_idx", None),
    (".SCB", None),
    (".weight_format", None),
    (".weight.absmax", None),
    (".weight.quant_map", None),
    (".weight.nested_absmax", None),
    (".weight.nested_quant_map", None),
];

/// The recognised method and what the planner needs from it.
#[derive(Debug, Clone)]
pub struct Method {
    pub summary: Quantization,
    /// Which `.weight` tensors hold two 4-bit values a byte — those stored as this dtype
    /// (U8 for bitsandbytes NF4 and ModelOpt NVFP4, I8 for DeepSeek's FP4 experts) — and the
    /// logical type they count under.
    packed_weight: Option<(&'static str, &'static str)>,
    /// The logical type of `.weight_packed` / `.qweight` values (compressed-tensors, GPTQ).
    packed_type: Option<&'static str>,
}

/// The quantization a checkpoint declares: config.json's `quantization_config` (top level or
/// the language model's), else ModelOpt's `hf_quant_config.json`, read as the same shape.
pub fn declared(
    raw: &serde_json::Map<String, Value>,
    text: &serde_json::Map<String, Value>,
    quant_config: Option<&serde_json::Map<String, Value>>,
) -> Option<Value> {
    if let Some(q) = raw
        .get("quantization_config")
        .or_else(|| text.get("quantization_config"))
    {
        // DeepSeek-V4 declares its experts' dtype beside the quantization config;
        // transformers' DeepseekV4Config folds it in (V4.1 ships it inside).
        let expert_dtype = text.get("expert_dtype").or_else(|| raw.get("expert_dtype"));
        return Some(match (q, expert_dtype) {
            (Value::Object(map), Some(dtype)) if !map.contains_key("expert_dtype") => {
                let mut map = map.clone();
                map.insert("expert_dtype".into(), dtype.clone());
                Value::Object(map)
            }
            _ => q.clone(),
        });
    }
    // `{"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "NVFP4", …}}`
    let quantization = quant_config?.get("quantization")?.as_object()?;
    let mut q = quantization.clone();
    q.insert("quant_method".into(), "modelopt".into());
    q.insert("_declared_in".into(), "hf_quant_config.json".into());
    Some(Value::Object(q))
}

/// Read `quantization_config`. An unknown method is a blocking finding (`None`).
pub fn recognise(config: &Value, findings: &mut Findings) -> Option<Method> {
    // ModelOpt's config.json form may name only its producer (`{"producer": {"name":
    // "modelopt"}, "quant_algo": "FP8", …}`).
    let producer = config.pointer("/producer/name").and_then(Value::as_str);
    let method = match config.get("quant_method").and_then(Value::as_str) {
        Some(method) => method,
        None if producer == Some("modelopt") && config.get("quant_algo").is_some() => "modelopt",
        None => "",
    };
    let u = |key: &str| config.get(key).and_then(Value::as_u64);
    let (layout, bits, packed_weight, packed_type) = match method {
        "fp8" => {
            let block = config.get("weight_block_size").and_then(Value::as_array).map(|b| {
                b.iter()
                    .map(|v| v.as_u64().map_or("?".into(), |n| n.to_string()))
                    .collect::<Vec<_>>()
                    .join("×")
            });
            // `scale_fmt: ue8m0` (DeepSeek-V3.2/V4): the block scales are F8_E8M0 `.scale`s.
            let scale = match config.get("scale_fmt").and_then(Value::as_str) {
                Some("ue8m0") => "F8_E8M0 scale",
                _ => "F32 weight_scale_inv",
            };
            let mut layout = match block {
                Some(block) => format!("F8_E4M3 weights, {scale} per {block} block"),
                None => "F8_E4M3 weights, per-tensor scales".to_owned(),
            };
            // `expert_dtype: fp4` (DeepSeek-V4): routed experts are E2M1 two a byte, stored
            // as I8 [out, in/2] with an F8_E8M0 scale per 32 values — MXFP4's format.
            let fp4_experts = config.get("expert_dtype").and_then(Value::as_str) == Some("fp4");
            if fp4_experts {
                layout.push_str("; routed experts FP4 (E2M1 two a byte in I8, F8_E8M0 scale per 32)");
            }
            (layout, Some(8), fp4_experts.then_some(("I8", "MXFP4")), None)
        }
        "fbgemm_fp8" => ("F8_E4M3 weights, per-row weight_scale".to_owned(), Some(8), None, None),
        "mxfp4" => (
            "MXFP4: 32 values a block in 16 U8 bytes (_blocks) + one U8 E8M0 scale a block (_scales)".to_owned(),
            Some(4),
            None,
            None,
        ),
        "modelopt" => modelopt(config, findings)?,
        "gptq" | "awq" => {
            let bits = u("bits").or_else(|| u("w_bit")).unwrap_or(4);
            let group = u("group_size").or_else(|| u("q_group_size"));
            let group = group.map_or_else(String::new, |g| format!(", group size {g}"));
            (
                format!("INT{bits} packed in I32 qweight, qzeros and scales per group{group}"),
                Some(bits),
                None,
                Some(if bits == 8 { "INT8" } else { "INT4" }),
            )
        }
        "bitsandbytes" => {
            let four = config.get("load_in_4bit").and_then(Value::as_bool).unwrap_or(false);
            let kind = config
                .get("bnb_4bit_quant_type")
                .and_then(Value::as_str)
                .unwrap_or("nf4")
                .to_uppercase();
            if four {
                (
                    format!("{kind}: two values a U8 byte, absmax and quant_map per block"),
                    Some(4),
                    Some(("U8", "NF4")),
                    None,
                )
            } else {
                ("LLM.int8: I8 weights with per-row SCB".to_owned(), Some(8), None, None)
            }
        }
        "compressed-tensors" => compressed_tensors(config),
        _ => {
            let finding = findings.push(
                Code::QuantizationUnknown,
                "config.quantization_config.quant_method",
                "the planner does not know how this method stores weights, so it cannot count them",
            );
            finding.observed = config.get("quant_method").cloned();
            return None;
        }
    };
    Some(Method {
        summary: Quantization {
            method: method.to_owned(),
            layout,
            bits,
        },
        packed_weight,
        packed_type,
    })
}

/// The `quant_algo` strings ModelOpt's exporter writes (nvidia-modelopt 0.47.0,
/// `data/modelopt.json`: `exported_quant_algo_strings`, plus `MIXED_PRECISION`).
fn modelopt_algorithms() -> &'static [String] {
    static ALGORITHMS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    ALGORITHMS.get_or_init(|| {
        let data: Value =
            serde_json::from_str(include_str!("../data/modelopt.json")).expect("data/modelopt.json is valid");
        let mut algorithms: Vec<String> = data
            .get("exported_quant_algo_strings")
            .and_then(Value::as_object)
            .map(|o| o.keys().cloned().collect())
            .unwrap_or_default();
        algorithms.push("MIXED_PRECISION".to_owned());
        algorithms
    })
}

/// How one ModelOpt algorithm stores a linear layer's weights; `None` for an algorithm the
/// planner knows by name but whose stored layout it does not plan (AWQ's pre-quant scales,
/// SVD's low-rank branches, W4A8 mixes).
fn modelopt_layer(algo: &str, group: Option<u64>) -> Option<(String, u64, Packed)> {
    let group = group.unwrap_or(16);
    Some(match algo {
        "FP8" => (
            "F8_E4M3 weights, F32 weight_scale and input_scale per tensor".to_owned(),
            8,
            None,
        ),
        "FP8_PER_CHANNEL_PER_TOKEN" => (
            "F8_E4M3 weights, weight_scale per output channel, activations per token".to_owned(),
            8,
            None,
        ),
        "NVFP4" => (
            format!(
                "two E2M1 values a U8 byte, F8_E4M3 weight_scale per {group}, F32 weight_scale_2 and input_scale per tensor"
            ),
            4,
            Some(("U8", "NVFP4")),
        ),
        // Weight-only NVFP4: the same stored weights; an `input_scale` the exporter may still
        // write is unused.
        "W4A16_NVFP4" => (
            format!(
                "weight-only NVFP4: two E2M1 values a U8 byte, F8_E4M3 weight_scale per {group}, F32 weight_scale_2 per tensor"
            ),
            4,
            Some(("U8", "NVFP4")),
        ),
        // OCP MX: blocks of 32 share one E8M0 scale.
        "MXFP8" => ("F8_E4M3 weights, U8 E8M0 weight_scale per 32".to_owned(), 8, None),
        "W8A16" => (
            "I8 weights, weight_scale per output channel, weight-only".to_owned(),
            8,
            None,
        ),
        _ => return None,
    })
}

/// ModelOpt's `quant_algo` (hf_quant_config.json's `quantization`, or config.json's
/// `quantization_config`); `MIXED_PRECISION` reads each layer's algorithm from
/// `quantized_layers`. An algorithm ModelOpt does not write is `quantization.unknown`; one it
/// writes whose layout is not planned is `quantization.unsupported`, naming it.
fn modelopt(config: &Value, findings: &mut Findings) -> Option<Layout> {
    let algo = config
        .get("quant_algo")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_ascii_uppercase();
    let subject = match config.get("_declared_in").and_then(Value::as_str) {
        Some(file) => format!("{file}:quantization.quant_algo"),
        None => "config.quantization_config.quant_algo".to_owned(),
    };
    let kv = config
        .get("kv_cache_quant_algo")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .or_else(|| {
            // config.json's form: `kv_cache_scheme` ("FP8", or a compressed-tensors scheme).
            match config.get("kv_cache_scheme")? {
                Value::String(s) => Some(s.clone()),
                Value::Object(o) => match (
                    o.get("type").and_then(Value::as_str),
                    o.get("num_bits").and_then(Value::as_u64),
                ) {
                    (Some("float"), Some(8)) => Some("FP8".to_owned()),
                    (Some("int"), Some(8)) => Some("INT8".to_owned()),
                    _ => Some("quantized".to_owned()),
                },
                _ => None,
            }
        })
        .map_or_else(String::new, |kv| format!("; KV cache {kv}"));
    if !modelopt_algorithms().contains(&algo) {
        let finding = findings.push(
            Code::QuantizationUnknown,
            subject,
            format!("`{algo}` is not a quant_algo ModelOpt (nvidia-modelopt 0.47.0) writes; the planner does not know how it stores weights"),
        );
        finding.observed = config.get("quant_algo").cloned();
        return None;
    }
    let unsupported = |algo: &str, findings: &mut Findings, subject: String| {
        let finding = findings.push(
            Code::QuantizationUnsupported,
            subject,
            format!("ModelOpt's `{algo}` is a known algorithm, but the planner does not model how it stores weights"),
        );
        finding.observed = Some(algo.into());
    };
    let group = config.get("group_size").and_then(Value::as_u64);
    if algo != "MIXED_PRECISION" {
        let Some((layout, bits, packed)) = modelopt_layer(&algo, group) else {
            unsupported(&algo, findings, subject);
            return None;
        };
        // `ModelOpt NVFP4` / `ModelOpt FP8` lead the layouts the runtimes judge kernels by.
        let family = match algo.as_str() {
            "NVFP4" | "W4A16_NVFP4" => "NVFP4",
            "FP8" | "FP8_PER_CHANNEL_PER_TOKEN" => "FP8",
            _ => "",
        };
        let layout = match family {
            "" => format!("ModelOpt {algo}: {layout}{kv}"),
            family if family == algo => format!("ModelOpt {family}: {layout}{kv}"),
            family => format!("ModelOpt {family} ({algo}): {layout}{kv}"),
        };
        return Some((layout, Some(bits), packed, None));
    }
    // MIXED_PRECISION: every layer's algorithm must be one the planner stores.
    let Some(layers) = config.get("quantized_layers").and_then(Value::as_object) else {
        let finding = findings.push(
            Code::QuantizationLayoutInvalid,
            subject.replace("quant_algo", "quantized_layers"),
            "MIXED_PRECISION without `quantized_layers`: which algorithm each layer uses is not said",
        );
        finding.observed = None;
        return None;
    };
    let mut counts: std::collections::BTreeMap<String, (u64, Option<u64>)> = std::collections::BTreeMap::new();
    for layer in layers.values() {
        let algo = layer
            .get("quant_algo")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_ascii_uppercase();
        let entry = counts.entry(algo).or_insert((0, None));
        entry.0 += 1;
        entry.1 = entry.1.or(layer.get("group_size").and_then(Value::as_u64));
    }
    let mut parts = Vec::new();
    let mut packed = None;
    let mut bits = 16;
    for (algo, (count, group)) in &counts {
        if !modelopt_algorithms().iter().any(|a| a == algo) || algo == "MIXED_PRECISION" {
            let finding = findings.push(
                Code::QuantizationUnknown,
                subject.replace("quant_algo", "quantized_layers"),
                format!("{count} layer(s) use `{algo}`, not a quant_algo ModelOpt (nvidia-modelopt 0.47.0) writes"),
            );
            finding.observed = Some(algo.as_str().into());
            return None;
        }
        let Some((layout, b, p)) = modelopt_layer(algo, *group) else {
            unsupported(algo, findings, subject.replace("quant_algo", "quantized_layers"));
            return None;
        };
        packed = packed.or(p);
        bits = bits.min(b);
        parts.push(format!("{algo} × {count} layers ({layout})"));
    }
    Some((
        format!("ModelOpt MIXED_PRECISION: {}{kv}", parts.join("; ")),
        Some(bits),
        packed,
        None,
    ))
}

/// compressed-tensors: the `format` says how weights are stored — `float-quantized` (FP8,
/// static or dynamic activations), `int-quantized` (W8A8 int8), `pack-quantized` (W4A16:
/// int4 packed eight to an I32 `weight_packed`), `nvfp4-pack-quantized` (two FP4 a byte).
type Layout = (String, Option<u64>, Packed, Option<&'static str>);

/// Weights packed several values a stored element: `(stored dtype, logical name)`, e.g.
/// `("U8", "NVFP4")` — two values a byte.
type Packed = Option<(&'static str, &'static str)>;

fn compressed_tensors(config: &Value) -> Layout {
    let format = config.get("format").and_then(Value::as_str).unwrap_or("unspecified");
    let group = config
        .get("config_groups")
        .and_then(Value::as_object)
        .and_then(|groups| groups.values().next());
    let weights = |key: &str| group.and_then(|g| g.pointer(&format!("/weights/{key}")));
    let bits = weights("num_bits").and_then(Value::as_u64);
    let kind = weights("type").and_then(Value::as_str).unwrap_or("");
    let strategy = weights("strategy").and_then(Value::as_str).unwrap_or("");
    let activations = match group.and_then(|g| g.get("input_activations")) {
        Some(Value::Object(a)) => match a.get("dynamic").and_then(Value::as_bool) {
            Some(true) => "dynamic activations",
            _ => "static activations",
        },
        _ => "weight-only",
    };
    let layout = format!(
        "compressed-tensors {format}: {kind}{} weights, {strategy} scales, {activations}",
        bits.map_or_else(String::new, |b| b.to_string())
    );
    match format {
        "nvfp4-pack-quantized" => (layout, Some(4), None, Some("NVFP4")),
        "pack-quantized" => (layout, bits, None, Some(if bits == Some(8) { "INT8" } else { "INT4" })),
        _ => (layout, bits, None, None),
    }
}

impl Method {
    fn packed_factor(&self, stored_bits: u64) -> u64 {
        match self.summary.bits {
            Some(bits) if bits > 0 && stored_bits.is_multiple_of(bits) => stored_bits / bits,
            _ => 1,
        }
    }
}

/// The tensor's role, and the name of the parameter it stands for (a `_blocks` tensor stands
/// for the weight it packs).
pub fn role<'n>(name: &'n str, dtype: &str, method: Option<&Method>) -> (Cow<'n, str>, Role) {
    // Most tensors are plain `….weight`s: settle them without trying every suffix.
    let plain_weight = name.ends_with(".weight");
    // E8M0 (a power of two) is only ever a scale format.
    if dtype == "F8_E8M0" {
        return (Cow::Borrowed(name), Role::Scale);
    }
    if !plain_weight
        && (SCALE_SUFFIXES.iter().any(|(suffix, _)| name.ends_with(suffix)) || name.contains(".weight.quant_state."))
    {
        return (Cow::Borrowed(name), Role::Scale);
    }
    if let Some(base) = name.strip_suffix("_blocks") {
        return (
            Cow::Borrowed(base),
            Role::Param {
                factor: 2,
                dtype: Some("MXFP4"),
            },
        );
    }
    let stored_bits = preflight_formats::safetensors::dtype_bits(dtype).unwrap_or(0);
    for packed in [".qweight", ".weight_packed"] {
        if let Some(stem) = name.strip_suffix(packed) {
            let factor = method.map_or(1, |m| m.packed_factor(stored_bits));
            let dtype = method.and_then(|m| m.packed_type).unwrap_or(match factor {
                8 => "INT4",
                4 => "INT8",
                _ => "INT",
            });
            return (
                Cow::Owned(format!("{stem}.weight")),
                Role::Param {
                    factor,
                    dtype: Some(dtype),
                },
            );
        }
    }
    if let Some((_, logical)) = method
        .and_then(|m| m.packed_weight)
        .filter(|(stored, _)| *stored == dtype)
        && name.ends_with(".weight")
    {
        return (
            Cow::Borrowed(name),
            Role::Param {
                factor: 2,
                dtype: Some(logical),
            },
        );
    }
    (Cow::Borrowed(name), Role::Param { factor: 1, dtype: None })
}

/// The parameter a quantization-metadata tensor belongs to, named as [`role`] names it
/// (`X.weight_scale_inv` → `X.weight`, MXFP4 `X_scales` → `X`), so its bytes can be
/// counted beside that parameter's.
pub fn scale_owner(name: &str) -> Option<String> {
    if let Some((stem, _)) = name.split_once(".weight.quant_state.") {
        return Some(format!("{stem}.weight"));
    }
    // DeepSeek's own names: `X.scale` (F8_E8M0) beside `X.weight`.
    if let Some(stem) = name.strip_suffix(".scale") {
        return Some(format!("{stem}.weight"));
    }
    SCALE_SUFFIXES.iter().find_map(|(suffix, _)| {
        let stem = name.strip_suffix(suffix)?;
        Some(match *suffix {
            "_scales" => stem.to_owned(),
            _ => format!("{stem}.weight"),
        })
    })
}

/// For a scale whose parameter must exist, the parameter's name as `(stem, suffix)`: the
/// name is `stem + suffix`, so callers can compare without building it.
pub fn scaled_tensor(name: &str) -> Option<(&str, &'static str)> {
    SCALE_SUFFIXES
        .iter()
        .find_map(|(suffix, base)| Some((name.strip_suffix(suffix)?, (*base)?)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scales_belong_to_the_parameter_they_scale() {
        for (scale, owner) in [
            (
                "model.layers.0.mlp.up_proj.weight_scale_inv",
                "model.layers.0.mlp.up_proj.weight",
            ),
            (
                "model.layers.0.mlp.experts.gate_up_proj_scales",
                "model.layers.0.mlp.experts.gate_up_proj",
            ),
            (
                "model.layers.0.self_attn.q_proj.scales",
                "model.layers.0.self_attn.q_proj.weight",
            ),
            (
                "model.layers.0.self_attn.q_proj.weight.absmax",
                "model.layers.0.self_attn.q_proj.weight",
            ),
            (
                "model.layers.0.self_attn.q_proj.weight.quant_state.bitsandbytes__nf4",
                "model.layers.0.self_attn.q_proj.weight",
            ),
        ] {
            assert_eq!(scale_owner(scale).as_deref(), Some(owner), "{scale}");
        }
        assert_eq!(scale_owner("model.layers.0.mlp.up_proj.weight"), None);
    }
}
