//! What the memory core asks of an engine ([`ServingEngine`]), implemented by each engine's
//! module under `engines/`: the core is engine-blind, and the engines depend on it,
//! never the other way round.

use super::{Sizing, Target, exact_cache_use};
use crate::model::{Mixer, Model, Rope};
use crate::options::{ComputeDtype, ContextFit, DeviceGroup, OptionsError, PlanOptions, Speculative};
use crate::verdict::{Component, Engine, RankMemory};
use crate::workload::Scheduler;

/// One engine's rules. Defaults are what vLLM and SGLang share (tensor parallelism over
/// ranks, a KV pool from a budget); an engine overrides where its source differs.
pub(crate) trait ServingEngine: Sync {
    /// The engine as the verdict names it (`runtimes.<key>`, `engines.<key>.version`).
    fn engine(&self) -> Engine;

    /// Names `--engine` accepts, the canonical one first.
    fn names(&self) -> &'static [&'static str];

    /// The release whose memory rules this module follows: the only one `ENGINE@VERSION`
    /// accepts, and the one its support data is read from.
    fn modelled_version(&self) -> &'static str;

    /// Releases whose rules were read and cannot be planned from metadata, each with why.
    fn not_offered(&self) -> &'static [(&'static str, &'static str)] {
        &[]
    }

    /// Which of the options given are this engine's own knobs (JSON names).
    fn knobs_given(&self, options: &PlanOptions) -> Vec<&'static str>;

    /// Options the engine has no counterpart of, refused before any work.
    fn refuse(&self, _options: &PlanOptions) -> Result<(), OptionsError> {
        Ok(())
    }

    /// Ranks the experts are spread over whole under expert parallelism.
    fn expert_parallel_ranks(&self, options: &PlanOptions) -> u64 {
        options.tensor_parallel_degree()
    }

    /// Ranks one expert's width is sliced over without expert parallelism.
    fn expert_width_ranks(&self, options: &PlanOptions) -> u64 {
        options.tensor_parallel_degree().max(1)
    }

    /// Sharded weight components the engine splits over more ranks than the tensor-parallel
    /// degree (which splits the attention projections and the KV heads), and over how many:
    /// `Ok(None)` when every sharded component follows the tensor-parallel degree; `Err`
    /// says why the engine's split of this model is not known (SGLang's data-parallel
    /// attention).
    fn wider_split(&self, _model: &Model, _options: &PlanOptions) -> Result<Option<WiderSplit>, String> {
        Ok(None)
    }

    /// What drafting with this engine holds and refuses.
    fn drafting(&self) -> &'static DraftRules;

    /// Module buffers every rank keeps whole (RoPE tables), for a model computing in `compute`.
    fn buffer_bytes(&self, _ropes: &[Rope], _compute: ComputeDtype) -> u64 {
        0
    }

    /// The dtype recurrent state is kept in when the config pins none.
    fn state_dtype(&self, compute: ComputeDtype) -> ComputeDtype {
        compute
    }

    /// A layer as the engine runs it (llama.cpp turns some windows off).
    fn as_run(&self, mixer: Mixer) -> Mixer {
        mixer
    }

    /// Whether sliding-window layers keep only their window.
    fn keeps_windows(&self, _model: &Model) -> bool {
        true
    }

    /// Whether the engine splits tensors over ranks (and so needs the model to divide), or
    /// splits layers between devices, which any count does.
    fn splits_tensors(&self) -> bool {
        true
    }

    /// (allocated, stored) scale of routed experts the engine pads, on `ranks` ranks.
    fn expert_padding(&self, _model: &Model, _options: &PlanOptions, _ranks: u64) -> Option<(u64, u64)> {
        None
    }

    /// Bytes of a device of `capacity` the engine lets the plan fill.
    fn usable(&self, options: &PlanOptions, capacity: u64) -> u64;

    /// That share, as the verdict's `gpu_utilization`.
    fn budget_share(&self, options: &PlanOptions, capacity: u64) -> f64;

    /// What one rank holds at `context`: weights, buffers, the requests' cache as the engine
    /// holds it, activations, non-torch. `None` when the engine cannot page the caches.
    /// Called only for a sizing whose architecture is known and splits; an engine that
    /// allocates the artifact [`Whole`] gives what the target device holds of it.
    fn rank_terms(&self, sizing: &Sizing, rank_weights: u64, context: u64, target: &Target) -> Option<[u64; 5]>;

    /// Each layer cache as the engine holds it at `context`: tokens a sequence keeps in it
    /// (`None` for state) and its bytes, on one rank or, for [`Whole`], in all.
    fn cache_use(&self, sizing: &Sizing, context: u64, _target: &Target) -> Vec<(Option<u64>, u64)> {
        exact_cache_use(sizing, context, context)
    }

    /// What the engine allocates for the whole artifact when it does not place it on ranks
    /// (llama.cpp: devices and host together); `None` when the figures are a rank's times the
    /// ranks.
    fn whole(&self, _sizing: &Sizing, _context: u64, _target: &Target) -> Option<Whole> {
        None
    }

    /// The scheduler's limits on `device` with a pool of `pool_tokens` (per replica), for the
    /// performance estimate; `None` where the engine's scheduling is not modelled.
    fn scheduler(
        &self,
        _options: &PlanOptions,
        _device: &DeviceGroup,
        _pool_tokens: u64,
        _context: u64,
    ) -> Option<Scheduler> {
        None
    }

    /// Whether the engine reports a KV pool (llama.cpp allocates `n_ctx × n_seq` cells instead).
    fn reports_pool(&self) -> bool {
        true
    }

    /// The KV pool's size in tokens as the engine reports it, and how many requests of the
    /// planned context it holds at once.
    fn capacity(&self, _sizing: &Sizing, _pool_bytes: u64, _target: &Target) -> (Option<u64>, Option<f64>) {
        (None, None)
    }

    /// The engine's own placement over `usable` devices (each's usable bytes, in `devices`
    /// order) when it does not hold one rank a device (llama.cpp: tensors, KV cache and
    /// compute buffers per backend, host RAM apart). `full`: a placement search asks whether
    /// every layer fits the devices. `None`: every device holds one rank.
    fn backends(
        &self,
        _sizing: &Sizing,
        _context: u64,
        _target: &Target,
        _usable: &[u64],
        _full: bool,
    ) -> Option<Backends> {
        None
    }

    /// Tokens a sequence when no `context` is given: the model's trained context.
    fn default_context(&self, trained: u64, _options: &PlanOptions) -> u64 {
        trained
    }

    /// Whether the engine's own fit may lower the context under these options (then
    /// `fit_context` says to what): asked before anything is sized for it.
    fn fits_context(&self, _options: &PlanOptions) -> bool {
        false
    }

    /// The context the engine itself lowers an unset `context` to on `usable` devices
    /// (llama.cpp's fit); `None` when it keeps the model's.
    fn fit_context(&self, _sizing: &Sizing, _target: &Target, _usable: &[u64]) -> Option<ContextFit> {
        None
    }

    /// A drafter's lookahead cache and activation, on one rank.
    fn draft_overheads(&self, _sizing: &Sizing, _target: &Target) -> (u64, u64) {
        (0, 0)
    }
}

/// Weight components split over `ranks` ranks rather than the tensor-parallel degree.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WiderSplit {
    pub ranks: u64,
    pub components: &'static [Component],
}

/// A backend: host RAM, or the i-th device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Backend {
    Host,
    Device(usize),
}

/// What one backend holds of an artifact.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct BackendTerms {
    pub weights: u64,
    pub kv: u64,
    pub compute: u64,
    /// The output buffer (host only).
    pub output: u64,
    /// Layers assigned to it, the output layer counted as llama.cpp counts it.
    pub layers: u64,
}

impl BackendTerms {
    pub fn total(&self) -> u64 {
        [self.kv, self.compute, self.output]
            .into_iter()
            .fold(self.weights, u64::saturating_add)
    }

    pub fn add(&mut self, other: &BackendTerms) {
        self.weights = self.weights.saturating_add(other.weights);
        self.kv = self.kv.saturating_add(other.kv);
        self.compute = self.compute.saturating_add(other.compute);
        self.output = self.output.saturating_add(other.output);
        self.layers = self.layers.saturating_add(other.layers);
    }
}

/// An artifact over every backend, as an engine that places tensors per device allocates it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Backends {
    /// One per device named, in order (unused ones hold nothing).
    pub devices: Vec<BackendTerms>,
    pub host: BackendTerms,
    /// The compute buffers are estimates (not a replay of the scheduler's split).
    pub estimated: bool,
    /// Layers offloaded, the output layer counted.
    pub gpu_layers: u64,
    /// Offloaded layers whose routed experts stay in host RAM.
    pub expert_layers_on_host: u64,
    /// The engine's flags that load this placement.
    pub command: String,
    /// How the engine's own fit went, said in words.
    pub fit: Option<String>,
    /// The engine's own fit found room for no layer on the devices: the plan does not fit
    /// them (it would run on the CPU alone).
    pub fit_left_devices_empty: bool,
}

/// An artifact the engine allocates whole, not per rank.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Whole {
    /// The compute and output buffers.
    pub activation_bytes: u64,
    /// What stays in host RAM.
    pub host_bytes: u64,
    /// The weights as allocated over every backend, when not as stored (llama.cpp: a tied
    /// embedding's output copy on a device).
    pub weights_bytes: Option<u64>,
    /// The compute buffer is estimated, not a replay of the engine's graph.
    pub activation_estimated: bool,
}

/// What drafting holds and refuses under one engine (`speculative.rs` and
/// `memory/speculative.rs` read it; the source lines are at each engine's table).
#[derive(Debug)]
pub(crate) struct DraftRules {
    /// `model_type`s whose own MTP layers the engine drafts with.
    pub mtp_model_types: &'static [&'static str],
    /// More drafted tokens than MTP layers must be a multiple of them (the layers reused in turn).
    pub mtp_tokens_multiple_of_layers: bool,
    /// Targets an EAGLE-3 head may draft for (`None`: not checked).
    pub eagle3_targets: Option<&'static [&'static str]>,
    /// The MTP layers share the target's embedding and head instead of loading their own.
    pub mtp_shares_embedding_and_head: bool,
    /// An EAGLE-3 head's draft→target map stays on the host until the pool is sized.
    pub d2t_on_host: bool,
    /// An EAGLE-3 head that ships no embedding builds one of its own until the pool is sized.
    pub builds_missing_embedding: bool,
    /// Tokens a request holds beyond its own while drafting.
    pub lookahead: fn(Speculative) -> u64,
}

/// One rank's figures from `[weights, buffers, kv, activation, non_torch]`, with their total.
pub(crate) fn rank_memory(tp: u64, [weights, buffers, kv, activation, non_torch]: [u64; 5]) -> RankMemory {
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
