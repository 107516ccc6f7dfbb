//! Speculative decoding: the option (`mtp:K`, the target's own multi-token-prediction layers
//! drafting K tokens; `eagle3:K`, an EAGLE-3 draft head given as the second source) and what
//! only the read artifacts can decide — whether the engine can draft that way for this
//! target. What the drafter holds is `memory/speculative.rs`; docs/memory.md § Speculative
//! decoding gives every term and the engine lines it follows.
//!
//! Validation has two steps, as for `tensor_parallel`: the value on its own
//! (`Speculative`'s parser in `options.rs`, with the other options in `PlanOptions::validate`), and against
//! the artifacts ([`check`], in `plan`): both are the caller's mistake (exit 2, HTTP 400).

use crate::memory::speculative::Skipped;
use crate::memory::{self, Sizing};
use crate::options::{MemoryEngine, OptionsError, PlanOptions, SpeculativeMethod};
use crate::verdict::{Component, Format};
use crate::{Described, findings::Findings};

fn error(message: impl Into<String>) -> OptionsError {
    OptionsError {
        option: "speculative",
        message: message.into(),
    }
}

/// The index of the artifact read as a draft head: the second source, for EAGLE-3.
pub(crate) fn draft_index(options: &PlanOptions) -> Option<usize> {
    match options.speculative?.method {
        SpeculativeMethod::Eagle3 => Some(1),
        SpeculativeMethod::Mtp => None,
    }
}

/// The sources the option needs, counted before any is read (the CLI checks this first):
/// `mtp`, the one checkpoint whose MTP layers draft; `eagle3`, the target then its draft head.
pub fn check_sources(options: &PlanOptions, sources: usize) -> Result<(), OptionsError> {
    match options.speculative.map(|s| (s.method, sources)) {
        Some((SpeculativeMethod::Mtp, n)) if n != 1 => Err(error(format!(
            "mtp drafts with the checkpoint's own multi-token-prediction layers: give that one source ({n} given)"
        ))),
        Some((SpeculativeMethod::Eagle3, n)) if n != 2 => Err(error(format!(
            "eagle3 needs two sources, the target then its EAGLE-3 draft head ({n} given)"
        ))),
        _ => Ok(()),
    }
}

/// What only the artifacts can say about the option: the right sources, a target the engine
/// can draft for, MTP layers to draft with. `Err` is the caller's mistake (exit 2, HTTP 400).
pub(crate) fn check(described: &[Described], options: &PlanOptions, engine: MemoryEngine) -> Result<(), OptionsError> {
    let Some(spec) = options.speculative else {
        return Ok(());
    };
    let release = |engine: MemoryEngine| format!("{} {}", engine.runtime().label(), engine.modelled_version());
    // llama.cpp's drafting is refused by `PlanOptions::check_engine`, before this.
    check_sources(options, described.len())?;
    match spec.method {
        SpeculativeMethod::Mtp => {
            let [target] = described else {
                return Ok(());
            };
            let Some(model) = &target.model else {
                // The architecture is unknown: its memory is a lower bound, already said.
                return Ok(());
            };
            if model.mtp_layers == 0 {
                return Err(error(format!(
                    "mtp drafts with the checkpoint's own multi-token-prediction layers, and {} declares none (num_nextn_predict_layers / mtp_num_hidden_layers); name an EAGLE-3 draft as a second source with eagle3:{}",
                    target.name, spec.tokens
                )));
            }
            if target.layout.component_bytes(Component::Mtp) == 0 {
                return Err(error(format!(
                    "{} declares {} multi-token-prediction layer(s) but ships none of their tensors: there is nothing to draft with",
                    target.name, model.mtp_layers
                )));
            }
            let rules = engine.unit().drafting();
            let supported = rules.mtp_model_types;
            if !supported.contains(&model.model_type.as_str()) {
                return Err(error(format!(
                    "{} has no MTP drafter for model_type `{}` (it drafts with the MTP layers of {})",
                    release(engine),
                    model.model_type,
                    supported.join(", ")
                )));
            }
            // An engine that reuses the MTP layers in turn needs more tokens than layers to
            // be a multiple of them.
            if rules.mtp_tokens_multiple_of_layers
                && spec.tokens > model.mtp_layers
                && !spec.tokens.is_multiple_of(model.mtp_layers)
            {
                return Err(error(format!(
                    "{} tokens with {} MTP layers: vLLM needs num_speculative_tokens divisible by the layers it reuses (config/speculative.py:562-577)",
                    spec.tokens, model.mtp_layers
                )));
            }
            Ok(())
        }
        SpeculativeMethod::Eagle3 => {
            let [target, draft] = described else {
                return Ok(());
            };
            if draft.format != Format::Safetensors {
                return Err(error(format!(
                    "{}: an EAGLE-3 draft head is read from safetensors (a GGUF is not one)",
                    draft.name
                )));
            }
            if let (Some(targets), Some(model)) = (engine.unit().drafting().eagle3_targets, &target.model)
                && !targets.iter().any(|t| model.model_type.contains(t))
            {
                return Err(error(format!(
                    "{} feeds an EAGLE-3 head the auxiliary hidden states of {} targets only, and {} is `{}` (config/speculative.py:795-822)",
                    release(engine),
                    targets.join(", "),
                    target.name,
                    model.model_type
                )));
            }
            Ok(())
        }
    }
}

/// Every artifact's sizing under `options`, with a drafter folded into its target: MTP layers
/// into their own artifact, an EAGLE-3 head into the first source (its own slot then `None`,
/// its index in `draft`). `findings` is one list an artifact.
pub(crate) struct Prepared {
    pub sizings: Vec<Option<Sizing>>,
    pub draft: Option<usize>,
}

impl Prepared {
    /// The sizings the system sums (the draft's is inside its target's): `None` when some
    /// artifact's memory is unknown.
    pub fn planned(&self) -> Option<Vec<&Sizing>> {
        self.sizings
            .iter()
            .enumerate()
            .filter(|(i, _)| Some(*i) != self.draft)
            .map(|(_, s)| s.as_ref())
            .collect()
    }
}

pub(crate) fn prepare(
    described: &[Described],
    options: &PlanOptions,
    engine: MemoryEngine,
    findings: &mut [Findings],
) -> Prepared {
    let draft = draft_index(options).filter(|i| *i < described.len());
    // The draft head is sized only inside its target: its own context, dtype and placement
    // are the target's engine's.
    let mut sizings: Vec<Option<Sizing>> = described
        .iter()
        .zip(findings.iter_mut())
        .enumerate()
        .map(|(i, (d, f))| match Some(i) == draft {
            true => None,
            false => memory::prepare(&d.inputs(), options, engine, f),
        })
        .collect();
    let (Some(spec), Some(first)) = (options.speculative, described.first()) else {
        return Prepared { sizings, draft };
    };
    let source = match (spec.method, draft) {
        (SpeculativeMethod::Mtp, _) => Some(memory::speculative::Source::Mtp {
            name: first.name.clone(),
            inputs: first.inputs(),
            skipped: first.skipped,
        }),
        (SpeculativeMethod::Eagle3, Some(i)) => Some(memory::speculative::Source::Eagle3 {
            name: described[i].name.clone(),
            inputs: described[i].inputs(),
            skipped: described[i].skipped,
        }),
        (SpeculativeMethod::Eagle3, None) => None,
    };
    let ropes = first.model.as_ref().map_or(&[][..], |m| m.rope.as_slice());
    if let (Some(source), Some(Some(target))) = (source, sizings.first_mut())
        && let Some(why) = memory::speculative::attach(target, ropes, source, spec, options, engine)
    {
        if let Some(f) = findings.first_mut() {
            f.push(crate::findings::Code::MemoryUnavailable, "speculative", why);
        }
        sizings[0] = None;
    }
    Prepared { sizings, draft }
}

/// The draft head's `memory.speculative_draft` finding: where its memory is, and when the
/// planned context is past the head's positions, that vLLM stops drafting there.
pub(crate) fn draft_note(draft: &Described, target: &str, context: Option<u64>) -> String {
    let mut note = format!(
        "planned as the EAGLE-3 draft head of {target}: its weights, RoPE table and KV cache layer are held by the target's engine and counted in that artifact's memory (its `speculative` object)"
    );
    let positions = draft.model.as_ref().map(|m| m.context);
    if let (Some(positions), Some(context)) = (positions, context)
        && positions < context
    {
        note.push_str(&format!(
            "; the head declares {} positions, fewer than the {} planned: vLLM drafts only for batches whose longest sequence plus the draft tokens fits them (its draft max_model_len is the smaller of the two, config/speculative.py:658-693; gpu_model_runner.py:4203-4210), and plain decoding goes on past it",
            crate::findings::grouped(positions),
            crate::findings::grouped(context)
        ));
    }
    note
}

/// [`Skipped`] for one artifact; `first_mtp_layer`: the index its MTP layers start at.
pub(crate) fn scan(facts: &preflight_formats::facts::ArtifactFacts, first_mtp_layer: u64) -> Skipped {
    let preflight_formats::facts::Content::Safetensors { files, .. } = &facts.content else {
        return Skipped::default();
    };
    let mut skipped = Skipped::default();
    let add = |share: &mut memory::Share, tensor: &preflight_formats::safetensors::TensorInfo| {
        let elements = tensor
            .shape
            .iter()
            .try_fold(1u64, |a, d| a.checked_mul(*d))
            .unwrap_or(u64::MAX);
        share.params = share.params.saturating_add(elements);
        share.bytes = share
            .bytes
            .saturating_add(tensor.data_offsets[1].saturating_sub(tensor.data_offsets[0]));
    };
    for tensor in files.iter().flat_map(|f| &f.header.tensors) {
        let name = tensor.name.as_str();
        if (name.ends_with(".embed_tokens.weight") || name.ends_with(".shared_head.head.weight"))
            && layer_index(name).is_some_and(|l| l >= first_mtp_layer)
        {
            add(&mut skipped.mtp_copies, tensor);
        } else if name == "t2d" {
            add(&mut skipped.t2d, tensor);
        } else if name == "d2t" {
            add(&mut skipped.d2t, tensor);
        }
    }
    skipped
}

/// The decoder layer a `model.layers.N.…` name belongs to.
fn layer_index(name: &str) -> Option<u64> {
    let rest = name.strip_prefix("model.layers.")?;
    rest.split('.').next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::Speculative;

    #[test]
    fn the_option_is_method_and_tokens_in_one_canonical_form() {
        let s: Speculative = " EAGLE3:3 ".parse().expect("parse");
        assert_eq!(
            s,
            Speculative {
                method: SpeculativeMethod::Eagle3,
                tokens: 3
            }
        );
        assert_eq!(s.to_string(), "eagle3:3");
        assert_eq!(
            "mtp:1".parse::<Speculative>().map(|s| s.method),
            Ok(SpeculativeMethod::Mtp)
        );
        for bad in ["mtp", "mtp:0", "mtp:129", "medusa:3", "eagle3:x", "eagle3:-1", ":3", ""] {
            let e = bad.parse::<Speculative>().expect_err(bad);
            assert_eq!(e.option, "speculative", "{bad}");
        }
        assert!("eagle3:128".parse::<Speculative>().is_ok());
    }

    #[test]
    fn mtp_copies_of_embedding_and_head_are_found_by_layer() {
        assert_eq!(layer_index("model.layers.61.embed_tokens.weight"), Some(61));
        assert_eq!(layer_index("model.embed_tokens.weight"), None);
        assert_eq!(layer_index("mtp.layers.0.x"), None);
    }
}
