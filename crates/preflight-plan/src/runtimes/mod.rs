//! Will it run there? Each engine's verdict on one artifact — vLLM, SGLang, llama.cpp,
//! transformers — from what the engines' own releases register (`data.rs`) and, when devices
//! are named, their compute capability. Each engine's rules are its `runtime` module under
//! `engines/`; this is what they share (`engines::judge` calls each engine once per
//! artifact from `plan_artifact`). **Runtime findings never touch admissibility**: they live in
//! `runtimes.<engine>.findings`, apart from the artifact's own. `docs/runtimes.md` gives every
//! rule and its source.

pub(crate) mod data;

use preflight_formats::facts::{ArtifactFacts, Content};
use preflight_formats::gguf::Value as GgufValue;

use crate::findings::{Code, Finding};
use crate::model::{Mixer, Model};
use crate::options::DeviceGroup;
use crate::verdict::{DeviceSupport, Engine, Format, Quantization, Runtime, Support};

/// What the engines are judged on.
pub struct Subject<'a> {
    pub format: Format,
    /// config.json's `architectures[0]`: the class engines dispatch on.
    pub class: Option<&'a str>,
    pub model_type: Option<&'a str>,
    /// A GGUF's `general.architecture`.
    pub gguf_architecture: Option<&'a str>,
    /// `None` when preflight refused the architecture: every verdict is then `unknown`.
    pub model: Option<&'a Model>,
}

impl<'a> Subject<'a> {
    /// What the engines dispatch on, from the staged facts and the planner's model.
    pub fn new(facts: &'a ArtifactFacts, format: Format, model: Option<&'a Model>) -> Subject<'a> {
        let config = facts.config.as_ref().map(|c| &c.raw);
        let text = |key: &str| config.and_then(|c| c.get(key)?.as_str());
        Subject {
            format,
            class: config.and_then(|c| c.get("architectures")?.as_array()?.first()?.as_str()),
            // The top level's: engines dispatch on a multimodal wrapper, not its text model.
            model_type: text("model_type").or_else(|| model.map(|m| m.model_type.as_str())),
            gguf_architecture: match &facts.content {
                Content::Gguf { parts, .. } => {
                    parts
                        .first()
                        .and_then(|p| match p.header.kv.get("general.architecture") {
                            Some(GgufValue::String(s)) => Some(s.as_str()),
                            _ => None,
                        })
                }
                Content::Safetensors { .. } => None,
            },
            model,
        }
    }

    pub(crate) fn quant(&self) -> Option<Quant<'_>> {
        let q = self.model?.quantization.as_ref()?;
        Some(Quant {
            method: q.method.as_str(),
            weights: Weights::of(q),
            bits: q.bits,
        })
    }

    /// DeepSeek-V3.2-style MLA with a sparse-attention indexer.
    pub(crate) fn sparse_mla(&self) -> bool {
        self.model.is_some_and(|m| {
            m.layers.iter().any(|l| {
                matches!(
                    l,
                    Mixer::Mla {
                        indexer_head_dim: Some(_),
                        ..
                    }
                )
            })
        })
    }
}

/// The quantization as the engines' kernel choice sees it.
#[derive(Clone, Copy)]
pub(crate) struct Quant<'a> {
    /// The planner's method name (`quantization.method`).
    pub(crate) method: &'a str,
    pub(crate) weights: Weights,
    pub(crate) bits: Option<u64>,
}

/// Weight formats whose kernel path depends on the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Weights {
    Fp8,
    Nvfp4,
    /// MXFP4 MoE experts (gpt-oss).
    Mxfp4,
    Other,
}

impl Weights {
    /// The format of a quantization as `quant.rs` recognised it (its method and layout).
    pub(crate) fn of(q: &Quantization) -> Weights {
        let layout = q.layout.as_str();
        match q.method.as_str() {
            "fp8" | "fbgemm_fp8" => Weights::Fp8,
            "mxfp4" => Weights::Mxfp4,
            "modelopt" if layout.starts_with("ModelOpt NVFP4") => Weights::Nvfp4,
            "modelopt" if layout.starts_with("ModelOpt FP8") => Weights::Fp8,
            "compressed-tensors" if layout.contains("nvfp4-pack-quantized") => Weights::Nvfp4,
            "compressed-tensors" if layout.contains("float-quantized") && q.bits == Some(8) => Weights::Fp8,
            _ => Weights::Other,
        }
    }

    /// The key of `kernel_paths` and `hardware_native_from` in the data.
    pub(crate) fn key(self) -> Option<&'static str> {
        match self {
            Weights::Fp8 => Some("fp8"),
            Weights::Nvfp4 => Some("nvfp4"),
            Weights::Mxfp4 => Some("mxfp4_moe"),
            Weights::Other => None,
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Weights::Fp8 => "FP8",
            Weights::Nvfp4 => "NVFP4",
            Weights::Mxfp4 => "MXFP4",
            Weights::Other => "these",
        }
    }
}

/// A verdict in the making: the worst support so far and the reasons.
#[derive(Default)]
pub(crate) struct Judgement {
    pub(crate) support: Option<Support>,
    /// Ids are given when the engine's findings are assembled.
    pub(crate) findings: Vec<Finding>,
}

impl Judgement {
    /// Record a reason that makes the verdict at best `support`.
    pub(crate) fn set(&mut self, support: Support, code: Code, subject: impl Into<String>, detail: impl Into<String>) {
        self.gate(support, code, subject, detail);
    }

    /// [`Judgement::set`], returning the finding so a capability gate can record both sides
    /// (`declared` what the gate needs, `observed` what the device has).
    pub(crate) fn gate(
        &mut self,
        support: Support,
        code: Code,
        subject: impl Into<String>,
        detail: impl Into<String>,
    ) -> &mut Finding {
        self.support = Some(self.support.map_or(support, |s| s.max(support)));
        self.record(code, subject, detail)
    }

    /// Record a reason that does not change the verdict.
    pub(crate) fn note(&mut self, code: Code, subject: impl Into<String>, detail: impl Into<String>) {
        self.record(code, subject, detail);
    }

    pub(crate) fn record(&mut self, code: Code, subject: impl Into<String>, detail: impl Into<String>) -> &mut Finding {
        self.findings.push(Finding {
            id: String::new(),
            code,
            severity: code.severity(),
            subject: subject.into(),
            declared: None,
            observed: None,
            detail: detail.into(),
        });
        self.findings.last_mut().expect("just pushed")
    }

    pub(crate) fn support(&self) -> Support {
        self.support.unwrap_or(Support::Yes)
    }
}

/// One engine's answer before assembly.
pub(crate) struct Outcome {
    pub(crate) general: Judgement,
    pub(crate) hybrid: Option<bool>,
    /// Per device group; empty without devices or when the general verdict settles it.
    pub(crate) devices: Vec<(String, Judgement)>,
}

impl Outcome {
    /// An engine with no Metal backend (`why`): every Apple silicon device refused, whatever
    /// else was judged of it (a capability it does not have) or of the artifact.
    pub(crate) fn without_metal(mut self, devices: &[DeviceGroup], why: &str) -> Outcome {
        for group in devices.iter().filter(|g| g.unified_memory()) {
            let mut j = Judgement::default();
            j.set(
                Support::No,
                Code::RuntimeDeviceUnsupported,
                group.name.clone(),
                format!("{why}; plan Apple silicon with llama.cpp (Metal)"),
            );
            match self.devices.iter_mut().find(|(name, _)| *name == group.name) {
                Some((_, judged)) => *judged = j,
                None => self.devices.push((group.name.clone(), j)),
            }
        }
        self
    }

    /// The general verdict settles it: no hybrid question, no device to judge.
    pub(crate) fn settled(general: Judgement) -> Outcome {
        Outcome {
            general,
            hybrid: None,
            devices: Vec::new(),
        }
    }
}

/// The engine release the verdicts for `engine` are judged against.
pub fn version(engine: Engine) -> &'static str {
    let engines = &*data::ENGINES;
    match engine {
        Engine::Vllm => &engines.vllm.version,
        Engine::Sglang => &engines.sglang.version,
        Engine::LlamaCpp => &engines.llama_cpp.version,
        Engine::Transformers => &engines.transformers.version,
    }
}

pub(crate) fn assemble(artifact: usize, engine: Engine, outcome: Outcome, devices: &[DeviceGroup]) -> Runtime {
    let general = outcome.general.support();
    // An engine whose verdict does not depend on the device still answers for each one.
    let per_device: Vec<DeviceSupport> = match outcome.devices.is_empty() {
        true => devices
            .iter()
            .map(|g| DeviceSupport {
                device: g.name.clone(),
                supported: general,
            })
            .collect(),
        false => outcome
            .devices
            .iter()
            .map(|(device, j)| DeviceSupport {
                device: device.clone(),
                supported: j.support().max(general),
            })
            .collect(),
    };
    let supported = per_device.iter().map(|d| d.supported).max().unwrap_or(general);
    let findings = std::iter::once(outcome.general)
        .chain(outcome.devices.into_iter().map(|(_, j)| j))
        .flat_map(|j| j.findings)
        .enumerate()
        .map(|(n, finding)| Finding {
            id: format!("{artifact}.{}.{n}", engine.key()),
            ..finding
        })
        .collect();
    Runtime {
        supported,
        hybrid: outcome.hybrid,
        per_device,
        findings,
    }
}

/// The compute capability an engine's CUDA gates compare, or why there is none to compare.
pub(crate) fn capability(group: &DeviceGroup) -> Result<u32, String> {
    let Some(device) = group.device() else {
        // The size as one would type it back (`24GiB`), whole GiB where it is.
        let bytes = group.capacity_bytes;
        let typed = match bytes.is_multiple_of(1 << 30) {
            true => format!("{}GiB", bytes >> 30),
            false => bytes.to_string(),
        };
        return Err(format!(
            "a device given only by its size has no compute capability to judge; name the part (e.g. l4, or rtx-4090={typed})"
        ));
    };
    match (device.compute_capability, &device.gfx_arch) {
        (Some(cc), _) => Ok(cc),
        (None, Some(gfx)) => Err(format!(
            "{} is an AMD part ({gfx}): the engines' ROCm paths are not judged",
            device.description
        )),
        (None, None) if device.unified_memory => Err(format!(
            "{} is Apple silicon (its GPU runs Metal, with no compute capability): the engine's CUDA gates do not apply, and its Apple path is not judged",
            device.description
        )),
        (None, None) => Err(format!(
            "no vendor source gives {}'s compute capability, so the engines' gates cannot be read for it",
            device.description
        )),
    }
}

/// Judge every device group with `on_device`, or mark it unknown when it has no capability.
pub(crate) fn per_device(
    devices: &[DeviceGroup],
    on_device: impl Fn(&str, u32, &mut Judgement),
) -> Vec<(String, Judgement)> {
    devices
        .iter()
        .map(|group| {
            let mut j = Judgement::default();
            match capability(group) {
                Ok(cc) => on_device(&group.name, cc, &mut j),
                Err(why) => j.set(Support::Unknown, Code::RuntimeUnknown, group.name.clone(), why),
            }
            (group.name.clone(), j)
        })
        .collect()
}

/// `major.minor` of a capability as engines hold it (`major × 10 + minor`).
pub(crate) fn cc_text(cc: u32) -> String {
    format!("{}.{}", cc / 10, cc % 10)
}

/// A capability gate's two sides on its finding: what the gate needs, what the device has.
pub(crate) fn sides(finding: &mut Finding, needs: u32, has: u32) {
    finding.declared = Some(cc_text(needs).into());
    finding.observed = Some(cc_text(has).into());
}

/// The verdict when preflight itself refused the architecture: `unknown`, never a guess.
pub(crate) fn refused(general: &mut Judgement, engine: &str) {
    general.set(
        Support::Unknown,
        Code::RuntimeUnknown,
        "architecture",
        format!("preflight refused the architecture (see the artifact's findings), so it does not say whether {engine} runs it"),
    );
}

/// A config without an `architectures` class: engines that dispatch on it cannot load it.
pub(crate) fn no_class(general: &mut Judgement, engine: &str) {
    general.set(
        Support::No,
        Code::RuntimeArchitectureUnregistered,
        "architecture",
        format!("config.json names no `architectures` class, which {engine} dispatches on"),
    );
}

/// Below the capability from which the hardware computes `weights` natively, whatever loads
/// runs through a non-native path.
pub(crate) fn below_native(engines: &data::Engines, weights: Weights, cc: u32) -> Option<u32> {
    let from = *engines.hardware_native_from.get(weights.key()?)?;
    (cc < from).then_some(from)
}
