#![no_main]
//! `cargo +nightly fuzz run gguf fuzz/corpus/gguf`: see `preflight_plan::fuzz::gguf`'s target.

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use preflight_plan::fuzz::{Seeds, TARGETS};

fn seeds() -> &'static Seeds {
    static SEEDS: OnceLock<Seeds> = OnceLock::new();
    SEEDS.get_or_init(|| {
        Seeds::new(
            include_bytes!("../../fixtures/local/tiny-llama/config.json"),
            include_bytes!("../../fixtures/local/tiny-llama/model.safetensors"),
        )
    })
}

fuzz_target!(|data: &[u8]| {
    let (_, target) = TARGETS.iter().find(|(name, _)| *name == "gguf").expect("a target");
    target(data, seeds());
});
