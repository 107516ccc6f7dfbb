//! Properties the memory plan keeps on every bundled checkpoint whatever the options:
//! KV bytes never shrink as context or sequences grow, `fits` is exactly "every device's
//! total within its usable bytes", and `max_context_that_fits` is where `fits` stops.

use preflight_plan::Verdict;
use proptest::prelude::*;

use crate::support::plan_with;

/// Small enough to plan many times; together every attention kind but MLA (whose sizing is
/// pinned by hand in `kv.rs`), GQA, sliding windows, MoE and GGUF.
const REPOS: &[&str] = &[
    "meta-llama/Llama-3.1-8B",
    "Qwen/Qwen3-0.6B",
    "openai/gpt-oss-20b",
    "google/gemma-3-1b-it",
    "microsoft/Phi-3-mini-4k-instruct",
    "Qwen/Qwen3-8B-GGUF",
];

fn plan_at(repo: &str, context: u64, sequences: u64, devices: &str) -> Verdict {
    plan_with(
        &[repo],
        &format!(r#"{{"context": {context}, "sequences": {sequences}, "devices": "{devices}"}}"#),
    )
}

fn kv(repo: &str, context: u64, sequences: u64) -> u64 {
    let v = plan_with(
        &[repo],
        &format!(r#"{{"context": {context}, "sequences": {sequences}}}"#),
    );
    v.memory.expect("memory").kv_cache_bytes
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn kv_never_shrinks_as_context_or_sequences_grow(
        repo in prop::sample::select(REPOS),
        context in 1u64..200_000,
        more_context in 0u64..5_000,
        sequences in 1u64..300,
        more_sequences in 0u64..50,
    ) {
        let base = kv(repo, context, sequences);
        prop_assert!(kv(repo, context + more_context, sequences) >= base);
        prop_assert!(kv(repo, context, sequences + more_sequences) >= base);
    }

    #[test]
    fn fits_is_every_device_within_its_usable_bytes(
        repo in prop::sample::select(REPOS),
        context in 1u64..50_000,
        sequences in 1u64..64,
        capacity in 1u64..64_000_000_000,
        count in 1u64..4,
    ) {
        let v = plan_at(repo, context, sequences, &format!("{capacity}:{count}"));
        let m = v.memory.expect("memory");
        if v.artifacts[0].memory.as_ref().is_some_and(|a| a.per_rank.is_none()) {
            // The heads do not split `count` ways: no placement, no answer.
            prop_assert!(m.per_device.is_empty() && m.fits.is_none());
            return Ok(());
        }
        prop_assert_eq!(m.per_device.len() as u64, count);
        let within = m.per_device.iter().all(|d| d.total_bytes <= d.usable_bytes);
        // llama.cpp's fit finding room for no layer leaves the devices empty: no fit on them.
        let emptied = m.offload.as_ref().is_some_and(|o| o.gpu_layers == 0 && o.fit.starts_with("fitted"));
        prop_assert_eq!(m.fits, Some(within && !emptied));
        for d in &m.per_device {
            prop_assert_eq!(d.fits, d.total_bytes <= d.usable_bytes);
            prop_assert_eq!(d.total_bytes, d.weights_bytes + d.buffers_bytes + d.kv_cache_bytes + d.activation_bytes + d.non_torch_bytes);
        }
        prop_assert_eq!(m.total_bytes, m.weights_bytes + m.buffers_bytes + m.kv_cache_bytes + m.activation_bytes + m.non_torch_bytes);
        // Each device holds one rank as the engine allocates it (whole KV blocks); under
        // llama.cpp each device holds its own layers, and the rank is the busiest device.
        let rank = m.per_rank.as_ref().expect("placed");
        let busiest = m.per_device.iter().map(|d| d.total_bytes).max().unwrap_or(0);
        match m.host {
            Some(_) => prop_assert_eq!(busiest, rank.total_bytes),
            None => prop_assert_eq!(m.per_device[0].total_bytes, rank.total_bytes),
        }
    }

    #[test]
    fn max_context_that_fits_is_the_largest_context_that_fits(
        repo in prop::sample::select(REPOS),
        sequences in 1u64..16,
        capacity in 1_000_000_000u64..40_000_000_000,
    ) {
        let devices = format!("{capacity}:1");
        let m = plan_at(repo, 1, sequences, &devices).memory.expect("memory");
        let longest = m.max_context_that_fits.expect("devices named");
        let model_max = plan_with(&[repo], r#"{"sequences": 1}"#).artifacts[0].memory.as_ref().expect("memory").context;
        let fits = |context: u64| plan_at(repo, context, sequences, &devices).memory.expect("memory").fits;
        if longest > 0 {
            prop_assert_eq!(fits(longest), Some(true));
        } else {
            prop_assert_eq!(fits(1), Some(false));
        }
        if longest < model_max {
            prop_assert_eq!(fits(longest + 1), Some(false));
        }
    }
}
