//! A GGUF's key/values as the families read them ([`GgufReader`]), graded against the keys
//! llama.cpp writes for every architecture. Beside the reader so that the families (which
//! read through it) and `gguf.rs` (which plans the file through the families) both depend on
//! it, never on each other.

use std::collections::BTreeMap;

use preflight_formats::gguf::Value;

use crate::config::Grade::{self, Consumed, Metadata, Numerics};
use crate::config::MAX_LAYERS;
use crate::findings::{Code, Findings};

/// Keys under `<arch>.` any family may carry.
pub const KEYS: &[(&str, Grade)] = &[
    ("context_length", Consumed),
    ("embedding_length", Consumed),
    ("block_count", Consumed),
    ("feed_forward_length", Consumed),
    ("expert_feed_forward_length", Consumed),
    ("expert_shared_feed_forward_length", Consumed),
    ("leading_dense_block_count", Consumed),
    ("expert_count", Consumed),
    ("expert_used_count", Consumed),
    ("expert_shared_count", Consumed),
    ("vocab_size", Consumed),
    ("nextn_predict_layers", Consumed),
    ("attention.head_count", Consumed),
    ("attention.head_count_kv", Consumed),
    ("attention.key_length", Consumed),
    ("attention.value_length", Consumed),
    ("attention.sliding_window", Consumed),
    ("attention.sliding_window_pattern", Consumed),
    ("attention.causal", Consumed),
    ("rope.dimension_count", Consumed),
    ("attention.layer_norm_epsilon", Numerics),
    ("attention.layer_norm_rms_epsilon", Numerics),
    ("attention.clamp_kqv", Numerics),
    ("attention.max_alibi_bias", Numerics),
    ("attention.scale", Numerics),
    ("attn_logit_softcapping", Numerics),
    ("final_logit_softcapping", Numerics),
    ("logit_scale", Numerics),
    ("embedding_scale", Numerics),
    ("residual_scale", Numerics),
    ("expert_weights_scale", Numerics),
    ("expert_weights_norm", Numerics),
    ("expert_gating_func", Numerics),
    ("expert_group_count", Numerics),
    ("expert_group_used_count", Numerics),
    ("rope.freq_base", Numerics),
    ("rope.scale_linear", Numerics),
    ("rope.dimension_sections", Numerics),
    ("rope.scaling.type", Numerics),
    ("rope.scaling.factor", Numerics),
    ("rope.scaling.attn_factor", Numerics),
    ("rope.scaling.original_context_length", Numerics),
    ("rope.scaling.finetuned", Numerics),
    ("rope.scaling.yarn_log_multiplier", Numerics),
    ("rope.scaling.yarn_beta_fast", Numerics),
    ("rope.scaling.yarn_beta_slow", Numerics),
    ("use_parallel_residual", Numerics),
    ("tensor_data_layout", Metadata),
    ("pooling_type", Numerics),
];

/// Namespaces that never affect shape or memory (identity, tokenizer, quantizer records).
pub const METADATA_NAMESPACES: &[&str] = &["general.", "tokenizer.", "quantize.", "split."];

/// A family's view of a GGUF's key/values under `<arch>.`: typed reads whose absence or
/// ill type is a finding, as [`crate::config::ConfigReader`] is for config.json.
pub struct GgufReader<'a> {
    kv: &'a BTreeMap<String, Value>,
    prefix: String,
    pub findings: &'a mut Findings,
}

impl<'a> GgufReader<'a> {
    /// The reader of architecture `arch`'s namespace.
    pub(crate) fn new(kv: &'a BTreeMap<String, Value>, arch: &str, findings: &'a mut Findings) -> GgufReader<'a> {
        GgufReader {
            kv,
            prefix: format!("{arch}."),
            findings,
        }
    }

    fn key(&self, key: &str) -> String {
        format!("{}{key}", self.prefix)
    }

    /// Whether the architecture's namespace has the key, of any type.
    pub fn has(&self, key: &str) -> bool {
        self.kv.contains_key(&self.key(key))
    }

    /// A value the planner reads and does not model: refused with a finding naming the key.
    pub fn unsupported(&mut self, key: &str, detail: impl Into<String>) {
        let full = self.key(key);
        let observed = self.kv.get(&full).and_then(|v| match v {
            Value::UInt(n) => Some(serde_json::Value::from(*n)),
            Value::Int(n) => Some(serde_json::Value::from(*n)),
            Value::Bool(b) => Some(serde_json::Value::from(*b)),
            _ => None,
        });
        let finding = self.findings.push(Code::ConfigUnsupportedValue, full, detail);
        finding.observed = observed;
    }

    /// Grade every key: the architecture's namespace against llama.cpp's common keys and
    /// the family's own; other namespaces only as metadata.
    pub(crate) fn grade(&mut self, family_keys: &[(&str, Grade)]) {
        for key in self.kv.keys() {
            let (graded, rest) = match key.strip_prefix(self.prefix.as_str()) {
                Some(rest) => (KEYS.iter().chain(family_keys).any(|(k, _)| *k == rest), Some(rest)),
                None => (METADATA_NAMESPACES.iter().any(|ns| key.starts_with(ns)), None),
            };
            if graded {
                continue;
            }
            // A key llama.cpp's loader for this architecture never reads cannot change what
            // it computes (`data/llamacpp_keys.json`).
            let arch = self.prefix.trim_end_matches('.');
            if rest.and_then(|rest| crate::config_keys::llama_cpp_reads(arch, rest)) == Some(false) {
                self.findings.push(
                    Code::GgufIgnoredKey,
                    key.clone(),
                    format!("llama.cpp's loader for `{arch}` never reads it; it cannot change what llama.cpp computes"),
                );
                continue;
            }
            self.findings.push(
                Code::GgufUnknownKey,
                key.clone(),
                "read by llama.cpp's loader and not modelled by the planner; it may change what the model computes",
            );
        }
    }

    /// An optional unsigned value under the architecture's namespace.
    pub fn opt(&self, key: &str) -> Option<u64> {
        uint(self.kv, &self.key(key))
    }

    /// An optional number (float or integer) under the architecture's namespace.
    pub fn opt_float(&self, key: &str) -> Option<f64> {
        match self.kv.get(&self.key(key))? {
            Value::Float(x) => Some(*x),
            Value::UInt(n) => Some(*n as f64),
            Value::Int(n) => Some(*n as f64),
            _ => None,
        }
    }

    /// An optional bool under the architecture's namespace.
    pub fn opt_bool(&self, key: &str) -> Option<bool> {
        match self.kv.get(&self.key(key))? {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// A required positive value; absence is a finding.
    pub fn required(&mut self, key: &str) -> Option<u64> {
        let full = self.key(key);
        let value = uint(self.kv, &full).filter(|n| *n > 0);
        if value.is_none() {
            self.findings
                .push(Code::GgufMissingKey, full, "required to know the architecture");
        }
        value
    }

    /// A layer count, bounded as config layer counts are.
    pub fn layers(&mut self, key: &str) -> Option<u64> {
        let n = self.required(key)?;
        if n > MAX_LAYERS {
            let full = self.key(key);
            self.findings.push(
                Code::GgufMissingKey,
                full,
                format!("more than {MAX_LAYERS} blocks is not a real model"),
            );
            return None;
        }
        Some(n)
    }

    /// A per-layer value: one number for every layer, or an array of one per layer. An array
    /// of another length, or of anything but integers, is a finding (and reads as absent).
    pub fn per_layer(&mut self, key: &str, layers: u64) -> Option<Vec<u64>> {
        let full = self.key(key);
        match self.kv.get(&full)? {
            Value::Array(values) => {
                let read: Option<Vec<u64>> = values.iter().map(as_u64).collect();
                let found = values.len();
                let valid = read.filter(|v| v.len() as u64 == layers);
                if valid.is_none() {
                    self.findings.push(
                        Code::ConfigInvalidValue,
                        full,
                        format!("expected one integer per block ({layers}); found {found} values"),
                    );
                }
                valid
            }
            _ => self.opt(key).map(|n| vec![n; layers as usize]),
        }
    }

    /// A per-layer flag (`get_key_or_arr` into a `bool` array): one bool for every layer, or an
    /// array of one per layer. `None` when absent; an array of another length, or of anything
    /// but bools, is a finding (and reads as absent).
    pub fn per_layer_flags(&mut self, key: &str, layers: u64) -> Option<Vec<bool>> {
        let full = self.key(key);
        let flags: Option<Vec<bool>> = match self.kv.get(&full)? {
            Value::Bool(b) => Some(vec![*b; layers as usize]),
            Value::Array(values) => values
                .iter()
                .map(|v| match v {
                    Value::Bool(b) => Some(*b),
                    _ => None,
                })
                .collect::<Option<Vec<bool>>>()
                .filter(|v| v.len() as u64 == layers),
            _ => None,
        };
        if flags.is_none() {
            self.findings.push(
                Code::ConfigInvalidValue,
                full,
                format!("expected one bool per block ({layers})"),
            );
        }
        flags
    }

    /// The vocabulary: `<arch>.vocab_size`, else the tokenizer's token count.
    pub fn vocab(&mut self) -> Option<u64> {
        let vocab = self
            .opt("vocab_size")
            .or_else(|| match self.kv.get("tokenizer.ggml.tokens") {
                Some(Value::SkippedArray { len, .. }) => Some(*len),
                Some(Value::Array(a)) => Some(a.len() as u64),
                _ => None,
            });
        if vocab.is_none() {
            let full = self.key("vocab_size");
            self.findings.push(
                Code::GgufMissingKey,
                full,
                "neither the vocab size nor the token list is present",
            );
        }
        vocab
    }
}

pub(crate) fn uint(kv: &BTreeMap<String, Value>, key: &str) -> Option<u64> {
    as_u64(kv.get(key)?)
}

pub(crate) fn as_u64(value: &Value) -> Option<u64> {
    match value {
        Value::UInt(n) => Some(*n),
        Value::Int(n) => u64::try_from(*n).ok(),
        _ => None,
    }
}
