//! Every finding the planner emits for a safetensors checkpoint, each provoked from a small
//! synthetic llama whose config and tensors agree until one thing is changed.

use std::collections::BTreeMap;

use preflight_formats::config::Config;
use preflight_formats::facts::{ArtifactFacts, Content, SafetensorsFile, SourceRef, StagingStats};
use preflight_formats::index::Index;
use preflight_formats::safetensors::{Header, TensorInfo};
use preflight_plan::{PlanOptions, Severity, Verdict, plan};
use serde_json::{Value, json};

/// A tensor as (name, dtype, shape).
type Spec = (String, &'static str, Vec<u64>);
type Tensors = Vec<Spec>;

const HIDDEN: u64 = 64;
const HEADS: u64 = 4;
const KV: u64 = 2;
const HEAD_DIM: u64 = 16;
const VOCAB: u64 = 512;
const FFN: u64 = 128;
const LAYERS: u64 = 2;

fn config() -> Value {
    json!({
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": HIDDEN,
        "intermediate_size": FFN,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV,
        "head_dim": HEAD_DIM,
        "num_hidden_layers": LAYERS,
        "vocab_size": VOCAB,
        "max_position_embeddings": 2048,
        "rms_norm_eps": 1e-6,
        "tie_word_embeddings": false,
        "torch_dtype": "bfloat16"
    })
}

fn tensors() -> Tensors {
    let mut t = vec![
        ("model.embed_tokens.weight".to_owned(), "BF16", vec![VOCAB, HIDDEN]),
        ("model.norm.weight".to_owned(), "BF16", vec![HIDDEN]),
        ("lm_head.weight".to_owned(), "BF16", vec![VOCAB, HIDDEN]),
    ];
    for l in 0..LAYERS {
        let p = format!("model.layers.{l}.");
        t.extend([
            (format!("{p}input_layernorm.weight"), "BF16", vec![HIDDEN]),
            (format!("{p}post_attention_layernorm.weight"), "BF16", vec![HIDDEN]),
            (
                format!("{p}self_attn.q_proj.weight"),
                "BF16",
                vec![HEADS * HEAD_DIM, HIDDEN],
            ),
            (
                format!("{p}self_attn.k_proj.weight"),
                "BF16",
                vec![KV * HEAD_DIM, HIDDEN],
            ),
            (
                format!("{p}self_attn.v_proj.weight"),
                "BF16",
                vec![KV * HEAD_DIM, HIDDEN],
            ),
            (
                format!("{p}self_attn.o_proj.weight"),
                "BF16",
                vec![HIDDEN, HEADS * HEAD_DIM],
            ),
            (format!("{p}mlp.gate_proj.weight"), "BF16", vec![FFN, HIDDEN]),
            (format!("{p}mlp.up_proj.weight"), "BF16", vec![FFN, HIDDEN]),
            (format!("{p}mlp.down_proj.weight"), "BF16", vec![HIDDEN, FFN]),
        ]);
    }
    t
}

fn header(tensors: &[Spec]) -> Header {
    let mut offset = 0;
    let tensors = tensors
        .iter()
        .map(|(name, dtype, shape)| {
            let bytes = shape.iter().product::<u64>() * 2;
            let info = TensorInfo {
                name: name.clone(),
                dtype: (*dtype).into(),
                shape: shape.clone(),
                data_offsets: [offset, offset + bytes],
            };
            offset += bytes;
            info
        })
        .collect();
    Header {
        tensors,
        metadata: None,
        json_len: 0,
        issues: vec![],
    }
}

fn facts(
    config: Option<Value>,
    shards: Vec<(&str, Tensors)>,
    index: Option<Index>,
    missing: Vec<String>,
) -> ArtifactFacts {
    ArtifactFacts {
        source: SourceRef {
            spec: "synthetic".into(),
            ..SourceRef::default()
        },
        config: config.map(|c| Config {
            raw: c.as_object().expect("object").clone(),
        }),
        quant_config: None,
        content: Content::Safetensors {
            files: shards
                .into_iter()
                .map(|(name, t)| SafetensorsFile {
                    name: name.into(),
                    size: None,
                    header: header(&t),
                })
                .collect(),
            index,
            missing_files: missing,
        },
        meta: Default::default(),
        staging: StagingStats::default(),
    }
}

fn plan_one(f: ArtifactFacts) -> Verdict {
    plan(&[f], &PlanOptions::default()).expect("valid options")
}

fn codes(v: &Verdict) -> Vec<&str> {
    v.artifacts[0].findings.iter().map(|f| f.code.as_str()).collect()
}

fn single(config: Value, tensors: Tensors) -> Verdict {
    plan_one(facts(Some(config), vec![("model.safetensors", tensors)], None, vec![]))
}

#[test]
fn the_baseline_is_admissible_and_exact() {
    let v = single(config(), tensors());
    assert!(v.admissible, "{:#?}", v.artifacts[0].findings);
    let expected: u64 = tensors().iter().map(|(_, _, s)| s.iter().product::<u64>()).sum();
    assert_eq!(v.artifacts[0].parameters.total, expected);
}

#[test]
fn vocab_size_disagreeing_with_the_embedding_is_a_shape_mismatch() {
    let mut c = config();
    c["vocab_size"] = json!(1000);
    let v = single(c, tensors());
    assert!(!v.admissible);
    let f = v.artifacts[0]
        .findings
        .iter()
        .find(|f| f.code == "config.shape_mismatch")
        .expect("finding");
    assert_eq!(
        (f.declared.clone(), f.observed.clone()),
        (Some(json!(1000)), Some(json!(VOCAB)))
    );
}

#[test]
fn head_dim_assumed_from_hidden_over_heads_is_caught_by_k_proj() {
    let mut c = config();
    c.as_object_mut().expect("object").remove("head_dim");
    c["num_attention_heads"] = json!(8); // hidden/heads = 8, but the tensors say 16
    c["num_key_value_heads"] = json!(2);
    let v = single(c, tensors());
    assert!(codes(&v).contains(&"config.shape_mismatch"), "{:?}", codes(&v));
}

#[test]
fn missing_layers_are_a_layer_count_mismatch() {
    let mut c = config();
    c["num_hidden_layers"] = json!(3);
    let v = single(c, tensors());
    assert_eq!(codes(&v), ["config.layer_count_mismatch"]);
}

#[test]
fn a_tensor_group_nobody_places_is_unplaced() {
    let mut t = tensors();
    t.push(("model.layers.0.self_attn.rel_pos_bias".into(), "BF16", vec![HEADS]));
    t.push(("model.layers.1.self_attn.rel_pos_bias".into(), "BF16", vec![HEADS]));
    let v = single(config(), t);
    let f = &v.artifacts[0].findings[0];
    assert_eq!(
        (f.code.as_str(), f.subject.as_str()),
        ("tensor.unplaced", "model.layers.N.self_attn.rel_pos_bias")
    );
    assert_eq!(f.observed, Some(json!(2)), "one finding per group, with its count");
}

#[test]
fn untied_without_lm_head_is_missing_tensor() {
    let t: Vec<_> = tensors()
        .into_iter()
        .filter(|(n, _, _)| n != "lm_head.weight")
        .collect();
    let v = single(config(), t);
    assert_eq!(codes(&v), ["tensor.missing"]);
}

#[test]
fn tied_and_stored_counts_lm_head_once() {
    let mut c = config();
    c["tie_word_embeddings"] = json!(true);
    let v = single(c, tensors());
    assert!(v.admissible);
    assert_eq!(codes(&v), ["weights.tied_stored"]);
    let p = &v.artifacts[0].parameters;
    let all: u64 = tensors().iter().map(|(_, _, s)| s.iter().product::<u64>()).sum();
    assert_eq!(p.total, all - VOCAB * HIDDEN);
    assert_eq!(p.by_dtype["BF16"], p.total);
}

#[test]
fn config_problems_are_findings() {
    let mut c = config();
    c["num_attention_heads"] = json!("four");
    assert!(codes(&single(c, tensors())).contains(&"config.invalid_value"));
    let mut c = config();
    c.as_object_mut().expect("object").remove("vocab_size");
    assert!(codes(&single(c, tensors())).contains(&"config.missing_key"));
    let mut c = config();
    c["model_type"] = json!("mistral");
    c["layer_types"] = json!(["full_attention", "linear_attention"]);
    // layer_types is not a llama/mistral key, so it is graded unknown.
    assert!(codes(&single(c, tensors())).contains(&"config.unknown_key"));
    let mut c = config();
    c["sliding_window"] = json!(4096);
    assert_eq!(codes(&single(c, tensors())), ["config.unsupported_value"]);
}

#[test]
fn no_config_still_counts_parameters() {
    let v = plan_one(facts(None, vec![("model.safetensors", tensors())], None, vec![]));
    assert_eq!(codes(&v), ["config.missing"]);
    assert!(v.artifacts[0].architecture.is_none());
    let all: u64 = tensors().iter().map(|(_, _, s)| s.iter().product::<u64>()).sum();
    assert_eq!(v.artifacts[0].parameters.total, all);
}

#[test]
fn unknown_quantization_method_is_refused() {
    let mut c = config();
    c["quantization_config"] = json!({"quant_method": "hqq9000"});
    assert_eq!(codes(&single(c, tensors())), ["quantization.unknown"]);
}

#[test]
fn a_scale_without_its_weight_is_an_invalid_layout() {
    let mut c = config();
    c["quantization_config"] = json!({"quant_method": "fp8", "weight_block_size": [128, 128]});
    let mut t = tensors();
    t.push((
        "model.layers.0.mlp.ghost_proj.weight_scale_inv".into(),
        "F32",
        vec![1, 1],
    ));
    assert_eq!(codes(&single(c, t)), ["quantization.layout_invalid"]);
}

fn split(t: Tensors) -> (Tensors, Tensors) {
    let half = t.len() / 2;
    let mut a = t;
    let b = a.split_off(half);
    (a, b)
}

fn index_of(a: &[Spec], b: &[Spec]) -> Index {
    let mut weight_map = BTreeMap::new();
    for (n, _, _) in a {
        weight_map.insert(n.clone(), "model-00001-of-00002.safetensors".to_owned());
    }
    for (n, _, _) in b {
        weight_map.insert(n.clone(), "model-00002-of-00002.safetensors".to_owned());
    }
    Index {
        total_size: None,
        weight_map,
    }
}

#[test]
fn index_disagreements_are_findings() {
    let (a, b) = split(tensors());
    let good = index_of(&a, &b);
    let sharded = |index: Index, a: Vec<_>, b: Vec<_>, missing: Vec<String>| {
        let mut shards = vec![("model-00001-of-00002.safetensors", a)];
        if missing.is_empty() {
            shards.push(("model-00002-of-00002.safetensors", b));
        }
        plan_one(facts(Some(config()), shards, Some(index), missing))
    };
    assert!(sharded(good.clone(), a.clone(), b.clone(), vec![]).admissible);

    let mut extra = good.clone();
    extra.weight_map.insert(
        "model.layers.9.mlp.up_proj.weight".into(),
        "model-00002-of-00002.safetensors".into(),
    );
    assert_eq!(
        codes(&sharded(extra, a.clone(), b.clone(), vec![])),
        ["index.missing_tensor"]
    );

    let mut fewer = good.clone();
    fewer.weight_map.remove("model.norm.weight");
    let v = sharded(fewer, a.clone(), b.clone(), vec![]);
    assert_eq!(codes(&v), ["index.unlisted_tensor"]);
    assert_eq!(v.artifacts[0].findings[0].severity, Severity::Warning);

    let mut moved = good.clone();
    moved
        .weight_map
        .insert("model.norm.weight".into(), "model-00002-of-00002.safetensors".into());
    assert_eq!(
        codes(&sharded(moved, a.clone(), b.clone(), vec![])),
        ["index.wrong_shard"]
    );

    let mut sized = good.clone();
    sized.total_size = Some(1);
    assert_eq!(
        codes(&sharded(sized, a.clone(), b.clone(), vec![])),
        ["index.total_size_mismatch"]
    );

    let v = sharded(good, a, b, vec!["model-00002-of-00002.safetensors".into()]);
    assert!(codes(&v).contains(&"index.missing_shard"), "{:?}", codes(&v));
    assert!(!v.admissible);
}

#[test]
fn the_same_tensor_in_two_shards_is_a_duplicate() {
    let (a, mut b) = split(tensors());
    b.push(a[0].clone());
    let v = plan_one(facts(
        Some(config()),
        vec![("a.safetensors", a), ("b.safetensors", b)],
        None,
        vec![],
    ));
    assert!(codes(&v).contains(&"tensor.duplicate"));
}

#[test]
fn header_issues_become_findings() {
    use preflight_formats::safetensors::HeaderIssue;
    let mut f = facts(Some(config()), vec![("model.safetensors", tensors())], None, vec![]);
    if let Content::Safetensors { files, .. } = &mut f.content {
        files[0].header.issues = vec![
            HeaderIssue::UnknownDtype {
                tensor: "x".into(),
                dtype: "F3".into(),
            },
            HeaderIssue::OffsetsInvalid {
                tensor: "y".into(),
                detail: "overlaps".into(),
            },
            HeaderIssue::BeyondFile {
                data_end: 10,
                file_size: 5,
            },
        ];
    }
    let v = plan_one(f);
    assert_eq!(
        codes(&v),
        ["dtype.unknown", "header.offsets_invalid", "header.beyond_file"]
    );
}

#[test]
fn every_code_is_documented_and_unique() {
    let mut seen = std::collections::HashSet::new();
    for code in preflight_plan::Code::ALL {
        assert!(seen.insert(code.as_str()), "{} twice", code.as_str());
        assert!(!code.meaning().is_empty(), "{} undocumented", code.as_str());
        assert!(code.as_str().contains('.'), "{} is not area.name", code.as_str());
    }
}

/// GPTQ stores 4-bit weights eight to an I32 `qweight` ([in/8, out]) with `qzeros`, `scales`
/// and `g_idx` beside it: parameters are unpacked, the metadata is not counted.
#[test]
fn gptq_packed_weights_are_unpacked_and_their_metadata_excluded() {
    let mut c = config();
    c["quantization_config"] = json!({"quant_method": "gptq", "bits": 4, "group_size": 32});
    let mut t = Vec::new();
    for (name, dtype, shape) in tensors() {
        let quantized = name.contains("_proj.weight");
        if !quantized {
            t.push((name, dtype, shape));
            continue;
        }
        let (out, inp) = (shape[0], shape[1]);
        let stem = name.trim_end_matches(".weight");
        t.push((format!("{stem}.qweight"), "I32", vec![inp / 8, out]));
        t.push((format!("{stem}.qzeros"), "I32", vec![inp / 32, out / 8]));
        t.push((format!("{stem}.scales"), "F16", vec![inp / 32, out]));
        t.push((format!("{stem}.g_idx"), "I32", vec![inp]));
    }
    let v = single(c, t);
    assert!(v.admissible, "{:#?}", v.artifacts[0].findings);
    let logical: u64 = tensors().iter().map(|(_, _, s)| s.iter().product::<u64>()).sum();
    let p = &v.artifacts[0].parameters;
    assert_eq!(p.total, logical, "same logical parameters as the unquantized model");
    assert!(p.by_dtype.contains_key("INT4"));
    let q = v.artifacts[0]
        .architecture
        .as_ref()
        .and_then(|a| a.quantization.as_ref())
        .expect("quantization");
    assert_eq!((q.method.as_str(), q.bits), ("gptq", Some(4)));
}

/// A multimodal wrapper's `text_config` is read as the model; its tensors' wrapper prefixes
/// fold onto the plain decoder's names. A vision tower would be unplaced (fail closed).
#[test]
fn a_nested_text_config_is_planned_as_the_model() {
    let wrapper = json!({ "architectures": ["LlavaLikeForConditionalGeneration"], "model_type": "llava_like", "text_config": config() });
    let renamed: Tensors = tensors()
        .into_iter()
        .map(|(name, dtype, shape)| {
            let name = match name.strip_prefix("model.") {
                Some(rest) => format!("model.language_model.{rest}"),
                None => format!("language_model.{name}"),
            };
            (name, dtype, shape)
        })
        .collect();
    let v = single(wrapper.clone(), renamed.clone());
    assert!(v.admissible, "{:#?}", v.artifacts[0].findings);
    let plain = single(config(), tensors());
    assert_eq!(v.artifacts[0].parameters, plain.artifacts[0].parameters);

    let mut with_vision = renamed;
    with_vision.push(("model.vision_tower.patch_embed.weight".into(), "BF16", vec![HIDDEN, 3]));
    let v = single(wrapper, with_vision);
    assert_eq!(codes(&v), ["tensor.unplaced"]);
}
