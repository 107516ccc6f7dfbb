#![no_main]
//! `cargo +nightly fuzz run safetensors fuzz/corpus/safetensors` (see ../README.md).

#[path = "../seeds.rs"]
mod seeds;

libfuzzer_sys::fuzz_target!(|data: &[u8]| seeds::run("safetensors", data));
