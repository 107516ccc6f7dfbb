//! Plan options: what the caller asks of the plan beyond the facts — today, memory and fit.
//! The CLI builds them from flags, the service deserialises them from `options` in
//! `POST /v1/plan`; both call [`PlanOptions::validate`] before any work, so a bad value is
//! bad input (CLI exit 2, HTTP 400), never a finding and never a panic.
//!
//! **Invariant:** serialisation is canonical (fields in declaration order, absent options
//! omitted, devices and fractions normalised), so the service may hash the JSON as a cache key.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

pub use crate::counts::{MAX_CONTEXT, MAX_SEQUENCES, tokens};
use crate::devices;
use crate::verdict::Engine;
use crate::workload::{GpuPrices, Slo, Workload};

/// Most devices (and tensor-parallel degree) accepted: an order of magnitude past the largest
/// scale-up domain sold (72 GPUs in an NVL72 rack). It bounds the `per_device` list.
pub const MAX_DEVICES: u64 = 1024;

/// Most device types a recommendation plans on: each costs up to eight full plans.
pub const MAX_RECOMMENDED_TYPES: usize = 8;

/// `gpu_utilization` is held in millionths so options hash and compare exactly.
const PPM: u64 = 1_000_000;

/// vLLM's default `gpu_memory_utilization`: the share of each device the plan may fill.
pub const DEFAULT_GPU_UTILIZATION_PPM: u32 = 900_000;

/// What the caller asks of the plan beyond the facts. Every field is optional; giving any
/// of them asks for the `memory` block (see [`PlanOptions::asks_for_memory`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanOptions {
    /// Tokens per sequence: a number, or as people type it (`"32k"`, `"1M"`). Default: each
    /// model's declared maximum context.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "token_count")]
    pub context: Option<u64>,
    /// Sequences served at once, each holding `context` tokens of KV cache. Default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sequences: Option<u64>,
    /// KV cache element type. Default: the model's dtype (GGUF: f16, llama.cpp's default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_dtype: Option<KvDtype>,
    /// Plan the weights as if stored in this type instead of as stored (a what-if).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weights_dtype: Option<WeightsDtype>,
    /// vLLM's and SGLang's `--dtype`: the dtype the model computes in (activations, RoPE
    /// tables, the `auto` KV cache), and the one an unquantized checkpoint's weights are
    /// loaded in. Default: the config's (`auto`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dtype: Option<ComputeDtype>,
    /// The devices the system is placed on, e.g. `"h100-80gb:2"`. Without devices there is
    /// no capacity, so `fits` and `max_context_that_fits` are null.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub devices: Option<Devices>,
    /// Tensor-parallel degree. Default: the device count over `data_parallel` (1 without
    /// devices).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tensor_parallel: Option<u64>,
    /// vLLM `--data-parallel-size`: engine replicas of `tensor_parallel` ranks each that act
    /// as one deployment, so that `expert_parallel` spreads the experts over all of their
    /// ranks. Each replica serves `sequences` of its own. Default 1; devices beyond
    /// `tensor_parallel × data_parallel` hold independent copies of the deployment. Under
    /// SGLang: `--attn-dp-size N` (deprecated: `--dp-size N --enable-dp-attention`) with
    /// `--tp-size` = `tensor_parallel × N` — attention groups of `tensor_parallel` ranks inside
    /// one TP group, each serving `sequences` of its own (docs/memory.md § Expert and data
    /// parallelism; Qwen3-MoE only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_parallel: Option<u64>,
    /// Expert parallelism — vLLM `--enable-expert-parallel` (over `tensor_parallel ×
    /// data_parallel` ranks), SGLang `--ep-size` equal to its `--tp-size` (`tensor_parallel ×
    /// data_parallel`): each rank holds
    /// whole experts, an even share of them, instead of a slice of every expert.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub expert_parallel: bool,
    /// Share of each device's memory the plan may fill, in (0, 1]. Default 0.9, as vLLM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_utilization: Option<Fraction>,
    /// Count multi-token-prediction layers (weights and KV), as when they serve as the
    /// speculative draft. Default: excluded, as engines skip them unless asked.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub include_mtp: bool,
    /// Speculative decoding, `METHOD:K`: `mtp:3` drafts 3 tokens with the checkpoint's own
    /// multi-token-prediction layers, `eagle3:3` with an EAGLE-3 draft head given as the second
    /// source. The drafter's weights, KV cache layers, lookahead and profile-run terms join the
    /// target's memory (docs/memory.md § Speculative decoding).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speculative: Option<Speculative>,
    /// The serving engine whose accounting the memory plan follows. Default: the engine its
    /// own knobs name, else llama.cpp when every artifact is a GGUF, else vLLM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<MemoryEngine>,
    /// vLLM `--max-num-seqs`: requests scheduled at once (its sampler warm-up holds logits for
    /// this many). Default: vLLM's for the device (1024 on ≥ 70 GiB parts but A100, else 256).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_num_seqs: Option<u64>,
    /// vLLM `--max-num-batched-tokens`: tokens in one forward pass, the profile run's size.
    /// Default: vLLM's for the device (8192 on ≥ 70 GiB parts but A100, else 2048).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_num_batched_tokens: Option<u64>,
    /// vLLM `--block-size`: tokens per KV cache page. Default 16 (64 for MLA models).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_size: Option<u64>,
    /// vLLM `--enforce-eager`: no CUDA graphs, so no graph pool beside the budget. Changes
    /// no figure under vLLM 0.19, which captures graphs outside the budget it sizes.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub enforce_eager: bool,
    /// SGLang `--mem-fraction-static`: the share of each device for weights and KV pool.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "mem_fraction_static"
    )]
    pub mem_fraction_static: Option<Fraction>,
    /// llama.cpp `--batch-size` (`n_batch`): tokens submitted per decode call. Default 2048.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<u64>,
    /// llama.cpp `--ubatch-size` (`n_ubatch`): tokens per forward pass, which sizes the compute
    /// buffer. Default 512.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ubatch: Option<u64>,
    /// llama.cpp `--flash-attn on|off`. Default: the engine's `auto`, which is on where the
    /// backend supports it (every backend preflight plans for).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flash_attn: Option<bool>,
    /// llama.cpp `--n-gpu-layers`: layers placed on the devices, counting the output layer as
    /// llama.cpp does (a model of 48 layers has 49), the first layers (and their KV cache) kept
    /// in host RAM: a number or `"all"`. Default: `auto` — llama.cpp's `--fit` picks it (see
    /// `fit`); without fit, all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_layers: Option<GpuLayers>,
    /// llama.cpp `--n-cpu-moe N`: the routed experts of the first N layers stay in host RAM
    /// (`blk.i.ffn_(up|down|gate|gate_up)_(ch|)exps`, i < N), the rest of those layers on
    /// their device.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub n_cpu_moe: Option<u64>,
    /// llama.cpp `--override-tensor PATTERN=DEVICE` (`-ot`): tensors whose name the regex
    /// matches (searched, as `std::regex_search`) go to `CPU`, or to the i-th device of
    /// `devices` as its backend names it (`CUDA<i>`, `ROCm<i>` on AMD, `MTL0` on Apple
    /// silicon); the first matching pattern wins, these before `n_cpu_moe`'s.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub override_tensor: Vec<TensorOverride>,
    /// llama.cpp `--no-kv-offload`: every layer's KV cache in host RAM, whatever device holds
    /// the layer.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_kv_offload: bool,
    /// llama.cpp `--split-mode layer|none` (`row` is refused: not modelled). Default `layer`:
    /// whole layers spread over the devices; `none` uses the first device only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split_mode: Option<SplitMode>,
    /// llama.cpp `--tensor-split A,B,…`: the share of the offloaded layers each device takes,
    /// in `devices` order. Default: in proportion to each device's memory (llama.cpp's free
    /// memory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tensor_split: Option<TensorSplit>,
    /// llama.cpp `--fit on|off`: whether llama.cpp lowers a `context` not given, then picks the
    /// layers (and, for MoE, the experts kept in host RAM) that fit the devices with its 1 GiB
    /// margin (`common/fit.cpp`). Default on, as llama.cpp's tools: the layers are picked when
    /// neither `gpu_layers`, `tensor_split` (several devices), `override_tensor` nor
    /// `n_cpu_moe` is given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fit: Option<bool>,
    /// Never the caller's: set by placement when llama.cpp's fit lowers an unset `context`.
    #[serde(skip)]
    pub fitted_context: Option<ContextFit>,
    /// Host RAM for llama.cpp's host buffers (CPU-mapped weights, CPU KV cache, host compute
    /// and output buffers): bytes, or a size (`64GiB`). Default: not checked — `memory.host`
    /// says what is needed, and `fits` is the devices' alone.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "host_memory")]
    pub host_memory: Option<u64>,
    /// Apple silicon: the GPU's working set, what macOS lets Metal hold of the unified memory
    /// (`recommendedMaxWorkingSetSize`, which llama.cpp prints at start-up and `sudo sysctl
    /// iogpu.wired_limit_mb=N` raises): bytes, or a size (`400GiB`). Default: preflight's rule
    /// for macOS's default ([`devices::default_working_set`]). Only with an Apple device.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "working_set")]
    pub working_set: Option<u64>,
    /// llama.cpp `--kv-unified`: one KV stream of `context × sequences` cells that every
    /// sequence shares, instead of a stream a sequence. Default off, as llama.cpp's tools.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub kv_unified: bool,
    /// llama.cpp `--swa-full`: sliding-window layers cache the whole context instead of the
    /// window and a micro-batch. Default off, as llama.cpp's tools.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub swa_full: bool,
    /// The traffic to estimate serving performance for: `isl=1024,osl=1024,concurrency=64`
    /// (a closed loop of 64 clients) or `isl=…,osl=…,rate=5` (5 requests a second, an open
    /// loop). Adds the `performance` block; needs `devices`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<Workload>,
    /// Latency targets the performance estimate is held to: `ttft=2s,tpot=50ms` (any of ttft,
    /// tpot, e2e; the median unless a percentile is named, `ttft_p99=3s`). Needs `workload`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo: Option<Slo>,
    /// Dollars an hour per GPU type (`h100-80gb=2.5,h200=3.5`): recommendations add the cost
    /// of a million output tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_price: Option<GpuPrices>,
    /// An engine the deployment needs (`vllm`, `sglang`, `llama_cpp`, `transformers`): the
    /// verdict's `require_engine.met` says whether every artifact runs on it (`yes` or
    /// `fallback`), and the CLI exits 4 when not. Not a memory option.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub require_engine: Option<Engine>,
}

/// A serving engine whose memory accounting preflight models (see `docs/memory.md`), at the
/// one release modelled for it. Written `vllm` or `vllm@0.19.0`; a release not modelled is
/// refused, never planned with another's rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum MemoryEngine {
    Vllm,
    Sglang,
    LlamaCpp,
}

impl TryFrom<String> for MemoryEngine {
    type Error = OptionsError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<MemoryEngine> for String {
    fn from(engine: MemoryEngine) -> String {
        engine.name().to_owned()
    }
}

/// `--engine`'s name table, from each engine's own names (`engines/<engine>/mod.rs`).
static ENGINE_NAMES: std::sync::LazyLock<Vec<(MemoryEngine, &'static [&'static str])>> =
    std::sync::LazyLock::new(|| MemoryEngine::ALL.iter().map(|e| (*e, e.unit().names())).collect());

impl MemoryEngine {
    /// The release whose memory rules the engine's module follows — the only one
    /// `ENGINE@VERSION` accepts, and the one the support data is read from.
    pub fn modelled_version(self) -> &'static str {
        self.unit().modelled_version()
    }

    /// Why a release that was read is not offered, if it is one of those.
    pub fn not_offered(self, release: &str) -> Option<&'static str> {
        self.unit()
            .not_offered()
            .iter()
            .find(|(r, _)| *r == release)
            .map(|(_, why)| *why)
    }

    /// The engine as `runtimes` names it: the same engine, judged for loading.
    pub fn runtime(self) -> crate::verdict::Engine {
        self.unit().engine()
    }

    pub fn name(self) -> &'static str {
        self.unit().names()[0]
    }
}

impl FromStr for MemoryEngine {
    type Err = OptionsError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let lower = s.trim().to_ascii_lowercase();
        let (name, release) = match lower.split_once('@') {
            Some((name, release)) => (name, Some(release)),
            None => (lower.as_str(), None),
        };
        let engine = named(&ENGINE_NAMES, "engine", name, s, "")?;
        let modelled = engine.modelled_version();
        let label = engine.runtime().label();
        match release {
            Some(release) if release != modelled => Err(error(
                "engine",
                match engine.not_offered(release) {
                    Some(why) => {
                        format!("{label} {release} is not offered: {why}; plan with {modelled}, the release modelled")
                    }
                    None => format!(
                        "{label} {release} is not modelled: its memory rules are read for {modelled} only (a release is offered once its rules are read from its source and its support data extracted)"
                    ),
                },
            )),
            _ => Ok(engine),
        }
    }
}

impl fmt::Display for MemoryEngine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// `context` in JSON: a number, or a string [`tokens`] reads.
fn token_count<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<u64>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Given {
        Number(u64),
        Text(String),
    }
    match Given::deserialize(deserializer)? {
        Given::Number(n) => Ok(Some(n)),
        Given::Text(text) => tokens(&text)
            .map(Some)
            .map_err(|m| serde::de::Error::custom(error("context", m))),
    }
}

/// `mem_fraction_static` is a [`Fraction`] whose error names its own option.
fn mem_fraction_static<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<Fraction>, D::Error> {
    let value = f64::deserialize(deserializer)?;
    Fraction::try_from(value)
        .map(Some)
        .map_err(|e| serde::de::Error::custom(error("mem_fraction_static", e.message)))
}

/// `host_memory` in JSON: bytes, or a size as `devices` reads one (`64GiB`).
fn host_memory<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<u64>, D::Error> {
    size(deserializer, parse_host_memory)
}

/// A size in JSON: bytes, or text `parse` reads.
fn size<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
    parse: fn(&str) -> Result<u64, OptionsError>,
) -> Result<Option<u64>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Given {
        Number(u64),
        Text(String),
    }
    match Given::deserialize(deserializer)? {
        Given::Number(n) => Ok(Some(n)),
        Given::Text(text) => parse(&text).map(Some).map_err(serde::de::Error::custom),
    }
}

/// `working_set` in JSON: bytes, or a size as `devices` reads one (`400GiB`).
fn working_set<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<u64>, D::Error> {
    size(deserializer, parse_working_set)
}

/// A working-set size: bytes, or `400GiB` / `400GB` (read as GiB, as device sizes are).
pub fn parse_working_set(text: &str) -> Result<u64, OptionsError> {
    parse_size("working_set", text, "400GiB")
}

/// A host RAM size: bytes, or `64GiB` / `64GB` (read as GiB, as everywhere else).
pub fn parse_host_memory(text: &str) -> Result<u64, OptionsError> {
    parse_size("host_memory", text, "64GiB")
}

/// A positive size as `devices` reads one, or an error on `option` showing `example`.
fn parse_size(option: &'static str, text: &str, example: &str) -> Result<u64, OptionsError> {
    devices::bytes(text.trim())
        .filter(|b| *b > 0)
        .ok_or_else(|| error(option, format!("`{text}` is not a size: give bytes or e.g. {example}")))
}

/// vLLM's accepted `--block-size` values (`CacheConfig.block_size`'s `Literal`).
pub const VLLM_BLOCK_SIZES: &[u64] = &[1, 8, 16, 32, 64, 128, 256];

/// An option value that cannot be planned: the caller's mistake, reported before any work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OptionsError {
    /// The option's JSON name (`context`, `tensor_parallel`, …); the CLI flag is the same
    /// with dashes.
    pub option: &'static str,
    pub message: String,
}

impl fmt::Display for OptionsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.option, self.message)
    }
}

impl std::error::Error for OptionsError {}

fn error(option: &'static str, message: impl Into<String>) -> OptionsError {
    OptionsError {
        option,
        message: message.into(),
    }
}

impl PlanOptions {
    /// A workload on device types without counts asks for recommendations: every deployment
    /// on them planned and ranked (`recommend.rs`).
    pub fn recommends(&self) -> bool {
        self.workload.is_some() && self.devices.as_ref().is_some_and(Devices::all_uncounted)
    }

    /// Whether the caller asked for memory: any memory option given (`require_engine` is
    /// not one). `{}` plans as before, so existing verdicts (and their cache keys) are
    /// unchanged.
    pub fn asks_for_memory(&self) -> bool {
        *self
            != PlanOptions {
                require_engine: self.require_engine,
                ..PlanOptions::default()
            }
    }

    /// Reject values no plan can honour. Values that depend on the model (a tensor-parallel
    /// degree that does not divide its heads, a context past its maximum) are findings
    /// instead, because only the planner knows the model.
    pub fn validate(&self) -> Result<(), OptionsError> {
        let bounded = |option, value: Option<u64>, max: u64, unit: &str| match value {
            Some(0) => Err(error(option, format!("must be at least 1 {unit}"))),
            Some(n) if n > max => Err(error(option, format!("{n} is more than the {max} {unit}s accepted"))),
            _ => Ok(()),
        };
        bounded("context", self.context, MAX_CONTEXT, "token")?;
        bounded("sequences", self.sequences, MAX_SEQUENCES, "sequence")?;
        bounded("tensor_parallel", self.tensor_parallel, MAX_DEVICES, "device")?;
        bounded("data_parallel", self.data_parallel, MAX_DEVICES, "replica")?;
        if let Some(ranks) = self
            .tensor_parallel
            .unwrap_or(1)
            .checked_mul(self.data_parallel.unwrap_or(1))
            && ranks > MAX_DEVICES
        {
            return Err(error(
                "data_parallel",
                format!(
                    "{ranks} ranks (tensor_parallel × data_parallel) is more than the {MAX_DEVICES} devices accepted"
                ),
            ));
        }
        bounded("max_num_seqs", self.max_num_seqs, MAX_SEQUENCES, "sequence")?;
        bounded(
            "max_num_batched_tokens",
            self.max_num_batched_tokens,
            MAX_CONTEXT,
            "token",
        )?;
        bounded("batch", self.batch, MAX_CONTEXT, "token")?;
        bounded("ubatch", self.ubatch, MAX_CONTEXT, "token")?;
        if let Some(size) = self.block_size
            && !VLLM_BLOCK_SIZES.contains(&size)
        {
            let sizes: Vec<String> = VLLM_BLOCK_SIZES.iter().map(u64::to_string).collect();
            return Err(error(
                "block_size",
                format!("{size} is not one of vLLM's block sizes ({})", sizes.join(", ")),
            ));
        }
        if let (Some(batch), Some(ubatch)) = (self.batch, self.ubatch)
            && ubatch > batch
        {
            return Err(error(
                "ubatch",
                format!("{ubatch} is more than the batch of {batch} (llama.cpp caps n_ubatch at n_batch)"),
            ));
        }
        self.validate_offload()?;
        if let Some(engine) = self.knob_engine()? {
            self.check_engine(engine)?;
        }
        if self.slo.is_some() && self.workload.is_none() {
            return Err(error(
                "slo",
                "latency targets are held against a workload: give workload too (isl=…,osl=…,concurrency=… or rate=…)",
            ));
        }
        if let Some(devices) = self.devices.as_ref().filter(|_| self.recommends())
            && devices.groups().len() > MAX_RECOMMENDED_TYPES
        {
            return Err(error(
                "devices",
                format!(
                    "{} device types to recommend on: at most {MAX_RECOMMENDED_TYPES} (each is planned at 1, 2, 4 and 8 GPUs)",
                    devices.groups().len()
                ),
            ));
        }
        if self.workload.is_some() && self.devices.is_none() {
            return Err(error(
                "workload",
                "a performance estimate needs the devices it runs on: give devices too (e.g. h100-80gb:8)",
            ));
        }
        if let Some(spec) = self.speculative
            && spec.method == SpeculativeMethod::Mtp
            && self.include_mtp
        {
            return Err(error(
                "include_mtp",
                "speculative mtp already counts the multi-token-prediction layers, as the engine holds them when they draft; give one or the other",
            ));
        }
        if let Some(devices) = self.devices.as_ref().filter(|d| d.open_count().is_none()) {
            let count = devices.count();
            let dp = self.data_parallel.unwrap_or(1);
            if let Some(tp) = self.tensor_parallel
                && (tp.saturating_mul(dp) > count || !count.is_multiple_of(tp.saturating_mul(dp)))
            {
                let (option, ranks) = match self.data_parallel {
                    Some(dp) => (
                        "data_parallel",
                        format!("{tp} × {dp} ranks (tensor_parallel × data_parallel)"),
                    ),
                    None => ("tensor_parallel", tp.to_string()),
                };
                return Err(error(
                    option,
                    format!(
                        "{ranks} must divide the device count {count} (each group of that many devices holds one deployment)"
                    ),
                ));
            }
            if self.tensor_parallel.is_none() && !count.is_multiple_of(dp) {
                return Err(error(
                    "data_parallel",
                    format!("{dp} replicas must divide the device count {count}"),
                ));
            }
        }
        Ok(())
    }

    /// The engine-specific options given, each with its JSON name and engine.
    fn knobs(&self) -> impl Iterator<Item = (&'static str, MemoryEngine)> {
        MemoryEngine::ALL.into_iter().flat_map(|engine| {
            engine
                .unit()
                .knobs_given(self)
                .into_iter()
                .map(move |knob| (knob, engine))
        })
    }

    /// The engine the options name, explicitly or through their knobs; a knob of another
    /// engine than the one named (or knobs of two engines) is a mistake.
    fn knob_engine(&self) -> Result<Option<MemoryEngine>, OptionsError> {
        let mut named: Option<(&'static str, MemoryEngine)> = self.engine.map(|e| ("engine", e));
        for (knob, engine) in self.knobs() {
            match named {
                Some((_, e)) if e == engine => {}
                Some(("engine", e)) => {
                    return Err(error(
                        knob,
                        format!("`{knob}` is a {engine} option, and the engine is {e}"),
                    ));
                }
                Some((other, e)) => {
                    return Err(error(
                        knob,
                        format!("`{knob}` is a {engine} option and `{other}` a {e} one; name the engine with `engine`"),
                    ));
                }
                None => named = Some((knob, engine)),
            }
        }
        Ok(named.map(|(_, e)| e))
    }

    /// Options the engine has no counterpart of, refused on the engine the plan follows —
    /// named (from `validate`, before any source is read) or resolved from the artifacts'
    /// formats (from `plan`). Each engine says what it refuses.
    pub fn check_engine(&self, engine: MemoryEngine) -> Result<(), OptionsError> {
        engine.unit().refuse(self)
    }

    /// The engine planned for: as named (or implied by its knobs), else llama.cpp when every
    /// artifact is a GGUF, else vLLM.
    pub fn engine_for(&self, all_gguf: bool) -> MemoryEngine {
        match self.knob_engine() {
            Ok(Some(engine)) => engine,
            _ if all_gguf => MemoryEngine::LlamaCpp,
            _ => MemoryEngine::Vllm,
        }
    }

    /// The tensor-parallel degree in effect: as given, else the device count, else 1.
    pub fn tensor_parallel_degree(&self) -> u64 {
        self.tensor_parallel
            .or_else(|| {
                self.devices
                    .as_ref()
                    .map(|d| (d.count() / self.data_parallel_degree()).max(1))
            })
            .unwrap_or(1)
    }

    /// Engine replicas acting as one deployment (`data_parallel`), 1 unless given.
    pub fn data_parallel_degree(&self) -> u64 {
        self.data_parallel.unwrap_or(1).max(1)
    }

    /// Ranks the experts are spread over whole, when expert parallelism is on: every rank of
    /// the data-parallel deployment under vLLM, SGLang's TP group (attention-DP groups
    /// included) under SGLang.
    pub fn expert_parallel_degree(&self, engine: MemoryEngine) -> Option<u64> {
        self.expert_parallel.then(|| engine.unit().expert_parallel_ranks(self))
    }

    pub fn utilization(&self) -> Fraction {
        self.gpu_utilization.unwrap_or(Fraction {
            ppm: DEFAULT_GPU_UTILIZATION_PPM,
        })
    }
}

/// A KV cache element type: how many bytes a block of elements takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String")]
pub enum KvDtype {
    #[serde(rename = "f32", alias = "fp32", alias = "float32")]
    F32,
    #[serde(rename = "bf16", alias = "bfloat16")]
    Bf16,
    #[serde(rename = "f16", alias = "fp16", alias = "float16")]
    F16,
    /// FP8 (E4M3 or E5M2): one byte an element, as vLLM's `--kv-cache-dtype fp8`.
    #[serde(rename = "fp8", alias = "fp8_e4m3", alias = "fp8_e5m2")]
    Fp8,
    /// llama.cpp's `q8_0`: 32 elements in 34 bytes (an f16 scale and 32 int8).
    #[serde(rename = "q8_0")]
    Q8_0,
    /// llama.cpp's `q4_0`: 32 elements in 18 bytes (an f16 scale and 32 nibbles).
    #[serde(rename = "q4_0")]
    Q4_0,
}

/// Names accepted for each KV dtype (the first is canonical); shared by `FromStr` and docs.
const KV_NAMES: &[(KvDtype, &[&str])] = &[
    (KvDtype::F32, &["f32", "fp32", "float32"]),
    (KvDtype::Bf16, &["bf16", "bfloat16"]),
    (KvDtype::F16, &["f16", "fp16", "float16"]),
    (KvDtype::Fp8, &["fp8", "fp8_e4m3", "fp8_e5m2"]),
    (KvDtype::Q8_0, &["q8_0"]),
    (KvDtype::Q4_0, &["q4_0"]),
];

/// The `--kv-cache-dtype` values each engine's own flag accepts, read from its release
/// (`data/kv_cache_dtypes.json`, `scripts/engines/extract_kv_cache_dtypes.py`).
type KvCacheDtypes = std::collections::BTreeMap<String, EngineKvChoices>;

#[derive(Deserialize)]
struct EngineKvChoices {
    values: Vec<String>,
    source: String,
}

static KV_CACHE_DTYPES: std::sync::LazyLock<KvCacheDtypes> = std::sync::LazyLock::new(|| {
    // Keyed by the engine's verdict key; the file's other keys (schema, provenance) are not choices.
    let file: std::collections::BTreeMap<String, serde_json::Value> =
        serde_json::from_str(include_str!("../data/kv_cache_dtypes.json")).expect("data/kv_cache_dtypes.json is valid");
    file.into_iter()
        .filter_map(|(key, value)| Some((key, EngineKvChoices::deserialize(value).ok()?)))
        .collect()
});

impl MemoryEngine {
    /// Refuse a KV cache dtype the engine's own flag would refuse (vLLM has no `q4_0` cache,
    /// llama.cpp no FP8 one): bad usage, not a plan with a cache the engine cannot keep. A
    /// dtype is accepted when any of its names is one of the engine's choices.
    pub fn check_kv_dtype(self, dtype: KvDtype) -> Result<(), OptionsError> {
        let data = &*KV_CACHE_DTYPES;
        let Some(choices) = data.get(self.runtime().key()) else {
            return Err(error(
                "kv_dtype",
                format!("no KV cache dtypes are extracted for {}", self.runtime().label()),
            ));
        };
        let names = KV_NAMES.iter().find(|(d, _)| *d == dtype).map_or(&[][..], |(_, n)| n);
        if names.iter().any(|n| choices.values.iter().any(|v| v == n)) {
            return Ok(());
        }
        Err(error(
            "kv_dtype",
            format!(
                "{} {} keeps no {} KV cache: its choices are {} ({}); leave kv_dtype out for the model's own dtype",
                self.runtime().label(),
                self.modelled_version(),
                dtype.name(),
                choices.values.join(", "),
                choices.source
            ),
        ))
    }
}

impl KvDtype {
    /// `(elements, bytes)` of one storage block.
    pub fn block(self) -> (u64, u64) {
        match self {
            KvDtype::F32 => (1, 4),
            KvDtype::Bf16 | KvDtype::F16 => (1, 2),
            KvDtype::Fp8 => (1, 1),
            KvDtype::Q8_0 => (32, 34),
            KvDtype::Q4_0 => (32, 18),
        }
    }

    /// Bytes of a row of `elements`, whole blocks (llama.cpp's `ggml_row_size`).
    pub fn row_bytes(self, elements: u64) -> u64 {
        let (per, bytes) = self.block();
        elements.div_ceil(per).saturating_mul(bytes)
    }

    pub fn name(self) -> &'static str {
        canonical_name(KV_NAMES, self)
    }

    /// The dtype a cache of this type computes in, when it is one a model computes in.
    pub fn compute(self) -> Option<ComputeDtype> {
        match self {
            KvDtype::F32 => Some(ComputeDtype::F32),
            KvDtype::Bf16 => Some(ComputeDtype::Bf16),
            KvDtype::F16 => Some(ComputeDtype::F16),
            KvDtype::Fp8 | KvDtype::Q8_0 | KvDtype::Q4_0 => None,
        }
    }
}

/// The dtype the model computes in (activations, RoPE tables, recurrent conv state): the
/// config's `dtype` unless `--dtype` says otherwise, never the KV cache's — an FP8 or `q4_0`
/// cache leaves the forward pass in BF16. Written as vLLM's `--dtype` takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum ComputeDtype {
    F32,
    Bf16,
    F16,
}

impl ComputeDtype {
    /// The dtype as `torch_dtype` or a safetensors dtype names it.
    pub fn from_model_dtype(name: &str) -> Option<ComputeDtype> {
        match name {
            "bfloat16" | "BF16" => Some(ComputeDtype::Bf16),
            "float16" | "F16" => Some(ComputeDtype::F16),
            "float32" | "F32" => Some(ComputeDtype::F32),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        canonical_name(COMPUTE_NAMES, self)
    }

    /// The weights' what-if type that loads float tensors in this dtype.
    pub fn weights(self) -> WeightsDtype {
        match self {
            ComputeDtype::F32 => WeightsDtype::F32,
            ComputeDtype::Bf16 => WeightsDtype::Bf16,
            ComputeDtype::F16 => WeightsDtype::F16,
        }
    }

    pub fn element_bytes(self) -> u64 {
        match self {
            ComputeDtype::F32 => 4,
            ComputeDtype::Bf16 | ComputeDtype::F16 => 2,
        }
    }

    /// The KV cache an engine keeps for this model when asked for none (vLLM's `auto`).
    pub fn kv(self) -> KvDtype {
        match self {
            ComputeDtype::F32 => KvDtype::F32,
            ComputeDtype::Bf16 => KvDtype::Bf16,
            ComputeDtype::F16 => KvDtype::F16,
        }
    }
}

/// vLLM's `--dtype` choices (`config/model.py` `_STR_DTYPE_TO_TORCH_DTYPE`), `auto` aside.
const COMPUTE_NAMES: &[(ComputeDtype, &[&str])] = &[
    (ComputeDtype::Bf16, &["bfloat16", "bf16"]),
    (ComputeDtype::F16, &["float16", "half", "f16", "fp16"]),
    (ComputeDtype::F32, &["float32", "float", "f32", "fp32"]),
];

impl FromStr for ComputeDtype {
    type Err = OptionsError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        named(COMPUTE_NAMES, "dtype", s, s, " (leave it out for the config's)")
    }
}

impl TryFrom<String> for ComputeDtype {
    type Error = OptionsError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<ComputeDtype> for String {
    fn from(dtype: ComputeDtype) -> String {
        dtype.name().to_owned()
    }
}

/// JSON takes the names the CLI takes, in any case (`"BF16"`, `"fp8_e4m3"`).
impl TryFrom<String> for KvDtype {
    type Error = OptionsError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl TryFrom<String> for WeightsDtype {
    type Error = OptionsError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl FromStr for KvDtype {
    type Err = OptionsError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        named(KV_NAMES, "kv_dtype", s, s, "")
    }
}

/// A weights type for the what-if: each stores `params` logical parameters in `bytes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String")]
pub enum WeightsDtype {
    #[serde(rename = "f32", alias = "fp32", alias = "float32")]
    F32,
    #[serde(rename = "bf16", alias = "bfloat16")]
    Bf16,
    #[serde(rename = "f16", alias = "fp16", alias = "float16")]
    F16,
    /// FP8 E4M3 with per-tensor scales (vLLM's online `--quantization fp8`).
    #[serde(rename = "fp8")]
    Fp8,
    /// INT8 weights with per-channel scales (their share is under 0.1% and not counted).
    #[serde(rename = "int8")]
    Int8,
    /// INT4 with an f16 scale and a 4-bit zero point per group of 128 (GPTQ/AWQ defaults).
    #[serde(rename = "int4")]
    Int4,
    /// MXFP4: 32 values in 16 bytes plus one E8M0 scale byte (OCP Microscaling).
    #[serde(rename = "mxfp4")]
    Mxfp4,
    /// NVFP4 (ModelOpt's layout): 16 values in 8 bytes plus one FP8 E4M3 scale byte (the
    /// per-tensor FP32 scales are a few bytes a tensor, not counted).
    #[serde(rename = "nvfp4")]
    Nvfp4,
}

const WEIGHTS_NAMES: &[(WeightsDtype, &[&str])] = &[
    (WeightsDtype::F32, &["f32", "fp32", "float32"]),
    (WeightsDtype::Bf16, &["bf16", "bfloat16"]),
    (WeightsDtype::F16, &["f16", "fp16", "float16"]),
    (WeightsDtype::Fp8, &["fp8"]),
    (WeightsDtype::Int8, &["int8"]),
    (WeightsDtype::Int4, &["int4"]),
    (WeightsDtype::Mxfp4, &["mxfp4"]),
    (WeightsDtype::Nvfp4, &["nvfp4"]),
];

impl WeightsDtype {
    /// `(params, bytes)`: `bytes` store `params` logical parameters, metadata included.
    pub fn rate(self) -> (u64, u64) {
        match self {
            WeightsDtype::F32 => (1, 4),
            WeightsDtype::Bf16 | WeightsDtype::F16 => (1, 2),
            WeightsDtype::Fp8 | WeightsDtype::Int8 => (1, 1),
            // 128 nibbles (64 bytes) + f16 scale (2) + 4-bit zero (0.5) = 66.5 bytes a group.
            WeightsDtype::Int4 => (256, 133),
            WeightsDtype::Mxfp4 => (32, 17),
            WeightsDtype::Nvfp4 => (16, 9),
        }
    }

    /// A float type casts every parameter (vLLM's `--dtype`); a quantized type quantizes the
    /// linear layers only and leaves embeddings, norms and routers as stored.
    pub fn is_float(self) -> bool {
        matches!(self, WeightsDtype::F32 | WeightsDtype::Bf16 | WeightsDtype::F16)
    }

    pub fn name(self) -> &'static str {
        canonical_name(WEIGHTS_NAMES, self)
    }
}

impl FromStr for WeightsDtype {
    type Err = OptionsError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        named(WEIGHTS_NAMES, "weights_dtype", s, s, "")
    }
}

fn canonical_names<T>(table: &[(T, &[&str])]) -> String {
    table.iter().map(|(_, names)| names[0]).collect::<Vec<_>>().join(", ")
}

/// What `key` names in a name table (any case), or an error on `option` listing the table's
/// choices for `given` (the text as typed), with `hint` after them.
fn named<T: Copy>(
    table: &[(T, &[&str])],
    option: &'static str,
    key: &str,
    given: &str,
    hint: &str,
) -> Result<T, OptionsError> {
    let lower = key.to_ascii_lowercase();
    table
        .iter()
        .find(|(_, names)| names.contains(&lower.as_str()))
        .map(|(value, _)| *value)
        .ok_or_else(|| {
            error(
                option,
                format!("`{given}` is not one of {}{hint}", canonical_names(table)),
            )
        })
}

/// The first of `value`'s names in a name table: the one it serialises and prints as.
fn canonical_name<T: Copy + PartialEq>(table: &[(T, &'static [&'static str])], value: T) -> &'static str {
    table
        .iter()
        .find(|(v, _)| *v == value)
        .map_or("?", |(_, names)| names[0])
}

/// A share in (0, 1], held in millionths so it hashes and compares exactly; JSON carries it
/// as a number (`0.9`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "f64", into = "f64")]
pub struct Fraction {
    ppm: u32,
}

impl Fraction {
    /// A share from millionths, held within (0, 1].
    pub fn from_ppm(ppm: u64) -> Fraction {
        Fraction {
            ppm: ppm.clamp(1, PPM) as u32,
        }
    }

    pub fn ppm(self) -> u64 {
        u64::from(self.ppm)
    }

    /// `bytes × fraction`, rounded down.
    pub fn of(self, bytes: u64) -> u64 {
        let share = u128::from(bytes) * u128::from(self.ppm) / u128::from(PPM);
        u64::try_from(share).unwrap_or(u64::MAX)
    }
}

impl TryFrom<f64> for Fraction {
    type Error = OptionsError;
    fn try_from(value: f64) -> Result<Self, Self::Error> {
        let ppm = (value * PPM as f64).round();
        if !value.is_finite() || value <= 0.0 || value > 1.0 || ppm < 1.0 {
            return Err(error(
                "gpu_utilization",
                format!("{value} is not a share in (0, 1] (at least 0.000001)"),
            ));
        }
        Ok(Fraction { ppm: ppm as u32 })
    }
}

impl From<Fraction> for f64 {
    fn from(f: Fraction) -> f64 {
        f.ppm as f64 / PPM as f64
    }
}

impl FromStr for Fraction {
    type Err = OptionsError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let value: f64 = s
            .trim()
            .parse()
            .map_err(|_| error("gpu_utilization", format!("`{s}` is not a number")))?;
        Fraction::try_from(value)
    }
}

/// The devices a system is placed on: groups of `NAME[:COUNT]`, comma-separated, where NAME
/// is a catalogue device ([`devices::catalogue`]), a catalogue device at a given size
/// (`rtx-4090=24GiB`, for parts whose memory the catalogue does not know), or a capacity
/// (`85899345920`, `80GiB`, `24GB`). Canonical form: lower-case names, capacities in bytes, every count written.
/// The API also takes a JSON list of groups (`["h100-80gb:2", "l4"]`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(into = "String")]
pub struct Devices {
    groups: Vec<DeviceGroup>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DeviceGroup {
    /// The catalogue name, or the capacity in bytes for a device given by size.
    pub name: String,
    pub capacity_bytes: u64,
    pub count: u64,
    /// The count was written (`NAME:N`). A lone group without one asks for the smallest
    /// count that fits.
    pub counted: bool,
    /// What CUDA shows of the device, where measured (catalogue devices at their own size).
    pub cuda_visible_bytes: Option<u64>,
}

impl DeviceGroup {
    /// The catalogued device, when the group names one (not a bare size).
    pub fn device(&self) -> Option<&'static devices::Device> {
        devices::find(&self.name)
    }

    /// Apple silicon: the CPU and the GPU share this group's memory.
    pub fn unified_memory(&self) -> bool {
        self.device().is_some_and(|d| d.unified_memory)
    }

    /// Apple silicon: what Metal may hold of the unified memory — `working_set` as given,
    /// else macOS's default by preflight's rule. `None` for other devices.
    pub fn working_set_bytes(&self, working_set: Option<u64>) -> Option<u64> {
        self.unified_memory()
            .then(|| working_set.unwrap_or_else(|| devices::default_working_set(self.capacity_bytes)))
    }

    /// What the engine's backend reports as this device's memory: CUDA's total where a log
    /// measured it, Metal's working set on Apple silicon, else the capacity.
    pub fn visible_bytes(&self, working_set: Option<u64>) -> u64 {
        self.cuda_visible_bytes
            .or_else(|| self.working_set_bytes(working_set))
            .unwrap_or(self.capacity_bytes)
    }

    /// Canonical text: `name`, or `name=bytes` when the caller gave a catalogued device a
    /// size other than the catalogue's.
    fn spec(&self) -> String {
        match self.device() {
            Some(d) if d.memory_bytes != Some(self.capacity_bytes) => format!("{}={}", self.name, self.capacity_bytes),
            _ => self.name.clone(),
        }
    }
}

impl Devices {
    pub fn groups(&self) -> &[DeviceGroup] {
        &self.groups
    }

    /// Devices in all (at most [`MAX_DEVICES`]).
    pub fn count(&self) -> u64 {
        self.groups.iter().map(|g| g.count).sum()
    }

    /// The group with the least memory: every device holds one rank of everything, so it
    /// decides the fit (and the engine's device-dependent defaults).
    pub fn smallest(&self) -> Option<&DeviceGroup> {
        self.groups.iter().min_by_key(|g| g.capacity_bytes)
    }

    /// The llama.cpp backend the devices run (the first group's: one build runs one).
    pub fn gpu_backend(&self) -> GpuBackend {
        self.groups.first().map_or(GpuBackend::Cuda, GpuBackend::of)
    }

    /// Apple silicon's unified memory, when the devices are a Mac's GPU (then the only group).
    pub fn unified_memory_bytes(&self) -> Option<u64> {
        self.groups
            .iter()
            .find(|g| g.unified_memory())
            .map(|g| g.capacity_bytes)
    }

    /// One kind of device whose count is left to the planner: the smallest that fits.
    pub fn open_count(&self) -> Option<&DeviceGroup> {
        match self.groups.as_slice() {
            [group] if !group.counted => Some(group),
            _ => None,
        }
    }

    /// One group of these, `count` devices of it (a recommendation's candidate).
    pub fn one(group: &DeviceGroup, count: u64) -> Devices {
        Devices {
            groups: vec![DeviceGroup {
                count,
                counted: true,
                ..group.clone()
            }],
        }
    }

    /// Every group named without a count: with a workload, the device types to recommend
    /// deployments on.
    pub fn all_uncounted(&self) -> bool {
        self.groups.iter().all(|g| !g.counted)
    }

    /// These devices with `count` of each group (the planner's choice for an open count).
    pub fn with_count(&self, count: u64) -> Devices {
        Devices {
            groups: self
                .groups
                .iter()
                .map(|g| DeviceGroup {
                    count,
                    counted: true,
                    ..g.clone()
                })
                .collect(),
        }
    }
}

impl FromStr for Devices {
    type Err = OptionsError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut groups = Vec::new();
        let mut total = 0u64;
        for part in s.split(',') {
            let part = part.trim();
            let (name, count, counted) = match part.rsplit_once(':') {
                Some((name, count)) => {
                    let count: u64 = count.trim().parse().map_err(|_| {
                        error(
                            "devices",
                            format!("`{part}`: the count after `:` must be a whole number"),
                        )
                    })?;
                    (name.trim(), count, true)
                }
                None => (part, 1, false),
            };
            if count == 0 {
                return Err(error("devices", format!("`{part}`: a count must be at least 1")));
            }
            total = total.saturating_add(count);
            if total > MAX_DEVICES {
                return Err(error(
                    "devices",
                    format!("more than the {MAX_DEVICES} devices accepted"),
                ));
            }
            let (name, capacity_bytes) = devices::capacity(name).map_err(|m| error("devices", m))?;
            // The measured CUDA total belongs to the catalogue's part, not to a size the
            // caller typed for it.
            let cuda_visible_bytes = devices::find(&name)
                .filter(|d| d.memory_bytes == Some(capacity_bytes))
                .and_then(|d| d.cuda_visible_bytes);
            // A Mac has one GPU, its memory shared with the CPU: one, never a count to search.
            let unified = devices::find(&name).is_some_and(|d| d.unified_memory);
            if unified && count != 1 {
                return Err(error(
                    "devices",
                    format!(
                        "`{part}`: a Mac has one Apple silicon GPU, sharing its unified memory with the CPU; name it once, without a count"
                    ),
                ));
            }
            groups.push(DeviceGroup {
                name,
                capacity_bytes,
                count,
                counted: counted || unified,
                cuda_visible_bytes,
            });
        }
        if groups.len() > 1
            && let Some(mac) = groups.iter().find(|g| g.unified_memory())
        {
            return Err(error(
                "devices",
                format!(
                    "{} is a Mac's GPU: it plans alone (llama.cpp's Metal backend, the unified memory its host RAM), not beside other devices",
                    mac.name
                ),
            ));
        }
        Ok(Devices { groups })
    }
}

impl<'de> Deserialize<'de> for Devices {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Devices;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("devices as a string such as \"h100-80gb:2\" or a list such as [\"h100-80gb:2\", \"l4\"]")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Devices, E> {
                s.parse().map_err(E::custom)
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Devices, A::Error> {
                let mut groups: Vec<String> = Vec::new();
                let entry = |e: A::Error| {
                    serde::de::Error::custom(format!("devices: each entry is a string such as \"h100-80gb:2\" ({e})"))
                };
                while let Some(group) = seq.next_element::<String>().map_err(entry)? {
                    // Bounded like the string form: more groups than devices allowed is refused.
                    if groups.len() as u64 >= MAX_DEVICES {
                        return Err(serde::de::Error::custom(format!(
                            "devices: at most {MAX_DEVICES} devices"
                        )));
                    }
                    groups.push(group);
                }
                groups.join(",").parse().map_err(serde::de::Error::custom)
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

impl From<Devices> for String {
    fn from(d: Devices) -> String {
        d.to_string()
    }
}

impl fmt::Display for Devices {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, g) in self.groups.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            match g.counted {
                true => write!(f, "{}:{}", g.spec(), g.count)?,
                false => f.write_str(&g.spec())?,
            }
        }
        Ok(())
    }
}

/// Speculative decoding (`speculative`): what drafts and how many tokens a step. What only the
/// read artifacts can decide about it (MTP layers, the engine's drafters, target and head) is
/// `speculative.rs`; what the drafter holds, `memory/speculative.rs`.
/// Most speculative tokens accepted: vLLM 0.19's rejection sampler holds at most
/// `MAX_SPEC_LEN = 128` draft tokens a request (`v1/sample/rejection_sampler.py:27`, asserted
/// in `RejectionSampler.forward`, `:91`).
pub const MAX_SPECULATIVE_TOKENS: u64 = 128;

/// How the tokens are drafted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SpeculativeMethod {
    /// The checkpoint's own multi-token-prediction layers (vLLM `method: "mtp"`, SGLang
    /// `NEXTN`, its alias for `EAGLE` over the target's MTP layers).
    Mtp,
    /// An EAGLE-3 draft head, a checkpoint of its own (vLLM `method: "eagle3"`, SGLang `EAGLE3`).
    Eagle3,
}

impl SpeculativeMethod {
    pub fn name(self) -> &'static str {
        match self {
            SpeculativeMethod::Mtp => "mtp",
            SpeculativeMethod::Eagle3 => "eagle3",
        }
    }
}

/// The `speculative` option: `METHOD:K`, K draft tokens a step (vLLM's
/// `num_speculative_tokens`; SGLang's `--speculative-num-steps` with `--speculative-eagle-topk 1`,
/// so `--speculative-num-draft-tokens` is K + 1). Canonical text: `mtp:3`, `eagle3:3`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Speculative {
    pub method: SpeculativeMethod,
    /// Tokens drafted a step, 1 … [`MAX_SPECULATIVE_TOKENS`].
    pub tokens: u64,
}

fn speculative_error(message: impl Into<String>) -> OptionsError {
    error("speculative", message)
}

impl FromStr for Speculative {
    type Err = OptionsError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let lower = s.trim().to_ascii_lowercase();
        let Some((method, tokens)) = lower.split_once(':') else {
            return Err(speculative_error(format!(
                "`{s}` is not METHOD:TOKENS (`mtp:3` drafts with the checkpoint's own MTP layers, `eagle3:3` with an EAGLE-3 draft given as the second source)"
            )));
        };
        let method = match method.trim() {
            "mtp" => SpeculativeMethod::Mtp,
            "eagle3" => SpeculativeMethod::Eagle3,
            other => {
                return Err(speculative_error(format!(
                    "`{other}` is not a method planned: mtp (the checkpoint's own multi-token-prediction layers) or eagle3 (an EAGLE-3 draft head given as the second source)"
                )));
            }
        };
        let tokens: u64 = tokens
            .trim()
            .parse()
            .map_err(|_| speculative_error(format!("`{s}`: the tokens after `:` must be a whole number")))?;
        if !(1..=MAX_SPECULATIVE_TOKENS).contains(&tokens) {
            return Err(speculative_error(format!(
                "{tokens} speculative tokens: 1 to {MAX_SPECULATIVE_TOKENS} (vLLM's rejection sampler holds at most {MAX_SPECULATIVE_TOKENS} a request)"
            )));
        }
        Ok(Speculative { method, tokens })
    }
}

impl TryFrom<String> for Speculative {
    type Error = OptionsError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<Speculative> for String {
    fn from(s: Speculative) -> String {
        s.to_string()
    }
}

impl fmt::Display for Speculative {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.method.name(), self.tokens)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_may_be_a_json_list_with_the_same_canonical_form() {
        let listed: PlanOptions = serde_json::from_str(r#"{"devices": ["H100-80GB:2", "l4"]}"#).expect("list");
        let written: PlanOptions = serde_json::from_str(r#"{"devices": "h100-80gb:2,l4"}"#).expect("string");
        assert_eq!(listed, written);
        assert_eq!(
            serde_json::to_string(&listed).expect("json"),
            serde_json::to_string(&written).expect("json")
        );
        for bad in [
            r#"{"devices": 7}"#,
            r#"{"devices": [7]}"#,
            r#"{"devices": ["h900"]}"#,
            r#"{"devices": []}"#,
        ] {
            let error = serde_json::from_str::<PlanOptions>(bad).expect_err(bad).to_string();
            assert!(error.contains("devices"), "{bad}: {error}");
        }
    }

    #[test]
    fn the_performance_parts_are_devices_at_their_catalogue_size() {
        // Counted per GPU: `gb300:4` is four GPUs (one compute tray), not four boards.
        for (spec, name) in [
            ("h200-nvl:2", "h200-nvl"),
            ("gh200", "gh200"),
            ("b300:8", "b300"),
            ("gb200:4", "gb200"),
            ("gb300:4", "gb300"),
            ("rtx-pro-6000:2", "rtx-pro-6000"),
            ("MI355X:8", "mi355x"),
        ] {
            let devices: Devices = spec.parse().unwrap_or_else(|e| panic!("{spec}: {e}"));
            let group = &devices.groups()[0];
            assert_eq!(group.name, name, "{spec}");
            assert_eq!(
                Some(group.capacity_bytes),
                group.device().and_then(|d| d.memory_bytes),
                "{spec}"
            );
        }
    }

    #[test]
    fn empty_options_do_not_ask_for_memory_and_serialise_to_an_empty_object() {
        let o = PlanOptions::default();
        assert!(!o.asks_for_memory());
        assert_eq!(serde_json::to_string(&o).expect("json"), "{}");
        let o: PlanOptions = serde_json::from_str(r#"{"include_mtp": false}"#).expect("parse");
        assert!(!o.asks_for_memory());
    }

    #[test]
    fn options_round_trip_canonically() {
        let o: PlanOptions = serde_json::from_str(
            r#"{"gpu_utilization": 0.95, "devices": "H100-80GB:2, 80GiB", "kv_dtype": "bfloat16",
                "weights_dtype": "int4", "context": 8192, "sequences": 4, "tensor_parallel": 3}"#,
        )
        .expect("parse");
        let json = serde_json::to_string(&o).expect("json");
        assert_eq!(
            json,
            r#"{"context":8192,"sequences":4,"kv_dtype":"bf16","weights_dtype":"int4","devices":"h100-80gb:2,85899345920","tensor_parallel":3,"gpu_utilization":0.95}"#
        );
        let again: PlanOptions = serde_json::from_str(&json).expect("reparse");
        assert_eq!(again, o);
        assert_eq!(o.validate(), Ok(()));
    }

    #[test]
    fn unknown_fields_and_values_are_rejected_by_name() {
        for bad in [
            r#"{"contxt": 1}"#,
            r#"{"kv_dtype": "int3"}"#,
            r#"{"devices": "h900:1"}"#,
            r#"{"devices": "h100-80gb:0"}"#,
            r#"{"devices": ""}"#,
            r#"{"gpu_utilization": 1.5}"#,
            r#"{"gpu_utilization": 0}"#,
            r#"{"gpu_utilization": -0.2}"#,
            r#"{"context": -1}"#,
        ] {
            assert!(serde_json::from_str::<PlanOptions>(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn validation_names_the_option() {
        let cases = [
            (
                PlanOptions {
                    context: Some(0),
                    ..PlanOptions::default()
                },
                "context",
            ),
            (
                PlanOptions {
                    context: Some(1 << 63),
                    ..PlanOptions::default()
                },
                "context",
            ),
            (
                PlanOptions {
                    sequences: Some(0),
                    ..PlanOptions::default()
                },
                "sequences",
            ),
            (
                PlanOptions {
                    tensor_parallel: Some(0),
                    ..PlanOptions::default()
                },
                "tensor_parallel",
            ),
            (
                PlanOptions {
                    tensor_parallel: Some(3),
                    devices: Some("h100-80gb:4".parse().expect("devices")),
                    ..PlanOptions::default()
                },
                "tensor_parallel",
            ),
            (
                PlanOptions {
                    tensor_parallel: Some(8),
                    devices: Some("h100-80gb:4".parse().expect("devices")),
                    ..PlanOptions::default()
                },
                "tensor_parallel",
            ),
        ];
        for (options, option) in cases {
            assert_eq!(options.validate().map_err(|e| e.option), Err(option), "{options:?}");
        }
    }

    #[test]
    fn fractions_are_exact_millionths() {
        let f: Fraction = "0.9".parse().expect("fraction");
        assert_eq!(f.ppm(), 900_000);
        assert_eq!(f.of(85_899_345_920), 77_309_411_328);
        assert_eq!(f64::from(f), 0.9);
        assert!("0.0000001".parse::<Fraction>().is_err());
        assert!("NaN".parse::<Fraction>().is_err());
        assert!("1".parse::<Fraction>().is_ok());
    }

    #[test]
    fn kv_rows_are_whole_blocks() {
        assert_eq!(KvDtype::Bf16.row_bytes(1024), 2048);
        assert_eq!(KvDtype::Q8_0.row_bytes(1024), 32 * 34);
        assert_eq!(KvDtype::Q4_0.row_bytes(33), 2 * 18);
        assert_eq!(KvDtype::F32.row_bytes(u64::MAX), u64::MAX);
    }

    #[test]
    fn a_catalogued_device_at_a_given_size_round_trips_and_keeps_its_name() {
        // A size other than the catalogue's is kept; the catalogue's own reads as the name.
        let d: Devices = "RTX-4090=20GiB:2, h100-80gb=80GB".parse().expect("devices");
        assert_eq!(d.to_string(), "rtx-4090=21474836480:2,h100-80gb");
        assert_eq!(d.to_string().parse::<Devices>().expect("reparse"), d);
        let [rtx, h100] = d.groups() else { panic!("two groups") };
        assert_eq!(
            (rtx.name.as_str(), rtx.device().and_then(|x| x.compute_capability)),
            ("rtx-4090", Some(89))
        );
        assert_eq!(rtx.cuda_visible_bytes, None);
        assert_eq!(
            h100.cuda_visible_bytes,
            Some(85_029_615_042),
            "79.19 GiB, as CUDA shows an H100 80GB"
        );
        assert!("a10g:1".parse::<Devices>().is_err(), "unknown memory needs a size");
        assert_eq!(
            "rtx-4090=24GiB".parse::<Devices>().map(|d| d.to_string()),
            Ok("rtx-4090".into())
        );
    }

    #[test]
    fn the_device_limit_is_checked_before_anything_is_built() {
        let too_many = format!("h100-80gb:{}", MAX_DEVICES + 1);
        assert!(too_many.parse::<Devices>().is_err());
        assert!("h100-80gb:18446744073709551615,l4:5".parse::<Devices>().is_err());
    }

    #[test]
    fn llama_cpp_cache_knobs_belong_to_llama_cpp() {
        let unified: PlanOptions = serde_json::from_str(r#"{"kv_unified": true, "swa_full": true}"#).expect("options");
        assert_eq!(unified.validate(), Ok(()));
        assert_eq!(unified.engine_for(false), MemoryEngine::LlamaCpp);
        let vllm: PlanOptions = serde_json::from_str(r#"{"engine": "vllm", "swa_full": true}"#).expect("options");
        assert_eq!(vllm.validate().map_err(|e| e.option), Err("swa_full"));
    }
}

/// llama.cpp's `--n-gpu-layers`: a count (the output layer counts as one, as llama.cpp
/// counts it) or `all`. `auto` is the absence of a value: llama.cpp's fit decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GpuLayers {
    Count(u64),
    All,
}

impl GpuLayers {
    /// Layers offloaded of a model of `layers` repeating layers: at most `layers + 1`.
    pub fn resolve(self, layers: u64) -> u64 {
        match self {
            GpuLayers::Count(n) => n.min(layers.saturating_add(1)),
            GpuLayers::All => layers.saturating_add(1),
        }
    }
}

impl FromStr for GpuLayers {
    type Err = OptionsError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "all" => Ok(GpuLayers::All),
            "auto" => Err(error(
                "gpu_layers",
                "`auto` is the default (llama.cpp's fit picks the layers): leave gpu_layers out",
            )),
            text => text
                .parse::<u64>()
                .map(GpuLayers::Count)
                .map_err(|_| error("gpu_layers", format!("`{s}` is not a layer count or `all`"))),
        }
    }
}

impl Serialize for GpuLayers {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            GpuLayers::Count(n) => serializer.serialize_u64(*n),
            GpuLayers::All => serializer.serialize_str("all"),
        }
    }
}

impl<'de> Deserialize<'de> for GpuLayers {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Given {
            Number(u64),
            Text(String),
        }
        match Given::deserialize(deserializer)? {
            Given::Number(n) => Ok(GpuLayers::Count(n)),
            Given::Text(text) => text.parse().map_err(serde::de::Error::custom),
        }
    }
}

/// llama.cpp's `--split-mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SplitMode {
    /// Whole layers over the devices (llama.cpp's default).
    Layer,
    /// Each matrix split by rows over the devices: refused, as llama.cpp refuses it on the
    /// devices planned (`Row::REFUSED`).
    Row,
    /// The first device only (`main_gpu` 0).
    None,
}

impl FromStr for SplitMode {
    type Err = OptionsError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "layer" => Ok(SplitMode::Layer),
            "row" => Ok(SplitMode::Row),
            "none" => Ok(SplitMode::None),
            "tensor" => Err(error(
                "split_mode",
                "tensor split (llama.cpp's experimental meta backend: weights and KV split over the devices) is not modelled; plan with layer (the default) or none",
            )),
            _ => Err(error("split_mode", format!("`{s}` is not layer, row or none"))),
        }
    }
}

/// Most `tensor_split` shares: llama.cpp's `llama_max_devices()` (16 on CUDA builds).
pub const MAX_TENSOR_SPLIT: usize = 16;

/// llama.cpp's `--tensor-split A,B,…`: one proportion per device, kept as the f32 llama.cpp
/// parses (`std::stof`) so the split points are computed as it computes them. Written `3,1`
/// (commas or slashes, as llama.cpp) or a JSON list.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorSplit(pub Vec<f32>);

impl Eq for TensorSplit {}

impl std::hash::Hash for TensorSplit {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        for share in &self.0 {
            share.to_bits().hash(state);
        }
    }
}

impl TensorSplit {
    fn checked(shares: Vec<f32>) -> Result<TensorSplit, OptionsError> {
        if shares.is_empty() || shares.len() > MAX_TENSOR_SPLIT {
            return Err(error(
                "tensor_split",
                format!("give 1 to {MAX_TENSOR_SPLIT} shares, one per device"),
            ));
        }
        if let Some(bad) = shares.iter().find(|s| !s.is_finite() || **s < 0.0) {
            return Err(error(
                "tensor_split",
                format!("{bad} is not a share: each must be a finite number ≥ 0"),
            ));
        }
        if shares.iter().all(|s| *s == 0.0) {
            return Err(error(
                "tensor_split",
                "every share is 0: leave tensor_split out for llama.cpp's split by device memory",
            ));
        }
        Ok(TensorSplit(shares))
    }
}

impl FromStr for TensorSplit {
    type Err = OptionsError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let shares = s
            .split([',', '/'])
            .filter(|p| !p.trim().is_empty())
            .map(|p| {
                p.trim()
                    .parse::<f32>()
                    .map_err(|_| error("tensor_split", format!("`{p}` is not a number")))
            })
            .collect::<Result<Vec<f32>, _>>()?;
        TensorSplit::checked(shares)
    }
}

impl Serialize for TensorSplit {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for TensorSplit {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Given {
            List(Vec<f32>),
            Text(String),
        }
        match Given::deserialize(deserializer)? {
            Given::List(shares) => TensorSplit::checked(shares).map_err(serde::de::Error::custom),
            Given::Text(text) => text.parse().map_err(serde::de::Error::custom),
        }
    }
}

/// What llama.cpp's fit does to a context nobody set (`common_params_fit_impl` step 2,
/// common/fit.cpp l.373–456): lowers it from the trained one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ContextFit {
    /// Tokens a sequence, as `context` counts them: the trained context, and the fit's.
    pub from: u64,
    pub context: u64,
    /// The lower context alone fits the one device, so the fit stops there (l.437–440) and
    /// the layers load as asked; otherwise it goes on to fit the layers.
    pub settled: bool,
}

/// The llama.cpp backend a GPU runs, which names its buffer types `<name><i>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GpuBackend {
    /// NVIDIA's (`GGML_CUDA_NAME`, ggml-cuda.h l.17).
    Cuda,
    /// AMD's: the CUDA backend built with HIP (ggml-cuda.h l.11).
    Rocm,
    /// Apple silicon's (`GGML_METAL_NAME`, ggml-metal.cpp l.15).
    Metal,
}

impl GpuBackend {
    const ALL: [GpuBackend; 3] = [GpuBackend::Cuda, GpuBackend::Rocm, GpuBackend::Metal];

    pub fn name(self) -> &'static str {
        match self {
            GpuBackend::Cuda => "CUDA",
            GpuBackend::Rocm => "ROCm",
            GpuBackend::Metal => "MTL",
        }
    }

    /// The backend of a group's device: by its vendor; a device named by size alone, CUDA.
    pub fn of(group: &DeviceGroup) -> GpuBackend {
        match group.device().map(|d| d.vendor.as_str()) {
            Some("Apple") => GpuBackend::Metal,
            Some("AMD") => GpuBackend::Rocm,
            _ => GpuBackend::Cuda,
        }
    }
}

/// Where an `--override-tensor` sends what it matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OverrideTarget {
    /// llama.cpp's `CPU` buffer type: host RAM.
    Cpu,
    /// `CUDA<i>`, `ROCm<i>` or `MTL<i>`: the i-th device of `devices`.
    Device(GpuBackend, u32),
}

impl fmt::Display for OverrideTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OverrideTarget::Cpu => f.write_str("CPU"),
            OverrideTarget::Device(backend, i) => write!(f, "{}{i}", backend.name()),
        }
    }
}

/// Longest `--override-tensor` pattern accepted: far past any tensor name llama.cpp writes.
pub const MAX_OVERRIDE_PATTERN: usize = 256;

/// Most layers `n_cpu_moe` may name: past any model's depth (llama.cpp's fit stops at 1000).
pub const MAX_CPU_MOE_LAYERS: u64 = 1 << 16;

/// Most `--override-tensor` entries: llama.cpp's `llama_max_tensor_buft_overrides()` (4096).
pub const MAX_OVERRIDES: usize = 4096;

/// One `--override-tensor PATTERN=DEVICE`. The pattern is checked as a regex when parsed.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TensorOverride {
    pub pattern: String,
    pub target: OverrideTarget,
}

impl TensorOverride {
    /// The compiled pattern: checked when the override was parsed, so this cannot fail then.
    pub fn regex(&self) -> Result<regex::Regex, OptionsError> {
        regex::RegexBuilder::new(&self.pattern)
            .size_limit(1 << 20)
            .build()
            .map_err(|e| error("override_tensor", format!("`{}` is not a pattern: {e}", self.pattern)))
    }
}

impl FromStr for TensorOverride {
    type Err = OptionsError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let Some((pattern, target)) = s.rsplit_once('=') else {
            return Err(error(
                "override_tensor",
                format!("`{s}` is not PATTERN=DEVICE (e.g. `blk\\.1[0-9]\\.ffn_.*_exps=CPU`)"),
            ));
        };
        if pattern.is_empty() || pattern.len() > MAX_OVERRIDE_PATTERN {
            return Err(error(
                "override_tensor",
                format!("a pattern of 1 to {MAX_OVERRIDE_PATTERN} characters, not `{pattern}`"),
            ));
        }
        let upper = target.trim().to_ascii_uppercase();
        let device = GpuBackend::ALL.iter().find_map(|backend| {
            let index = upper.strip_prefix(&backend.name().to_ascii_uppercase())?;
            Some(OverrideTarget::Device(*backend, index.parse::<u32>().ok()?))
        });
        let target = match (upper.as_str(), device) {
            ("CPU", _) => OverrideTarget::Cpu,
            (_, Some(device)) => device,
            _ => {
                return Err(error(
                    "override_tensor",
                    format!(
                        "`{target}` is not a buffer type preflight plans: CPU, or the i-th device of devices as its backend names it: CUDA<i>, ROCm<i> (AMD) or MTL0 (Apple silicon)"
                    ),
                ));
            }
        };
        let parsed = TensorOverride {
            pattern: pattern.to_owned(),
            target,
        };
        parsed.regex()?;
        Ok(parsed)
    }
}

impl fmt::Display for TensorOverride {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}", self.pattern, self.target)
    }
}

impl Serialize for TensorOverride {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for TensorOverride {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

impl PlanOptions {
    /// llama.cpp's offload knobs, checked against each other and the devices.
    fn validate_offload(&self) -> Result<(), OptionsError> {
        let devices = self
            .devices
            .as_ref()
            .filter(|d| d.open_count().is_none())
            .map(Devices::count);
        if let Some(bytes) = self.host_memory
            && (bytes == 0 || bytes > devices::MAX_DEVICE_BYTES)
        {
            return Err(error("host_memory", "give host RAM between 1 byte and 1 PiB"));
        }
        let unified = self.devices.as_ref().and_then(Devices::unified_memory_bytes);
        if let (Some(_), Some(memory)) = (self.host_memory, unified) {
            return Err(error(
                "host_memory",
                format!(
                    "on Apple silicon host RAM is the unified memory the device names ({}): host_memory does not apply",
                    crate::findings::size(memory)
                ),
            ));
        }
        if let Some(bytes) = self.working_set {
            let Some(memory) = unified else {
                return Err(error(
                    "working_set",
                    "working_set is Apple silicon's GPU working set (Metal's recommendedMaxWorkingSetSize): name the Mac's chip and memory in devices too (e.g. m3-ultra=512GB)",
                ));
            };
            if bytes == 0 || bytes > memory {
                return Err(error(
                    "working_set",
                    format!(
                        "{} is not a working set of {} of unified memory: give at most the memory",
                        crate::findings::size(bytes),
                        crate::findings::size(memory)
                    ),
                ));
            }
        }
        if self.override_tensor.len() > MAX_OVERRIDES {
            return Err(error(
                "override_tensor",
                format!(
                    "{} overrides: at most {MAX_OVERRIDES}, as llama.cpp",
                    self.override_tensor.len()
                ),
            ));
        }
        if self.split_mode == Some(SplitMode::Row) {
            // `make_gpu_buft_list` (llama-model.cpp:1139-1163) asks the device's backend for
            // `ggml_backend_split_buffer_type`; in this release only SYCL and Hexagon give one.
            return Err(error(
                "split_mode",
                "llama.cpp 0.3.36 cannot load with row split on CUDA, ROCm or Metal: their backends have no split buffer type, and loading throws \"does not support split buffers\" (llama-model.cpp:1139-1163); plan with layer (the default) or none",
            ));
        }
        if let Some(n) = self.n_cpu_moe
            && n > MAX_CPU_MOE_LAYERS
        {
            return Err(error("n_cpu_moe", format!("{n} layers is more than any model has")));
        }
        if let Some(split) = &self.tensor_split {
            match devices {
                None if self.devices.is_none() => {
                    return Err(error(
                        "tensor_split",
                        "a split over devices needs the devices: give devices too (e.g. rtx-4090:2)",
                    ));
                }
                Some(count) if split.0.len() as u64 > count => {
                    return Err(error(
                        "tensor_split",
                        format!(
                            "{} shares for {count} device(s): one share per device at most",
                            split.0.len()
                        ),
                    ));
                }
                _ => {}
            }
        }
        let backend = self.devices.as_ref().map(Devices::gpu_backend);
        for o in &self.override_tensor {
            let OverrideTarget::Device(named, i) = o.target else {
                continue;
            };
            // llama.cpp knows a buffer type only by its backend's name.
            if let Some(backend) = backend.filter(|b| *b != named) {
                return Err(error(
                    "override_tensor",
                    format!(
                        "`{o}` names a buffer type these devices do not have: llama.cpp runs them on its {} backend, whose buffer types are {}<i>",
                        backend.name(),
                        backend.name()
                    ),
                ));
            }
            // An open count is chosen later: any index below the largest count searched.
            let count = match (&self.devices, devices) {
                (None, _) => 0,
                (Some(_), Some(count)) => count,
                (Some(_), None) => u64::MAX,
            };
            if u64::from(i) >= count {
                return Err(error(
                    "override_tensor",
                    format!(
                        "`{o}` names device {i}, and there are {count} device(s) (index 0 is the first of devices)"
                    ),
                ));
            }
        }
        Ok(())
    }
}
