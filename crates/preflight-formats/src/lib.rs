//! Bytes → typed checkpoint metadata. Every reader here is pure over a byte slice and
//! bounded: it never allocates on the strength of an untrusted length before checking a cap.
//! **Invariant:** no I/O and no async in this crate; callers own reading.

pub mod config;
pub mod facts;
pub mod gguf;
pub mod index;
pub mod issues;
pub mod safetensors;
