//! Sources and staging: turning a source spec into [`ArtifactFacts`] by reading only
//! metadata. **Invariant:** no weights are ever read — only config and small metadata files,
//! safetensors headers (a prefix of each file) and GGUF headers.

pub mod error;
pub mod facts_cache;
pub mod hub;
pub mod local;
pub mod spec;

pub use error::{ErrorCode, ErrorKind, SourceError};
pub use preflight_formats::facts::ArtifactFacts;
