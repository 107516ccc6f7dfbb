//! SGLang 0.5.23: the models' `EntryClass` registry (unknown classes fall back to
//! `TransformersForCausalLM`), its hybrid classification, and each quantization config's
//! minimum capability. Its kernel selection was not extracted, so a format the device cannot
//! compute natively is judged by the hardware alone.

use crate::findings::Code;
use crate::options::DeviceGroup;
use crate::runtimes::data::Engines;
use crate::runtimes::{
    Judgement, Outcome, Subject, Weights, below_native, cc_text, no_class, per_device, refused, sides,
};
use crate::verdict::{Format, Support};

/// SGLang's name for the checkpoint's quantization method on CUDA.
fn method(planner: &str, weights: Weights) -> &str {
    match (planner, weights) {
        ("modelopt", Weights::Nvfp4) => "modelopt_fp4",
        ("modelopt", _) => "modelopt_fp8",
        // On CUDA SGLang registers GPTQ only as its Marlin variant.
        ("gptq", _) => "gptq_marlin",
        (other, _) => other,
    }
}

/// SGLang on Apple silicon's GPU: a hand-stated rule, not read from the wheel's data.
pub(crate) const ON_METAL: &str = "SGLang has no Metal backend for serving language models: its runtime targets CUDA and ROCm GPUs (and other accelerators), not Apple silicon's GPU";

pub fn judge(engines: &Engines, subject: &Subject, devices: &[DeviceGroup]) -> Outcome {
    let data = &engines.sglang;
    let mut general = Judgement::default();
    if subject.format == Format::Gguf {
        let gguf = data
            .quantization
            .get("gguf")
            .map_or(String::new(), |m| format!(" ({})", m.source));
        general.set(
            Support::Unknown,
            Code::RuntimeUnknown,
            "format",
            format!(
                "SGLang {} registers a `gguf` quantization{gguf}, but how its loader maps a GGUF's architecture back to a model class is not in the extracted data",
                data.version
            ),
        );
        return Outcome::settled(general);
    }
    if subject.model.is_none() {
        refused(&mut general, "SGLang");
        return Outcome::settled(general);
    }
    let Some(class) = subject.class else {
        no_class(&mut general, "SGLang");
        return Outcome::settled(general);
    };
    let registered = data.architectures.contains_key(class);
    if !registered {
        match engines.transformers.class_owner(class) {
            Some((model_type, _)) => general.set(
                Support::Fallback,
                Code::RuntimeTransformersBackend,
                "architecture",
                format!(
                    "`{class}` has no SGLang implementation; SGLang falls back to TransformersForCausalLM ({}), which transformers {} backs (`{model_type}`)",
                    data.transformers_fallback_source, engines.transformers.version
                ),
            ),
            None => general.set(
                Support::No,
                Code::RuntimeArchitectureUnregistered,
                "architecture",
                format!(
                    "`{class}` has no SGLang {} implementation, and transformers does not implement it for the TransformersForCausalLM fallback",
                    data.version
                ),
            ),
        }
    }
    let quant = subject.quant();
    let min_capability = quant.and_then(|q| {
        let name = method(q.method, q.weights);
        match data.quantization.get(name) {
            Some(m) => m.min_capability.map(|cc| (cc, name, m.source.as_str())),
            None => {
                general.set(
                    Support::No,
                    Code::RuntimeQuantizationUnsupported,
                    "quantization",
                    format!(
                        "SGLang {} registers no `{name}` quantization method on CUDA",
                        data.version
                    ),
                );
                None
            }
        }
    });
    let hybrid = match (registered, subject.model_type) {
        (true, Some(model_type)) => Some(data.hybrid_model_types.contains_key(model_type)),
        _ => None,
    };
    let sparse_mla = subject.sparse_mla();
    let devices = per_device(devices, |device, cc, j| {
        if let Some((min, name, source)) = min_capability
            && cc < min
        {
            let finding = j.gate(
                Support::No,
                Code::RuntimeCapabilityTooLow,
                device,
                format!(
                    "SGLang's `{name}` needs compute capability ≥ {} ({source}); {device} has {}",
                    cc_text(min),
                    cc_text(cc)
                ),
            );
            sides(finding, min, cc);
            return;
        }
        if let Some(q) = quant
            && let Some(native) = below_native(engines, q.weights, cc)
        {
            let finding = j.gate(
                Support::Fallback,
                Code::RuntimeFallbackKernel,
                device,
                format!(
                    "{device} (compute capability {}) has no native {} compute (from {}): SGLang loads the checkpoint, so it runs a weight-only or emulated path (which one is not in the extracted data)",
                    cc_text(cc),
                    q.weights.name(),
                    cc_text(native)
                ),
            );
            sides(finding, native, cc);
        }
        if sparse_mla && cc < 90 {
            j.set(
                Support::Unknown,
                Code::RuntimeUnknown,
                device,
                format!("{} ({})", data.sparse_mla_note, data.sparse_mla_source),
            );
        }
    });
    Outcome {
        general,
        hybrid,
        devices,
    }
}
