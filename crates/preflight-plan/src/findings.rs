//! The findings catalogue: every code the planner can emit, with its severity and what it
//! means. **Invariant:** codes are stable strings; tests and users match on them, never on
//! message text. A new code is added here, once, with its documentation.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// The verdict cannot be trusted: `admissible` is false.
    Blocking,
    /// Worth a look; the figures still hold.
    Warning,
    /// For the record.
    Info,
}

macro_rules! catalogue {
    ($( $(#[doc = $doc:literal])* $variant:ident => ($code:literal, $severity:ident), )*) => {
        /// A finding's code. See [`Code::as_str`] for the stable string and the variant docs
        /// (also in `docs/findings.md`) for what each means and what to do about it.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Code { $( $(#[doc = $doc])* $variant, )* }

        impl Code {
            pub const ALL: &'static [Code] = &[$(Code::$variant),*];

            /// The code for its stable string, for reading a stored verdict back.
            pub fn from_code_str(code: &str) -> Option<Code> {
                match code { $($code => Some(Code::$variant),)* _ => None }
            }

            pub fn as_str(self) -> &'static str {
                match self { $(Code::$variant => $code,)* }
            }

            pub fn severity(self) -> Severity {
                match self { $(Code::$variant => Severity::$severity,)* }
            }

            /// What the code means, from its documentation.
            pub fn meaning(self) -> &'static str {
                match self { $(Code::$variant => concat!($($doc, "\n"),*).trim_ascii(),)* }
            }
        }
    };
}

catalogue! {
    /// The checkpoint has no config.json, so its architecture cannot be known.
    /// Provide the directory holding config.json, not a lone weights file.
    ConfigMissing => ("config.missing", Blocking),
    /// config.json has a key the planner has not graded. An unknown key may change what the
    /// model computes or how much memory it needs, so the verdict fails closed.
    ConfigUnknownKey => ("config.unknown_key", Blocking),
    /// A key the planner needs is absent from config.json.
    ConfigMissingKey => ("config.missing_key", Blocking),
    /// A key has a value of the wrong type or out of range (e.g. zero heads).
    ConfigInvalidValue => ("config.invalid_value", Blocking),
    /// A key has a value the planner recognises but does not model (e.g. an unknown
    /// quantization method or layer type).
    ConfigUnsupportedValue => ("config.unsupported_value", Blocking),
    /// config.json and the tensors disagree about a shape (e.g. `vocab_size` vs the
    /// embedding's rows, `num_key_value_heads × head_dim` vs k_proj's rows), or a GGUF's keys
    /// make a block another kind than its tensors (a Nemotron-H block whose `head_count_kv`
    /// says attention, holding Mamba2 `ssm_*` tensors).
    ConfigShapeMismatch => ("config.shape_mismatch", Blocking),
    /// The layers present in the tensors are not the layers config.json declares.
    ConfigLayerCountMismatch => ("config.layer_count_mismatch", Blocking),
    /// A config key that neither the reference implementation (transformers, for this
    /// `model_type`) nor the serving engine (vLLM, for the config's `architectures`) reads,
    /// as extracted from their released code (`data/config_keys.json`): it cannot change what
    /// they compute, so it is recorded, not blocking.
    ConfigIgnoredKey => ("config.ignored_key", Info),
    /// A config key the planner does not model, read by the reference implementation or the
    /// serving engine, whose value is the config class's default (or an identity value such
    /// as `partial_rotary_factor: 1.0`, or `null` for an option that defaults to none): the
    /// model computes as if the key were absent. Recorded, not blocking.
    ConfigDefaultValue => ("config.default_value", Info),
    /// The config declares multi-token-prediction modules the checkpoint does not ship.
    /// Engines serve such a checkpoint without speculative decoding.
    MtpDeclaredAbsent => ("mtp.declared_absent", Warning),
    /// `model_type` names an architecture the planner does not know. It is refused, never
    /// approximated from a look-alike.
    ArchitectureUnknown => ("architecture.unknown", Blocking),
    /// A group of tensors the planner cannot place in any component of the architecture.
    TensorUnplaced => ("tensor.unplaced", Blocking),
    /// A tensor the architecture requires is absent (e.g. no embedding, or no lm_head while
    /// embeddings are untied).
    TensorMissing => ("tensor.missing", Blocking),
    /// The same tensor name appears twice (in one header or across shards).
    TensorDuplicate => ("tensor.duplicate", Blocking),
    /// A tensor's dtype is not one the planner knows the width of.
    DtypeUnknown => ("dtype.unknown", Blocking),
    /// A header's data offsets overlap, leave gaps, run backwards or are misaligned.
    HeaderOffsetsInvalid => ("header.offsets_invalid", Blocking),
    /// A tensor's byte range is not its elements × dtype width.
    HeaderSizeMismatch => ("header.size_mismatch", Blocking),
    /// The data a header declares does not match the file's size (runs past it, or leaves
    /// bytes unaccounted for).
    HeaderBeyondFile => ("header.beyond_file", Blocking),
    /// The shard index names a tensor that no shard's header contains.
    IndexMissingTensor => ("index.missing_tensor", Blocking),
    /// A shard header contains a tensor the index does not list; loaders that follow the
    /// index will never load it.
    IndexUnlistedTensor => ("index.unlisted_tensor", Warning),
    /// The index places a tensor in a different shard than the one holding it.
    IndexWrongShard => ("index.wrong_shard", Blocking),
    /// The index names a shard file that is not there.
    IndexMissingShard => ("index.missing_shard", Blocking),
    /// `metadata.total_size` differs from the sum of the shards' data sections.
    IndexTotalSizeMismatch => ("index.total_size_mismatch", Warning),
    /// A split GGUF declares a part that is not there, or parts disagree.
    GgufMissingPart => ("gguf.missing_part", Blocking),
    /// A GGUF key in the architecture's namespace that llama.cpp's loader reads (or, for an
    /// architecture llama.cpp does not name, any key) and the planner does not model.
    GgufUnknownKey => ("gguf.unknown_key", Blocking),
    /// A GGUF key under the architecture's namespace that llama.cpp's loader for that
    /// architecture never reads (`data/llamacpp_keys.json`): it cannot change what llama.cpp
    /// computes, so it is recorded, not blocking.
    GgufIgnoredKey => ("gguf.ignored_key", Info),
    /// A GGUF key the planner needs is absent or has the wrong type.
    GgufMissingKey => ("gguf.missing_key", Blocking),
    /// A quantized tensor's element count is not a whole number of blocks.
    GgufBlockMismatch => ("gguf.block_mismatch", Blocking),
    /// `quantization_config.quant_method` names a method the planner does not know.
    QuantizationUnknown => ("quantization.unknown", Blocking),
    /// The quantization method or algorithm is a known one (e.g. a ModelOpt `quant_algo` its
    /// exporter writes), but the planner does not model how it stores weights (AWQ's
    /// pre-quant scales, SVD branches, W4A8 mixes), so it cannot count them.
    QuantizationUnsupported => ("quantization.unsupported", Blocking),
    /// A quantized tensor lacks its scales, or scales appear without their tensor.
    QuantizationLayoutInvalid => ("quantization.layout_invalid", Blocking),
    /// `tie_word_embeddings` is set but the checkpoint stores lm_head anyway; it is
    /// counted once.
    WeightsTiedStored => ("weights.tied_stored", Info),
    /// Multi-token-prediction layers are present; they are counted under `mtp` and left out
    /// of `active_per_token`.
    MtpLayersPresent => ("mtp.present", Info),
    /// Stored tensors that are buffers, not parameters (e.g. DeepSeek's
    /// `e_score_correction_bias`); counted in raw elements and bytes, not in parameters.
    TensorBuffersExcluded => ("tensor.buffers_excluded", Info),
    /// config.json's `auto_map` points transformers at modules of the repo's own: loading it
    /// with `trust_remote_code=True` imports and runs them (`source.remote_code` names each,
    /// and whether the repo has it). Read that code before running it, or serve the checkpoint
    /// with an engine's own implementation of its architecture.
    SourceRemoteCode => ("source.remote_code", Warning),
    /// Memory was asked for, but this artifact's cannot be known: no architecture, no dtype
    /// to cache in, or a layer the planner has no cache model for. No figure is guessed, and
    /// the system's `memory` block is left out. Fix the other findings, or give `kv_dtype`.
    MemoryUnavailable => ("memory.unavailable", Blocking),
    /// The weights alone, as stored, exceed what the named devices hold: whatever else is
    /// known or unknown about the checkpoint, it does not fit. Reported even when the
    /// architecture is refused, where the stored weights are a lower bound.
    MemoryWeightsExceedDevices => ("memory.weights_exceed_devices", Blocking),
    /// The requested context is longer than the model's declared maximum; engines refuse it
    /// unless overridden. The figures are still computed at the requested context.
    MemoryContextExceedsModel => ("memory.context_exceeds_model", Warning),
    /// The config declares no dtype, so the KV cache is planned in the float dtype most
    /// parameters are stored in. Give `kv_dtype` to plan another.
    MemoryDtypeInferred => ("memory.dtype_inferred", Info),
    /// The plan fits, but with under 5% of a device's usable memory to spare: a longer
    /// prompt mix, a larger batch or another engine version may tip it over.
    MemoryTightFit => ("memory.tight_fit", Warning),
    /// `--devices NAME` named no count: the plan is for the smallest count that fits (or, when
    /// none up to the search's limit does, the most devices the model splits over).
    MemoryDevicesChosen => ("memory.devices_chosen", Info),
    /// The device count does not split the model and no degree was given: the plan uses the
    /// largest degree dividing the count that does; the other devices hold replicas.
    MemoryTensorParallelChosen => ("memory.tensor_parallel_chosen", Info),
    /// llama.cpp, no `--context` given, devices named: the model's trained context, as
    /// llama.cpp loads it then, leaves a device under its fit's 1 GiB margin, so llama.cpp's
    /// `--fit` lowers the context first (common/fit.cpp step 2, down to 4,096 tokens) and the
    /// plan is at the context it picks. Give `--context` to plan another (the fit then
    /// changes layers only), or `--fit off`.
    MemoryContextFitted => ("memory.context_fitted", Info),
    /// With `speculative: eagle3:K`, the second source is the target's EAGLE-3 draft head: it
    /// has no memory block of its own, because its weights, RoPE table and KV cache layer are
    /// held by the target's engine and counted in the target's (`memory.speculative`).
    MemorySpeculativeDraft => ("memory.speculative_draft", Info),
    /// A workload was given, but no performance estimate can be made for this plan: the
    /// engine's scheduler is not modelled (llama.cpp), several artifacts share the devices, a
    /// device lacks the vendor figures the step costs need, the engine was never calibrated,
    /// or the KV pool holds not one request of the workload's length. The detail says which.
    PerformanceUnavailable => ("performance.unavailable", Warning),
    /// The performance estimate's constants were fitted on another device or compute type
    /// than this deployment's (the detail names the set used): its range is the other set's
    /// and may not hold here.
    PerformanceUncalibrated => ("performance.uncalibrated", Warning),
    /// (In `runtimes.<engine>.findings`; runtime findings never make a checkpoint
    /// inadmissible.) The engine registers no implementation of the checkpoint's
    /// `architectures` class (or GGUF `general.architecture`), and has no fallback for it.
    RuntimeArchitectureUnregistered => ("runtime.architecture_unregistered", Warning),
    /// The engine has no loader for the checkpoint's quantization method.
    RuntimeQuantizationUnsupported => ("runtime.quantization_unsupported", Warning),
    /// A named device's compute capability is below what the engine requires for the
    /// quantization method (its `get_min_capability()`) or for every kernel that could run it.
    RuntimeCapabilityTooLow => ("runtime.capability_too_low", Warning),
    /// The engine runs the weights on the named device only through a slower path its code
    /// selects when no native kernel's gate passes (e.g. Marlin weight-only FP8 or FP4).
    RuntimeFallbackKernel => ("runtime.fallback_kernel", Warning),
    /// The model's attention kind needs a kernel the engine has only for other devices
    /// (e.g. vLLM's sparse MLA for DeepSeek-V3.2 on compute capability 9.x/10.x/12.x).
    RuntimeAttentionUnsupported => ("runtime.attention_unsupported", Warning),
    /// The engine has no backend for the named device: vLLM and SGLang have none for Apple
    /// silicon's GPU (Metal), so they do not run there. Plan a Mac with llama.cpp.
    RuntimeDeviceUnsupported => ("runtime.device_unsupported", Warning),
    /// The engine cannot load this file format (e.g. GGUF on vLLM without its plugin,
    /// safetensors on llama.cpp before conversion).
    RuntimeFormatUnsupported => ("runtime.format_unsupported", Warning),
    /// The engine would serve the architecture through its generic Transformers backend:
    /// slower than a native implementation, and only as far as transformers supports it.
    RuntimeTransformersBackend => ("runtime.transformers_backend", Warning),
    /// llama.cpp cannot load safetensors, but its converter (`convert_hf_to_gguf.py`) accepts
    /// this architecture: convert first, then serve the GGUF.
    RuntimeConvertible => ("runtime.convertible", Info),
    /// The data cannot decide: preflight refused the architecture, the device has no compute
    /// capability the engine's gates read, or the deciding gate is compiled code. The finding
    /// says which; the verdict is `unknown`, never `yes`.
    RuntimeUnknown => ("runtime.unknown", Warning),
    /// The judged path depends on a package an install may lack (FlashInfer, DeepGEMM,
    /// `triton_kernels`); the finding names the path taken without it.
    RuntimeOptionalPackage => ("runtime.optional_package", Info),
}

impl Code {
    /// A runtime finding that, on its own, makes the engine refuse (rather than only slow
    /// down or leave undecided): what a `no` is shown by first.
    pub fn refuses_a_runtime(self) -> bool {
        matches!(
            self,
            Code::RuntimeArchitectureUnregistered
                | Code::RuntimeQuantizationUnsupported
                | Code::RuntimeCapabilityTooLow
                | Code::RuntimeAttentionUnsupported
                | Code::RuntimeFormatUnsupported
                | Code::RuntimeDeviceUnsupported
        )
    }
}

/// Codes travel as their stable strings; the enum is the only place either side lives.
impl Serialize for Code {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Code {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let code = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        Code::from_code_str(&code)
            .ok_or_else(|| serde::de::Error::custom(format_args!("unknown finding code `{code}`")))
    }
}

/// A code equals its stable string, so callers (and tests) may match on the documented form.
impl PartialEq<&str> for Code {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl std::fmt::Display for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

/// One thing the planner noticed about an artifact.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// Stable within a verdict: `<artifact index>.<n>`.
    pub id: String,
    pub code: Code,
    pub severity: Severity,
    /// What the finding is about: a config key, a tensor (group), a file.
    pub subject: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub declared: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observed: Option<serde_json::Value>,
    pub detail: String,
}

/// `1234567` → `1,234,567`: every figure in a finding's text is grouped for reading (the
/// `declared`/`observed` values stay plain numbers).
/// A size as a person reads it: two decimals in the largest binary unit it reaches (TiB past
/// 1,024 GiB), bytes below a KiB. One formatter for findings and every rendering.
pub fn size(n: u64) -> String {
    const UNITS: [(&str, u64); 4] = [("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];
    UNITS.iter().find(|(_, scale)| n >= *scale).map_or_else(
        || format!("{n} B"),
        |(unit, scale)| format!("{:.2} {unit}", n as f64 / *scale as f64),
    )
}

pub fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Findings of one code kept one by one; past this they are counted into one summary
/// finding, so a hostile header with a million bad tensors yields a verdict of kilobytes
/// rather than hundreds of megabytes (and every code still shows).
pub const KEPT_PER_CODE: usize = 20;

/// Subjects a summary finding names beyond the kept ones.
const NAMED_IN_SUMMARY: usize = 5;

/// Collects findings for one artifact; ids are assigned when the artifact is finished.
#[derive(Debug, Default)]
pub struct Findings {
    kept: Vec<Finding>,
    per_code: std::collections::HashMap<Code, usize>,
    /// Findings past [`KEPT_PER_CODE`]: how many, and the first few subjects.
    overflow: std::collections::BTreeMap<&'static str, (Code, u64, Vec<String>)>,
    /// Where a dropped finding's details are written (and forgotten).
    scratch: Option<Finding>,
}

impl Findings {
    pub fn push(&mut self, code: Code, subject: impl Into<String>, detail: impl Into<String>) -> &mut Finding {
        self.keep(Finding {
            id: String::new(),
            code,
            severity: code.severity(),
            subject: subject.into(),
            declared: None,
            observed: None,
            detail: detail.into(),
        })
    }

    /// Findings collected apart (checks run on another thread) joined to these exactly as
    /// if each had been pushed here, in order, after these: the same kept findings, counts
    /// and summary subjects.
    pub fn append(&mut self, other: Findings) {
        for finding in other.kept {
            self.keep(finding);
        }
        for (key, (code, count, subjects)) in other.overflow {
            self.count_more(code, count);
            if let Some((_, _, named)) = self.overflow.get_mut(key) {
                let room = NAMED_IN_SUMMARY.saturating_sub(named.len());
                named.extend(subjects.into_iter().take(room));
            }
        }
    }

    /// Whether any finding so far is blocking: the figures then cannot prove a fit.
    pub fn any_blocking(&self) -> bool {
        self.per_code.keys().any(|code| code.severity() == Severity::Blocking)
    }

    fn keep(&mut self, finding: Finding) -> &mut Finding {
        let code = finding.code;
        let seen = self.per_code.entry(code).or_default();
        *seen += 1;
        if *seen <= KEPT_PER_CODE {
            self.kept.push(finding);
            return self.kept.last_mut().expect("just pushed");
        }
        let (_, count, subjects) = self.overflow.entry(code.as_str()).or_insert((code, 0, Vec::new()));
        *count += 1;
        if subjects.len() < NAMED_IN_SUMMARY {
            subjects.push(finding.subject.clone());
        }
        self.scratch.insert(finding)
    }

    /// `count` more findings of `code` that a reader already counted instead of listing
    /// (a header's `Repeated` issue): they join this code's summary finding.
    pub fn count_more(&mut self, code: Code, count: u64) {
        if count == 0 {
            return;
        }
        *self.per_code.entry(code).or_default() += usize::try_from(count).unwrap_or(usize::MAX);
        let (_, counted, _) = self.overflow.entry(code.as_str()).or_insert((code, 0, Vec::new()));
        *counted = counted.saturating_add(count);
    }

    /// A config/tensor disagreement with both sides recorded.
    pub fn mismatch(
        &mut self,
        code: Code,
        subject: impl Into<String>,
        declared: impl Into<serde_json::Value>,
        observed: impl Into<serde_json::Value>,
        detail: impl Into<String>,
    ) {
        let finding = self.push(code, subject, detail);
        finding.declared = Some(declared.into());
        finding.observed = Some(observed.into());
    }

    pub fn has(&self, code: Code) -> bool {
        self.per_code.contains_key(&code)
    }

    /// Blocking first, then warnings, then info; ids in that order. Each code past
    /// [`KEPT_PER_CODE`] ends with one finding counting the rest.
    pub fn finish(mut self, artifact: usize) -> Vec<Finding> {
        for (_, (code, count, subjects)) in std::mem::take(&mut self.overflow) {
            self.kept.push(Finding {
                id: String::new(),
                code,
                severity: code.severity(),
                subject: format!("{} more", grouped(count)),
                declared: None,
                observed: Some(count.into()),
                detail: match subjects.is_empty() {
                    true => format!(
                        "{} more findings with this code are counted, not listed",
                        grouped(count)
                    ),
                    false => format!(
                        "{} more findings with this code are counted, not listed; the next are: {}",
                        grouped(count),
                        subjects.join(", ")
                    ),
                },
            });
        }
        self.kept.sort_by_key(|f| f.severity);
        for (n, f) in self.kept.iter_mut().enumerate() {
            f.id = format!("{artifact}.{n}");
        }
        self.kept
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn sizes_read_in_the_largest_binary_unit_they_reach() {
        assert_eq!(size(1023), "1023 B");
        assert_eq!(size(1536), "1.50 KiB");
        assert_eq!(size(80 << 30), "80.00 GiB");
        // Past 1,024 GiB, TiB: DeepSeek-V3's weights over 8 ranks are not "5,120.00 GiB".
        assert_eq!(size(5 << 40), "5.00 TiB");
        assert_eq!(size(u64::MAX), "16777216.00 TiB");
    }

    use super::*;

    /// A stream of findings: two codes past the cap, a reader's count, one code under it.
    fn push_part(findings: &mut Findings, from: usize, to: usize) {
        for i in from..to {
            findings.push(Code::TensorDuplicate, format!("t{i}"), "twice");
            if i % 3 == 0 {
                findings.mismatch(Code::HeaderSizeMismatch, format!("s{i}"), i as u64, 0u64, "size");
            }
            if i == 7 {
                findings.count_more(Code::TensorDuplicate, 1_000);
                findings.push(Code::ConfigMissing, "config.json", "none");
            }
        }
    }

    #[test]
    fn appended_findings_are_what_pushing_them_in_order_makes() {
        for split in [0, 5, 19, 20, 21, 40, 80] {
            let mut one = Findings::default();
            push_part(&mut one, 0, 80);
            let (mut first, mut second) = (Findings::default(), Findings::default());
            push_part(&mut first, 0, split);
            push_part(&mut second, split, 80);
            first.append(second);
            assert_eq!(first.finish(0), one.finish(0), "split at {split}");
        }
    }

    #[test]
    fn figures_are_grouped_by_thousands() {
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(1_000), "1,000");
        assert_eq!(grouped(844_640_768), "844,640,768");
        assert_eq!(grouped(u64::MAX), "18,446,744,073,709,551,615");
    }
}
