#![no_main]
//! `cargo +nightly fuzz run config fuzz/corpus/config` (see ../README.md).

#[path = "../seeds.rs"]
mod seeds;

libfuzzer_sys::fuzz_target!(|data: &[u8]| seeds::run("config", data));
