//! Which config keys the reference implementations read: transformers 5.24.0 per `model_type`
//! and vLLM 0.33.0 per architecture class, as `data/config_keys.json` records them (extracted
//! from the released wheels by `scripts/engines/extract_config_keys.py`). It grades the keys a
//! family has no rule for (design §3, "Fail closed does not mean…"). Compiled in and parsed
//! once per process; nothing here reads a file at plan time.

use std::collections::HashMap;
use std::sync::OnceLock;

use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::Value;

use crate::tensors::{FastMap, FastSet};

/// What the data says about one config key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataGrade {
    /// Neither reference implementation reads it: it cannot change what they compute.
    NotRead,
    /// Read, and the value is the config class's default (or an identity value): the same
    /// computation as if the key were absent.
    Default,
    /// Read, with a value that may change the computation.
    Read,
    /// Popped by `PreTrainedConfig` into the generation config: sampling policy, not model.
    Generation,
}

/// One implementation: a transformers model type or a vLLM architecture class.
struct Implementation {
    /// Keys it reads (its own reads, config-class reads and converted legacy keys, rope keys),
    /// with `attribute_map` aliases folded in both ways.
    reads: FastSet<&'static str>,
    /// The extraction found a read it cannot name (`getattr(config, name)`, `to_dict()`):
    /// every key counts as read.
    dynamic: bool,
    /// Literal defaults of the config class's attributes (transformers only).
    defaults: FastMap<&'static str, Value>,
}

struct Engine {
    implementations: FastMap<&'static str, Implementation>,
    /// The shared helpers' reads (`modeling_utils.py`, vLLM's `config/*`, rotary, fused MoE):
    /// read for every implementation of the engine.
    common: FastSet<&'static str>,
}

struct Reference {
    transformers: Engine,
    vllm: Engine,
    /// `PreTrainedConfig`'s own literal defaults.
    base_defaults: FastMap<&'static str, Value>,
    generation: FastSet<&'static str>,
}

/// The implementations a config is graded against: transformers model types (the text model's
/// and a wrapper's) and vLLM architecture classes (`architectures[0]`).
#[derive(Debug, Default, Clone)]
pub struct Implementations<'a> {
    pub model_types: Vec<&'a str>,
    pub architectures: Vec<&'a str>,
}

/// Values the reference code documents as "no change" for a key whatever the class default:
/// a rotary fraction of 1 ropes the whole head (`int(head_dim * 1.0)`).
const IDENTITY_VALUES: &[(&str, f64)] = &[
    ("partial_rotary_factor", 1.0),
    ("rotary_pct", 1.0),
    ("rotary_emb_fraction", 1.0),
];

impl Implementations<'_> {
    /// How the data grades `key` with `value`; `None` when neither engine knows any of the
    /// implementations (the key then stays ungraded: fail closed).
    pub fn grade(&self, key: &str, value: &Value) -> Option<DataGrade> {
        let reference = reference();
        let found: Vec<(&Engine, &Implementation)> = self
            .model_types
            .iter()
            .filter_map(|t| Some((&reference.transformers, reference.transformers.implementations.get(t)?)))
            .chain(
                self.architectures
                    .iter()
                    .filter_map(|a| Some((&reference.vllm, reference.vllm.implementations.get(a)?))),
            )
            .collect();
        if found.is_empty() {
            return None;
        }
        let read = found
            .iter()
            .any(|(engine, i)| i.dynamic || i.reads.contains(key) || engine.common.contains(key));
        if !read {
            // Generation parameters are popped by `PreTrainedConfig` (a read, of sampling policy).
            if reference.generation.contains(key) {
                return Some(DataGrade::Generation);
            }
            return Some(DataGrade::NotRead);
        }
        let default = found
            .iter()
            .find_map(|(_, i)| i.defaults.get(key))
            .or_else(|| reference.base_defaults.get(key));
        let is_default = match (default, value) {
            (Some(d), v) => same(d, v),
            // An Optional nobody defaults reads as `None` (`getattr(config, key, None)`).
            (None, Value::Null) => true,
            (None, v) => IDENTITY_VALUES
                .iter()
                .any(|(k, identity)| *k == key && v.as_f64() == Some(*identity)),
        };
        if is_default {
            return Some(DataGrade::Default);
        }
        if reference.generation.contains(key) {
            return Some(DataGrade::Generation);
        }
        Some(DataGrade::Read)
    }
}

/// JSON equality with numbers compared by value (`1` is `1.0`).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b)),
        _ => a == b,
    }
}

// The file's shape, borrowed from the compiled-in text (no copies of the key names).

type Names<'a> = HashMap<&'a str, IgnoredAny>;

#[derive(Deserialize)]
struct File<'a> {
    #[serde(borrow)]
    transformers: TransformersFile<'a>,
    #[serde(borrow)]
    vllm: VllmFile<'a>,
}

#[derive(Deserialize)]
struct TransformersFile<'a> {
    #[serde(borrow)]
    base_config: BaseConfig<'a>,
    #[serde(borrow)]
    common: Common<'a>,
    #[serde(borrow)]
    model_types: HashMap<&'a str, ModelType<'a>>,
}

#[derive(Deserialize)]
struct BaseConfig<'a> {
    #[serde(borrow)]
    attributes: HashMap<&'a str, Attribute>,
    #[serde(borrow)]
    generation_params_popped: Names<'a>,
    #[serde(borrow)]
    kwargs_read: Names<'a>,
    #[serde(borrow)]
    read_by_config_class: Names<'a>,
    #[serde(borrow)]
    properties: Names<'a>,
}

#[derive(Deserialize)]
struct Common<'a> {
    #[serde(borrow)]
    reads: Names<'a>,
}

#[derive(Deserialize)]
struct Attribute {
    /// A literal default; absent when the default is an expression (`expr`).
    #[serde(default = "no_literal")]
    default: Value,
    #[serde(default)]
    expr: Option<IgnoredAny>,
}

fn no_literal() -> Value {
    Value::Null
}

#[derive(Deserialize)]
struct ModelType<'a> {
    #[serde(borrow, default)]
    attribute_map: HashMap<&'a str, &'a str>,
    #[serde(borrow, default)]
    attributes: HashMap<&'a str, Attribute>,
    #[serde(default)]
    dynamic: Vec<IgnoredAny>,
    #[serde(borrow, default)]
    reads: Names<'a>,
    #[serde(borrow, default)]
    read_by_config_class: Names<'a>,
    #[serde(borrow, default)]
    kwargs_read: Names<'a>,
    #[serde(borrow, default)]
    properties: Names<'a>,
    #[serde(borrow, default)]
    rope_parameter_keys_read: Names<'a>,
}

#[derive(Deserialize)]
struct VllmFile<'a> {
    #[serde(borrow)]
    architectures: HashMap<&'a str, VllmArchitecture<'a>>,
    #[serde(borrow)]
    common: Common<'a>,
}

#[derive(Deserialize)]
struct VllmArchitecture<'a> {
    #[serde(default)]
    dynamic: Vec<IgnoredAny>,
    #[serde(borrow, default)]
    reads: Names<'a>,
    #[serde(borrow, default)]
    rope_parameter_keys_read: Names<'a>,
}

fn literal_defaults(attributes: HashMap<&'static str, Attribute>) -> FastMap<&'static str, Value> {
    attributes
        .into_iter()
        .filter(|(_, a)| a.expr.is_none())
        .map(|(k, a)| (k, a.default))
        .collect()
}

fn reference() -> &'static Reference {
    static REFERENCE: OnceLock<Reference> = OnceLock::new();
    REFERENCE.get_or_init(|| {
        let file: File<'static> =
            serde_json::from_str(include_str!("../data/config_keys.json")).expect("data/config_keys.json is valid");
        let base = file.transformers.base_config;
        let mut transformers_common: FastSet<&str> = file.transformers.common.reads.into_keys().collect();
        // `PreTrainedConfig` reads and converts these for every model type (`rope_theta`,
        // `partial_rotary_factor` into `rope_parameters`).
        transformers_common.extend(base.kwargs_read.into_keys());
        transformers_common.extend(base.read_by_config_class.into_keys());
        transformers_common.extend(base.properties.into_keys());
        let model_types = file
            .transformers
            .model_types
            .into_iter()
            .map(|(name, m)| {
                let mut reads: FastSet<&str> = m
                    .reads
                    .into_keys()
                    .chain(m.read_by_config_class.into_keys())
                    .chain(m.kwargs_read.into_keys())
                    .chain(m.properties.into_keys())
                    .chain(m.rope_parameter_keys_read.into_keys())
                    .collect();
                // `attribute_map`: config.json may carry the alias or the target name.
                for (alias, target) in &m.attribute_map {
                    if reads.contains(alias) || reads.contains(target) || transformers_common.contains(target) {
                        reads.insert(alias);
                        reads.insert(target);
                    }
                }
                let implementation = Implementation {
                    reads,
                    dynamic: !m.dynamic.is_empty(),
                    defaults: literal_defaults(m.attributes),
                };
                (name, implementation)
            })
            .collect();
        let architectures = file
            .vllm
            .architectures
            .into_iter()
            .map(|(name, a)| {
                let implementation = Implementation {
                    reads: a
                        .reads
                        .into_keys()
                        .chain(a.rope_parameter_keys_read.into_keys())
                        .collect(),
                    dynamic: !a.dynamic.is_empty(),
                    defaults: FastMap::default(),
                };
                (name, implementation)
            })
            .collect();
        Reference {
            transformers: Engine {
                implementations: model_types,
                common: transformers_common,
            },
            vllm: Engine {
                implementations: architectures,
                common: file.vllm.common.reads.into_keys().collect(),
            },
            base_defaults: literal_defaults(base.attributes),
            generation: base.generation_params_popped.into_keys().collect(),
        }
    })
}

/// Whether the data knows this transformers `model_type` (a wrapper without a family table
/// is graded by it).
pub fn knows_model_type(model_type: &str) -> bool {
    reference().transformers.implementations.contains_key(model_type)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn nemotron() -> Implementations<'static> {
        Implementations {
            model_types: vec!["nemotron_h"],
            architectures: vec!["NemotronHForCausalLM"],
        }
    }

    #[test]
    fn the_data_parses_and_grades() {
        let n = nemotron();
        assert_eq!(n.grade("norm_eps", &json!(1e-5)), Some(DataGrade::NotRead));
        assert_eq!(n.grade("foo_bar_baz", &json!(3)), Some(DataGrade::NotRead));
        assert_eq!(n.grade("n_groups", &json!(8)), Some(DataGrade::Default));
        assert_eq!(n.grade("n_groups", &json!(4)), Some(DataGrade::Read));
        assert_eq!(n.grade("partial_rotary_factor", &json!(1.0)), Some(DataGrade::Default));
        assert_eq!(n.grade("partial_rotary_factor", &json!(0.5)), Some(DataGrade::Read));
        assert_eq!(n.grade("sliding_window", &Value::Null), Some(DataGrade::Default));
        let unknown = Implementations {
            model_types: vec!["no_such_type"],
            architectures: vec!["NoSuchForCausalLM"],
        };
        assert_eq!(unknown.grade("hidden_size", &json!(1)), None);
    }
}

/// llama.cpp's reads of GGUF keys (`data/llamacpp_keys.json`, llama-cpp-python 0.3.36's
/// vendored `src/`): per architecture name, the keys under `<arch>.` its loader reads — the
/// generic `load_hparams`, `load_swa_pattern` where the architecture calls it, and its own
/// `load_arch_hparams` — as suffixes after `<arch>.`.
struct LlamaCpp {
    generic: FastSet<&'static str>,
    swa_pattern: FastSet<&'static str>,
    architectures: FastMap<&'static str, (bool, FastSet<&'static str>)>,
}

#[derive(Deserialize)]
struct LlamaCppFile<'a> {
    #[serde(borrow)]
    architectures: HashMap<&'a str, LlamaCppArchitecture<'a>>,
    #[serde(borrow)]
    generic_hparams: KeysRead<'a>,
    #[serde(borrow)]
    load_swa_pattern: KeysRead<'a>,
}

#[derive(Deserialize)]
struct LlamaCppArchitecture<'a> {
    name: &'a str,
    #[serde(default)]
    calls_load_swa_pattern: bool,
    #[serde(borrow, default)]
    kv_keys_read: HashMap<&'a str, KeyRead<'a>>,
}

#[derive(Deserialize)]
struct KeysRead<'a> {
    #[serde(borrow)]
    kv_keys_read: HashMap<&'a str, KeyRead<'a>>,
}

#[derive(Deserialize)]
struct KeyRead<'a> {
    key: &'a str,
}

fn llama_cpp() -> &'static LlamaCpp {
    static LLAMA_CPP: OnceLock<LlamaCpp> = OnceLock::new();
    LLAMA_CPP.get_or_init(|| {
        let file: LlamaCppFile<'static> =
            serde_json::from_str(include_str!("../data/llamacpp_keys.json")).expect("data/llamacpp_keys.json is valid");
        let generic_suffixes = |read: KeysRead<'static>| -> FastSet<&'static str> {
            read.kv_keys_read
                .into_values()
                .filter_map(|k| k.key.strip_prefix("%s."))
                .collect()
        };
        LlamaCpp {
            generic: generic_suffixes(file.generic_hparams),
            swa_pattern: generic_suffixes(file.load_swa_pattern),
            architectures: file
                .architectures
                .into_values()
                .map(|a| {
                    let name = a.name;
                    let reads = a
                        .kv_keys_read
                        .into_values()
                        .filter_map(|k| {
                            k.key
                                .strip_prefix("%s.")
                                .or_else(|| k.key.strip_prefix(name).and_then(|rest| rest.strip_prefix('.')))
                        })
                        .collect();
                    (name, (a.calls_load_swa_pattern, reads))
                })
                .collect(),
        }
    })
}

/// Whether llama.cpp's loader for GGUF architecture `arch` reads `<arch>.<suffix>`; `None`
/// when llama.cpp has no such architecture.
pub fn llama_cpp_reads(arch: &str, suffix: &str) -> Option<bool> {
    let data = llama_cpp();
    let (swa, reads) = data.architectures.get(arch)?;
    Some(data.generic.contains(suffix) || reads.contains(suffix) || (*swa && data.swa_pattern.contains(suffix)))
}

#[cfg(test)]
mod llama_cpp_tests {
    use super::*;

    #[test]
    fn llama_cpp_reads_per_architecture() {
        assert_eq!(llama_cpp_reads("qwen35", "ssm.inner_size"), Some(true));
        assert_eq!(llama_cpp_reads("qwen35", "block_count"), Some(true));
        assert_eq!(llama_cpp_reads("gemma3", "rope.freq_base_swa"), Some(true));
        assert_eq!(llama_cpp_reads("qwen35", "frobnicate"), Some(false));
        assert_eq!(llama_cpp_reads("no-such-arch", "block_count"), None);
    }

    /// Every GGUF architecture a family reads is one llama.cpp names — but `mistral`, which
    /// this llama.cpp no longer names (its keys are graded by the registry alone: fail closed).
    #[test]
    fn families_name_llama_cpp_architectures() {
        let mut read = Vec::new();
        for family in crate::families::FAMILIES {
            for (arch, _) in family.gguf.as_ref().map_or(&[][..], |g| g.architectures) {
                assert!(
                    *arch == "mistral" || llama_cpp().architectures.contains_key(arch),
                    "{arch}"
                );
                read.push(*arch);
            }
        }
        for arch in ["qwen35", "qwen35moe", "deepseek2", "phi3", "gemma3"] {
            assert!(read.contains(&arch), "{arch}");
        }
    }
}
