//! Memory and fit: what serving a checkpoint takes — weights, KV cache, activations — per
//! tensor-parallel rank and per named device, and the longest context that fits. Pure
//! arithmetic on the architecture and the weights' layout; `docs/memory.md` gives every
//! formula and the engine code it follows. **Fails closed:** when an artifact's memory
//! cannot be known, it gets a `memory.unavailable` finding, never a guessed number.
//!
//! The core is engine-blind: what an engine does differently is asked of its unit
//! (`engines/`, [`MemoryEngine::unit`]). By concern: `cache.rs` what each layer caches,
//! `weights.rs` what each rank holds of the weights, `shape.rs` the widths activations are
//! sized by, `system.rs` every artifact together on the devices; this file prepares one
//! artifact ([`prepare`]) and reports its figures ([`Sizing::report`]).

mod buffers;
mod cache;
mod engine;
mod shape;
pub(crate) mod speculative;
mod system;
mod weights;

pub(crate) use buffers::rope_table_bytes;
pub(crate) use cache::LayerCache;
pub(crate) use engine::{Backend, BackendTerms, Backends, DraftRules, ServingEngine, Whole, WiderSplit, rank_memory};
pub use shape::Replays;
pub(crate) use shape::{GraphShape, Shape};
pub use system::{Target, engine_for, fit_context, fits_as_planned, system};
pub(crate) use weights::part_bytes;
pub use weights::{NamedTensor, Share, WeightsLayout};

use crate::findings::{Code, Findings};
use crate::model::Model;
use crate::options::{ComputeDtype, Devices, KvDtype, MemoryEngine, PlanOptions, WeightsDtype};
use crate::verdict::{ArtifactMemory, Component, Format, KvCacheGroup, Parameters, RankMemory};
use cache::layer_cache;
use weights::{tensor_parallel_split, weights_bytes};

/// What sizing one artifact needs beyond its architecture.
pub struct Inputs<'a> {
    pub model: Option<&'a Model>,
    pub format: Format,
    pub parameters: &'a Parameters,
    pub layout: &'a WeightsLayout,
    /// The weights as stored: all that is certain when the architecture is refused.
    pub weights_bytes: u64,
    /// llama.cpp compute buffers replayed so far for this artifact, shared by every sizing of it.
    pub replays: std::sync::Arc<Replays>,
    /// A blocking finding was made before sizing: the figures stand, but they may rest on a
    /// header that lies (a key that understates its tensors), so they never prove a fit.
    pub untrusted: bool,
}

/// One artifact, prepared so its figures can be taken at any context.
#[derive(Debug, Clone)]
pub struct Sizing {
    pub(crate) context: u64,
    pub(crate) max_context: u64,
    pub(crate) sequences: u64,
    pub(crate) kv_dtype: KvDtype,
    pub(crate) weights_dtype: Option<WeightsDtype>,
    pub(crate) weights: u64,
    pub(crate) caches: Vec<LayerCache>,
    pub(crate) shape: Shape,
    pub(crate) tensor_parallel: u64,
    /// `None` when the model cannot be split at this tensor-parallel degree.
    pub(crate) rank_weights: Option<u64>,
    /// Module buffers every rank keeps whole: vLLM's and SGLang's RoPE tables.
    pub(crate) buffers: u64,
    /// The architecture was refused: only the stored weights are known, as a lower bound.
    pub(crate) lower_bound: bool,
    /// See [`Inputs::untrusted`].
    pub(crate) untrusted: bool,
    /// Each decoder layer's group in `caches` (`None`: it caches nothing), in layer order.
    pub(crate) layer_groups: Vec<Option<usize>>,
    /// Each decoder layer's weight bytes, and the token embedding's.
    pub(crate) layer_weights: Vec<u64>,
    pub(crate) embedding_weights: u64,
    /// No stored lm_head: the output layer is the token embedding again.
    pub(crate) tied_output: bool,
    /// The GGUF's tensors by name (empty for safetensors): what llama.cpp loads and places one
    /// by one (an MTP block only when asked for).
    pub(crate) named: std::sync::Arc<[NamedTensor]>,
    /// The graph llama.cpp builds, where its compute buffer is replayed.
    pub(crate) llama_cpp_graph: Option<crate::model::LlamaCppGraph>,
    pub(crate) replays: std::sync::Arc<Replays>,
    /// Speculative decoding's drafter, folded in: its weights, buffers and KV layers are in
    /// the figures above; these are its terms (`speculative.rs`).
    pub(crate) speculative: Option<speculative::Terms>,
}

/// Each layer cache held token for token: the tokens a sequence keeps in it at `context`
/// (`None` for state) and its bytes on one rank when every request holds `held` tokens.
pub(crate) fn exact_cache_use(sizing: &Sizing, context: u64, held: u64) -> Vec<(Option<u64>, u64)> {
    sizing
        .caches
        .iter()
        .map(|c| {
            (
                (!c.kind.is_state()).then(|| c.tokens(context)),
                c.bytes(held, sizing.sequences, true),
            )
        })
        .collect()
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
    let unit = engine.unit();
    let expert_parallel = options.expert_parallel_degree(engine);
    // The degree one expert's width is sliced by: none under expert parallelism.
    let expert_width_degree = match expert_parallel {
        Some(_) => 1,
        None => unit.expert_width_ranks(options),
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
    let buffers = unit.buffer_bytes(&model.rope, compute);
    // vLLM keeps recurrent state in the model's dtype (`mamba_cache_dtype` "auto",
    // mamba_utils.py `_mamba_state_dtype`), whatever `--kv-cache-dtype` asks of the KV cache.
    let state_base = unit.state_dtype(compute);
    let windows_kept = unit.keeps_windows(model);
    let mut caches: Vec<LayerCache> = Vec::new();
    let mut layer_groups = Vec::with_capacity(layers.len());
    for (layer, mixer) in layers.iter().enumerate() {
        let cache = match layer_cache(unit.as_run(*mixer), kv_dtype, state_base, tp) {
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
    // Components the engine splits wider than the attention (SGLang's data-parallel
    // attention), or why its split of this model is not known.
    let wider = match unit.wider_split(model, options) {
        Ok(wider) => wider,
        Err(why) => return unavailable(findings, "data_parallel", why),
    };
    // A dense MLP split wider must divide by those ranks too.
    let wider_divides = wider.is_none_or(|w| {
        !w.components.contains(&Component::Mlp) || model.intermediate.is_none_or(|i| i.is_multiple_of(w.ranks.max(1)))
    });
    // An engine that splits layers between devices, not tensors, takes any count.
    let kv_projection_excess = match unit.splits_tensors() {
        false => Some(0),
        true => tensor_parallel_split(model, &layers, tp, expert_width_degree).filter(|_| wider_divides),
    };
    // A degree that does not split it leaves `rank_weights` out: placement passes such a
    // count by, and a degree the caller gave is refused before sizing (`check_degree`).
    let context = options
        .context
        .or(options.fitted_context.map(|f| f.context))
        .unwrap_or_else(|| unit.default_context(model.context, options));
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
    let padding = |ranks| unit.expert_padding(model, options, ranks);
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
    let weights = weights_bytes(inputs.layout, options, 1, 0, padding(1), None, None);
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
        .map(|excess| weights_bytes(inputs.layout, options, tp, excess, rank_padding, experts_held, wider));
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
        // llama.cpp loads an MTP block only into an MTP context (`TENSOR_SKIP` otherwise).
        named: match options.include_mtp {
            true => inputs.layout.named.clone(),
            false => inputs.layout.named.iter().filter(|t| !t.mtp).cloned().collect(),
        },
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
        named: Default::default(),
        llama_cpp_graph: None,
        replays: Default::default(),
        speculative: None,
    }
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

impl Sizing {
    /// Whether its tensor-parallel degree splits the model.
    pub fn splits(&self) -> bool {
        self.rank_weights.is_some()
    }

    /// Bytes of the caches for `context` tokens a sequence, on one rank or whole.
    pub(crate) fn kv(&self, context: u64, rank: bool) -> u64 {
        self.caches.iter().fold(0u64, |acc, c| {
            acc.saturating_add(c.bytes(context, self.sequences, rank))
        })
    }

    /// What one rank holds at `context` under the target engine, or `None` when the model
    /// cannot be split (or the engine cannot page its caches).
    pub(crate) fn rank(&self, context: u64, target: &Target) -> Option<RankMemory> {
        let weights_bytes = self.rank_weights?;
        let tp = self.tensor_parallel;
        let terms = match self.lower_bound {
            true => [weights_bytes, self.buffers, 0, 0, 0],
            false => target.engine.unit().rank_terms(self, weights_bytes, context, target)?,
        };
        Some(rank_memory(tp, terms))
    }

    /// This artifact's memory. Placed on ranks (vLLM, SGLang), every figure is one rank's
    /// times the ranks, so the whole is what the devices hold between them; llama.cpp's is
    /// what it allocates, devices and host together.
    pub fn report(&self, target: &Target) -> ArtifactMemory {
        let context = self.context;
        let unit = target.engine.unit();
        // What the engine allocates for the artifact as a whole, where it does not place it on ranks.
        let whole: Option<Whole> = unit.whole(self, context, target);
        let per_rank = self.rank(context, target);
        // Ranks the per-rank figures multiply by — every device named (replicas included),
        // else the deployment's tensor × data parallel ranks; a whole allocation's are whole.
        let options = target.options;
        let ranks = match (unit.splits_tensors(), &per_rank) {
            (false, _) | (_, None) => None,
            (true, Some(rank)) => Some(options.devices.as_ref().map_or_else(
                || {
                    rank.tensor_parallel
                        .max(1)
                        .saturating_mul(options.data_parallel_degree())
                },
                Devices::count,
            )),
        };
        let scale = |bytes: u64| bytes.saturating_mul(ranks.unwrap_or(1));
        let uses = unit.cache_use(self, context, target);
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
                    state_dtypes: c.state_dtypes.clone(),
                    tokens_per_sequence: *tokens,
                    bytes: match ranks {
                        Some(_) => scale(*bytes),
                        // Unplaced: the whole model's cache (a whole allocation's already is).
                        None if whole.is_some() => *bytes,
                        None => c.bytes(context, self.sequences, false),
                    },
                    draft_layers: c.draft_layers,
                }
            })
            .collect();
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
                    let activation = whole.map_or(0, |w| w.activation_bytes);
                    let weights = whole.and_then(|w| w.weights_bytes).unwrap_or(self.weights);
                    let total = [kv, activation].into_iter().fold(weights, u64::saturating_add);
                    (weights, 0, kv, activation, 0, total)
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
            host_bytes: whole.map(|w| w.host_bytes),
            speculative,
            per_rank,
            estimated: match whole.is_some_and(|w| w.activation_estimated) {
                true => vec!["activation_bytes".to_owned()],
                false => Vec::new(),
            },
        }
    }
}
