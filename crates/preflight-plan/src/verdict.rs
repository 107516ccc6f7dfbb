//! The verdict document (docs/design.md §3). Versioned by [`SCHEMA`](crate::SCHEMA).

use std::collections::BTreeMap;

pub use preflight_formats::facts::Gated;
use preflight_formats::facts::{SourceRef, StagingStats};
use serde::{Deserialize, Serialize};

use crate::findings::Finding;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub schema: String,
    pub planner: PlannerVersion,
    /// No blocking finding in any artifact.
    pub admissible: bool,
    pub summary: Summary,
    pub artifacts: Vec<ArtifactVerdict>,
    /// Memory and fit of the whole system on the named devices: present when the options
    /// ask for memory and every artifact's memory is known (else see each artifact's
    /// `memory.unavailable` finding).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<Memory>,
    /// Serving performance under the `workload` option, on `memory`'s deployment: present
    /// when one artifact's memory is planned and the engine, device and calibration allow an
    /// estimate (else a `performance.unavailable` finding says why).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub performance: Option<Performance>,
    /// With a workload on device types without counts: every deployment tried, best first
    /// (meeting the targets, fewest GPUs, most tokens a second per GPU); the rest of the
    /// verdict is the first one's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recommendations: Vec<Recommendation>,
    /// Per artifact, in artifact order.
    pub staging: Vec<StagingStats>,
    /// Present when the options require an engine (`require_engine`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub require_engine: Option<RequiredEngine>,
    /// The one release of each engine that `memory` and `runtimes` follow, named once.
    pub engines: Releases,
}

/// The engine releases a verdict is about, keyed as `runtimes` is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Releases {
    pub vllm: Release,
    pub sglang: Release,
    pub llama_cpp: Release,
    pub transformers: Release,
}

impl Releases {
    pub fn get(&self, engine: Engine) -> &Release {
        match engine {
            Engine::Vllm => &self.vllm,
            Engine::Sglang => &self.sglang,
            Engine::LlamaCpp => &self.llama_cpp,
            Engine::Transformers => &self.transformers,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Release {
    /// The release whose code the rules and data were read from (llama.cpp: the
    /// llama-cpp-python release that vendors it).
    pub version: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannerVersion {
    pub version: String,
    pub semantics_version: u32,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    pub blocking: usize,
    pub warnings: usize,
    pub info: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArtifactVerdict {
    pub name: String,
    pub source: Source,
    pub format: Format,
    /// Absent when the architecture could not be established (see findings).
    pub architecture: Option<Architecture>,
    pub parameters: Parameters,
    /// Bytes of tensor data as stored (scales, MTP layers and all).
    pub weights_bytes: u64,
    /// Raw stored elements per dtype (packed 4-bit bytes counted as stored).
    pub tensor_elements_by_dtype: BTreeMap<String, u64>,
    /// This artifact's share of the memory plan, when the options ask for one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<ArtifactMemory>,
    /// Whether each engine would run it (on the named devices, when any are named).
    pub runtimes: Runtimes,
    pub findings: Vec<Finding>,
}

/// Where an artifact came from — the source as this request names it (`spec`, `repo`,
/// `revision`, `commit`, `pinned`) — and what it asks of whoever downloads it: the card's
/// licence, the Hub's gating, whether loading runs the repo's own code, and the bytes an
/// engine fetches. `null` is unknown (a local folder has no card or gating).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Source {
    #[serde(flatten)]
    pub reference: SourceRef,
    /// The model card's `license` (the Hub's `cardData.license`).
    pub license: Option<String>,
    /// The card's `license_name`: which licence a `license: other` means.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub license_name: Option<String>,
    /// The Hub's `gated`: `false`, `"auto"` (access granted on request) or `"manual"`
    /// (requests reviewed by the owners).
    pub gated: Option<Gated>,
    pub remote_code: RemoteCode,
    /// What an engine fetches to serve it: the weight files the plan read (the shards the
    /// index names, the GGUF's parts — never another copy the repo holds) and, beside
    /// safetensors, the config, index, generation, tokenizer and processor files the repo has
    /// and any remote-code module (`source::ENGINE_FILES`). `null` when a size is unknown.
    pub download_bytes: Option<u64>,
}

/// Whether loading runs code from the repo: config.json's `auto_map` names modules
/// transformers imports under `trust_remote_code=True`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteCode {
    pub required: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub modules: Vec<RemoteModule>,
}

impl RemoteCode {
    /// Each module as a person reads it: `modeling_x.py (AutoModel)`, `… from org/name (…)`.
    pub fn named_modules(&self) -> Vec<String> {
        self.modules
            .iter()
            .map(|m| {
                let place = m.repo.as_ref().map(|r| format!(" from {r}")).unwrap_or_default();
                format!("{}{place} ({})", m.file, m.classes.join(", "))
            })
            .collect()
    }

    /// The source's own modules it does not ship.
    pub fn missing_files(&self) -> Vec<&str> {
        self.modules
            .iter()
            .filter(|m| !m.present && m.repo.is_none())
            .map(|m| m.file.as_str())
            .collect()
    }
}

/// One module `auto_map` names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteModule {
    /// `modeling_deepseek.py`.
    pub file: String,
    /// The repo holding it, when `auto_map` names another (`org/name--module.Class`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repo: Option<String>,
    /// The source's own listing has it.
    pub present: bool,
    /// The auto classes that load from it (`AutoConfig`, `AutoModelForCausalLM`, …).
    pub classes: Vec<String>,
}

/// Each engine's verdict on one artifact (docs/runtimes.md). Keys as the JSON names them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Runtimes {
    pub vllm: Runtime,
    pub sglang: Runtime,
    pub llama_cpp: Runtime,
    pub transformers: Runtime,
}

impl Runtimes {
    pub fn get(&self, engine: Engine) -> &Runtime {
        match engine {
            Engine::Vllm => &self.vllm,
            Engine::Sglang => &self.sglang,
            Engine::LlamaCpp => &self.llama_cpp,
            Engine::Transformers => &self.transformers,
        }
    }
}

/// An inference engine the planner judges support for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Engine {
    Vllm,
    Sglang,
    #[serde(alias = "llama.cpp")]
    LlamaCpp,
    Transformers,
}

impl Engine {
    pub const ALL: [Engine; 4] = [Engine::Vllm, Engine::Sglang, Engine::LlamaCpp, Engine::Transformers];

    /// The JSON key (`runtimes.<key>`).
    pub fn key(self) -> &'static str {
        match self {
            Engine::Vllm => "vllm",
            Engine::Sglang => "sglang",
            Engine::LlamaCpp => "llama_cpp",
            Engine::Transformers => "transformers",
        }
    }

    /// As people write it.
    pub fn label(self) -> &'static str {
        match self {
            Engine::Vllm => "vLLM",
            Engine::Sglang => "SGLang",
            Engine::LlamaCpp => "llama.cpp",
            Engine::Transformers => "transformers",
        }
    }
}

impl std::str::FromStr for Engine {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let lower = s.trim().to_ascii_lowercase();
        Engine::ALL
            .into_iter()
            .find(|e| {
                e.key() == lower
                    || e.label().eq_ignore_ascii_case(&lower)
                    || (lower == "llamacpp" && *e == Engine::LlamaCpp)
            })
            .ok_or_else(|| format!("`{s}` is not an engine: vllm, sglang, llama.cpp or transformers"))
    }
}

/// How far an engine supports an artifact, best first: the order is how verdicts on several
/// devices combine (the worst one wins).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Support {
    /// A native path on the named devices (or, without devices, nothing refuses it).
    Yes,
    /// Only through a slower path the engine selects (a fallback kernel, the Transformers
    /// backend): see the warning finding.
    Fallback,
    /// The data cannot decide (see the `runtime.unknown` finding); never read as yes.
    Unknown,
    /// The engine's code refuses it.
    No,
}

impl Support {
    pub fn as_str(self) -> &'static str {
        match self {
            Support::Yes => "yes",
            Support::Fallback => "fallback",
            Support::Unknown => "unknown",
            Support::No => "no",
        }
    }

    /// Whether a deployment that requires the engine can count on it.
    pub fn runs(self) -> bool {
        matches!(self, Support::Yes | Support::Fallback)
    }
}

impl Runtime {
    /// The finding that makes the engine refuse (`supported` is `no`): the first of the
    /// refusing kinds, ahead of warnings that only slow it down.
    pub fn deciding(&self) -> Option<&Finding> {
        if self.supported != Support::No {
            return None;
        }
        self.findings
            .iter()
            .find(|f| f.code.refuses_a_runtime())
            .or_else(|| self.findings.first())
    }
}

/// One engine's verdict on one artifact.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Runtime {
    /// The worst of the per-device verdicts; without devices, the architecture and
    /// quantization verdict alone.
    pub supported: Support,
    /// The engine's own classification of the architecture as hybrid (attention beside
    /// recurrent state), when its data has one for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hybrid: Option<bool>,
    /// One entry per named device group.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub per_device: Vec<DeviceSupport>,
    /// The reasons, with stable `runtime.*` codes; a device's own reasons name it as their
    /// subject.
    pub findings: Vec<Finding>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceSupport {
    /// As `memory.per_device[].device` names it.
    pub device: String,
    pub supported: Support,
}

/// What `require_engine` asked, and whether every artifact meets it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequiredEngine {
    pub engine: Engine,
    /// Every artifact's `supported` is `yes` or `fallback` for that engine.
    pub met: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    Safetensors,
    Gguf,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Parameters {
    /// Logical parameters: packed 4-bit values unpacked, scales and buffers excluded, tied
    /// weights once, MTP layers included (see `by_component.mtp`).
    pub total: u64,
    pub by_dtype: BTreeMap<String, u64>,
    pub by_component: BTreeMap<Component, u64>,
    /// For MoE: every non-routed parameter plus `experts × active / experts`; MTP excluded.
    /// For dense models: `total` less MTP.
    pub active_per_token: Option<u64>,
}

/// Where a tensor's parameters are counted (`parameters.by_component` keys).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Component {
    Embedding,
    Attention,
    /// Linear-attention (gated DeltaNet) token mixers.
    LinearAttention,
    /// Mamba token mixers.
    Mamba,
    Mlp,
    Experts,
    SharedExperts,
    Router,
    Norm,
    LmHead,
    /// Multi-token-prediction layers; assigned by layer, never by a pattern.
    Mtp,
    /// A vision encoder (ViT) beside the language model.
    Vision,
    /// The projector from an encoder into the language model.
    Projector,
    /// An audio encoder beside the language model.
    Audio,
    /// Stored but not a parameter (transformers registers it as a buffer); never in
    /// `by_component`.
    Buffer,
}

impl Component {
    /// Every rank holds these whole: vLLM replicates norms and MoE routers, and buffers are
    /// per-module state.
    pub fn is_replicated(self) -> bool {
        matches!(self, Component::Norm | Component::Router | Component::Buffer)
    }

    /// Linear layers, which a quantized what-if (`weights_dtype` fp8, int4, …) quantizes;
    /// embeddings, lm_head, norms, routers and encoders stay as stored, as vLLM leaves them.
    pub fn is_linear(self) -> bool {
        matches!(
            self,
            Component::Attention
                | Component::LinearAttention
                | Component::Mamba
                | Component::Mlp
                | Component::Experts
                | Component::SharedExperts
                | Component::Mtp
        )
    }

    /// Encoders beside the language model.
    pub fn is_encoder(self) -> bool {
        matches!(self, Component::Vision | Component::Projector | Component::Audio)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Component::Embedding => "embedding",
            Component::Attention => "attention",
            Component::LinearAttention => "linear_attention",
            Component::Mamba => "mamba",
            Component::Mlp => "mlp",
            Component::Experts => "experts",
            Component::SharedExperts => "shared_experts",
            Component::Router => "router",
            Component::Norm => "norm",
            Component::LmHead => "lm_head",
            Component::Mtp => "mtp",
            Component::Vision => "vision",
            Component::Projector => "projector",
            Component::Audio => "audio",
            Component::Buffer => "buffer",
        }
    }
}

/// What the planner understood of the model, normalised across families.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Architecture {
    pub model_type: String,
    pub family: String,
    pub layers: u64,
    pub hidden_size: u64,
    pub heads: u64,
    /// The most KV heads any layer has (see `kv_heads_per_layer`).
    pub kv_heads: u64,
    /// Key (and query) width per head, as declared — not assumed to be hidden/heads. Under
    /// MLA, the config's own `head_dim` when it declares one (GLM-5's 192, which its config
    /// class replaces), else `qk_nope_head_dim + qk_rope_head_dim`; the widths are in `mla`.
    /// 0 only for a model with no attention layer.
    pub head_dim: u64,
    /// Value width per head, when it differs from `head_dim` (GGUF `attention.value_length`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub v_head_dim: Option<u64>,
    /// KV heads of each layer, when attention layers differ (GGUF per-layer
    /// `attention.head_count_kv`, Gemma 4); a 0 is a layer without softmax attention.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_heads_per_layer: Option<Vec<u64>>,
    /// Head width of each layer, when attention layers differ (Gemma 4's global layers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head_dim_per_layer: Option<Vec<u64>>,
    /// Width of the dense MLP layers (`intermediate_size`), when the model has any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intermediate_size: Option<u64>,
    pub vocab_size: u64,
    /// Longest context the config declares (`max_position_embeddings` or equivalent).
    pub context: u64,
    /// One entry per layer, in order.
    pub attention: Vec<Attention>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub moe: Option<Moe>,
    /// Multi-head latent attention's widths, for a model whose layers use it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mla: Option<MlaDims>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quantization: Option<Quantization>,
    /// Multi-token-prediction layers stored after the main stack (DeepSeek's `nextn`).
    pub mtp_layers: u64,
    pub tie_word_embeddings: bool,
    /// The dtype the weights were trained/saved in (`torch_dtype`), when declared.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dtype: Option<String>,
}

/// How one layer attends, which decides what its KV cache costs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Attention {
    /// Every past token is attended to: the cache grows with context.
    Full,
    /// Only the last `window` tokens: the cache stops growing at the window.
    Sliding { window: u64 },
    /// Only the current `chunk`-token block (Llama 4's chunked local attention): the cache
    /// stops growing at the chunk.
    Chunked { chunk: u64 },
    /// Multi-head latent attention: one compressed latent per token.
    Mla { kv_lora_rank: u64, qk_rope_head_dim: u64 },
    /// MLA with a sparse-attention indexer (DeepSeek-V3.2): the latent plus the indexer's
    /// key per token.
    MlaIndexer {
        kv_lora_rank: u64,
        qk_rope_head_dim: u64,
        index_head_dim: u64,
    },
    /// DeepSeek-V4's compressed sparse attention: a sliding window of one shared K=V head
    /// (`head_dim` wide), one entry compressed from every `compress_ratio` past tokens, and a
    /// sparse indexer with its own compressed key (`index_head_dim`) per entry.
    CsaIndexer {
        head_dim: u64,
        window: u64,
        compress_ratio: u64,
        index_head_dim: u64,
    },
    /// DeepSeek-V4's heavily compressed attention: the sliding window plus one entry
    /// compressed from every `compress_ratio` past tokens, no indexer.
    Hca {
        head_dim: u64,
        window: u64,
        compress_ratio: u64,
    },
    /// Full attention with a sparse-attention indexer beside it (MiniMax-M3): K and V per
    /// token, and the indexer's key (`index_heads × index_head_dim`).
    FullIndexer {
        kv_heads: u64,
        head_dim: u64,
        index_heads: u64,
        index_head_dim: u64,
    },
    /// Linear attention (gated DeltaNet): a fixed state per sequence, `[heads, key, value]`.
    LinearAttention {
        heads: u64,
        key_head_dim: u64,
        value_head_dim: u64,
        conv_kernel: u64,
    },
    /// A Mamba2 block: a fixed SSM state per sequence, `[heads, head_dim, state_size]`.
    Mamba {
        heads: u64,
        head_dim: u64,
        state_size: u64,
        conv_kernel: u64,
    },
    /// No token mixer (an MLP-only block).
    None,
}

/// Multi-head latent attention's widths as declared: a query and key head is
/// `qk_nope_head_dim + qk_rope_head_dim` wide, a value head `v_head_dim`; what is cached per
/// token is the `kv_lora_rank` latent and one `qk_rope_head_dim` rope key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MlaDims {
    pub kv_lora_rank: u64,
    /// The query's own low-rank width; `None` when queries are projected directly
    /// (DeepSeek-V2-Lite).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub q_lora_rank: Option<u64>,
    pub qk_nope_head_dim: u64,
    pub qk_rope_head_dim: u64,
    pub v_head_dim: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Moe {
    /// Routed experts per MoE layer.
    pub experts: u64,
    /// Routed experts used per token (top-k).
    pub active: u64,
    /// Shared (always-on) experts per MoE layer.
    pub shared: u64,
    /// Layers with a dense MLP instead of experts.
    pub dense_layers: Vec<u64>,
    /// Width of one expert's MLP (and of each shared expert), when declared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expert_intermediate_size: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Quantization {
    /// `fp8`, `mxfp4`, `gptq`, `awq`, `bitsandbytes`, `compressed-tensors`, `gguf`, …
    pub method: String,
    /// How it is stored, e.g. `F8_E4M3 weights + F32 weight_scale_inv per 128×128 block`.
    pub layout: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bits: Option<u64>,
}

/// Memory and fit of a whole system (docs/design.md §3, `memory`): every artifact placed with the same
/// tensor-parallel degree on the same devices. See `docs/memory.md` for every formula.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Memory {
    /// The engine whose accounting the figures follow (its release: `engines.<engine>`).
    pub engine: Engine,
    pub sequences: u64,
    pub tensor_parallel: u64,
    /// Engine replicas acting as one deployment (vLLM `--data-parallel-size`), or SGLang's
    /// attention-DP groups inside one TP group (`--attn-dp-size`), each serving `sequences` of
    /// its own.
    pub data_parallel: u64,
    /// Ranks the experts are spread over whole, when expert parallelism is on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expert_parallel: Option<u64>,
    /// The share of each device the engine fills: vLLM's `gpu_memory_utilization`,
    /// SGLang's `mem_fraction_static`, 1 for llama.cpp.
    pub gpu_utilization: f64,
    /// Sums over the artifacts of their `memory` figures: what the devices hold between them,
    /// `per_rank` times the ranks (`total_bytes = per_rank.total_bytes × tensor_parallel`).
    pub weights_bytes: u64,
    pub buffers_bytes: u64,
    pub kv_cache_bytes_per_token: u64,
    pub kv_cache_bytes: u64,
    pub activation_bytes: u64,
    /// vLLM: memory outside PyTorch the profile run adds (workspaces, NCCL buffers), apart
    /// from the activations it sits beside.
    pub non_torch_bytes: u64,
    pub total_bytes: u64,
    /// What one device holds: one rank of every artifact under the engine's accounting.
    /// Absent when an artifact cannot be split at this tensor-parallel degree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_rank: Option<RankMemory>,
    /// The KV pool the engine would allocate on each rank of the smallest device: its budget
    /// less weights, activations and other memory (0 when nothing is left). Null without
    /// devices, and under llama.cpp, which has no pool (it allocates `n_ctx × n_seq` cells:
    /// `kv_cache_bytes`).
    pub kv_pool_bytes: Option<u64>,
    /// That pool as the engine reports it in tokens (vLLM's "GPU KV cache size"; for hybrid
    /// models a block count times the block size, not tokens every layer holds). Null
    /// without devices or with several artifacts.
    pub kv_pool_tokens: Option<u64>,
    /// Requests of `context` tokens the pool holds at once (vLLM's "Maximum concurrency").
    pub max_concurrency: Option<f64>,
    /// One entry per named device; empty without devices, or when an artifact cannot be
    /// placed at this tensor-parallel degree.
    pub per_device: Vec<DeviceMemory>,
    /// Every device holds its share within its usable bytes **and** the engine these figures
    /// follow loads every artifact there (`runs`). Null without `per_device`.
    pub fits: Option<bool>,
    /// Set when the engine these figures follow cannot load some artifact on the planned
    /// devices (its `runtimes.<engine>.supported` is `no`): the finding that decides it. The
    /// plan then does not fit whatever the figures say, and no context "fits".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub does_not_run: Option<DoesNotRun>,
    /// The longest context (at `sequences`, for every artifact, up to the shortest model
    /// maximum) for which `fits` holds; 0 when not even one token fits. Null without
    /// `per_device`.
    pub max_context_that_fits: Option<u64>,
    /// Whether `max_context_that_fits` is the model's own maximum or where memory runs out.
    pub max_context_limited_by: Option<LimitedBy>,
    /// llama.cpp with devices: what stays in host RAM, with a device's terms (CPU-mapped
    /// weights, CPU KV cache, the host compute buffer and the output buffer in
    /// `activation_bytes`). `per_device` and `host` together are the block's totals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<HostMemory>,
    /// llama.cpp with devices: how the layers were offloaded (as asked, or as its fit chose).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offload: Option<Offload>,
    /// Upper bounds on speed on the named devices (one artifact; docs/throughput.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throughput_bounds: Option<ThroughputBounds>,
}

/// Why the memory block's engine cannot serve the plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DoesNotRun {
    /// The artifact the engine refuses (`artifacts[i].name`).
    pub artifact: String,
    /// The engine's deciding `runtime.*` finding.
    pub finding: Finding,
}

/// What stops a longer context.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LimitedBy {
    /// The model's declared maximum context.
    Model,
    /// The devices' memory.
    Memory,
}

/// Roofline upper bounds — never predictions: what the devices' bandwidth and peak dense
/// FLOPs allow at best, before any kernel's efficiency or any communication. A figure is null
/// when some named device lacks the vendor number it needs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThroughputBounds {
    /// Tokens per second each sequence can decode at most: the slowest device's bandwidth ÷
    /// `decode_bytes_per_rank`.
    pub decode_tokens_per_s: Option<f64>,
    /// Prompt tokens per second at most: the tensor-parallel group's peak dense FLOPs at
    /// `compute_dtype` ÷ `prefill_flops_per_token`.
    pub prefill_tokens_per_s: Option<f64>,
    /// Bytes one decode step reads on one rank: its active weights plus the KV cache of
    /// every sequence at the context.
    pub decode_bytes_per_rank: u64,
    /// Of those, the weights a token passes through (MoE: the routed experts it uses, not all).
    pub active_weights_bytes_per_rank: u64,
    /// 2 × active parameters + attention over the context (causal prompt: half of it on average).
    pub prefill_flops_per_token: f64,
    /// The peak the prefill bound uses: `bf16`, `fp8` or `fp4` (the weights' own type when
    /// the device computes it natively, else bf16).
    pub compute_dtype: String,
    /// Why `decode_tokens_per_s` is null though the devices have vendor figures: llama.cpp
    /// runs a layer split one device after another and reads host-held weights at the host's
    /// bandwidth, which one rank's bytes over one device's bandwidth would overstate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decode_withheld: Option<String>,
}

/// Serving performance under the `workload` option: an **estimate** (`estimate` is always
/// true), each figure with the range the calibration's residuals give it (docs/performance.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Performance {
    /// The workload estimated, canonically spelled.
    pub workload: String,
    pub estimate: bool,
    /// Output tokens a second the whole deployment (every replica) generates.
    pub output_tokens_per_s: f64,
    /// That over the GPUs the deployment takes.
    pub output_tokens_per_s_per_gpu: f64,
    /// Mean time to first token; null when an open loop arrives faster than the deployment
    /// serves (`overloaded`): the queue, and so the wait, grows without bound.
    pub ttft_ms: Option<f64>,
    /// Mean time per output token after the first (inter-token latency).
    pub tpot_ms: f64,
    /// Mean end-to-end latency: `ttft_ms + (osl − 1) × tpot_ms`.
    pub e2e_ms: Option<f64>,
    /// Requests each replica runs at once in the steady state (a mean).
    pub batch: f64,
    pub limited_by: PerformanceLimit,
    /// An open loop's rate is past what the deployment completes.
    pub overloaded: bool,
    /// `output_tokens_per_s` may be this many times the estimate, low to high (the 10th to
    /// 90th percentile of measured ÷ estimated on the calibration's rows).
    pub range: Range,
    pub ttft_range: Range,
    pub tpot_range: Range,
    /// The type the weights compute in (`bf16`, `fp8`, `fp4`): the device peak used.
    pub compute_dtype: String,
    /// The calibration set the constants come from: engine × device × type.
    pub calibrated_on: String,
    /// Measured rows that set was fitted on.
    pub calibration_rows: u64,
    /// Whether that set was fitted on this engine, device and type (else a
    /// `performance.uncalibrated` finding says what differs).
    pub calibration_matches: bool,
    /// Each latency target against its estimate (`slo` option); empty without targets.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub slo: Vec<SloCheck>,
    /// Every target met; null without targets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meets_slo: Option<bool>,
}

/// One deployment a recommendation tried.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Recommendation {
    /// One copy's devices, `NAME:COUNT`.
    pub devices: String,
    pub gpus: u64,
    /// Copies an open loop's rate is spread over (1 for a closed loop).
    pub replicas: u64,
    /// `gpus × replicas`.
    pub total_gpus: u64,
    pub tensor_parallel: u64,
    pub data_parallel: u64,
    pub expert_parallel: bool,
    /// Admissible, fits the devices and the engine runs it there.
    pub fits: bool,
    /// Fits, has an estimate, meets every target and is not overloaded.
    pub meets: bool,
    /// Every copy together.
    pub output_tokens_per_s: Option<f64>,
    pub output_tokens_per_s_per_gpu: Option<f64>,
    pub ttft_ms: Option<f64>,
    pub tpot_ms: Option<f64>,
    /// With `gpu_price`: dollars for a million output tokens at the estimate.
    pub cost_per_million_output_tokens: Option<f64>,
    /// Why it does not meet: the first thing that fails.
    pub rejected: Option<String>,
}

/// What bounds the estimated throughput.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PerformanceLimit {
    /// Each step reads weights and KV cache slower than it computes.
    MemoryBandwidth,
    /// Each step computes slower than it reads.
    Compute,
    /// Tensor- or expert-parallel collectives take most of the step.
    Communication,
    /// The KV pool holds no more requests of the workload's length: more clients queue.
    KvCapacity,
    /// The engine runs no more requests at once (`max_num_seqs`): more clients queue.
    Scheduling,
}

/// Multiples of an estimate: what it may be, low to high.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Range {
    pub low: f64,
    pub high: f64,
}

/// One latency target against the estimate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SloCheck {
    /// The target, canonically spelled (`ttft=2000ms`, `tpot_p99=50ms`).
    pub target: String,
    /// The estimate it is held against: the mean for a median target, the range's high end
    /// for a higher percentile; null when there is none (overloaded).
    pub estimate_ms: Option<f64>,
    pub met: bool,
}

/// What one device holds: its rank's share of every artifact.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceMemory {
    /// Catalogue name, or the capacity in bytes for a device given by size.
    pub device: String,
    pub capacity_bytes: u64,
    /// What CUDA reports of the device, where a record measured it (an "80 GB" H100 shows
    /// 79.19 GiB): the engines budget from this, not from the nominal capacity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda_visible_bytes: Option<u64>,
    /// Apple silicon: what Metal may hold of the unified memory (`capacity_bytes`), macOS's
    /// `recommendedMaxWorkingSetSize` — `working_set` as given, else preflight's rule for
    /// macOS's default. llama.cpp sizes the device by it: it is `usable_bytes`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub working_set_bytes: Option<u64>,
    /// `gpu_utilization` × `cuda_visible_bytes` (else `working_set_bytes`, else
    /// `capacity_bytes`), rounded down.
    pub usable_bytes: u64,
    pub weights_bytes: u64,
    /// RoPE tables and other module buffers (see `RankMemory::buffers_bytes`).
    pub buffers_bytes: u64,
    pub kv_cache_bytes: u64,
    pub activation_bytes: u64,
    /// See `RankMemory::non_torch_bytes`.
    pub non_torch_bytes: u64,
    pub total_bytes: u64,
    /// `usable_bytes − total_bytes`: negative when it does not fit.
    pub headroom_bytes: i64,
    pub fits: bool,
    /// llama.cpp: layers assigned to this device, its output layer counted as llama.cpp counts it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layers: Option<u64>,
    /// Terms that are estimates, not a replay of the engine (llama.cpp's compute buffers
    /// when layers are split over backends: `activation_bytes`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub estimated: Vec<String>,
}

/// Host RAM under llama.cpp with devices: a device's terms, and the host's capacity when
/// `host_memory` names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostMemory {
    /// CPU-mapped weights (the input layer always, and whatever is not offloaded).
    pub weights_bytes: u64,
    pub buffers_bytes: u64,
    /// KV cache of the layers left on the CPU (every layer's with `no_kv_offload`).
    pub kv_cache_bytes: u64,
    /// The host compute buffer and the output buffer.
    pub activation_bytes: u64,
    pub non_torch_bytes: u64,
    pub total_bytes: u64,
    /// Of `activation_bytes`: the host compute buffer (an estimate, see `estimated`).
    pub compute_bytes: u64,
    /// Of `activation_bytes`: the output buffer (logits, one row a sequence).
    pub output_bytes: u64,
    /// Layers left on the CPU, the output layer counted as llama.cpp counts it.
    pub layers: u64,
    /// `host_memory`, when given; on Apple silicon, what the device's buffers leave of the
    /// unified memory (`unified_memory_bytes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headroom_bytes: Option<i64>,
    /// Within `capacity_bytes`; null when there is none (host RAM is not checked).
    pub fits: Option<bool>,
    /// Apple silicon: the one memory host RAM and the device share. Each buffer is counted
    /// once, where llama.cpp places it (the device's weights are the mapped GGUF, not a copy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unified_memory_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub estimated: Vec<String>,
}

/// How llama.cpp offloads the plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Offload {
    /// Layers on the devices (`-ngl`), the output layer counted: at most `layers + 1`.
    pub gpu_layers: u64,
    /// The model's repeating layers plus its output layer, as llama.cpp counts them.
    pub layers: u64,
    /// Offloaded layers whose routed experts stay in host RAM (`--n-cpu-moe`, the fit).
    pub expert_layers_on_host: u64,
    /// Whether llama.cpp's fit ran and what it did (`off`, `unchanged`, `fitted`, `not run`).
    pub fit: String,
    /// The llama.cpp flags that load this placement.
    pub command: String,
}

/// One artifact's memory: weights, KV cache by attention kind, activations, and the share
/// each tensor-parallel rank holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArtifactMemory {
    /// Tokens per sequence planned for.
    pub context: u64,
    pub sequences: u64,
    /// The KV cache element type (`bf16`, `f16`, `fp8`, …).
    pub kv_dtype: String,
    /// `as_stored`, or the what-if type the weights are planned in.
    pub weights_dtype: String,
    /// Placed on ranks (vLLM, SGLang), this and every term below but the per-token and state
    /// figures is `per_rank`'s times the ranks: what the devices hold between them.
    /// The weights as the ranks load them (replicated tensors counted on each rank, MXFP4
    /// experts padded as the kernel wants them); as stored when not placed.
    pub weights_bytes: u64,
    /// Module buffers (see `RankMemory::buffers_bytes`); 0 under llama.cpp.
    pub buffers_bytes: u64,
    /// What one more token adds to one long sequence in the model, past every sliding window
    /// (one copy: the ranks may keep more, see `kv_cache[].bytes`).
    pub kv_cache_bytes_per_token: u64,
    /// What the planned requests (`context` tokens × `sequences`) take, as the engine holds
    /// it: vLLM's whole pages (a sliding layer keeps `window − 1 + max_num_batched_tokens`
    /// tokens), llama.cpp's whole cells; per-sequence state included. The engine's whole
    /// pool is `memory.kv_pool_bytes`, a different figure.
    pub kv_cache_bytes: u64,
    /// Recurrent state (linear attention, Mamba) one sequence holds, whatever its length.
    pub state_bytes_per_sequence: u64,
    /// That state for the requested sequences (part of `kv_cache_bytes`).
    pub state_bytes: u64,
    /// Activations: every rank holds its own (they are not split by tensor parallelism).
    pub activation_bytes: u64,
    /// Memory outside PyTorch on every rank (see `RankMemory::non_torch_bytes`).
    pub non_torch_bytes: u64,
    pub total_bytes: u64,
    /// The KV cache by attention kind: the working behind `kv_cache_bytes`.
    pub kv_cache: Vec<KvCacheGroup>,
    /// The architecture was refused: `weights_bytes` is the weights as stored, a lower bound;
    /// nothing else is known, and nothing is said to fit.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub lower_bound: bool,
    /// llama.cpp: bytes in host RAM rather than on the devices — everything on the CPU
    /// backend (no devices named); with devices, the token embedding (llama.cpp never
    /// offloads the input layer), the layers `gpu_layers` leaves behind with their KV cache,
    /// and the output buffer. Absent for other engines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_bytes: Option<u64>,
    /// What each tensor-parallel rank holds; absent when the engine cannot page these caches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_rank: Option<RankMemory>,
    /// Speculative decoding (`speculative` option): what the drafter adds, term by term. Every
    /// figure here is already inside the block's own (`weights_bytes`, `buffers_bytes`,
    /// `kv_cache_bytes`, `activation_bytes`), so the totals stay sums of their terms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speculative: Option<SpeculativeMemory>,
    /// Terms that are estimates, not a replay of the engine: llama.cpp's compute buffer
    /// (`activation_bytes`) where the architecture's graph is not replayed, or layers are
    /// split over backends.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub estimated: Vec<String>,
}

/// What speculative decoding adds to its target's memory, on all ranks as the block's other
/// figures (docs/memory.md § Speculative decoding).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpeculativeMemory {
    /// `mtp` or `eagle3`.
    pub method: String,
    /// Tokens drafted a step (vLLM `num_speculative_tokens`; SGLang `speculative_num_steps`).
    pub num_speculative_tokens: u64,
    /// The drafter's source: the target itself for `mtp`, the second source for `eagle3`.
    pub draft: String,
    /// The drafter's weights as the engine holds them (tensors it shares with the target,
    /// or never loads, left out).
    pub draft_weights_bytes: u64,
    /// RoPE tables the drafter builds beside the target's (0 when it reuses the target's).
    pub draft_buffers_bytes: u64,
    /// The drafter's attention layers, cached in the same pool as the target's
    /// (`kv_cache[].draft_layers` says which groups hold them).
    pub draft_kv_layers: u64,
    /// What one token adds to the drafter's layers, one copy.
    pub draft_kv_cache_bytes_per_token: u64,
    /// Of `kv_cache_bytes`, the drafter's layers' share at the planned context.
    pub draft_kv_cache_bytes: u64,
    /// Tokens a request holds beyond its own for drafting: vLLM's `num_lookahead_tokens`
    /// (allocated beside the unverified drafts, capped at `max_model_len`); SGLang's decode
    /// reserve, `2 × max(steps × topk, draft tokens)`.
    pub lookahead_tokens: u64,
    /// What the lookahead adds to `kv_cache_bytes` for the planned requests: 0 under vLLM,
    /// whose allocation stops at `max_model_len` (the planned context).
    pub lookahead_kv_cache_bytes: u64,
    /// What drafting adds to the profile run's activation peak (vLLM's rejection-sampler
    /// warm-up and the drafter's forward pass; 0 under SGLang, which leaves activations out of
    /// `mem_fraction_static`).
    pub activation_bytes: u64,
}

impl ArtifactMemory {
    /// The model's own cache at `context` × `sequences`, one copy: every token up to each
    /// window and one state a sequence, before an engine rounds it to pages or cells or
    /// keeps copies on its ranks (`kv_cache_bytes` is the engine's). What a decode step reads.
    pub fn model_cache_bytes(&self) -> u64 {
        self.kv_cache.iter().fold(0u64, |acc, g| {
            let tokens = g.window.map_or(self.context, |w| w.min(self.context));
            let per_layer = g
                .bytes_per_token_per_layer
                .unwrap_or(0)
                .saturating_mul(tokens)
                .saturating_add(g.bytes_per_sequence_per_layer.unwrap_or(0));
            acc.saturating_add(per_layer.saturating_mul(g.layers).saturating_mul(self.sequences))
        })
    }
}

/// What a group of layers caches, named as `architecture.attention[].kind` names layers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CacheKind {
    Full,
    Sliding,
    Chunked,
    Mla,
    MlaIndexer,
    LinearAttention,
    Mamba,
}

impl CacheKind {
    pub fn as_str(self) -> &'static str {
        match self {
            CacheKind::Full => "full",
            CacheKind::Sliding => "sliding",
            CacheKind::Chunked => "chunked",
            CacheKind::Mla => "mla",
            CacheKind::MlaIndexer => "mla_indexer",
            CacheKind::LinearAttention => "linear_attention",
            CacheKind::Mamba => "mamba",
        }
    }

    /// Per-sequence state (a fixed size whatever the context), not a per-token cache.
    pub fn is_state(self) -> bool {
        matches!(self, CacheKind::LinearAttention | CacheKind::Mamba)
    }
}

/// Layers that cache alike: same kind, cap and bytes. Per-token kinds carry
/// `bytes_per_token_per_layer`; per-sequence kinds (linear attention, Mamba) carry
/// `bytes_per_sequence_per_layer`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KvCacheGroup {
    pub kind: CacheKind,
    /// The sliding window or attention chunk: tokens a sequence keeps at most.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<u64>,
    pub layers: u64,
    /// Bytes one token adds to one such layer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_per_token_per_layer: Option<u64>,
    /// Bytes one sequence holds in one such layer, whatever its length (conv + recurrent state).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_per_sequence_per_layer: Option<u64>,
    /// Per-sequence kinds: the element types of the state's parts, as the engine keeps them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_dtypes: Option<StateDtypes>,
    /// Tokens each sequence keeps in such a layer as the engine holds them: `context`, or the
    /// window when shorter, rounded up to whole pages (vLLM) or cells (llama.cpp).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_per_sequence: Option<u64>,
    /// At the requested context and sequences, as the engine holds them on all ranks
    /// (padded pages, copies on every rank): may exceed per-token × tokens × layers.
    pub bytes: u64,
    /// Of `layers`, the speculative drafter's (an MTP layer, an EAGLE-3 head's layer): the
    /// engine caches them in the same pool, in the group of their kind.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub draft_layers: u64,
}

/// A recurrent state's element types, named as `kv_dtype` is: the convolution window's (llama.cpp's `R` buffer) and
/// the recurrent state's (`S`; the SSM or DeltaNet state). llama.cpp keeps both in F32
/// (`llama-model.cpp:2672-2673, 2725-2726`); vLLM in the model's dtype unless the config pins one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateDtypes {
    pub conv: String,
    pub recurrent: String,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// One tensor-parallel rank's share of an artifact.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RankMemory {
    pub tensor_parallel: u64,
    pub weights_bytes: u64,
    /// Module buffers every rank keeps whole beside its weights: vLLM's and SGLang's RoPE
    /// cos/sin tables (which vLLM's "Model loading took" counts as weights).
    pub buffers_bytes: u64,
    /// The KV cache the planned requests take, as the engine allocates it (vLLM: whole
    /// blocks; llama.cpp: whole cells).
    pub kv_cache_bytes: u64,
    /// vLLM: the profile run's activation peak; llama.cpp: compute and output buffers.
    pub activation_bytes: u64,
    /// vLLM: memory outside PyTorch that the profile run adds (workspaces, NCCL buffers).
    pub non_torch_bytes: u64,
    pub total_bytes: u64,
}
