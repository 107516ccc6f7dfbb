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
            SourceError::Io { .. } | SourceError::Hub(_) => ErrorKind::Unreadable,
            _ => ErrorKind::BadInput,
        }
    }

    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> SourceError {
        let path = path.into();
        move |source| SourceError::Io { path, source }
    }
}
