//! llama.cpp, at the llama-cpp-python release whose vendored tree (commit 0c1e570) its rules
//! follow: names, knobs, memory accounting (`memory.rs`, with the ggml-alloc replay in
//! `ggml.rs`) and runtime support (`runtime.rs`). It places layers, not tensors, and
//! allocates `n_ctx × n_seq` cells up front: no ranks, no pool.

pub(crate) mod ggml;
mod graphs;
pub(crate) mod memory;
pub(crate) mod offload;
pub(crate) mod runtime;

use crate::memory::{Backends, DraftRules, ServingEngine, Sizing, Target, Whole, exact_cache_use};
use crate::model::Mixer;
use crate::options::{ComputeDtype, ContextFit, OptionsError, PlanOptions, Speculative};
use crate::verdict::Engine;

pub(crate) struct LlamaCpp;

/// Drafting is refused before planning ([`ServingEngine::refuse`]): nothing drafts.
const DRAFTING: DraftRules = DraftRules {
    mtp_model_types: &[],
    mtp_tokens_multiple_of_layers: false,
    eagle3_targets: None,
    mtp_shares_embedding_and_head: false,
    d2t_on_host: false,
    builds_missing_embedding: false,
    lookahead: |spec: Speculative| spec.tokens,
};

fn refused(option: &'static str, message: String) -> Result<(), OptionsError> {
    Err(OptionsError { option, message })
}

impl ServingEngine for LlamaCpp {
    fn engine(&self) -> Engine {
        Engine::LlamaCpp
    }

    fn names(&self) -> &'static [&'static str] {
        &["llama.cpp", "llama_cpp", "llamacpp"]
    }

    fn modelled_version(&self) -> &'static str {
        "0.3.36"
    }

    fn knobs_given(&self, options: &PlanOptions) -> Vec<&'static str> {
        [
            ("batch", options.batch.is_some()),
            ("ubatch", options.ubatch.is_some()),
            ("flash_attn", options.flash_attn.is_some()),
            ("gpu_layers", options.gpu_layers.is_some()),
            ("kv_unified", options.kv_unified),
            ("swa_full", options.swa_full),
            ("n_cpu_moe", options.n_cpu_moe.is_some()),
            ("override_tensor", !options.override_tensor.is_empty()),
            ("no_kv_offload", options.no_kv_offload),
            ("split_mode", options.split_mode.is_some()),
            ("tensor_split", options.tensor_split.is_some()),
            ("fit", options.fit.is_some()),
            ("host_memory", options.host_memory.is_some()),
        ]
        .into_iter()
        .filter_map(|(name, given)| given.then_some(name))
        .collect()
    }

    /// llama.cpp computes in the GGUF's types, splits layers, not experts, and drafts with a
    /// separate model preflight does not plan.
    fn refuse(&self, options: &PlanOptions) -> Result<(), OptionsError> {
        if options.dtype.is_some() {
            return refused(
                "dtype",
                "llama.cpp computes in the types the GGUF stores; `dtype` is vLLM's and SGLang's".into(),
            );
        }
        if options.expert_parallel {
            return refused(
                "expert_parallel",
                "llama.cpp splits layers between devices, not experts: it has no expert parallelism".into(),
            );
        }
        if options.data_parallel.is_some() {
            return refused(
                "data_parallel",
                "llama.cpp splits layers between devices: it has no data parallelism (`data_parallel` is vLLM's and SGLang's)".into(),
            );
        }
        if options.speculative.is_some() {
            return refused(
                "speculative",
                format!(
                    "llama.cpp's speculative decoding (a separate draft model, --model-draft) is not modelled for llama.cpp {}; plan with --engine vllm or sglang",
                    self.modelled_version()
                ),
            );
        }
        Ok(())
    }

    fn drafting(&self) -> &'static DraftRules {
        &DRAFTING
    }

    /// Recurrent state (conv r and SSM s rows) in F32 whatever the model's dtype.
    fn state_dtype(&self, _compute: ComputeDtype) -> ComputeDtype {
        ComputeDtype::F32
    }

    fn as_run(&self, mixer: Mixer) -> Mixer {
        memory::engine_mixer(mixer)
    }

    fn splits_tensors(&self) -> bool {
        false
    }

    /// All of it.
    fn usable(&self, _options: &PlanOptions, capacity: u64) -> u64 {
        capacity
    }

    fn budget_share(&self, _options: &PlanOptions, _capacity: u64) -> f64 {
        1.0
    }

    /// What a device holds: everything on the CPU backend; with devices, the busiest one's
    /// weights, cells and compute buffer (each device's are `memory.per_device`).
    fn rank_terms(&self, sizing: &Sizing, _rank_weights: u64, context: u64, target: &Target) -> Option<[u64; 5]> {
        if target.device.is_none() {
            let b = memory::buffers(sizing, context, target);
            return Some([b.weights, 0, b.kv, b.compute.saturating_add(b.output), 0]);
        }
        let placed = self.backends(sizing, context, target, &usable(target), false)?;
        let busiest = placed
            .devices
            .iter()
            .max_by_key(|d| d.total())
            .copied()
            .unwrap_or_default();
        Some([busiest.weights, 0, busiest.kv, busiest.compute, 0])
    }

    /// Tensors, cells and compute buffers on each backend, as `load_tensors` and the fit
    /// place them (`offload.rs`).
    fn backends(&self, sizing: &Sizing, context: u64, target: &Target, usable: &[u64], full: bool) -> Option<Backends> {
        if sizing.lower_bound || usable.is_empty() {
            return None;
        }
        let (ctx, compute, output) = memory::reserved(sizing, context, target);
        let placer = offload::Placer::new(sizing, target.options, ctx, compute, output, usable.to_vec());
        let (layout, fit) = placer.resolve(full);
        let mut placed = placer.place(&layout);
        placed.fit_left_devices_empty = fit == offload::Fit::Fitted && placed.gpu_layers == 0;
        placed.fit = Some(match fit {
            offload::Fit::Off => "off".to_owned(),
            offload::Fit::Unchanged => "unchanged: every device keeps llama.cpp's 1 GiB margin as asked".to_owned(),
            offload::Fit::ContextLowered => {
                "context lowered: llama.cpp's fit lowered the context nobody set until the layers fit as asked (common/fit.cpp l.373–440)".to_owned()
            }
            offload::Fit::Fitted => "fitted: llama.cpp's fit chose the layers (common/fit.cpp)".to_owned(),
            offload::Fit::NotRun(why) => format!("not run ({why}): llama.cpp warns and loads as asked"),
        });
        Some(placed)
    }

    /// `n_ctx` 0 is the trained context (llama-context.cpp:133), which every sequence shares
    /// unified or with `--fit off` (`n_ctx_seq = n_ctx / n_seq_max`, l.292-296); the fit first
    /// makes it the trained context a stream (common/fit.cpp l.270-276).
    fn default_context(&self, trained: u64, options: &PlanOptions) -> u64 {
        let sequences = options.sequences.unwrap_or(1).max(1);
        match options.kv_unified || options.fit == Some(false) {
            true => (trained / sequences).max(1),
            false => trained,
        }
    }

    /// llama.cpp's fit, step 2: with no context asked for, n_ctx is the trained context a
    /// stream (`n_ctx_max`), lowered toward `fit_params_min_ctx` a stream when the layout as
    /// asked does not fit (`Placer::lowered_context`).
    fn fits_context(&self, options: &PlanOptions) -> bool {
        options.context.is_none() && options.fit != Some(false)
    }

    fn fit_context(&self, sizing: &Sizing, target: &Target, usable: &[u64]) -> Option<ContextFit> {
        let options = target.options;
        if sizing.lower_bound || usable.is_empty() {
            return None;
        }
        let sequences = sizing.sequences.max(1);
        let streams = match memory::Knobs::resolve(options).kv_unified {
            true => 1,
            false => sequences,
        };
        // `--context` counts a sequence's tokens; llama.cpp's n_ctx, all of theirs.
        let placer_at = |n_ctx: u64| {
            let (ctx, compute, output) = memory::reserved(sizing, n_ctx / sequences, target);
            offload::Placer::new(sizing, options, ctx, compute, output, usable.to_vec())
        };
        let n_ctx_max = sizing.max_context.saturating_mul(streams);
        let n_ctx_min = offload::FIT_MIN_CONTEXT.saturating_mul(streams);
        let (n_ctx, settled) = placer_at(n_ctx_max).lowered_context(n_ctx_max, n_ctx_min, placer_at)?;
        Some(ContextFit {
            from: n_ctx_max / sequences,
            context: n_ctx / sequences,
            settled,
        })
    }

    /// Whole 256-cell streams, and windows of a micro-batch more.
    fn cache_use(&self, sizing: &Sizing, context: u64, target: &Target) -> Vec<(Option<u64>, u64)> {
        if sizing.lower_bound {
            return exact_cache_use(sizing, context, context);
        }
        let cells = memory::Context::new(context, sizing.sequences, &memory::Knobs::resolve(target.options));
        sizing
            .caches
            .iter()
            .map(|c| {
                let tokens = (!c.kind.is_state()).then(|| cells.cells_of(c));
                (tokens, cells.layer_bytes(c).saturating_mul(c.layers))
            })
            .collect()
    }

    /// The compute buffers and the output buffer, wherever they sit, and host RAM.
    fn whole(&self, sizing: &Sizing, context: u64, target: &Target) -> Option<Whole> {
        if sizing.lower_bound {
            return None;
        }
        if target.device.is_some()
            && let Some(placed) = self.backends(sizing, context, target, &usable(target), false)
        {
            let sum = |f: fn(&crate::memory::BackendTerms) -> u64| {
                placed
                    .devices
                    .iter()
                    .fold(f(&placed.host), |acc, d| acc.saturating_add(f(d)))
            };
            return Some(Whole {
                activation_bytes: sum(|t| t.compute.saturating_add(t.output)),
                host_bytes: placed.host.total(),
                weights_bytes: Some(sum(|t| t.weights)),
                activation_estimated: sizing.llama_cpp_graph.is_none() || placed.estimated,
            });
        }
        let buffers = memory::buffers(sizing, context, target);
        Some(Whole {
            activation_bytes: buffers.compute.saturating_add(buffers.output),
            host_bytes: buffers.host,
            weights_bytes: Some(buffers.weights),
            activation_estimated: sizing.llama_cpp_graph.is_none(),
        })
    }

    fn reports_pool(&self) -> bool {
        false
    }
}

/// Each device's usable bytes, in `devices` order.
fn usable(target: &Target) -> Vec<u64> {
    target.options.devices.as_ref().map_or_else(Vec::new, |d| {
        d.groups()
            .iter()
            .flat_map(|g| std::iter::repeat_n(target.usable_of(g), usize::try_from(g.count).unwrap_or(0)))
            .collect()
    })
}
