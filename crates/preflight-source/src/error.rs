//! Failure to read a source. What is wrong *with* a checkpoint is a finding in the verdict;
//! these are the cases where there is nothing to plan.

use std::path::PathBuf;

use preflight_formats::{config::ConfigError, gguf::GgufError, index::IndexError, safetensors::HeaderError};

use crate::spec::SpecError;

#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error(transparent)]
    Spec(#[from] SpecError),
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path}: not a checkpoint: {reason}")]
    NotACheckpoint { path: PathBuf, reason: String },
    #[error("{file}: {source}")]
    Safetensors { file: String, source: HeaderError },
    #[error("{file}: {source}")]
    Gguf { file: String, source: GgufError },
    #[error("{file}: {source}")]
    Index { file: String, source: IndexError },
    #[error("{file}: {source}")]
    Config { file: String, source: ConfigError },
    #[error(transparent)]
    Hub(#[from] crate::hub::HubError),
    #[error("{file}: header is larger than the {max}-byte cap for one plan")]
    HeaderTooLarge { file: String, max: u64 },
    /// A file of the checkpoint resolves (through a symlink) outside the allowed roots. The
    /// file is never opened, so nothing of it can leak into an error.
    #[error("{path}: resolves outside the allowed local roots; refused")]
    OutsideRoot { path: PathBuf },
    /// A local path that does not exist but reads as a Hub repo id.
    #[error("{path}: no such file or directory; did you mean {suggestion}?")]
    DidYouMean { path: PathBuf, suggestion: String },
    /// A named file the repo does not have, with the files it does have of that kind.
    #[error("{spec}: the repo has no file {file:?} at {revision}{}", list_files(available))]
    FileNotInRepo {
        spec: String,
        file: String,
        revision: String,
        available: Vec<String>,
    },
}

fn list_files(available: &[String]) -> String {
    if available.is_empty() {
        return "; it has no .gguf files".into();
    }
    format!("; its GGUF files: {}", available.join(", "))
}

/// How the CLI and the service classify a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The input itself is malformed (bad spec, corrupt header): exit 2, HTTP 400.
    BadInput,
    /// The source could not be read (missing, permissions, network): exit 3.
    Unreadable,
}

impl SourceError {
    pub fn kind(&self) -> ErrorKind {
        match self {
            SourceError::Io { .. } | SourceError::Hub(_) | SourceError::FileNotInRepo { .. } => ErrorKind::Unreadable,
            _ => ErrorKind::BadInput,
        }
    }

    /// The stable, machine-readable code, the same in the service's error body and in the
    /// CLI's `--json` error document.
    pub fn code(&self) -> &'static str {
        match self {
            SourceError::Spec(_) | SourceError::DidYouMean { .. } => "invalid_source",
            SourceError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => "not_found",
            SourceError::Io { .. } => "unreadable",
            SourceError::NotACheckpoint { .. } => "not_a_checkpoint",
            SourceError::Safetensors { .. }
            | SourceError::Gguf { .. }
            | SourceError::Index { .. }
            | SourceError::Config { .. } => "malformed_checkpoint",
            SourceError::HeaderTooLarge { .. } => "headers_too_large",
            SourceError::OutsideRoot { .. } => "local_source_refused",
            SourceError::FileNotInRepo { .. } => "file_not_found",
            SourceError::Hub(hub) => hub.code(),
        }
    }

    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> SourceError {
        let path = path.into();
        move |source| SourceError::Io { path, source }
    }
}
