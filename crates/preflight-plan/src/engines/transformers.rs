//! transformers 5.24: the `model_type`s with a generation class (causal LM,
//! image-text-to-text, multimodal LM) and the quantization methods `AutoHfQuantizer` loads.
//! On a device that cannot compute a quantized format natively its quantizers dequantize,
//! which is a fallback.

use crate::findings::Code;
use crate::options::DeviceGroup;
use crate::runtimes::data::Engines;
use crate::runtimes::{Judgement, Outcome, Subject, Weights, below_native, cc_text, per_device, refused, sides};
use crate::verdict::{Format, Support};

/// transformers' `quant_method` key for the checkpoint's method.
fn method(planner: &str, bits: Option<u64>) -> &str {
    match (planner, bits) {
        ("bitsandbytes", Some(8)) => "bitsandbytes_8bit",
        ("bitsandbytes", _) => "bitsandbytes_4bit",
        (other, _) => other,
    }
}

pub fn judge(engines: &Engines, subject: &Subject, devices: &[DeviceGroup]) -> Outcome {
    let data = &engines.transformers;
    let mut general = Judgement::default();
    if subject.format == Format::Gguf {
        general.set(
            Support::Unknown,
            Code::RuntimeUnknown,
            "format",
            format!(
                "transformers {} lists `gguf` among its quantizers (it dequantizes GGUF to float), but which GGUF architectures it maps is not in the extracted data",
                data.version
            ),
        );
        return Outcome::settled(general);
    }
    if subject.model.is_none() {
        refused(&mut general, "transformers");
        return Outcome::settled(general);
    }
    let by_type = subject.model_type.and_then(|t| data.model_types.get(t));
    let by_class = subject.class.and_then(|c| data.class_owner(c));
    if by_type.is_none() && by_class.is_none() {
        general.set(
            Support::No,
            Code::RuntimeArchitectureUnregistered,
            "architecture",
            format!(
                "transformers {} has no generation class for `{}` (model_type `{}`); only trust_remote_code could load it",
                data.version,
                subject.class.unwrap_or("?"),
                subject.model_type.unwrap_or("?")
            ),
        );
    }
    let quant = subject.quant();
    if let Some(q) = quant {
        let name = method(q.method, q.bits);
        if !data.quantization.iter().any(|m| m == name) {
            general.set(
                Support::No,
                Code::RuntimeQuantizationUnsupported,
                "quantization",
                format!("transformers {} has no `{name}` quantizer", data.version),
            );
        }
    }
    let devices = per_device(devices, |device, cc, j| {
        if let Some(q) = quant
            && q.weights != Weights::Other
            && let Some(native) = below_native(engines, q.weights, cc)
        {
            let finding = j.gate(
                Support::Fallback,
                Code::RuntimeFallbackKernel,
                device,
                format!(
                    "{device} (compute capability {}) has no native {} compute (from {}): transformers' quantizer dequantizes the weights",
                    cc_text(cc),
                    q.weights.name(),
                    cc_text(native)
                ),
            );
            sides(finding, native, cc);
        }
    });
    Outcome {
        general,
        hybrid: None,
        devices,
    }
}
