#![no_main]
//! `cargo +nightly fuzz run gguf fuzz/corpus/gguf` (see ../README.md).

#[path = "../seeds.rs"]
mod seeds;

libfuzzer_sys::fuzz_target!(|data: &[u8]| seeds::run("gguf", data));
