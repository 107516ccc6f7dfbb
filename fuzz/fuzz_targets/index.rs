#![no_main]
//! `cargo +nightly fuzz run index fuzz/corpus/index` (see ../README.md).

#[path = "../seeds.rs"]
mod seeds;

libfuzzer_sys::fuzz_target!(|data: &[u8]| seeds::run("index", data));
