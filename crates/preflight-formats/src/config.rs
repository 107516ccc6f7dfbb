//! `config.json`: kept as a JSON object so the planner can grade every key.
//!
//! Nesting is bounded by serde_json's recursion limit (128), so a hostile `[[[[…` is an
//! error, not a stack overflow.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Real configs are a few KB; a cap keeps a hostile one from costing memory.
pub const MAX_CONFIG_BYTES: usize = 4 << 20;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Config {
    pub raw: Map<String, Value>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("config is {len} bytes, over the {max}-byte cap")]
    TooLarge { len: usize, max: usize },
    #[error("config is not valid JSON: {0}")]
    Json(String),
    #[error("config is not a JSON object")]
    NotAnObject,
}

pub fn parse(bytes: &[u8]) -> Result<Config, ConfigError> {
    if bytes.len() > MAX_CONFIG_BYTES {
        return Err(ConfigError::TooLarge {
            len: bytes.len(),
            max: MAX_CONFIG_BYTES,
        });
    }
    match serde_json::from_slice(bytes).map_err(|e| ConfigError::Json(e.to_string()))? {
        Value::Object(raw) => Ok(Config { raw }),
        _ => Err(ConfigError::NotAnObject),
    }
}
