//! Reading config.json for a family: typed accessors that turn a missing or ill-typed key
//! into a finding, and the grading of every key (**fail closed**, design §3): the common
//! registry and the family's own rules first, then what the reference implementations read
//! ([`crate::config_keys`]); a key they read and the planner does not model is
//! `config.unknown_key`.

use serde_json::{Map, Value};

use crate::config_keys::{DataGrade, Implementations};
use crate::findings::{Code, Findings};

/// How the planner treats a config key. Every key a config may carry has one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grade {
    /// Read by the planner: it shapes the architecture, parameters or memory.
    Consumed,
    /// Identity or bookkeeping (names, versions, token ids): no effect on shape or memory.
    Metadata,
    /// Affects training only (dropout, init, auxiliary losses).
    TrainingOnly,
    /// Generation policy or runtime default (sampling, `use_cache`).
    Generation,
    /// Numerics that change values, not shapes or memory (eps, rope base, activation).
    Numerics,
    /// Neither the reference implementation (transformers) nor the serving engine (vLLM)
    /// reads it: an `info` finding (`config.ignored_key`), not a refusal. Keys the data grades
    /// need no entry; this is for a reading the extraction cannot see.
    Ignored,
}

/// More layers than any real model (the largest have ~100–200); the planner builds per-layer
/// tables, so an absurd count is refused before it allocates.
pub const MAX_LAYERS: u64 = 4096;

/// Keys any transformers config may carry, whatever the family.
pub const COMMON_KEYS: &[(&str, Grade)] = &[
    ("architectures", Grade::Metadata),
    ("model_type", Grade::Consumed),
    ("transformers_version", Grade::Metadata),
    ("torch_dtype", Grade::Consumed),
    ("dtype", Grade::Consumed),
    ("_name_or_path", Grade::Metadata),
    ("auto_map", Grade::Metadata),
    ("bos_token_id", Grade::Metadata),
    ("eos_token_id", Grade::Metadata),
    ("pad_token_id", Grade::Metadata),
    ("sep_token_id", Grade::Metadata),
    ("decoder_start_token_id", Grade::Metadata),
    ("id2label", Grade::Metadata),
    ("label2id", Grade::Metadata),
    ("task_specific_params", Grade::Metadata),
    ("problem_type", Grade::Metadata),
    ("finetuning_task", Grade::Metadata),
    ("tokenizer_class", Grade::Metadata),
    ("prefix", Grade::Metadata),
    ("return_dict", Grade::Metadata),
    ("output_hidden_states", Grade::Metadata),
    ("output_attentions", Grade::Metadata),
    ("torchscript", Grade::Metadata),
    ("use_return_dict", Grade::Metadata),
    ("is_encoder_decoder", Grade::Consumed),
    ("is_decoder", Grade::Metadata),
    ("add_cross_attention", Grade::Metadata),
    ("cross_attention_hidden_size", Grade::Metadata),
    ("tie_encoder_decoder", Grade::Metadata),
    ("chunk_size_feed_forward", Grade::Numerics),
    ("pruned_heads", Grade::Metadata),
    ("initializer_range", Grade::TrainingOnly),
    ("attention_dropout", Grade::TrainingOnly),
    ("hidden_dropout", Grade::TrainingOnly),
    ("output_router_logits", Grade::TrainingOnly),
    ("router_aux_loss_coef", Grade::TrainingOnly),
    ("pretraining_tp", Grade::TrainingOnly),
    ("gradient_checkpointing", Grade::TrainingOnly),
    ("use_cache", Grade::Generation),
    ("max_length", Grade::Generation),
    ("min_length", Grade::Generation),
    ("do_sample", Grade::Generation),
    ("temperature", Grade::Generation),
    ("top_k", Grade::Generation),
    ("top_p", Grade::Generation),
    ("repetition_penalty", Grade::Generation),
    ("num_beams", Grade::Generation),
    // transformers 4's PretrainedConfig wrote its generation defaults into every saved
    // config (a sub-config's too); transformers 5 moved them to GenerationConfig.
    ("num_beam_groups", Grade::Generation),
    ("diversity_penalty", Grade::Generation),
    ("length_penalty", Grade::Generation),
    ("early_stopping", Grade::Generation),
    ("no_repeat_ngram_size", Grade::Generation),
    ("encoder_no_repeat_ngram_size", Grade::Generation),
    ("bad_words_ids", Grade::Generation),
    ("num_return_sequences", Grade::Generation),
    ("output_scores", Grade::Generation),
    ("return_dict_in_generate", Grade::Generation),
    ("forced_bos_token_id", Grade::Generation),
    ("forced_eos_token_id", Grade::Generation),
    ("remove_invalid_values", Grade::Generation),
    ("exponential_decay_length_penalty", Grade::Generation),
    ("suppress_tokens", Grade::Generation),
    ("begin_suppress_tokens", Grade::Generation),
    ("typical_p", Grade::Generation),
    ("tf_legacy_loss", Grade::TrainingOnly),
    ("use_bfloat16", Grade::Metadata),
    ("hidden_act", Grade::Numerics),
    ("hidden_activation", Grade::Numerics),
    ("rms_norm_eps", Grade::Numerics),
    ("layer_norm_eps", Grade::Numerics),
    ("rope_theta", Grade::Numerics),
    ("rope_scaling", Grade::Numerics),
    ("rope_parameters", Grade::Numerics),
    ("quantization_config", Grade::Consumed),
    ("tie_word_embeddings", Grade::Consumed),
];

/// The keys the families' `read_dims` reads for every decoder family (and the families
/// that read their own way read them too): a family lists only what it interprets beyond them.
pub const DECODER_KEYS: &[(&str, Grade)] = &[
    ("num_hidden_layers", Grade::Consumed),
    ("hidden_size", Grade::Consumed),
    ("intermediate_size", Grade::Consumed),
    ("num_attention_heads", Grade::Consumed),
    ("num_key_value_heads", Grade::Consumed),
    ("head_dim", Grade::Consumed),
    ("vocab_size", Grade::Consumed),
    ("max_position_embeddings", Grade::Consumed),
];

/// A family's view of one config object (the top level, or `text_config`).
pub struct ConfigReader<'a> {
    map: &'a Map<String, Value>,
    /// `""`, `"text_config."` or `"vision_config."`, so findings name the key as the user
    /// sees it.
    prefix: String,
    pub findings: &'a mut Findings,
}

impl<'a> ConfigReader<'a> {
    pub fn new(map: &'a Map<String, Value>, prefix: impl Into<String>, findings: &'a mut Findings) -> Self {
        Self {
            map,
            prefix: prefix.into(),
            findings,
        }
    }

    /// An optional float (JSON number); an ill-typed value is a finding and reads as absent.
    pub fn opt_f64(&mut self, key: &str) -> Option<f64> {
        let v = self.value(key)?;
        match v.as_f64() {
            Some(f) => Some(f),
            None => {
                self.invalid(key, "a number");
                None
            }
        }
    }

    /// An optional object (a nested config such as `rope_scaling`).
    pub fn opt_object(&mut self, key: &str) -> Option<&'a Map<String, Value>> {
        let v = self.value(key)?;
        match v.as_object() {
            Some(o) => Some(o),
            None => {
                self.invalid(key, "an object");
                None
            }
        }
    }

    fn subject(&self, key: &str) -> String {
        format!("config.{}{key}", self.prefix)
    }

    /// The raw value, `None` when absent or JSON `null`.
    pub fn value(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key).filter(|v| !v.is_null())
    }

    fn invalid(&mut self, key: &str, want: &str) {
        let subject = self.subject(key);
        let found = self.map.get(key).cloned();
        let finding = self
            .findings
            .push(Code::ConfigInvalidValue, subject, format!("expected {want}"));
        finding.observed = found;
    }

    /// An optional non-negative integer; an ill-typed value is a finding and reads as absent.
    pub fn opt_u64(&mut self, key: &str) -> Option<u64> {
        let v = self.value(key)?;
        match v.as_u64().or_else(|| {
            v.as_f64()
                .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f < 2f64.powi(53))
                .map(|f| f as u64)
        }) {
            Some(n) => Some(n),
            None => {
                self.invalid(key, "a non-negative integer");
                None
            }
        }
    }

    /// A required positive integer; absence or zero is a finding.
    pub fn u64(&mut self, key: &str) -> Option<u64> {
        if self.value(key).is_none() {
            self.missing(key);
            return None;
        }
        match self.opt_u64(key)? {
            0 => {
                self.invalid(key, "a positive integer");
                None
            }
            n => Some(n),
        }
    }

    /// A key this architecture requires is absent.
    pub fn missing(&mut self, key: &str) {
        let subject = self.subject(key);
        self.findings.push(
            Code::ConfigMissingKey,
            subject,
            format!("`{key}` is required for this architecture"),
        );
    }

    /// An optional positive integer: absent is `None` without a finding; zero or ill-typed
    /// is a finding.
    pub fn opt_positive(&mut self, key: &str) -> Option<u64> {
        self.value(key)?;
        self.u64(key)
    }

    /// A layer count: required, positive, and at most [`MAX_LAYERS`] (per-layer tables are
    /// built from it, so an absurd count must not allocate).
    pub fn layers(&mut self, key: &str) -> Option<u64> {
        let n = self.u64(key)?;
        if n > MAX_LAYERS {
            self.invalid(key, &format!("at most {MAX_LAYERS} layers"));
            return None;
        }
        Some(n)
    }

    /// An optional layer count where zero is meaningful (absent reads as zero), bounded as
    /// [`Self::layers`] is.
    pub fn opt_layers(&mut self, key: &str) -> Option<u64> {
        let n = self.opt_u64(key).unwrap_or(0);
        if n > MAX_LAYERS {
            self.invalid(key, &format!("at most {MAX_LAYERS} layers"));
            return None;
        }
        Some(n)
    }

    pub fn opt_bool(&mut self, key: &str) -> Option<bool> {
        let v = self.value(key)?;
        match v.as_bool() {
            Some(b) => Some(b),
            None => {
                self.invalid(key, "a boolean");
                None
            }
        }
    }

    pub fn opt_str(&mut self, key: &str) -> Option<&'a str> {
        let v = self.value(key)?;
        match v.as_str() {
            Some(s) => Some(s),
            None => {
                self.invalid(key, "a string");
                None
            }
        }
    }

    /// An optional array of strings.
    pub fn opt_str_list(&mut self, key: &str) -> Option<Vec<&'a str>> {
        let v = self.value(key)?;
        let list = v
            .as_array()
            .and_then(|a| a.iter().map(Value::as_str).collect::<Option<Vec<_>>>());
        if list.is_none() {
            self.invalid(key, "an array of strings");
        }
        list
    }

    /// An optional array of non-negative integers.
    pub fn opt_u64_list(&mut self, key: &str) -> Option<Vec<u64>> {
        let v = self.value(key)?;
        let list = v
            .as_array()
            .and_then(|a| a.iter().map(Value::as_u64).collect::<Option<Vec<_>>>());
        if list.is_none() {
            self.invalid(key, "an array of non-negative integers");
        }
        list
    }

    /// A value the planner recognises but cannot model.
    pub fn unsupported(&mut self, key: &str, detail: impl Into<String>) {
        let subject = self.subject(key);
        let found = self.map.get(key).cloned();
        let finding = self.findings.push(Code::ConfigUnsupportedValue, subject, detail);
        finding.observed = found;
    }

    /// Grade every key against the common registry and `family_keys` alone: a key in neither
    /// is `config.unknown_key` (an encoder's config, whose registry is the whole rule).
    pub fn grade_keys(&mut self, family_keys: &[(&str, Grade)], extra: &[&str]) {
        self.grade(family_keys, extra, None);
    }

    /// Grade a language model's (or a wrapper's) keys: the common registry, the generic
    /// decoder reading ([`DECODER_KEYS`]) and the family's own rules first; a key none of them
    /// has is graded by what the reference implementations read (`data/config_keys.json`):
    /// read by neither → `config.ignored_key` (info); read with the class default →
    /// `config.default_value` (info); read with another value → `config.unknown_key`.
    pub(crate) fn grade_keys_by(&mut self, family_keys: &[(&str, Grade)], reference: &Implementations) {
        self.grade(family_keys, &[], Some(reference));
    }

    fn grade(&mut self, family_keys: &[(&str, Grade)], extra: &[&str], reference: Option<&Implementations>) {
        let decoder: &[(&str, Grade)] = if reference.is_some() { DECODER_KEYS } else { &[] };
        for (key, value) in self.map {
            let grade = COMMON_KEYS
                .iter()
                .chain(decoder)
                .chain(family_keys)
                .find(|(k, _)| k == key)
                .map(|(_, g)| *g)
                .or_else(|| extra.contains(&key.as_str()).then_some(Grade::Consumed))
                .or_else(|| is_token_id(key).then_some(Grade::Metadata));
            let by_data = match grade {
                None => reference.and_then(|r| r.grade(key, value)),
                Some(_) => None,
            };
            let subject = self.subject(key);
            let finding = match (grade, by_data) {
                (Some(Grade::Ignored), _) | (None, Some(DataGrade::NotRead)) => self.findings.push(
                    Code::ConfigIgnoredKey,
                    subject,
                    format!("`{key}` is read by neither the reference implementation (transformers) nor the serving engine (vLLM) for this architecture; it cannot change what they compute"),
                ),
                (None, Some(DataGrade::Default)) => self.findings.push(
                    Code::ConfigDefaultValue,
                    subject,
                    format!("`{key}` is not modelled by the planner, but its value is the config class's default: the model computes as if it were absent"),
                ),
                (Some(_), _) | (None, Some(DataGrade::Generation)) => continue,
                (None, Some(DataGrade::Read)) => self.findings.push(
                    Code::ConfigUnknownKey,
                    subject,
                    format!("`{key}` is read by the reference implementation or the serving engine and not modelled by the planner; it may change what the model computes"),
                ),
                (None, None) => self.findings.push(
                    Code::ConfigUnknownKey,
                    subject,
                    format!("`{key}` is not in the planner's key registry for this config, and no reference reading grades it; it may change what the model computes"),
                ),
            };
            finding.observed = Some(value.clone());
        }
    }
}

/// A token id (`image_token_id`, `video_token_index`, …): which vocabulary entry marks a
/// placeholder. It changes neither shapes nor memory, whichever wrapper declares it.
fn is_token_id(key: &str) -> bool {
    ["_token_id", "_token_ids", "_token_index"]
        .iter()
        .any(|suffix| key.ends_with(suffix))
}
