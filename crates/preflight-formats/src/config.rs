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
    let value = match serde_json::from_slice(bytes) {
        Ok(value) => value,
        // Python's json module writes (and transformers reads) NaN and ±Infinity; retry with
        // those literals as strings before calling the document invalid.
        Err(error) => match python_literals_as_strings(bytes) {
            Some(rewritten) => serde_json::from_slice(&rewritten).map_err(|_| ConfigError::Json(error.to_string()))?,
            None => return Err(ConfigError::Json(error.to_string())),
        },
    };
    match value {
        Value::Object(raw) => Ok(Config { raw }),
        _ => Err(ConfigError::NotAnObject),
    }
}

/// The literals Python's `json.dumps` writes for non-finite floats. serde_json has no number
/// for them, so they are kept as the strings `"NaN"`, `"Infinity"`, `"-Infinity"`: a key
/// the planner grades but never sizes from reads the same, and one it sizes from is an
/// invalid value (a finding), never a guessed number.
const PYTHON_LITERALS: &[&[u8]] = &[b"-Infinity", b"Infinity", b"NaN"];

/// `bytes` with every non-finite literal outside a string quoted, or `None` when there is
/// none to quote.
fn python_literals_as_strings(bytes: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(bytes.len() + 16);
    let (mut in_string, mut escaped, mut changed) = (false, false, false);
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
        } else if b == b'"' {
            in_string = true;
        } else if let Some(literal) = PYTHON_LITERALS.iter().find(|l| bytes[i..].starts_with(l)) {
            out.push(b'"');
            out.extend_from_slice(literal);
            out.push(b'"');
            i += literal.len();
            changed = true;
            continue;
        }
        out.push(b);
        i += 1;
    }
    changed.then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_non_finite_literals_parse_as_strings() {
        let config =
            parse(br#"{"time_step_limit": [0.0, Infinity], "a": NaN, "b": -Infinity, "s": "NaN \" Infinity"}"#)
                .expect("python json is a valid config");
        assert_eq!(config.raw["time_step_limit"][1], "Infinity");
        assert_eq!(config.raw["a"], "NaN");
        assert_eq!(config.raw["b"], "-Infinity");
        assert_eq!(config.raw["s"], "NaN \" Infinity");
    }

    #[test]
    fn other_invalid_json_is_still_refused() {
        assert!(matches!(parse(b"{\"a\": Nope}"), Err(ConfigError::Json(_))));
        assert!(matches!(parse(b"{\"a\": [Infinity,]}"), Err(ConfigError::Json(_))));
    }
}
