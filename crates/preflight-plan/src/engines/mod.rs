//! The serving engines preflight plans for, each one module: `vllm/`, `sglang/`,
//! `llama_cpp/` hold an engine's names, the release it models, its knobs, its memory
//! accounting (`memory.rs`) and its runtime rules (`runtime.rs`), behind [`ServingEngine`].
//! `transformers.rs` is judged for loading only: it has no serving memory to plan.
//!
//! **Invariant:** nothing outside this module matches on an engine. The memory core
//! (`crate::memory`), the options and the verdict reach an engine through
//! [`MemoryEngine::unit`], which returns the engine as the [`ServingEngine`] the memory core
//! asks (`memory/engine.rs`); adding one (TensorRT-LLM, say) is a module here, a variant of
//! [`MemoryEngine`] and [`crate::verdict::Engine`], and its extracted data.

pub(crate) mod llama_cpp;
pub(crate) mod sglang;
pub(crate) mod transformers;
pub(crate) mod vllm;

use crate::memory::ServingEngine;
use crate::options::{DeviceGroup, MemoryEngine};
use crate::runtimes::{self, Subject};
use crate::verdict::{Engine, Runtime, Runtimes};

impl MemoryEngine {
    /// Every engine preflight plans memory for.
    pub const ALL: [MemoryEngine; 3] = [MemoryEngine::Vllm, MemoryEngine::Sglang, MemoryEngine::LlamaCpp];

    /// The module that owns this engine's rules: the one place an engine is dispatched on.
    pub(crate) fn unit(self) -> &'static dyn ServingEngine {
        match self {
            MemoryEngine::Vllm => &vllm::Vllm,
            MemoryEngine::Sglang => &sglang::Sglang,
            MemoryEngine::LlamaCpp => &llama_cpp::LlamaCpp,
        }
    }
}

/// The subject's verdict from every engine on `devices` (none: architecture and quantization
/// only). `artifact` numbers the findings' ids.
pub fn judge(artifact: usize, subject: &Subject, devices: &[DeviceGroup]) -> Runtimes {
    let engines = &*runtimes::data::ENGINES;
    let run = |engine: Engine| -> Runtime {
        let outcome = match engine {
            Engine::Vllm => {
                vllm::runtime::judge(engines, subject, devices).without_metal(devices, vllm::runtime::ON_METAL)
            }
            Engine::Sglang => {
                sglang::runtime::judge(engines, subject, devices).without_metal(devices, sglang::runtime::ON_METAL)
            }
            Engine::LlamaCpp => llama_cpp::runtime::judge(engines, subject),
            Engine::Transformers => transformers::judge(engines, subject, devices),
        };
        runtimes::assemble(artifact, engine, outcome, devices)
    };
    Runtimes {
        vllm: run(Engine::Vllm),
        sglang: run(Engine::Sglang),
        llama_cpp: run(Engine::LlamaCpp),
        transformers: run(Engine::Transformers),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One version per engine per answer: the support data (`runtimes`) must be read from
    /// the release whose memory rules are modelled, or a regeneration moved one without the other.
    #[test]
    fn memory_rules_and_support_data_follow_the_same_release() {
        for engine in MemoryEngine::ALL {
            assert_eq!(
                engine.modelled_version(),
                crate::runtimes::version(engine.runtime()),
                "{engine}"
            );
        }
    }

    /// Every name an engine answers to is its own: the table `--engine` reads is built from
    /// the units, so two engines must never claim one name.
    #[test]
    fn no_two_engines_share_a_name() {
        let names: Vec<&str> = MemoryEngine::ALL
            .iter()
            .flat_map(|e| e.unit().names())
            .copied()
            .collect();
        let mut unique = names.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), names.len(), "{names:?}");
    }
}
