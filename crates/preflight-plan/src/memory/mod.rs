//! Memory and fit: what serving a checkpoint takes — weights, KV cache, activations — per
//! tensor-parallel rank and per named device, and the longest context that fits. Pure
//! arithmetic on the architecture and the weights' layout; `docs/memory.md` gives every
//! formula and the engine code it follows. **Fails closed:** when an artifact's memory
//! cannot be known, it gets a `memory.unavailable` finding, never a guessed number.

mod ggml;
mod llama_cpp;
mod sglang;
pub(crate) mod speculative;
mod vllm;

pub use ggml::replays_on_this_thread;
pub use llama_cpp::Replays;

use std::collections::BTreeMap;

use crate::families::Placement;
use crate::findings::{Code, Findings};
use crate::model::{Mixer, Model, Span, StateDtype};
use crate::options::{ComputeDtype, DeviceGroup, Devices, KvDtype, MemoryEngine, PlanOptions, WeightsDtype};
use crate::verdict::{
    ArtifactMemory, CacheKind, Component, DeviceMemory, Format, KvCacheGroup, LimitedBy, Memory, Parameters, RankMemory,
};

/// Logical parameters and stored bytes of one slice of the weights.
#[derive(Debug, Default, Clone, Copy)]
pub struct Share {
    pub params: u64,
    pub bytes: u64,
}

/// Where an artifact's weight bytes sit: per component and tensor-parallel placement, with
/// quantization scales counted beside the weights they scale. Built while counting tensors.
#[derive(Debug, Default, Clone)]
pub struct WeightsLayout {
    parts: BTreeMap<(Component, Placement), Share>,
    /// Bytes of tensors no component claims (a blocking finding already says so); held
    /// whole by every rank, the conservative choice.
    unplaced_bytes: u64,
    /// Bytes of each decoder layer's tensors: what llama.cpp leaves in host RAM for the
    /// layers `--gpu-layers` does not offload.
    layer_bytes: BTreeMap<u32, u64>,
}

impl WeightsLayout {
    pub fn add(&mut self, component: Component, placement: Placement, params: u64, bytes: u64) {
        let share = self.parts.entry((component, placement)).or_default();
        share.params = share.params.saturating_add(params);
        share.bytes = share.bytes.saturating_add(bytes);
    }

    pub fn add_layer(&mut self, layer: u32, bytes: u64) {
        let held = self.layer_bytes.entry(layer).or_default();
        *held = held.saturating_add(bytes);
    }

    pub fn add_unplaced(&mut self, bytes: u64) {
        self.unplaced_bytes = self.unplaced_bytes.saturating_add(bytes);
    }

    /// Bytes of one component as stored, every placement together (the throughput bounds'
    /// routed experts).
    pub fn component_bytes(&self, component: Component) -> u64 {
        self.parts
            .iter()
            .filter(|((c, _), _)| *c == component)
            .fold(0u64, |acc, (_, share)| acc.saturating_add(share.bytes))
    }

    /// Drop a component (a stored lm_head that tied embeddings make a copy of: engines
    /// skip loading it).
    pub fn remove(&mut self, component: Component) {
        self.parts.retain(|(c, _), _| *c != component);
    }
}

/// What sizing one artifact needs beyond its architecture.
pub struct Inputs<'a> {
    pub model: Option<&'a Model>,
    pub format: Format,
    pub parameters: &'a Parameters,
    pub layout: &'a WeightsLayout,
    /// The weights as stored: all that is certain when the architecture is refused.
    pub weights_bytes: u64,
    /// llama.cpp compute buffers replayed so far for this artifact, shared by every sizing of it.
    pub replays: std::sync::Arc<llama_cpp::Replays>,
    /// A blocking finding was made before sizing: the figures stand, but they may rest on a
    /// header that lies (a key that understates its tensors), so they never prove a fit.
    pub untrusted: bool,
}

/// One artifact, prepared so its figures can be taken at any context.
#[derive(Debug, Clone)]
pub struct Sizing {
    context: u64,
    max_context: u64,
    sequences: u64,
    kv_dtype: KvDtype,
    weights_dtype: Option<WeightsDtype>,
    weights: u64,
    caches: Vec<LayerCache>,
    shape: Shape,
    tensor_parallel: u64,
    /// `None` when the model cannot be split at this tensor-parallel degree.
    rank_weights: Option<u64>,
    /// Module buffers every rank keeps whole: vLLM's and SGLang's RoPE tables.
    buffers: u64,
    /// The architecture was refused: only the stored weights are known, as a lower bound.
    lower_bound: bool,
    /// See [`Inputs::untrusted`].
    untrusted: bool,
    /// Each decoder layer's group in `caches` (`None`: it caches nothing), in layer order.
    layer_groups: Vec<Option<usize>>,
    /// Each decoder layer's weight bytes, and the token embedding's.
    layer_weights: Vec<u64>,
    embedding_weights: u64,
    /// No stored lm_head: the output layer is the token embedding again.
    tied_output: bool,
    /// The graph llama.cpp builds, where its compute buffer is replayed.
    llama_cpp_graph: Option<crate::model::LlamaCppGraph>,
    replays: std::sync::Arc<llama_cpp::Replays>,
    /// Speculative decoding's drafter, folded in: its weights, buffers and KV layers are in
    /// the figures above; these are its terms (`speculative.rs`).
    speculative: Option<speculative::Terms>,
}

/// Layers that cache alike.
#[derive(Debug, Clone, PartialEq, Eq)]
struct LayerCache {
    kind: CacheKind,
    /// Tokens a sequence keeps at most; `None` grows with the context.
    cap: Option<u64>,
    layers: u64,
    /// Per-token kinds: bytes one token adds, whole and on one rank.
    per_token: u64,
    per_token_rank: u64,
    /// Per-sequence kinds: bytes one sequence holds, whole and on one rank.
    per_sequence: u64,
    per_sequence_rank: u64,
    /// Of `per_token_rank`, the sparse-attention indexer's keys, which vLLM pages apart.
    indexer_per_token_rank: u64,
    /// Of `layers`, a speculative drafter's (cached in the same pool, as its kind).
    draft_layers: u64,
}

impl LayerCache {
    fn alike(&self, other: &LayerCache) -> bool {
        LayerCache {
            layers: 0,
            draft_layers: 0,
            ..self.clone()
        } == LayerCache {
            layers: 0,
            draft_layers: 0,
            ..other.clone()
        }
    }

    fn tokens(&self, context: u64) -> u64 {
        self.cap.map_or(context, |cap| cap.min(context))
    }

    /// Bytes of these layers for `sequences` sequences of `context` tokens.
    fn bytes(&self, context: u64, sequences: u64, rank: bool) -> u64 {
        let (per_token, per_sequence) = match rank {
            true => (self.per_token_rank, self.per_sequence_rank),
            false => (self.per_token, self.per_sequence),
        };
        per_token
            .saturating_mul(self.tokens(context))
            .saturating_add(per_sequence)
            .saturating_mul(self.layers)
            .saturating_mul(sequences)
    }
}

/// Prepare one artifact, or say with a finding why its memory cannot be known.
pub fn prepare(
    inputs: &Inputs,
    options: &PlanOptions,
    engine: MemoryEngine,
    findings: &mut Findings,
) -> Option<Sizing> {
    let unavailable = |findings: &mut Findings, subject: &str, why: String| {
        findings.push(Code::MemoryUnavailable, subject, why);
        None
    };
    let tp = options.tensor_parallel_degree().max(1);
    let expert_parallel = options.expert_parallel_degree(engine);
    // The degree one expert's width is sliced by: none under expert parallelism; else vLLM
    // slices the experts over every rank of its data-parallel deployment
    // (`FusedMoEParallelConfig.flatten_tp_across_dp_and_pcp`), the rest over the TP group.
    let expert_width_degree = match (expert_parallel, engine) {
        (Some(_), _) => 1,
        (None, MemoryEngine::Vllm) => tp.saturating_mul(options.data_parallel_degree()),
        (None, _) => tp,
    };
    let Some(model) = inputs.model else {
        findings.push(
            Code::MemoryUnavailable,
            "architecture",
            "the architecture is not known (see the other findings), so neither is its memory beyond the weights as stored, a lower bound",
        );
        return Some(lower_bound(inputs.weights_bytes, tp, options, engine, findings));
    };
    // The dtype the model computes in: `--dtype`, else the model's; a cache asked for in a
    // float type stands in for it only when nothing else says.
    let Some(compute) = options
        .dtype
        .or_else(|| {
            model_dtype(
                model,
                inputs.format,
                inputs.parameters,
                options.kv_dtype.is_none(),
                findings,
            )
        })
        .or_else(|| options.kv_dtype?.compute())
    else {
        return unavailable(
            findings,
            "kv_dtype",
            "neither the config nor the stored tensors say which dtype the model computes in; give a float kv_dtype"
                .into(),
        );
    };
    let kv_dtype = options.kv_dtype.unwrap_or(compute.kv());
    let mut layers = model.layers.clone();
    if options.include_mtp {
        // An MTP layer is one more decoder layer, of its own kind where the family says.
        if let Some(mixer) = model.mtp_mixer.or(model.layers.last().copied()) {
            layers.extend((0..model.mtp_layers).map(|_| mixer));
        }
    }
    // vLLM's RoPE tables are in the dtype the model computes in, whatever the KV cache's;
    // SGLang's in FP32.
    let buffers = match engine {
        MemoryEngine::Vllm => vllm::rope_table_bytes(&model.rope, compute.element_bytes()),
        MemoryEngine::Sglang => sglang::rope_table_bytes(&model.rope),
        MemoryEngine::LlamaCpp => 0,
    };
    // vLLM keeps recurrent state in the model's dtype (`mamba_cache_dtype` "auto",
    // mamba_utils.py `_mamba_state_dtype`), whatever `--kv-cache-dtype` asks of the KV cache;
    // llama.cpp keeps it in F32, conv rows and SSM rows alike.
    let (state_base, mixer_for): (ComputeDtype, fn(Mixer) -> Mixer) = match engine {
        MemoryEngine::LlamaCpp => (ComputeDtype::F32, llama_cpp::engine_mixer),
        MemoryEngine::Vllm | MemoryEngine::Sglang => (compute, |m| m),
    };
    // SGLang keeps a window apart only in its hybrid SWA pool; else every layer holds every token.
    let windows_kept = engine != MemoryEngine::Sglang || model.sglang_hybrid_swa;
    let mut caches: Vec<LayerCache> = Vec::new();
    let mut layer_groups = Vec::with_capacity(layers.len());
    for (layer, mixer) in layers.iter().enumerate() {
        let cache = match layer_cache(mixer_for(*mixer), kv_dtype, state_base, tp) {
            Ok(Some(cache)) if windows_kept => cache,
            Ok(Some(cache)) => LayerCache { cap: None, ..cache },
            Ok(None) => {
                layer_groups.push(None);
                continue;
            }
            Err(why) => return unavailable(findings, &format!("layer {layer}"), why),
        };
        match caches.iter().position(|c| c.alike(&cache)) {
            Some(group) => {
                caches[group].layers += 1;
                layer_groups.push(Some(group));
            }
            None => {
                layer_groups.push(Some(caches.len()));
                caches.push(cache);
            }
        }
    }
    // llama.cpp splits layers between devices, not tensors: any count will do.
    let kv_projection_excess = match engine {
        MemoryEngine::LlamaCpp => Some(0),
        MemoryEngine::Vllm | MemoryEngine::Sglang => tensor_parallel_split(model, &layers, tp, expert_width_degree),
    };
    // A degree that does not split it leaves `rank_weights` out: placement passes such a
    // count by, and a degree the caller gave is refused before sizing (`check_degree`).
    let context = options.context.unwrap_or(model.context);
    if context > model.context {
        let finding = findings.push(
            Code::MemoryContextExceedsModel,
            "context",
            format!(
                "{} tokens is past the {} the model declares; engines refuse it unless overridden",
                crate::findings::grouped(context),
                crate::findings::grouped(model.context)
            ),
        );
        finding.declared = Some(model.context.into());
        finding.observed = Some(context.into());
    }
    let padding = |tp| match engine {
        MemoryEngine::Vllm => vllm::mxfp4_expert_padding(model, options, tp),
        MemoryEngine::Sglang | MemoryEngine::LlamaCpp => None,
    };
    // `--dtype` loads an unquantized checkpoint's weights in the dtype it names, as a
    // what-if of that type would (a quantized one keeps its stored types).
    let cast;
    let options = match (options.dtype, options.weights_dtype, &model.quantization) {
        (Some(dtype), None, None) => {
            cast = PlanOptions {
                weights_dtype: Some(dtype.weights()),
                ..options.clone()
            };
            &cast
        }
        _ => options,
    };
    let weights = weights_bytes(inputs.layout, options, 1, 0, padding(1), None);
    // Expert parallelism: a rank holds whole experts — the busiest `⌈experts / ranks⌉` of
    // them (vLLM `determine_expert_map` gives the first `experts mod ranks` ranks one more) —
    // each as wide as stored.
    // Without it, a slice of every expert: the share of `expert_width_degree` ranks.
    let experts_held = match expert_parallel.zip(model.moe.as_ref()) {
        Some((ranks, moe)) => Some((moe.experts.div_ceil(ranks.max(1)), moe.experts.max(1))),
        None => (expert_width_degree != tp).then_some((1, expert_width_degree)),
    };
    let rank_padding = padding(expert_width_degree);
    let rank_weights = kv_projection_excess
        .map(|excess| weights_bytes(inputs.layout, options, tp, excess, rank_padding, experts_held));
    Some(Sizing {
        context,
        max_context: model.context,
        sequences: options.sequences.unwrap_or(1),
        kv_dtype,
        weights_dtype: options.weights_dtype,
        weights,
        caches,
        shape: Shape::of(model, compute, expert_width_degree),
        tensor_parallel: tp,
        rank_weights,
        buffers,
        lower_bound: false,
        untrusted: inputs.untrusted,
        layer_weights: (0..layers.len() as u64)
            .map(|l| {
                u32::try_from(l)
                    .ok()
                    .and_then(|l| inputs.layout.layer_bytes.get(&l))
                    .copied()
                    .unwrap_or(0)
            })
            .collect(),
        embedding_weights: inputs
            .layout
            .parts
            .iter()
            .filter(|((c, _), _)| *c == Component::Embedding)
            .fold(0u64, |acc, (_, s)| acc.saturating_add(s.bytes)),
        tied_output: !inputs.layout.parts.keys().any(|(c, _)| *c == Component::LmHead),
        llama_cpp_graph: model.llama_cpp_graph,
        replays: inputs.replays.clone(),
        layer_groups,
        speculative: None,
    })
}

/// A refused architecture: the stored weights, split as evenly as any engine could, are
/// the least each rank holds. When that alone exceeds a device, it does not fit whatever
/// else is true (a blocking finding); otherwise nothing is said to fit.
fn lower_bound(weights: u64, tp: u64, options: &PlanOptions, engine: MemoryEngine, findings: &mut Findings) -> Sizing {
    let rank = weights.div_ceil(tp);
    if let Some(devices) = &options.devices {
        let usable = |group| {
            Target {
                engine,
                options,
                device: Some(group),
            }
            .usable_of(group)
        };
        if let Some(smallest) = devices.groups().iter().map(usable).min()
            && rank > smallest
        {
            let finding = findings.push(
                Code::MemoryWeightsExceedDevices,
                "weights",
                format!(
                    "the weights as stored, split over {tp} rank(s), are {} bytes a rank, more than the {} usable bytes of the smallest device",
                    crate::findings::grouped(rank),
                    crate::findings::grouped(smallest)
                ),
            );
            finding.declared = Some(smallest.into());
            finding.observed = Some(rank.into());
        }
    }
    Sizing {
        context: options.context.unwrap_or(0),
        max_context: 0,
        sequences: options.sequences.unwrap_or(1),
        kv_dtype: options.kv_dtype.unwrap_or(KvDtype::Bf16),
        weights_dtype: None,
        weights,
        caches: Vec::new(),
        shape: Shape::default(),
        tensor_parallel: tp,
        rank_weights: Some(rank),
        // Unknown, as everything but the stored weights is.
        buffers: 0,
        lower_bound: true,
        untrusted: true,
        layer_groups: Vec::new(),
        layer_weights: Vec::new(),
        embedding_weights: 0,
        tied_output: false,
        llama_cpp_graph: None,
        replays: Default::default(),
        speculative: None,
    }
}

/// Bytes of one recurrent-state element: the config's pinned dtype, else the model's.
fn state_element_bytes(dtype: StateDtype, model: ComputeDtype) -> u64 {
    match dtype {
        StateDtype::F32 => 4,
        StateDtype::Bf16 | StateDtype::F16 => 2,
        StateDtype::Model => model.element_bytes(),
    }
}

/// What one layer caches, whole and on one of `tp` ranks; `Ok(None)` for a layer that
/// caches nothing; `Err` says why the planner has no cache model for it.
fn layer_cache(mixer: Mixer, dtype: KvDtype, state_base: ComputeDtype, tp: u64) -> Result<Option<LayerCache>, String> {
    let per_token = |per_token: u64, per_token_rank: u64, kind: CacheKind, cap: Option<u64>| LayerCache {
        kind,
        cap,
        layers: 1,
        per_token,
        per_token_rank,
        per_sequence: 0,
        per_sequence_rank: 0,
        indexer_per_token_rank: 0,
        draft_layers: 0,
    };
    match mixer {
        Mixer::Attention {
            kv_heads,
            head_dim,
            v_head_dim,
            span,
            ..
        } => {
            if kv_heads == 0 || head_dim == 0 || v_head_dim == 0 {
                return Err(
                    "a layer with no KV heads or a zero head width: a kind of layer the planner has no cache model for"
                        .into(),
                );
            }
            let (kind, cap) = match span {
                Span::Full => (CacheKind::Full, None),
                Span::Sliding(0) | Span::Chunked(0) => return Err("a window of 0 tokens is not a window".into()),
                Span::Sliding(w) => (CacheKind::Sliding, Some(w)),
                Span::Chunked(c) => (CacheKind::Chunked, Some(c)),
            };
            let bytes = |heads: u64| {
                dtype
                    .row_bytes(heads.saturating_mul(head_dim))
                    .saturating_add(dtype.row_bytes(heads.saturating_mul(v_head_dim)))
            };
            // vLLM `get_num_kv_heads`: max(1, kv / tp) — a whole head when kv < tp.
            Ok(Some(per_token(
                bytes(kv_heads),
                bytes((kv_heads / tp).max(1)),
                kind,
                cap,
            )))
        }
        Mixer::Mla { kv_lora_rank: 0, .. } => {
            Err("an MLA layer with kv_lora_rank 0 caches nothing the planner can size".into())
        }
        Mixer::Mla {
            kv_lora_rank,
            rope_dim,
            indexer_head_dim,
        } => {
            // One latent per token, no separate V; every rank holds all of it.
            let latent = dtype.row_bytes(kv_lora_rank.saturating_add(rope_dim));
            let indexer = indexer_head_dim.map_or(0, indexer_key_bytes);
            let kind = match indexer_head_dim {
                None => CacheKind::Mla,
                Some(_) => CacheKind::MlaIndexer,
            };
            let bytes = latent.saturating_add(indexer);
            Ok(Some(LayerCache {
                indexer_per_token_rank: indexer,
                ..per_token(bytes, bytes, kind, None)
            }))
        }
        Mixer::LinearAttention {
            conv_dim,
            conv_kernel,
            heads,
            key_dim,
            value_dim,
            state_dtype,
        } => {
            // vLLM `MambaStateShapeCalculator.gated_delta_net_state_shape`: conv state
            // (kernel − 1) × conv_dim in the model dtype, temporal state heads × k × v in
            // the SSM state dtype; both split over tensor-parallel ranks.
            let conv = conv_kernel.saturating_sub(1).saturating_mul(conv_dim);
            let state = heads.saturating_mul(key_dim).saturating_mul(value_dim);
            Ok(Some(state_cache(
                CacheKind::LinearAttention,
                conv,
                state,
                state_dtype,
                state_base,
                tp,
            )))
        }
        Mixer::Mamba {
            conv_dim,
            conv_kernel,
            heads,
            head_dim,
            state_size,
            state_dtype,
        } => {
            // vLLM `MambaStateShapeCalculator.mamba2_state_shape`: conv state
            // (kernel − 1) × conv_dim, SSM state heads × head_dim × state_size.
            let conv = conv_kernel.saturating_sub(1).saturating_mul(conv_dim);
            let state = heads.saturating_mul(head_dim).saturating_mul(state_size);
            Ok(Some(state_cache(
                CacheKind::Mamba,
                conv,
                state,
                state_dtype,
                state_base,
                tp,
            )))
        }
        // transformers 5.24 (modeling_deepseek_v4.py) keeps, per layer, the window's K=V rows
        // and the compressed entries (one per `ratio` tokens) in growing tensors; vLLM 0.19
        // has no DeepSeek-V4, and what an engine pages (dtype, scales, the compressor's
        // leftover buffer and overlap rows) is not established.
        Mixer::Compressed { .. } => Err(
            "compressed attention (a window plus entries compressed from every compress_ratio tokens): how an engine stores the compressed entries is not established, so its cache is not sized"
                .into(),
        ),
        Mixer::IndexedAttention { .. } => Err(
            "full attention with a sparse indexer: how an engine stores the indexer's keys beside K and V is not established, so its cache is not sized"
                .into(),
        ),
        Mixer::None => Ok(None),
    }
}

/// vLLM's DeepSeek-V3.2 indexer key cache: the key in FP8 (one byte an element) plus one
/// F32 scale per 128-element quantization block (`DeepseekV32IndexerCache`:
/// `head_dim = index_head_dim + index_head_dim // quant_block_size * 4`, dtype uint8).
fn indexer_key_bytes(index_head_dim: u64) -> u64 {
    const QUANT_BLOCK: u64 = 128;
    index_head_dim.saturating_add(index_head_dim / QUANT_BLOCK * 4)
}

/// A per-sequence state: conv elements in the model's dtype, recurrent elements in the
/// state dtype; each rank holds `1/tp` of both.
fn state_cache(
    kind: CacheKind,
    conv: u64,
    state: u64,
    state_dtype: StateDtype,
    model: ComputeDtype,
    tp: u64,
) -> LayerCache {
    let conv_bytes = |elements: u64| elements.saturating_mul(model.element_bytes());
    let state_bytes = |elements: u64| elements.saturating_mul(state_element_bytes(state_dtype, model));
    LayerCache {
        kind,
        cap: None,
        layers: 1,
        per_token: 0,
        per_token_rank: 0,
        per_sequence: conv_bytes(conv).saturating_add(state_bytes(state)),
        per_sequence_rank: conv_bytes(conv / tp).saturating_add(state_bytes(state / tp)),
        indexer_per_token_rank: 0,
        draft_layers: 0,
    }
}

/// Whether `tp` ranks can split the model as vLLM requires (heads, each layer's KV heads,
/// the MLP widths), and if so the K/V projection parameters each rank holds beyond its
/// share: with fewer KV heads than ranks, every rank keeps one whole head's K and V rows.
/// `expert_width_degree`: the ranks one expert's width is sliced over (1 when experts are
/// held whole).
fn tensor_parallel_split(model: &Model, layers: &[Mixer], tp: u64, expert_width_degree: u64) -> Option<u64> {
    let expert_width = model.moe.as_ref().and_then(|m| m.expert_intermediate_size);
    if !model.heads.is_multiple_of(tp)
        || !model.intermediate.is_none_or(|w| w.is_multiple_of(tp))
        || !expert_width.is_none_or(|w| w.is_multiple_of(expert_width_degree.max(1)))
    {
        return None;
    }
    let mut excess = 0u64;
    for mixer in layers {
        let Mixer::Attention {
            kv_heads,
            head_dim,
            v_head_dim,
            ..
        } = *mixer
        else {
            continue;
        };
        if !(kv_heads.is_multiple_of(tp) || tp.is_multiple_of(kv_heads)) {
            return None;
        }
        if kv_heads < tp {
            let rows = head_dim.saturating_add(v_head_dim).saturating_mul(model.hidden);
            excess = excess.saturating_add(rows.saturating_mul(tp - kv_heads) / tp);
        }
    }
    Some(excess)
}

/// The dtype the model computes in: GGUF in f16 (llama.cpp's default `type_k` and `type_v`
/// follow it); safetensors in the config's dtype, else the float dtype most parameters are
/// stored in — said in a finding when `say_inferred` (it then sizes the KV cache too).
fn model_dtype(
    arch: &Model,
    format: Format,
    parameters: &Parameters,
    say_inferred: bool,
    findings: &mut Findings,
) -> Option<ComputeDtype> {
    if format == Format::Gguf {
        return Some(ComputeDtype::F16);
    }
    if let Some(dtype) = arch.dtype.as_deref().and_then(ComputeDtype::from_model_dtype) {
        return Some(dtype);
    }
    let (name, dtype) = parameters
        .by_dtype
        .iter()
        .filter_map(|(name, n)| Some((n, name, ComputeDtype::from_model_dtype(name)?)))
        .max_by_key(|(n, _, _)| **n)
        .map(|(_, name, dtype)| (name, dtype))?;
    if say_inferred {
        let finding = findings.push(
            Code::MemoryDtypeInferred,
            "kv_dtype",
            format!("the config declares no dtype the planner knows; the KV cache is planned in {name}, the float dtype most parameters are stored in"),
        );
        finding.declared = arch.dtype.clone().map(Into::into);
        finding.observed = Some(name.clone().into());
    }
    Some(dtype)
}

/// Weight bytes one of `tp` ranks holds (`tp` 1: the whole model): replicated parts whole,
/// sharded parts split, plus `kv_projection_excess` parameters of K/V projections that
/// ranks duplicate when there are fewer KV heads than ranks. `expert_padding` (allocated,
/// stored) scales the routed experts where the engine allocates them padded;
/// `experts_held` (held, all) is a rank's share of whole experts under expert parallelism,
/// in place of a slice of every one.
fn weights_bytes(
    layout: &WeightsLayout,
    options: &PlanOptions,
    tp: u64,
    kv_projection_excess: u64,
    expert_padding: Option<(u64, u64)>,
    experts_held: Option<(u64, u64)>,
) -> u64 {
    let mut total = layout.unplaced_bytes;
    for ((component, placement), share) in &layout.parts {
        if *component == Component::Mtp && !options.include_mtp {
            continue;
        }
        let mut bytes = part_bytes(*component, *share, options.weights_dtype);
        if let (Component::Experts, Some((allocated, stored))) = (component, expert_padding) {
            let padded = u128::from(bytes) * u128::from(allocated) / u128::from(stored);
            bytes = u64::try_from(padded).unwrap_or(u64::MAX);
        }
        let held = match (placement, component, experts_held) {
            (Placement::Sharded, Component::Experts, Some((held, all))) => {
                u64::try_from((u128::from(bytes) * u128::from(held)).div_ceil(u128::from(all))).unwrap_or(u64::MAX)
            }
            (Placement::Replicated, ..) => bytes,
            (Placement::Sharded, ..) => bytes.div_ceil(tp),
        };
        total = total.saturating_add(held);
        if *component == Component::Attention && *placement == Placement::Sharded && share.params > 0 {
            // The duplicated K/V rows cost what attention weights cost per parameter.
            let excess = u128::from(bytes) * u128::from(kv_projection_excess) / u128::from(share.params);
            total = total.saturating_add(u64::try_from(excess).unwrap_or(u64::MAX));
        }
    }
    total
}

/// Bytes of one slice as stored, or under the what-if type.
fn part_bytes(component: Component, share: Share, what_if: Option<WeightsDtype>) -> u64 {
    match what_if {
        Some(dtype) if component != Component::Buffer && (dtype.is_float() || component.is_linear()) => {
            let (params, bytes) = dtype.rate();
            let scaled = (u128::from(share.params) * u128::from(bytes)).div_ceil(u128::from(params));
            u64::try_from(scaled).unwrap_or(u64::MAX)
        }
        _ => share.bytes,
    }
}

/// What the forward pass and the sampler are sized by: the model's widths on one rank's
/// share, in the dtype it computes in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Shape {
    hidden: u64,
    /// Query heads (llama.cpp's KQ scores are one row a head).
    heads: u64,
    vocab: u64,
    /// Query heads × head width (the attention output's width).
    q_width: u64,
    /// K and V widths together, and their geometry (of the first attention layer).
    kv_width: u64,
    kv_heads: u64,
    head_dim: u64,
    /// The dense MLP's width (0 when every layer routes to experts).
    intermediate: u64,
    moe: Option<MoeShape>,
    element_bytes: u64,
    /// A multimodal model's dummy encoder pass (vLLM's profile run holds its inputs and outputs).
    encoder: Option<crate::model::EncoderProfile>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MoeShape {
    experts: u64,
    active: u64,
    shared: u64,
    /// One expert's MLP width.
    width: u64,
    /// The experts are stored unquantized, so vLLM runs them with its Triton fused-MoE
    /// kernel (`oracle/unquantized.py` `select_unquantized_moe_backend`: TRITON on CUDA by
    /// default), whose workspace it keeps.
    unquantized: bool,
    /// The ranks one expert's width is sliced over: 1 under expert parallelism (whole
    /// experts); under vLLM otherwise every tensor × data parallel rank.
    width_degree: u64,
}

impl Shape {
    /// `expert_width_degree`: the ranks one expert's width is sliced over (1: held whole).
    fn of(model: &Model, dtype: ComputeDtype, expert_width_degree: u64) -> Shape {
        let (q_width, kv_width, kv_heads, head_dim) = model
            .layers
            .iter()
            .find_map(|m| match *m {
                Mixer::Attention {
                    kv_heads,
                    head_dim,
                    v_head_dim,
                    ..
                } => Some((
                    model.heads.saturating_mul(head_dim),
                    kv_heads.saturating_mul(head_dim.saturating_add(v_head_dim)),
                    kv_heads,
                    head_dim,
                )),
                _ => None,
            })
            .unwrap_or((model.hidden, model.hidden.saturating_mul(2), model.heads, 0));
        Shape {
            hidden: model.hidden,
            heads: model.heads,
            vocab: model.vocab,
            q_width,
            kv_width,
            kv_heads,
            head_dim,
            intermediate: model.intermediate.unwrap_or(0),
            moe: model.moe.as_ref().map(|m| MoeShape {
                experts: m.experts,
                active: m.active,
                shared: m.shared,
                width: m.expert_intermediate_size.unwrap_or(0),
                unquantized: model.quantization.is_none(),
                width_degree: expert_width_degree.max(1),
            }),
            element_bytes: dtype.element_bytes(),
            encoder: model.encoder_profile,
        }
    }

    /// The widest per-token MLP: the dense width, or the routed-plus-shared experts' widths.
    fn ffn_width(&self) -> u64 {
        let experts = self
            .moe
            .map_or(0, |m| m.width.saturating_mul(m.active.saturating_add(m.shared)));
        self.intermediate.max(experts)
    }
}

/// What a plan is held against on one device: the engine, and the device it names.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    pub engine: MemoryEngine,
    pub options: &'a PlanOptions,
    pub device: Option<&'a DeviceGroup>,
}

impl Target<'_> {
    /// Bytes of the device the engine lets the plan fill: vLLM's `gpu_memory_utilization`
    /// share and SGLang's `mem_fraction_static` share of it; llama.cpp all of it.
    /// Usable bytes of a device: engines budget from what CUDA reports of it (an "80 GB"
    /// H100 shows 79.19 GiB), where that was measured, else from its capacity.
    fn usable_of(&self, group: &DeviceGroup) -> u64 {
        self.usable(group.cuda_visible_bytes.unwrap_or(group.capacity_bytes))
    }

    fn usable(&self, capacity: u64) -> u64 {
        match self.engine {
            MemoryEngine::Vllm => self.options.utilization().of(capacity),
            MemoryEngine::Sglang => {
                sglang::fraction(self.options, capacity, self.options.tensor_parallel_degree()).of(capacity)
            }
            MemoryEngine::LlamaCpp => capacity,
        }
    }

    fn vllm_knobs(&self, paging: vllm::Paging) -> vllm::Knobs {
        vllm::Knobs::resolve(
            self.options,
            self.device.map(|d| vllm::Part {
                name: d.name.as_str(),
                total: d.capacity_bytes,
                capability: d.device().and_then(|c| c.compute_capability),
            }),
            paging,
        )
    }
}

impl Sizing {
    /// Whether its tensor-parallel degree splits the model.
    pub fn splits(&self) -> bool {
        self.rank_weights.is_some()
    }

    fn kv(&self, context: u64, rank: bool) -> u64 {
        self.caches.iter().fold(0u64, |acc, c| {
            acc.saturating_add(c.bytes(context, self.sequences, rank))
        })
    }

    /// What pages the cache: MLA's backends choose their own block size.
    fn paging(&self) -> vllm::Paging {
        let kind = |k: CacheKind| self.caches.iter().any(|c| c.kind == k);
        if kind(CacheKind::MlaIndexer) {
            vllm::Paging::SparseMla
        } else if kind(CacheKind::Mla) {
            vllm::Paging::Mla
        } else {
            vllm::Paging::Standard
        }
    }

    /// vLLM's paging of this artifact's caches on one rank.
    fn pool(&self, target: &Target) -> Result<vllm::Pool, String> {
        vllm::Pool::new(&self.caches, &target.vllm_knobs(self.paging()))
    }

    /// What one rank holds at `context` under the target engine, or `None` when the model
    /// cannot be split (or vLLM cannot page its caches).
    fn rank(&self, context: u64, target: &Target) -> Option<RankMemory> {
        let weights_bytes = self.rank_weights?;
        let tp = self.tensor_parallel;
        let (kv_cache_bytes, activation_bytes, non_torch_bytes) = match (target.engine, self.lower_bound) {
            (_, true) => (0, 0, 0),
            (MemoryEngine::Vllm, false) => {
                let pool = self.pool(target).ok()?;
                let knobs = target.vllm_knobs(self.paging());
                (
                    pool.bytes_for(context, self.sequences),
                    speculative::vllm_activation(self, tp, &knobs, context),
                    // Expert parallelism over data-parallel ranks talks over NCCL too.
                    vllm::non_torch(tp.max(target.options.expert_parallel_degree(MemoryEngine::Vllm).unwrap_or(1))),
                )
            }
            // SGLang's activations live in the share `mem_fraction_static` leaves out; a
            // drafter's decode reserve adds tokens to every request.
            (MemoryEngine::Sglang, false) => (
                self.kv(context.saturating_add(speculative::sglang_lookahead(self)), true),
                0,
                0,
            ),
            (MemoryEngine::LlamaCpp, false) => {
                let buffers = llama_cpp::buffers(self, context, target);
                let (weights, kv, activation) = buffers.on_target(target.device.is_some());
                return Some(rank_memory(tp, [weights, 0, kv, activation, 0]));
            }
        };
        Some(rank_memory(
            tp,
            [
                weights_bytes,
                self.buffers,
                kv_cache_bytes,
                activation_bytes,
                non_torch_bytes,
            ],
        ))
    }

    /// Each layer cache as the engine holds it at `context`: tokens a sequence keeps in it
    /// (`None` for state) and bytes of it — on one rank for vLLM and SGLang (whole pages,
    /// whole blocks, vLLM's empty group slots), whole cells under llama.cpp.
    fn cache_use(&self, context: u64, target: &Target, llama: Option<llama_cpp::Context>) -> Vec<(Option<u64>, u64)> {
        // The cells themselves, token for token, on one rank, held for `tokens` tokens.
        let exact = |tokens: u64| -> Vec<(Option<u64>, u64)> {
            self.caches
                .iter()
                .map(|c| {
                    (
                        (!c.kind.is_state()).then(|| c.tokens(context)),
                        c.bytes(tokens, self.sequences, true),
                    )
                })
                .collect()
        };
        match (target.engine, llama) {
            (MemoryEngine::LlamaCpp, Some(l)) => self
                .caches
                .iter()
                .map(|c| {
                    let cells = (!c.kind.is_state()).then(|| l.cells_of(c));
                    (cells, l.layer_bytes(c).saturating_mul(c.layers))
                })
                .collect(),
            (MemoryEngine::Vllm, _) if !self.lower_bound => self.pool(target).map_or_else(
                |_| exact(context),
                |pool| pool.by_cache(self.caches.len(), context, self.sequences),
            ),
            (MemoryEngine::Sglang, _) => exact(context.saturating_add(speculative::sglang_lookahead(self))),
            _ => exact(context),
        }
    }

    /// This artifact's memory. Placed on ranks (vLLM, SGLang), every figure is one rank's
    /// times the ranks, so the whole is what the devices hold between them; llama.cpp's is
    /// what it allocates, devices and host together.
    pub fn report(&self, target: &Target) -> ArtifactMemory {
        let context = self.context;
        // llama.cpp allocates whole 256-cell streams and windows of a micro-batch more.
        let llama = (target.engine == MemoryEngine::LlamaCpp && !self.lower_bound)
            .then(|| llama_cpp::Context::new(context, self.sequences, &llama_cpp::Knobs::resolve(target.options)));
        let per_rank = self.rank(context, target);
        // Ranks the per-rank figures multiply by — every device named (replicas included),
        // else the deployment's tensor × data parallel ranks; llama.cpp's are already whole.
        let options = target.options;
        let ranks = match (target.engine, &per_rank) {
            (MemoryEngine::LlamaCpp, _) | (_, None) => None,
            (_, Some(rank)) => Some(options.devices.as_ref().map_or_else(
                || {
                    rank.tensor_parallel
                        .max(1)
                        .saturating_mul(options.data_parallel_degree())
                },
                Devices::count,
            )),
        };
        let scale = |bytes: u64| bytes.saturating_mul(ranks.unwrap_or(1));
        let uses = self.cache_use(context, target, llama);
        let kv_cache: Vec<KvCacheGroup> = self
            .caches
            .iter()
            .zip(&uses)
            .map(|(c, (tokens, bytes))| {
                let state = c.kind.is_state();
                KvCacheGroup {
                    kind: c.kind,
                    window: c.cap,
                    layers: c.layers,
                    bytes_per_token_per_layer: (!state).then_some(c.per_token),
                    bytes_per_sequence_per_layer: state.then_some(c.per_sequence),
                    tokens_per_sequence: *tokens,
                    bytes: match ranks {
                        Some(_) => scale(*bytes),
                        // Unplaced: the whole model's cache (llama.cpp's is already whole).
                        None if llama.is_some() => *bytes,
                        None => c.bytes(context, self.sequences, false),
                    },
                    draft_layers: c.draft_layers,
                }
            })
            .collect();
        let buffers = llama.map(|_| llama_cpp::buffers(self, context, target));
        let state_bytes_per_sequence = self.caches.iter().fold(0u64, |acc, c| {
            acc.saturating_add(c.per_sequence.saturating_mul(c.layers))
        });
        // The model's own: one copy, whatever the ranks keep of it.
        let kv_cache_bytes_per_token = self
            .caches
            .iter()
            .filter(|c| c.cap.is_none())
            .fold(0u64, |acc, c| acc.saturating_add(c.layers.saturating_mul(c.per_token)));
        let (weights_bytes, buffers_bytes, kv_cache_bytes, activation_bytes, non_torch_bytes, total_bytes) =
            match (&per_rank, ranks) {
                (Some(rank), Some(_)) => (
                    scale(rank.weights_bytes),
                    scale(rank.buffers_bytes),
                    scale(rank.kv_cache_bytes),
                    scale(rank.activation_bytes),
                    scale(rank.non_torch_bytes),
                    scale(rank.total_bytes),
                ),
                _ => {
                    let kv = kv_cache.iter().fold(0u64, |acc, g| acc.saturating_add(g.bytes));
                    // llama.cpp's compute buffer and its output buffer, wherever that sits.
                    let activation = buffers.map_or(0, |b| b.compute.saturating_add(b.output));
                    let total = [kv, activation].into_iter().fold(self.weights, u64::saturating_add);
                    (self.weights, 0, kv, activation, 0, total)
                }
            };
        let speculative = self
            .speculative
            .as_ref()
            .map(|t| t.report(self, &kv_cache, ranks, target));
        ArtifactMemory {
            context,
            sequences: self.sequences,
            kv_dtype: self.kv_dtype.name().to_owned(),
            weights_dtype: self.weights_dtype.map_or("as_stored", WeightsDtype::name).to_owned(),
            weights_bytes,
            buffers_bytes,
            kv_cache_bytes_per_token,
            kv_cache_bytes,
            state_bytes_per_sequence,
            state_bytes: state_bytes_per_sequence.saturating_mul(self.sequences),
            activation_bytes,
            non_torch_bytes,
            total_bytes,
            kv_cache,
            lower_bound: self.lower_bound,
            host_bytes: buffers.map(|b| b.host),
            speculative,
            per_rank,
        }
    }
}

/// One rank's figures from `[weights, buffers, kv, activation, non_torch]`, with their total.
fn rank_memory(tp: u64, [weights, buffers, kv, activation, non_torch]: [u64; 5]) -> RankMemory {
    RankMemory {
        tensor_parallel: tp,
        weights_bytes: weights,
        buffers_bytes: buffers,
        kv_cache_bytes: kv,
        activation_bytes: activation,
        non_torch_bytes: non_torch,
        total_bytes: [buffers, kv, activation, non_torch]
            .into_iter()
            .fold(weights, u64::saturating_add),
    }
}

/// The engine the system is planned for: as the options say, else by the artifacts' formats.
pub fn engine_for(options: &PlanOptions, formats: &[Format]) -> MemoryEngine {
    options.engine_for(!formats.is_empty() && formats.iter().all(|f| *f == Format::Gguf))
}

/// What one device holds at `context` (each artifact's own when `None`): one rank of every
/// artifact, whichever replica it belongs to; `None` when some artifact cannot be split.
fn held_per_rank(sizings: &[&Sizing], context: Option<u64>, target: &Target) -> Option<RankMemory> {
    let mut held = RankMemory {
        tensor_parallel: target.options.tensor_parallel_degree(),
        weights_bytes: 0,
        buffers_bytes: 0,
        kv_cache_bytes: 0,
        activation_bytes: 0,
        non_torch_bytes: 0,
        total_bytes: 0,
    };
    for sizing in sizings {
        let rank = sizing.rank(context.unwrap_or(sizing.context), target)?;
        held.weights_bytes = held.weights_bytes.saturating_add(rank.weights_bytes);
        held.buffers_bytes = held.buffers_bytes.saturating_add(rank.buffers_bytes);
        held.kv_cache_bytes = held.kv_cache_bytes.saturating_add(rank.kv_cache_bytes);
        held.activation_bytes = held.activation_bytes.saturating_add(rank.activation_bytes);
        held.non_torch_bytes = held.non_torch_bytes.saturating_add(rank.non_torch_bytes);
        held.total_bytes = held.total_bytes.saturating_add(rank.total_bytes);
    }
    Some(held)
}

/// Whether the system fits its devices at the planned context, as placement asks it of each
/// candidate count: one rank's memory against the smallest device, and nothing else — no
/// report, no longest-context search. `None` when some artifact cannot be split.
pub fn fits_as_planned(sizings: &[&Sizing], options: &PlanOptions, engine: MemoryEngine) -> Option<bool> {
    let smallest = options.devices.as_ref()?.smallest()?;
    let target = Target {
        engine,
        options,
        device: Some(smallest),
    };
    let held = held_per_rank(sizings, None, &target)?;
    let fits = held.total_bytes <= target.usable_of(smallest);
    // A refused architecture's weights are a lower bound: they prove a misfit, never a fit.
    match fits && sizings.iter().any(|s| s.lower_bound) {
        true => None,
        false => Some(fits),
    }
}

/// Share of usable bytes under which a plan that fits is called tight.
const TIGHT_FIT_PERCENT: u64 = 5;

/// The system's memory: every artifact on the same devices at the same tensor-parallel
/// degree, each device holding one rank of every artifact. Returns the block, and a
/// `memory.tight_fit` finding's detail when a plan fits with little to spare.
pub fn system(sizings: &[&Sizing], options: &PlanOptions, engine: MemoryEngine) -> (Memory, Option<String>) {
    // Figures that cannot prove a fit: a refused architecture's, or ones beside a blocking finding.
    let refused = sizings.iter().any(|s| s.lower_bound || s.untrusted);
    // A refused architecture's device rows are lower bounds: never marked as fitting. Rows
    // beside a blocking finding are the model's own figures and say what they say; only the
    // system's verdict withholds the fit they cannot prove.
    let lower_bound = sizings.iter().any(|s| s.lower_bound);
    let devices = options.devices.as_ref();
    // The smallest device decides (every device holds one rank of everything).
    let smallest: Option<&DeviceGroup> = devices.and_then(Devices::smallest);
    let target = Target {
        engine,
        options,
        device: smallest,
    };
    let reports: Vec<ArtifactMemory> = sizings.iter().map(|s| s.report(&target)).collect();
    let sum = |f: fn(&ArtifactMemory) -> u64| reports.iter().fold(0u64, |acc, r| acc.saturating_add(f(r)));
    let per_rank_at = |context: Option<u64>, target: &Target| held_per_rank(sizings, context, target);
    let per_rank = per_rank_at(None, &target);
    let mut per_device = Vec::new();
    let mut max_context_that_fits = None;
    let mut max_context_limited_by = None;
    let (mut kv_pool_bytes, mut kv_pool_tokens, mut max_concurrency) = (None, None, None);
    if let (Some(devices), Some(held)) = (devices, &per_rank) {
        for group in devices.groups() {
            let target = Target {
                device: Some(group),
                ..target
            };
            let usable_bytes = target.usable_of(group);
            let device = DeviceMemory {
                device: group.name.clone(),
                capacity_bytes: group.capacity_bytes,
                cuda_visible_bytes: group.cuda_visible_bytes,
                usable_bytes,
                weights_bytes: held.weights_bytes,
                buffers_bytes: held.buffers_bytes,
                kv_cache_bytes: held.kv_cache_bytes,
                activation_bytes: held.activation_bytes,
                non_torch_bytes: held.non_torch_bytes,
                total_bytes: held.total_bytes,
                headroom_bytes: i64::try_from(i128::from(usable_bytes) - i128::from(held.total_bytes))
                    .unwrap_or(i64::MIN),
                fits: !lower_bound && held.total_bytes <= usable_bytes,
            };
            per_device.extend((0..group.count).map(|_| device.clone()));
        }
        let usable = smallest.map_or(0, |g| target.usable_of(g));
        // What the engine would give its KV pool: its budget less everything else it holds.
        let pool = usable.checked_sub(held.total_bytes.saturating_sub(held.kv_cache_bytes));
        if engine != MemoryEngine::LlamaCpp {
            kv_pool_bytes = Some(pool.unwrap_or(0));
        }
        if let ([sizing], Some(pool)) = (sizings, pool)
            && !refused
        {
            (kv_pool_tokens, max_concurrency) = sizing.capacity(pool, &target);
        }
        let longest = sizings.iter().map(|s| s.max_context).min().unwrap_or(0);
        let fits_at = |context: u64| per_rank_at(Some(context), &target).is_some_and(|r| r.total_bytes <= usable);
        if !refused {
            let fitting = largest_passing(longest, fits_at);
            max_context_that_fits = Some(fitting);
            max_context_limited_by = Some(match fitting == longest {
                true => LimitedBy::Model,
                false => LimitedBy::Memory,
            });
        }
    }
    let all_fit = per_device.iter().all(|d| d.total_bytes <= d.usable_bytes);
    // A refused artifact's figures are lower bounds: they can prove a plan does not fit,
    // never that it does.
    let fits = match (per_device.is_empty(), refused, all_fit) {
        (true, _, _) => None,
        (false, true, true) => None,
        (false, _, all_fit) => Some(all_fit),
    };
    let tight = per_device
        .iter()
        .filter(|d| d.fits && i128::from(d.headroom_bytes) * 100 < i128::from(d.usable_bytes) * i128::from(TIGHT_FIT_PERCENT))
        .min_by_key(|d| d.headroom_bytes)
        .map(|d| {
            format!(
                "{} fits with {} to spare of its {} usable, under {TIGHT_FIT_PERCENT}%: a longer prompt, a larger batch or another engine version may not",
                d.device,
                crate::findings::size(u64::try_from(d.headroom_bytes).unwrap_or(0)),
                crate::findings::size(d.usable_bytes)
            )
        });
    let memory = Memory {
        engine: engine.runtime(),
        sequences: options.sequences.unwrap_or(1),
        tensor_parallel: options.tensor_parallel_degree(),
        data_parallel: options.data_parallel_degree(),
        expert_parallel: options.expert_parallel_degree(engine),
        gpu_utilization: match engine {
            MemoryEngine::Vllm => options.utilization().into(),
            MemoryEngine::Sglang => {
                let capacity = smallest.map_or(0, |g| g.capacity_bytes);
                sglang::fraction(options, capacity, options.tensor_parallel_degree()).into()
            }
            MemoryEngine::LlamaCpp => 1.0,
        },
        weights_bytes: sum(|r| r.weights_bytes),
        buffers_bytes: sum(|r| r.buffers_bytes),
        kv_cache_bytes_per_token: sum(|r| r.kv_cache_bytes_per_token),
        kv_cache_bytes: sum(|r| r.kv_cache_bytes),
        activation_bytes: sum(|r| r.activation_bytes),
        non_torch_bytes: sum(|r| r.non_torch_bytes),
        total_bytes: sum(|r| r.total_bytes),
        per_rank,
        kv_pool_bytes,
        kv_pool_tokens,
        max_concurrency,
        per_device,
        fits,
        does_not_run: None,
        max_context_that_fits,
        max_context_limited_by,
        throughput_bounds: None,
    };
    (memory, tight)
}

impl Sizing {
    /// The KV pool's size in tokens as the engine reports it, and how many requests of the
    /// planned context it holds at once.
    fn capacity(&self, pool_bytes: u64, target: &Target) -> (Option<u64>, Option<f64>) {
        match target.engine {
            MemoryEngine::Vllm => match self.pool(target) {
                Ok(pool) => {
                    let blocks = pool.blocks(pool_bytes);
                    (
                        Some(pool.tokens(blocks)),
                        Some(pool.max_concurrency(blocks, self.context)),
                    )
                }
                Err(_) => (None, None),
            },
            MemoryEngine::Sglang => {
                // Bytes a token costs the full pool and, for a hybrid SWA model, the SWA pool.
                let per_token = |windowed: bool| {
                    self.caches
                        .iter()
                        .filter(|c| !c.kind.is_state() && c.cap.is_some() == windowed)
                        .map(|c| c.per_token_rank.saturating_mul(c.layers))
                        .fold(0u64, u64::saturating_add)
                };
                // A drafter's layers cost the full pool what SGLang estimates for them.
                let full = match self.speculative {
                    Some(_) => speculative::sglang_cell(self).saturating_sub(per_token(true)),
                    None => per_token(false),
                };
                // A Mamba or linear-attention model's state slots take their share first.
                let state: u64 = self
                    .caches
                    .iter()
                    .filter(|c| c.kind.is_state())
                    .map(|c| c.per_sequence_rank.saturating_mul(c.layers))
                    .fold(0u64, u64::saturating_add);
                let kv_bytes = pool_bytes.saturating_sub(sglang::state_pool_bytes(pool_bytes, state));
                let held = self.context.saturating_add(speculative::sglang_lookahead(self));
                let per_request = self.kv(held, true) / self.sequences.max(1);
                (
                    sglang::pool_tokens(kv_bytes, full, per_token(true)),
                    (per_request > 0).then(|| pool_bytes as f64 / per_request as f64),
                )
            }
            // llama.cpp has no pool: it allocates `n_ctx × n_seq` cells up front, and the
            // memory block shows exactly that.
            MemoryEngine::LlamaCpp => (None, None),
        }
    }
}

/// The largest `n` in `1..=upper` with `passes(n)`, or 0 when none does, for a `passes`
/// that holds up to some point and fails after it (memory only grows with context).
/// Binary search over the exact function, so sliding windows are honoured, not assumed away.
pub fn largest_passing(upper: u64, passes: impl Fn(u64) -> bool) -> u64 {
    // Nothing fits at all is common (a device too small) and costs one try, not a search.
    if upper == 0 || !passes(1) {
        return 0;
    }
    let (mut lo, mut hi) = (1u64, upper);
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if passes(mid) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    lo
}

#[cfg(test)]
mod tests {
    /// One version per engine per answer: the support data (`runtimes`) must be read from
    /// the release whose memory rules are modelled, or a regeneration moved one without the other.
    #[test]
    fn memory_rules_and_support_data_follow_the_same_release() {
        for engine in [MemoryEngine::Vllm, MemoryEngine::Sglang, MemoryEngine::LlamaCpp] {
            assert_eq!(
                engine.modelled_version(),
                crate::runtimes::version(engine.runtime()),
                "{engine}"
            );
        }
    }

    use super::*;

    #[test]
    fn largest_passing_finds_the_boundary() {
        for boundary in [0u64, 1, 2, 7, 1000, 4095, 4096] {
            assert_eq!(largest_passing(4096, |n| n <= boundary), boundary.min(4096));
        }
        assert_eq!(largest_passing(u64::MAX, |n| n < u64::MAX), u64::MAX - 1);
        assert_eq!(largest_passing(0, |_| true), 0);
    }

    #[test]
    fn what_if_rates_round_up_and_leave_non_linear_parts_as_stored() {
        let share = Share {
            params: 1000,
            bytes: 2000,
        };
        assert_eq!(part_bytes(Component::Mlp, share, None), 2000);
        assert_eq!(part_bytes(Component::Mlp, share, Some(WeightsDtype::Fp8)), 1000);
        assert_eq!(part_bytes(Component::Mlp, share, Some(WeightsDtype::Int4)), 520); // 1000 × 133/256
        assert_eq!(part_bytes(Component::Embedding, share, Some(WeightsDtype::Int4)), 2000);
        assert_eq!(part_bytes(Component::Embedding, share, Some(WeightsDtype::F32)), 4000);
        assert_eq!(part_bytes(Component::Buffer, share, Some(WeightsDtype::F32)), 2000);
    }
}
