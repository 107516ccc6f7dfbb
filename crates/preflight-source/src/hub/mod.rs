//! Hub sources: the client, the HF cache, and staging at a resolved commit. Their error,
//! [`HubError`], is defined beside `SourceError`, which wraps it (`error.rs`).

pub mod cache;
pub mod client;
pub mod config;
pub mod stage;

pub use crate::error::HubError;
pub use client::{Counters, HubClient, RepoInfo};
pub use config::HubConfig;
