//! Architecture families: one file each. A family says which `model_type`s it covers, which
//! config keys it grades, how its config normalises into an [`Architecture`], and where each
//! of its tensors belongs. **Adding a family touches one file here plus its entry in
//! [`FAMILIES`]; nothing else in the planner knows family names.**

mod deepseek;
mod deepseek_v4;
mod eagle3;
mod gemma;
mod gemma4;
mod glm;
mod gpt_oss;
mod granite;
mod kimi_k25;
mod llama;
mod llama4;
pub mod llama_cpp;
mod mimo_v2_flash;
mod minimax;
mod minimax_m3;
mod mixtral;
mod nemotron_h;
mod phi3;
mod qwen;
mod qwen3_5;
mod qwen3_vl;
mod step3p7;

use crate::config::{ConfigReader, Grade};
use crate::gguf_reader::GgufReader;
use crate::model::{EncoderProfile, LlamaCppGraph, Mixer, MlaShape, Model, Rope, RopeScaling, Span, StateDtype};
pub use crate::verdict::Component;
use crate::verdict::{MlaDims, Moe};
use serde_json::{Map, Value};

/// A tensor-name pattern and the component it belongs to. In a pattern, `N` stands for any
/// layer or expert index and `{a,b}` for alternatives; it is matched against the tensor's
/// name with every numeric segment replaced by `N`.
#[derive(Debug, Clone, Copy)]
pub struct TensorGroup {
    pub pattern: &'static str,
    pub component: Component,
}

pub const fn group(pattern: &'static str, component: Component) -> TensorGroup {
    TensorGroup { pattern, component }
}

/// A shape the config implies for a tensor group: `dim` of every tensor matching `pattern`
/// must equal `value`, which `keys` explains.
#[derive(Debug, Clone)]
pub struct ShapeRule {
    pub pattern: &'static str,
    pub dim: usize,
    pub value: u64,
    pub keys: &'static str,
}

/// What a family makes of a config (or of GGUF key/values).
pub struct Normalized {
    pub model: Model,
    pub shapes: Vec<ShapeRule>,
}

/// Where a checkpoint keeps its multi-token-prediction layers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MtpLayout {
    /// After the main stack, as `model.layers.N` with N ≥ the layer count (DeepSeek, GLM).
    Appended,
    /// Under their own prefix (`mtp.layers.0.…`, `mtp.fc.weight`): decoder-layer tensors
    /// there are read with the second string in place of the prefix — `model.` for Qwen3.5's
    /// `mtp.layers.0.…`, `layers.` for DeepSeek-V4's `mtp.0.…`.
    Prefixed(&'static str, &'static str),
}

/// An encoder a multimodal wrapper carries beside the language model.
pub struct Encoder {
    /// The wrapper's key holding the encoder's config (`vision_config`, `audio_config`).
    pub config_key: &'static str,
    /// Keys of that config, graded against the encoder's own registry.
    pub keys: &'static [(&'static str, Grade)],
    /// Tensor-name prefixes and the component their tensors count under.
    pub tensors: &'static [(&'static str, Component)],
}

/// A multimodal wrapper: a top-level config whose `text_config` is the language model.
pub struct Wrapper {
    pub model_type: &'static str,
    /// The wrapper's own keys (token ids, projector settings), beyond the common registry.
    pub keys: &'static [(&'static str, Grade)],
    pub encoders: &'static [Encoder],
}

/// The family as llama.cpp writes it into a GGUF.
pub struct Gguf {
    /// `general.architecture` values and the transformers `model_type` each stands for.
    pub architectures: &'static [(&'static str, &'static str)],
    /// Keys under `<arch>.` beyond [`crate::gguf_reader::KEYS`].
    pub keys: &'static [(&'static str, Grade)],
    /// llama.cpp tensor names beyond [`llama_cpp::TENSORS`].
    pub tensors: &'static [TensorGroup],
    pub normalize: fn(model_type: &str, kv: &mut GgufReader) -> Option<Normalized>,
}

/// Everything about one architecture family. **Nothing outside `families/` knows a
/// family's name**: the planner finds families through [`FAMILIES`] only.
pub struct Family {
    pub name: &'static str,
    /// `model_type`s of the language model (a wrapper's `text_config.model_type`).
    pub model_types: &'static [&'static str],
    /// The `architectures` class names checkpoints of this family declare.
    pub architectures: &'static [&'static str],
    /// Keys beyond [`crate::config::COMMON_KEYS`], each with the grade's source.
    pub keys: &'static [(&'static str, Grade)],
    /// More keys of this family alone, when `keys` is a table shared with sibling families.
    pub more_keys: &'static [(&'static str, Grade)],
    pub tensors: &'static [&'static [TensorGroup]],
    /// Where MTP layers live, when the family has them.
    pub mtp: Option<MtpLayout>,
    /// Tensors that only multi-token-prediction layers carry.
    pub mtp_tensors: &'static [TensorGroup],
    /// Tensor patterns (as in [`TensorGroup`]) every tensor-parallel rank holds whole, beyond
    /// norms, routers and buffers (which always are): vLLM builds them as `ReplicatedLinear`.
    pub tp_replicated: &'static [&'static str],
    pub normalize: fn(model_type: &str, cfg: &mut ConfigReader) -> Option<Normalized>,
    pub wrappers: &'static [Wrapper],
    pub gguf: Option<Gguf>,
    /// Values the reference config class takes for keys a config.json leaves out, by
    /// `model_type`: read as if written (google/gemma-3-4b-it's `text_config` names neither
    /// its heads nor its vocabulary). A key no class defaults stays required.
    pub defaults: &'static [ConfigDefaults],
    /// What one of the family's multimodal wrappers (named by its `model_type`) leaves held
    /// through vLLM's profile run, read from the wrapper's whole config and the language model.
    pub encoder_profile: Option<EncoderProfileReader>,
}

/// Reads a wrapper's [`EncoderProfile`]: the wrapper's `model_type`, its whole config, and the
/// language model its `text_config` made.
pub type EncoderProfileReader = fn(wrapper: &str, config: &Map<String, Value>, text: &Model) -> Option<EncoderProfile>;

/// A config class's defaults for the shape-deciding keys (see [`Family::defaults`]).
pub struct ConfigDefaults {
    pub model_type: &'static str,
    pub values: &'static [(&'static str, u64)],
}

impl Family {
    /// `map` with this family's defaults for `model_type` filled in where a key is absent;
    /// `None` when nothing is missing (the config is read as it is).
    pub fn with_defaults(&self, model_type: &str, map: &Map<String, Value>) -> Option<Map<String, Value>> {
        let defaults = self.defaults.iter().find(|d| d.model_type == model_type)?;
        if defaults.values.iter().all(|(key, _)| map.contains_key(*key)) {
            return None;
        }
        let mut filled = map.clone();
        for (key, value) in defaults.values {
            filled.entry(*key).or_insert((*value).into());
        }
        Some(filled)
    }

    /// A family with no wrappers, GGUF form or MTP, to spread from (`..Family::BASE`).
    pub const BASE: Family = Family {
        name: "",
        model_types: &[],
        architectures: &[],
        keys: &[],
        more_keys: &[],
        tensors: &[],
        mtp: None,
        mtp_tensors: &[],
        tp_replicated: &[],
        normalize: |_, _| None,
        wrappers: &[],
        gguf: None,
        defaults: &[],
        encoder_profile: None,
    };
}

pub static FAMILIES: &[&Family] = &[
    &llama::FAMILY,
    &llama4::FAMILY,
    &qwen::FAMILY,
    &qwen::MOE_FAMILY,
    &qwen::QWEN2_MOE_FAMILY,
    &mixtral::FAMILY,
    &deepseek::FAMILY,
    &deepseek_v4::FAMILY,
    &gpt_oss::FAMILY,
    &gemma::FAMILY,
    &gemma4::FAMILY,
    &phi3::FAMILY,
    &qwen3_5::FAMILY,
    &qwen3_5::MOE_FAMILY,
    &qwen3_vl::FAMILY,
    &qwen3_vl::MOE_FAMILY,
    &glm::GLM4_MOE,
    &glm::GLM_MOE_DSA,
    &minimax::FAMILY,
    &minimax_m3::FAMILY,
    &mimo_v2_flash::FAMILY,
    &nemotron_h::FAMILY,
    &step3p7::FAMILY,
    &granite::FAMILY,
];

/// The family an EAGLE-3 draft head is read by (`speculative: eagle3:K`'s second source), for
/// its `model_type`: only `llama` heads are modelled (vLLM 0.19's `Eagle3LlamaForCausalLM`).
pub fn eagle3_draft(model_type: &str) -> Option<&'static Family> {
    eagle3::DRAFT
        .model_types
        .contains(&model_type)
        .then_some(&eagle3::DRAFT)
}

/// The family whose language model is `model_type`.
pub fn for_model_type(model_type: &str) -> Option<&'static Family> {
    FAMILIES.iter().copied().find(|f| f.model_types.contains(&model_type))
}

/// The family and wrapper for a multimodal wrapper's `model_type`.
pub fn for_wrapper(model_type: &str) -> Option<(&'static Family, &'static Wrapper)> {
    FAMILIES
        .iter()
        .find_map(|f| Some((*f, f.wrappers.iter().find(|w| w.model_type == model_type)?)))
}

/// The family and `model_type` for a GGUF `general.architecture`.
pub fn for_gguf_architecture(name: &str) -> Option<(&'static Family, &'static str)> {
    FAMILIES.iter().find_map(|f| {
        let gguf = f.gguf.as_ref()?;
        let (_, model_type) = gguf.architectures.iter().find(|(a, _)| *a == name)?;
        Some((*f, *model_type))
    })
}

impl Family {
    /// The component for a normalised tensor name, if any of the family's groups match.
    pub fn classify(&self, normalized: &str, is_mtp_layer: bool) -> Option<Component> {
        let found = self
            .tensors
            .iter()
            .flat_map(|groups| groups.iter())
            .find(|g| pattern_matches(g.pattern, normalized));
        match found {
            Some(g) if is_mtp_layer => Some(if g.component == Component::Buffer {
                Component::Buffer
            } else {
                Component::Mtp
            }),
            Some(g) => Some(g.component),
            None if is_mtp_layer => self
                .mtp_tensors
                .iter()
                .any(|g| pattern_matches(g.pattern, normalized))
                .then_some(Component::Mtp),
            None => None,
        }
    }

    /// How a tensor of `component` spreads over tensor-parallel ranks.
    pub fn placement(&self, normalized: &str, component: Component) -> Placement {
        if component.is_replicated() || self.tp_replicated.iter().any(|p| pattern_matches(p, normalized)) {
            Placement::Replicated
        } else {
            Placement::Sharded
        }
    }
}

/// Under tensor parallelism a tensor is either split across ranks (projections, experts,
/// vocab-parallel embeddings) or held whole by each (norms, routers, small projections).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Placement {
    Sharded,
    Replicated,
}

/// Match `name` against a pattern with `{a,b,…}` alternatives (no nesting).
pub fn pattern_matches(pattern: &str, name: &str) -> bool {
    match pattern.find('{') {
        None => pattern == name,
        Some(open) => {
            let Some(close) = pattern[open..].find('}').map(|c| open + c) else {
                return false;
            };
            let (head, alternatives, tail) = (&pattern[..open], &pattern[open + 1..close], &pattern[close + 1..]);
            let Some(rest) = name.strip_prefix(head) else {
                return false;
            };
            alternatives
                .split(',')
                .any(|alt| rest.strip_prefix(alt).is_some_and(|after| pattern_matches(tail, after)))
        }
    }
}

// Building blocks most decoder-only checkpoints share (transformers' on-disk names).
use Component::*;

pub const EMBED_NORM_HEAD: &[TensorGroup] = &[
    group("model.embed_tokens.weight", Embedding),
    group("model.norm.weight", Norm),
    group("lm_head.weight", LmHead),
    group("model.layers.N.{input_layernorm,post_attention_layernorm}.weight", Norm),
];
pub const QKVO: &[TensorGroup] = &[group("model.layers.N.self_attn.{q,k,v,o}_proj.weight", Attention)];
pub const QKV_BIAS: &[TensorGroup] = &[group("model.layers.N.self_attn.{q,k,v}_proj.bias", Attention)];
pub const QK_NORM: &[TensorGroup] = &[group("model.layers.N.self_attn.{q,k}_norm.weight", Norm)];
pub const GATED_MLP: &[TensorGroup] = &[group("model.layers.N.mlp.{gate,up,down}_proj.weight", Mlp)];
/// Llama-layout biases (`attention_bias`, `mlp_bias`): on every projection.
pub const QKVO_MLP_BIAS: &[TensorGroup] = &[
    group("model.layers.N.self_attn.{q,k,v,o}_proj.bias", Attention),
    group("model.layers.N.mlp.{gate,up,down}_proj.bias", Mlp),
];

/// A LLaVA-style vision tower and projector (Gemma 3, Mistral 3): transformers 5 saves them
/// under `model.`, the published checkpoints keep the 4.x names without it.
pub const VISION_TOWER_AND_PROJECTOR: &[(&str, Component)] = &[
    ("model.vision_tower.", Vision),
    ("vision_tower.", Vision),
    ("model.multi_modal_projector.", Projector),
    ("multi_modal_projector.", Projector),
];

/// The dimensions nearly every decoder config declares the same way.
pub struct Dims {
    pub layers: u64,
    pub hidden: u64,
    pub heads: u64,
    pub kv_heads: u64,
    pub head_dim: u64,
    pub vocab: u64,
    pub context: u64,
    pub tie: bool,
    pub dtype: Option<String>,
    /// `intermediate_size` when declared: the dense MLP width, or the expert width in
    /// families whose experts use it.
    pub intermediate: Option<u64>,
    /// The rotary tables every layer's `head_dim` implies ([`read_rope`]).
    pub rope: Vec<Rope>,
}

/// Read [`Dims`]. `head_dim` defaults to hidden/heads only where the family's code does so;
/// `tie_default` is the family's own default for `tie_word_embeddings`.
pub fn read_dims(cfg: &mut ConfigReader, tie_default: bool) -> Option<Dims> {
    let layers = cfg.layers("num_hidden_layers");
    let hidden = cfg.u64("hidden_size");
    let heads = cfg.u64("num_attention_heads");
    let vocab = cfg.u64("vocab_size");
    let context = cfg.u64("max_position_embeddings");
    let kv_heads = match cfg.value("num_key_value_heads") {
        Some(_) => cfg.u64("num_key_value_heads"),
        None => heads,
    };
    let head_dim = match cfg.value("head_dim") {
        Some(_) => cfg.u64("head_dim"),
        None => hidden.zip(heads).and_then(|(h, n)| (h % n == 0).then_some(h / n)),
    };
    let tie = cfg.opt_bool("tie_word_embeddings").unwrap_or(tie_default);
    let intermediate = cfg.opt_positive("intermediate_size");
    let dtype = cfg
        .opt_str("torch_dtype")
        .or_else(|| cfg.opt_str("dtype"))
        .map(str::to_owned);
    if let (Some(heads), Some(kv)) = (heads, kv_heads)
        && heads % kv != 0
    {
        cfg.findings.mismatch(
            crate::findings::Code::ConfigInvalidValue,
            "config.num_key_value_heads",
            kv,
            heads,
            "num_attention_heads is not a multiple of num_key_value_heads",
        );
        return None;
    }
    Some(Dims {
        layers: layers?,
        hidden: hidden?,
        heads: heads?,
        kv_heads: kv_heads?,
        head_dim: head_dim?,
        vocab: vocab?,
        context: context?,
        tie,
        dtype,
        intermediate,
        rope: read_rope(cfg, context?, |_| head_dim.unwrap_or(0)),
    })
}

/// The rotary tables a config declares, gathered as vLLM 0.19's `patch_rope_parameters`
/// (`transformers_utils/config.py:377-426`) gathers them: `rope_parameters`, else
/// transformers 4's `rope_scaling`, with `partial_rotary_factor` (or `rotary_pct`,
/// `rotary_emb_fraction`) and `original_max_position_embeddings` from beside it. A
/// transformers-5 config keyed by layer type (`{"full_attention": {…}, "sliding_attention":
/// {…}}`) gives one table per distinct entry, each for the head `head_size` names for its
/// layer type; a flat one gives one table (`head_size(None)`). A rope type the planner does
/// not size specially counts one row per position.
/// RoPE scaling factors past this stretch no released model (DeepSeek's YaRN is 40, Llama 4
/// Scout's 16): a larger one sizes the rotary table past any device.
const MAX_ROPE_FACTOR: f64 = 1024.0;

pub fn read_rope(cfg: &mut ConfigReader, max_position: u64, head_size: impl Fn(Option<&str>) -> u64) -> Vec<Rope> {
    let key = ["rope_parameters", "rope_scaling"]
        .into_iter()
        .find(|k| cfg.value(k).is_some())
        .unwrap_or("rope_parameters");
    let params = cfg.value(key).and_then(Value::as_object);
    // A factor that is not a number in (0, MAX_ROPE_FACTOR] (NaN and ±Infinity arrive as
    // strings, Python's json writes them) changes positions in a way nothing here models.
    let entries: Vec<&Map<String, Value>> = match params {
        Some(p) if p.values().all(Value::is_object) && !p.is_empty() => {
            p.values().filter_map(Value::as_object).collect()
        }
        Some(p) => vec![p],
        None => Vec::new(),
    };
    if let Some(bad) = entries.iter().filter_map(|e| e.get("factor")).find(|f| {
        !f.as_f64()
            .is_some_and(|f| f.is_finite() && f > 0.0 && f <= MAX_ROPE_FACTOR)
    }) {
        cfg.unsupported(
            key,
            format!(
                "a RoPE scaling factor of {bad}: a positive number up to {MAX_ROPE_FACTOR} is planned, nothing else"
            ),
        );
    }
    let top_partial = ["partial_rotary_factor", "rotary_pct", "rotary_emb_fraction"]
        .iter()
        .find_map(|k| cfg.value(k).and_then(Value::as_f64));
    let top_original = cfg.value("original_max_position_embeddings").and_then(Value::as_u64);
    let one = |layer_type: Option<&str>, entry: Option<&Map<String, Value>>| {
        let number = |key: &str| entry.and_then(|e| e.get(key)).and_then(Value::as_f64);
        let head = head_size(layer_type);
        let partial = number("partial_rotary_factor")
            .or(top_partial)
            .filter(|f| *f > 0.0 && *f <= 1.0)
            .unwrap_or(1.0);
        let kind = entry
            .and_then(|e| e.get("rope_type").or_else(|| e.get("type")))
            .and_then(Value::as_str)
            .unwrap_or("default");
        let factor = number("factor").filter(|f| f.is_finite() && *f > 0.0);
        let original = entry
            .and_then(|e| e.get("original_max_position_embeddings"))
            .and_then(Value::as_u64)
            .or(top_original);
        let yarn = factor.zip(original);
        let scaling = match (kind, factor, original) {
            _ if entry.is_some_and(|e| e.contains_key("mrope_section")) => RopeScaling::Multimodal {
                yarn: yarn.filter(|_| kind == "yarn"),
            },
            ("linear" | "dynamic", Some(factor), _) => RopeScaling::Stretched { factor },
            ("yarn" | "deepseek_yarn" | "deepseek_llama_scaling", Some(factor), Some(original)) => {
                RopeScaling::Yarn { factor, original }
            }
            ("longrope" | "su", _, Some(original)) => RopeScaling::LongRope { original },
            ("proportional", _, _) => RopeScaling::Proportional,
            _ => RopeScaling::Plain,
        };
        Rope {
            head_size: head,
            // `int(head_size * partial_rotary_factor)`.
            rotary_dim: (head as f64 * partial) as u64,
            max_position,
            scaling,
            f32: false,
        }
    };
    let nested: Option<Vec<(&String, &Map<String, Value>)>> = params.and_then(|p| {
        (!p.is_empty())
            .then(|| p.iter().map(|(k, v)| v.as_object().map(|o| (k, o))).collect())
            .flatten()
    });
    match nested {
        // `get_rope` caches by its arguments: layer types with equal entries (and heads)
        // share one table.
        Some(per_type) => {
            let mut tables: Vec<(&Map<String, Value>, Rope)> = Vec::new();
            for (layer_type, entry) in per_type {
                let rope = one(Some(layer_type), Some(entry));
                if !tables.iter().any(|(e, r)| *e == entry && *r == rope) {
                    tables.push((entry, rope));
                }
            }
            tables.into_iter().map(|(_, rope)| rope).collect()
        }
        None => vec![one(None, params)],
    }
}

impl Dims {
    /// Softmax attention of this geometry over the given span.
    pub fn attention(&self, span: Span) -> Mixer {
        Mixer::full(self.kv_heads, self.head_dim).with_span(span)
    }

    pub fn model(&self, model_type: &str, family: &'static str, layers: Vec<Mixer>, moe: Option<Moe>) -> Model {
        Model {
            model_type: model_type.to_owned(),
            family,
            hidden: self.hidden,
            heads: self.heads,
            vocab: self.vocab,
            context: self.context,
            tie_word_embeddings: self.tie,
            dtype: self.dtype.clone(),
            // The dense width; MoE families replace it (experts are not dense layers).
            intermediate: self.intermediate,
            layers,
            mtp_layers: 0,
            mtp_mixer: None,
            mtp_first_index: self.layers,
            moe,
            mla: None,
            quantization: None,
            rope: self.rope.clone(),
            llama_cpp_graph: None,
            encoder_profile: None,
            sglang_hybrid_swa: false,
        }
    }

    /// Shapes every family with embed_tokens/lm_head and q/k/v projections implies.
    pub fn base_shapes(&self) -> Vec<ShapeRule> {
        vec![
            ShapeRule {
                pattern: "model.embed_tokens.weight",
                dim: 0,
                value: self.vocab,
                keys: "vocab_size",
            },
            ShapeRule {
                pattern: "model.embed_tokens.weight",
                dim: 1,
                value: self.hidden,
                keys: "hidden_size",
            },
            ShapeRule {
                pattern: "lm_head.weight",
                dim: 0,
                value: self.vocab,
                keys: "vocab_size",
            },
            ShapeRule {
                pattern: "lm_head.weight",
                dim: 1,
                value: self.hidden,
                keys: "hidden_size",
            },
        ]
    }

    pub fn qkv_shapes(&self) -> Vec<ShapeRule> {
        vec![
            ShapeRule {
                pattern: "model.layers.N.self_attn.q_proj.weight",
                dim: 0,
                value: self.heads.saturating_mul(self.head_dim),
                keys: "num_attention_heads × head_dim",
            },
            ShapeRule {
                pattern: "model.layers.N.self_attn.k_proj.weight",
                dim: 0,
                value: self.kv_heads.saturating_mul(self.head_dim),
                keys: "num_key_value_heads × head_dim",
            },
            ShapeRule {
                pattern: "model.layers.N.self_attn.v_proj.weight",
                dim: 0,
                value: self.kv_heads.saturating_mul(self.head_dim),
                keys: "num_key_value_heads × head_dim",
            },
            ShapeRule {
                pattern: "model.layers.N.self_attn.o_proj.weight",
                dim: 1,
                value: self.heads.saturating_mul(self.head_dim),
                keys: "num_attention_heads × head_dim",
            },
        ]
    }
}

/// Per-layer spans from `layer_types` when the config has it; `None` when absent.
/// An unknown layer type is a finding (and `None`).
pub fn layer_types(cfg: &mut ConfigReader, layers: u64, window: Option<u64>) -> Option<Option<Vec<Span>>> {
    let Some(types) = cfg.opt_str_list("layer_types") else {
        return Some(None);
    };
    if types.len() as u64 != layers {
        cfg.findings.mismatch(
            crate::findings::Code::ConfigInvalidValue,
            "config.layer_types",
            layers,
            types.len(),
            "layer_types must have one entry per layer (num_hidden_layers)",
        );
        return None;
    }
    let mut out = Vec::with_capacity(types.len());
    for t in types {
        match (t, window) {
            ("full_attention", _) => out.push(Span::Full),
            ("sliding_attention", Some(window)) if window > 0 => out.push(Span::Sliding(window)),
            ("sliding_attention", _) => {
                cfg.unsupported(
                    "sliding_window",
                    "layer_types names sliding layers but sliding_window is not a positive window",
                );
                return None;
            }
            (other, _) => {
                cfg.unsupported(
                    "layer_types",
                    format!("layer type `{other}` is not one the planner models"),
                );
                return None;
            }
        }
    }
    Some(Some(out))
}

/// Every layer alike.
pub fn uniform(layers: u64, mixer: Mixer) -> Vec<Mixer> {
    (0..layers).map(|_| mixer).collect()
}

/// Softmax attention of one geometry over per-layer spans.
pub fn spans(dims: &Dims, spans: impl IntoIterator<Item = Span>) -> Vec<Mixer> {
    spans.into_iter().map(|span| dims.attention(span)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_alternatives_and_literals() {
        assert!(pattern_matches(
            "model.layers.N.self_attn.{q,k,v,o}_proj.weight",
            "model.layers.N.self_attn.k_proj.weight"
        ));
        assert!(!pattern_matches(
            "model.layers.N.self_attn.{q,k,v,o}_proj.weight",
            "model.layers.N.self_attn.x_proj.weight"
        ));
        assert!(pattern_matches("a.{b,bc}.d", "a.bc.d"));
        assert!(!pattern_matches("a.{b", "a.b"));
    }

    fn ropes(config: Value) -> Vec<Rope> {
        let mut findings = crate::findings::Findings::default();
        let map = config.as_object().expect("object").clone();
        let mut cfg = ConfigReader::new(&map, "", &mut findings);
        read_rope(&mut cfg, 4096, |layer_type| match layer_type {
            Some("full_attention") => 512,
            _ => 128,
        })
    }

    #[test]
    fn rope_types_read_as_vllm_patches_them() {
        let one = |config: Value| {
            let tables = ropes(config);
            assert_eq!(tables.len(), 1, "{tables:?}");
            tables[0].clone()
        };
        // transformers 4's legacy `type`, and the partial factor beside `rope_scaling`.
        let rope = one(serde_json::json!({
            "rope_scaling": {"type": "dynamic", "factor": 2.5},
            "partial_rotary_factor": 0.5
        }));
        assert_eq!(rope.scaling, RopeScaling::Stretched { factor: 2.5 });
        assert_eq!((rope.head_size, rope.rotary_dim), (128, 64));
        // `su` is longrope's old name; the original context may sit beside the rope.
        let rope = one(serde_json::json!({
            "rope_scaling": {"type": "su", "short_factor": [1.0], "long_factor": [2.0]},
            "original_max_position_embeddings": 1024
        }));
        assert_eq!(rope.scaling, RopeScaling::LongRope { original: 1024 });
        let rope = one(serde_json::json!({
            "rope_parameters": {"rope_type": "yarn", "factor": 4.0,
                "original_max_position_embeddings": 1024, "mrope_section": [16, 24, 24]}
        }));
        assert_eq!(
            rope.scaling,
            RopeScaling::Multimodal {
                yarn: Some((4.0, 1024))
            }
        );
        // A factor outside (0, 1] is not a fraction of the head: the whole head is roped.
        let rope = one(serde_json::json!({"partial_rotary_factor": 1.5}));
        assert_eq!((rope.scaling, rope.rotary_dim), (RopeScaling::Plain, 128));
        // A scaled type without its factor, and an unknown type, count one row a position.
        assert_eq!(
            one(serde_json::json!({"rope_scaling": {"rope_type": "linear"}})).scaling,
            RopeScaling::Plain
        );
        assert_eq!(
            one(serde_json::json!({"rope_scaling": {"rope_type": "new"}})).scaling,
            RopeScaling::Plain
        );
    }

    #[test]
    fn ropes_keyed_by_layer_type_share_a_table_only_when_alike() {
        let alike = ropes(serde_json::json!({"rope_parameters": {
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            "chunked_attention": {"rope_type": "default", "rope_theta": 10000.0}
        }}));
        assert_eq!(alike.len(), 1);
        // Different thetas are different `get_rope` keys; the full layers' head is wider.
        let apart = ropes(serde_json::json!({"rope_parameters": {
            "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25},
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            "other_attention": {"rope_type": "default", "rope_theta": 500.0}
        }}));
        let heads: Vec<(u64, u64)> = apart.iter().map(|r| (r.head_size, r.rotary_dim)).collect();
        assert_eq!(heads, [(512, 128), (128, 128), (128, 128)]);
        assert_eq!(apart[0].scaling, RopeScaling::Proportional);
    }

    #[test]
    fn every_model_type_belongs_to_one_family() {
        let mut seen = std::collections::HashSet::new();
        for family in FAMILIES {
            for t in family.model_types {
                assert!(seen.insert(*t), "{t} claimed twice");
            }
        }
    }
}
