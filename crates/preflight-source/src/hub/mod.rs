//! Hub sources: the client, the HF cache, and staging at a resolved commit.

pub mod cache;
pub mod client;
pub mod config;
pub mod error;
pub mod stage;

pub use client::{Counters, HubClient};
pub use config::HubConfig;
pub use error::HubError;
