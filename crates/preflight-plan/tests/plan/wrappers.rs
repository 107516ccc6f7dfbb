//! Multimodal wrappers without a bundled fixture — Gemma 3 (`gemma3`: SigLIP + projector) and
//! Mistral 3 (`mistral3`: Pixtral + patch-merging projector) — on small synthetic checkpoints
//! whose tensors are named as transformers 5 saves `Gemma3ForConditionalGeneration` /
//! `Mistral3ForConditionalGeneration` (and, for each, as the published checkpoints name them).
//! The encoders' tensors must count under `vision` / `projector`, never unplaced, and the
//! `vision_config` must be graded against the encoder's own key registry.

use preflight_plan::{Component, PlanOptions, Severity, Verdict, plan};
use serde_json::{Value, json};

type Spec = (String, Vec<u64>);

fn plan_one(config: &Value, tensors: &[Spec]) -> Verdict {
    let header = preflight_testhub::facts::header(
        tensors
            .iter()
            .map(|(name, shape)| (name.clone(), "BF16", shape.clone())),
    );
    let facts = preflight_testhub::facts::single_file(Some(config), header, None);
    plan(&[facts], &PlanOptions::default()).expect("valid options")
}

fn elements(tensors: &[Spec], prefix: &str) -> u64 {
    tensors
        .iter()
        .filter(|(n, _)| n.starts_with(prefix))
        .map(|(_, s)| s.iter().product::<u64>())
        .sum()
}

fn blocking(v: &Verdict) -> Vec<String> {
    v.artifacts[0]
        .findings
        .iter()
        .filter(|f| f.severity == Severity::Blocking)
        .map(|f| format!("{} {} {}", f.code, f.subject, f.detail))
        .collect()
}

fn t(name: impl Into<String>, shape: &[u64]) -> Spec {
    (name.into(), shape.to_vec())
}

/// Checks every wrapper must pass: admissible, encoder tensors under their components,
/// the total the sum of every stored tensor, nothing unplaced.
fn assert_wrapper(v: &Verdict, tensors: &[Spec], vision: u64, projector: u64) {
    assert!(v.admissible, "{:#?}", blocking(v));
    let p = &v.artifacts[0].parameters;
    assert_eq!(p.by_component.get(&Component::Vision), Some(&vision));
    assert_eq!(p.by_component.get(&Component::Projector), Some(&projector));
    let all: u64 = tensors.iter().map(|(_, s)| s.iter().product::<u64>()).sum();
    assert_eq!(p.total, all);
    assert!(
        !v.artifacts[0].findings.iter().any(|f| f.code == "tensor.unplaced"),
        "{:#?}",
        v.artifacts[0].findings
    );
}

/// A vision_config key the encoder's registry lacks — `vocab_size` is a text key the language
/// model's registry knows, so finding it unknown shows which registry graded it.
fn assert_vision_keys_graded_by_the_encoder(config: &Value, tensors: &[Spec]) {
    for key in ["vocab_size", "frobnicate"] {
        let mut c = config.clone();
        c["vision_config"][key] = json!(7);
        let v = plan_one(&c, tensors);
        assert!(!v.admissible);
        let f = v.artifacts[0]
            .findings
            .iter()
            .find(|f| f.code == "config.unknown_key")
            .expect("unknown key finding");
        assert_eq!(f.subject, format!("config.vision_config.{key}"));
        assert_eq!(f.severity, Severity::Blocking);
    }
}

// ---------------------------------------------------------------------------------------
// Gemma 3: a config shaped like google/gemma-3-4b-it's (model_type `gemma3`, text
// `gemma3_text`, vision `siglip_vision_model`, `vision_use_head: false`), scaled down.

const G_HIDDEN: u64 = 64;
const G_HEADS: u64 = 4;
const G_KV: u64 = 2;
const G_HEAD_DIM: u64 = 32;
const G_FFN: u64 = 128;
const G_VOCAB: u64 = 512;
const G_LAYERS: u64 = 6;
const V_HIDDEN: u64 = 48;
const V_FFN: u64 = 96;
const V_LAYERS: u64 = 2;
const V_PATCH: u64 = 14;
const V_IMAGE: u64 = 56;

fn gemma3_config() -> Value {
    json!({
        "architectures": ["Gemma3ForConditionalGeneration"],
        "model_type": "gemma3",
        "boi_token_index": 255999,
        "eoi_token_index": 256000,
        "eos_token_id": [1, 106],
        "image_token_index": 262144,
        "initializer_range": 0.02,
        "mm_tokens_per_image": 4,
        "torch_dtype": "bfloat16",
        "transformers_version": "5.24.0",
        "text_config": {
            "model_type": "gemma3_text",
            "hidden_size": G_HIDDEN,
            "intermediate_size": G_FFN,
            "num_attention_heads": G_HEADS,
            "num_key_value_heads": G_KV,
            "head_dim": G_HEAD_DIM,
            "num_hidden_layers": G_LAYERS,
            "vocab_size": G_VOCAB,
            "max_position_embeddings": 131072,
            "query_pre_attn_scalar": 256,
            "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
            "sliding_window": 1024
        },
        "vision_config": {
            "model_type": "siglip_vision_model",
            "hidden_size": V_HIDDEN,
            "image_size": V_IMAGE,
            "intermediate_size": V_FFN,
            "num_attention_heads": 4,
            "num_hidden_layers": V_LAYERS,
            "patch_size": V_PATCH,
            "vision_use_head": false
        }
    })
}

/// Tensors with `lm` / `vision` / `projector` prefixes: transformers 5's names are
/// `model.language_model.`, `model.vision_tower.`, `model.multi_modal_projector.`.
fn gemma3_tensors(lm: &str, vision: &str, projector: &str) -> Vec<Spec> {
    let mut out = vec![
        t(format!("{lm}embed_tokens.weight"), &[G_VOCAB, G_HIDDEN]),
        t(format!("{lm}norm.weight"), &[G_HIDDEN]),
    ];
    for l in 0..G_LAYERS {
        let p = format!("{lm}layers.{l}.");
        for norm in [
            "input_layernorm",
            "post_attention_layernorm",
            "pre_feedforward_layernorm",
            "post_feedforward_layernorm",
        ] {
            out.push(t(format!("{p}{norm}.weight"), &[G_HIDDEN]));
        }
        out.extend([
            t(format!("{p}self_attn.q_proj.weight"), &[G_HEADS * G_HEAD_DIM, G_HIDDEN]),
            t(format!("{p}self_attn.k_proj.weight"), &[G_KV * G_HEAD_DIM, G_HIDDEN]),
            t(format!("{p}self_attn.v_proj.weight"), &[G_KV * G_HEAD_DIM, G_HIDDEN]),
            t(format!("{p}self_attn.o_proj.weight"), &[G_HIDDEN, G_HEADS * G_HEAD_DIM]),
            t(format!("{p}self_attn.q_norm.weight"), &[G_HEAD_DIM]),
            t(format!("{p}self_attn.k_norm.weight"), &[G_HEAD_DIM]),
            t(format!("{p}mlp.gate_proj.weight"), &[G_FFN, G_HIDDEN]),
            t(format!("{p}mlp.up_proj.weight"), &[G_FFN, G_HIDDEN]),
            t(format!("{p}mlp.down_proj.weight"), &[G_HIDDEN, G_FFN]),
        ]);
    }
    // SiglipVisionModel: `vision_model.` inside the tower.
    let v = format!("{vision}vision_model.");
    let positions = (V_IMAGE / V_PATCH) * (V_IMAGE / V_PATCH);
    out.extend([
        t(
            format!("{v}embeddings.patch_embedding.weight"),
            &[V_HIDDEN, 3, V_PATCH, V_PATCH],
        ),
        t(format!("{v}embeddings.patch_embedding.bias"), &[V_HIDDEN]),
        t(
            format!("{v}embeddings.position_embedding.weight"),
            &[positions, V_HIDDEN],
        ),
        t(format!("{v}post_layernorm.weight"), &[V_HIDDEN]),
        t(format!("{v}post_layernorm.bias"), &[V_HIDDEN]),
    ]);
    for l in 0..V_LAYERS {
        let p = format!("{v}encoder.layers.{l}.");
        for proj in ["q_proj", "k_proj", "v_proj", "out_proj"] {
            out.push(t(format!("{p}self_attn.{proj}.weight"), &[V_HIDDEN, V_HIDDEN]));
            out.push(t(format!("{p}self_attn.{proj}.bias"), &[V_HIDDEN]));
        }
        for norm in ["layer_norm1", "layer_norm2"] {
            out.push(t(format!("{p}{norm}.weight"), &[V_HIDDEN]));
            out.push(t(format!("{p}{norm}.bias"), &[V_HIDDEN]));
        }
        out.extend([
            t(format!("{p}mlp.fc1.weight"), &[V_FFN, V_HIDDEN]),
            t(format!("{p}mlp.fc1.bias"), &[V_FFN]),
            t(format!("{p}mlp.fc2.weight"), &[V_HIDDEN, V_FFN]),
            t(format!("{p}mlp.fc2.bias"), &[V_HIDDEN]),
        ]);
    }
    // Gemma3MultiModalProjector: [vision hidden, text hidden] and the soft-embedding norm.
    out.extend([
        t(format!("{projector}mm_input_projection_weight"), &[V_HIDDEN, G_HIDDEN]),
        t(format!("{projector}mm_soft_emb_norm.weight"), &[V_HIDDEN]),
    ]);
    out
}

#[test]
fn gemma3_wrapper_counts_siglip_and_projector_apart_from_the_language_model() {
    let config = gemma3_config();
    let tensors = gemma3_tensors(
        "model.language_model.",
        "model.vision_tower.",
        "model.multi_modal_projector.",
    );
    let v = plan_one(&config, &tensors);
    let vision = elements(&tensors, "model.vision_tower.");
    let projector = elements(&tensors, "model.multi_modal_projector.");
    assert_eq!(projector, V_HIDDEN * G_HIDDEN + V_HIDDEN);
    assert_wrapper(&v, &tensors, vision, projector);
    let p = &v.artifacts[0].parameters;
    // Tied: no lm_head stored or counted; the language model's own parts are all there.
    assert_eq!(p.by_component.get(&Component::Embedding), Some(&(G_VOCAB * G_HIDDEN)));
    assert!(!p.by_component.contains_key(&Component::LmHead));
    // Gemma 3's default pattern: five sliding layers, then a full one.
    let arch = v.artifacts[0].architecture.as_ref().expect("architecture");
    let kinds: Vec<Value> = arch
        .attention
        .iter()
        .map(|a| serde_json::to_value(a).expect("json")["kind"].clone())
        .collect();
    assert_eq!(
        kinds,
        ["sliding", "sliding", "sliding", "sliding", "sliding", "full"].map(Value::from)
    );
    assert_eq!(arch.model_type, "gemma3_text");
}

#[test]
fn gemma3_published_names_plan_the_same() {
    // The published Gemma 3 checkpoints keep the 4.x names: `language_model.model.`,
    // `vision_tower.`, `multi_modal_projector.`.
    let config = gemma3_config();
    let tensors = gemma3_tensors("language_model.model.", "vision_tower.", "multi_modal_projector.");
    let v = plan_one(&config, &tensors);
    assert_wrapper(
        &v,
        &tensors,
        elements(&tensors, "vision_tower."),
        elements(&tensors, "multi_modal_projector."),
    );
}

#[test]
fn gemma3_vision_config_is_graded_against_the_siglip_registry() {
    let tensors = gemma3_tensors(
        "model.language_model.",
        "model.vision_tower.",
        "model.multi_modal_projector.",
    );
    assert_vision_keys_graded_by_the_encoder(&gemma3_config(), &tensors);
}

// ---------------------------------------------------------------------------------------
// Mistral 3: a config shaped like mistralai/Mistral-Small-3.1-24B-Instruct-2503's (model_type
// `mistral3`, text `mistral`, vision `pixtral`), scaled down.

const M_HIDDEN: u64 = 64;
const M_HEADS: u64 = 4;
const M_KV: u64 = 2;
const M_HEAD_DIM: u64 = 32;
const M_FFN: u64 = 160;
const M_VOCAB: u64 = 512;
const M_LAYERS: u64 = 2;
const P_HIDDEN: u64 = 32;
const P_FFN: u64 = 64;
const P_LAYERS: u64 = 2;
const P_PATCH: u64 = 14;
const MERGE: u64 = 2;

fn mistral3_config() -> Value {
    json!({
        "architectures": ["Mistral3ForConditionalGeneration"],
        "model_type": "mistral3",
        "image_token_index": 10,
        "multimodal_projector_bias": false,
        "projector_hidden_act": "gelu",
        "spatial_merge_size": MERGE,
        "vision_feature_layer": -1,
        "torch_dtype": "bfloat16",
        "transformers_version": "5.24.0",
        "text_config": {
            "model_type": "mistral",
            "attention_dropout": 0.0,
            "head_dim": M_HEAD_DIM,
            "hidden_act": "silu",
            "hidden_size": M_HIDDEN,
            "initializer_range": 0.02,
            "intermediate_size": M_FFN,
            "max_position_embeddings": 131072,
            "num_attention_heads": M_HEADS,
            "num_hidden_layers": M_LAYERS,
            "num_key_value_heads": M_KV,
            "rms_norm_eps": 1e-05,
            "rope_theta": 1000000000.0,
            "sliding_window": null,
            "use_cache": true,
            "vocab_size": M_VOCAB
        },
        "vision_config": {
            "model_type": "pixtral",
            "attention_dropout": 0.0,
            "head_dim": P_HIDDEN / 4,
            "hidden_act": "silu",
            "hidden_size": P_HIDDEN,
            "image_size": 1540,
            "initializer_range": 0.02,
            "intermediate_size": P_FFN,
            "num_attention_heads": 4,
            "num_channels": 3,
            "num_hidden_layers": P_LAYERS,
            "patch_size": P_PATCH,
            "rope_theta": 10000.0
        }
    })
}

fn mistral3_tensors(lm: &str, head: &str, vision: &str, projector: &str) -> Vec<Spec> {
    let mut out = vec![
        t(format!("{lm}embed_tokens.weight"), &[M_VOCAB, M_HIDDEN]),
        t(format!("{lm}norm.weight"), &[M_HIDDEN]),
        t(format!("{head}weight"), &[M_VOCAB, M_HIDDEN]),
    ];
    for l in 0..M_LAYERS {
        let p = format!("{lm}layers.{l}.");
        out.extend([
            t(format!("{p}input_layernorm.weight"), &[M_HIDDEN]),
            t(format!("{p}post_attention_layernorm.weight"), &[M_HIDDEN]),
            t(format!("{p}self_attn.q_proj.weight"), &[M_HEADS * M_HEAD_DIM, M_HIDDEN]),
            t(format!("{p}self_attn.k_proj.weight"), &[M_KV * M_HEAD_DIM, M_HIDDEN]),
            t(format!("{p}self_attn.v_proj.weight"), &[M_KV * M_HEAD_DIM, M_HIDDEN]),
            t(format!("{p}self_attn.o_proj.weight"), &[M_HIDDEN, M_HEADS * M_HEAD_DIM]),
            t(format!("{p}mlp.gate_proj.weight"), &[M_FFN, M_HIDDEN]),
            t(format!("{p}mlp.up_proj.weight"), &[M_FFN, M_HIDDEN]),
            t(format!("{p}mlp.down_proj.weight"), &[M_HIDDEN, M_FFN]),
        ]);
    }
    // PixtralVisionModel: patch_conv, ln_pre, transformer.layers.N.{attention,feed_forward}.
    out.extend([
        t(format!("{vision}patch_conv.weight"), &[P_HIDDEN, 3, P_PATCH, P_PATCH]),
        t(format!("{vision}ln_pre.weight"), &[P_HIDDEN]),
    ]);
    for l in 0..P_LAYERS {
        let p = format!("{vision}transformer.layers.{l}.");
        out.extend([
            t(format!("{p}attention_norm.weight"), &[P_HIDDEN]),
            t(format!("{p}ffn_norm.weight"), &[P_HIDDEN]),
            t(format!("{p}attention.q_proj.weight"), &[P_HIDDEN, P_HIDDEN]),
            t(format!("{p}attention.k_proj.weight"), &[P_HIDDEN, P_HIDDEN]),
            t(format!("{p}attention.v_proj.weight"), &[P_HIDDEN, P_HIDDEN]),
            t(format!("{p}attention.o_proj.weight"), &[P_HIDDEN, P_HIDDEN]),
            t(format!("{p}feed_forward.gate_proj.weight"), &[P_FFN, P_HIDDEN]),
            t(format!("{p}feed_forward.up_proj.weight"), &[P_FFN, P_HIDDEN]),
            t(format!("{p}feed_forward.down_proj.weight"), &[P_HIDDEN, P_FFN]),
        ]);
    }
    // Mistral3MultiModalProjector: norm, patch merger, two linears (no bias).
    out.extend([
        t(format!("{projector}norm.weight"), &[P_HIDDEN]),
        t(
            format!("{projector}patch_merger.merging_layer.weight"),
            &[P_HIDDEN, P_HIDDEN * MERGE * MERGE],
        ),
        t(format!("{projector}linear_1.weight"), &[M_HIDDEN, P_HIDDEN]),
        t(format!("{projector}linear_2.weight"), &[M_HIDDEN, M_HIDDEN]),
    ]);
    out
}

#[test]
fn mistral3_wrapper_counts_pixtral_and_projector_apart_from_the_language_model() {
    let config = mistral3_config();
    let tensors = mistral3_tensors(
        "model.language_model.",
        "lm_head.",
        "model.vision_tower.",
        "model.multi_modal_projector.",
    );
    let v = plan_one(&config, &tensors);
    let vision = elements(&tensors, "model.vision_tower.");
    let projector = elements(&tensors, "model.multi_modal_projector.");
    assert_eq!(
        projector,
        P_HIDDEN + P_HIDDEN * P_HIDDEN * 4 + M_HIDDEN * P_HIDDEN + M_HIDDEN * M_HIDDEN
    );
    assert_wrapper(&v, &tensors, vision, projector);
    let p = &v.artifacts[0].parameters;
    assert_eq!(p.by_component.get(&Component::LmHead), Some(&(M_VOCAB * M_HIDDEN)));
    let arch = v.artifacts[0].architecture.as_ref().expect("architecture");
    assert_eq!(arch.model_type, "mistral");
    assert_eq!(
        (arch.layers, arch.kv_heads, arch.head_dim),
        (M_LAYERS, M_KV, M_HEAD_DIM)
    );
}

#[test]
fn mistral3_published_names_plan_the_same() {
    // Mistral Small 3.1's published checkpoint: `language_model.model.`,
    // `language_model.lm_head.`, `vision_tower.`, `multi_modal_projector.`.
    let config = mistral3_config();
    let tensors = mistral3_tensors(
        "language_model.model.",
        "language_model.lm_head.",
        "vision_tower.",
        "multi_modal_projector.",
    );
    let v = plan_one(&config, &tensors);
    assert_wrapper(
        &v,
        &tensors,
        elements(&tensors, "vision_tower."),
        elements(&tensors, "multi_modal_projector."),
    );
}

#[test]
fn mistral3_vision_config_is_graded_against_the_pixtral_registry() {
    let tensors = mistral3_tensors(
        "model.language_model.",
        "lm_head.",
        "model.vision_tower.",
        "model.multi_modal_projector.",
    );
    assert_vision_keys_graded_by_the_encoder(&mistral3_config(), &tensors);
}

/// Item 2 of the grading issue: a wrapper no family names (`llava`, the generic LLaVA class)
/// around a known text model (`mistral`) with a known encoder (Pixtral) is planned as the text
/// family plus that encoder; its own keys are graded by what transformers' `llava` and vLLM's
/// `LlavaForConditionalGeneration` read, not by a family table.
#[test]
fn any_known_text_model_with_any_known_encoder_is_a_wrapper() {
    let mut config = mistral3_config();
    config["model_type"] = json!("llava");
    // Without `architectures` no vLLM class is named: transformers' reading alone grades.
    config.as_object_mut().expect("object").remove("architectures");
    // LlavaConfig's own keys: a token id, a default, a key neither reference reads.
    config["multimodal_projector_bias"] = json!(true);
    config["ignore_index"] = json!(-100);
    // Mistral 3 takes the last layer's features; LLaVA reads `vision_feature_layer` and
    // defaults to the one before: another value would change what it computes.
    config["vision_feature_layer"] = json!(-2);
    config["frobnicate_wrapper"] = json!(3);
    let tensors = mistral3_tensors(
        "model.language_model.",
        "lm_head.",
        "model.vision_tower.",
        "model.multi_modal_projector.",
    );
    let v = plan_one(&config, &tensors);
    let vision = elements(&tensors, "model.vision_tower.");
    let projector = elements(&tensors, "model.multi_modal_projector.");
    assert_wrapper(&v, &tensors, vision, projector);
    let code = |subject: &str| {
        v.artifacts[0]
            .findings
            .iter()
            .find(|f| f.subject == subject)
            .map(|f| f.code.to_string())
    };
    assert_eq!(code("config.frobnicate_wrapper").as_deref(), Some("config.ignored_key"));
    assert_eq!(
        code("config.multimodal_projector_bias").as_deref(),
        Some("config.default_value")
    );
    assert_eq!(
        code("config.vision_feature_layer").as_deref(),
        Some("config.default_value")
    );
    assert_eq!(code("config.image_token_index"), None, "a token id is metadata");
    config["vision_feature_layer"] = json!(-1);
    assert!(!plan_one(&config, &tensors).admissible, "read, and not the default");
    config["vision_feature_layer"] = json!(-2);
    // The encoder's config is still graded by the encoder's registry: fail closed.
    assert_vision_keys_graded_by_the_encoder(&config, &tensors);
}

/// vLLM's `LlavaForConditionalGeneration` reads its config where the extraction cannot name
/// the key (`vision.py` subscripts, `pixtral.py` `to_dict()`): every key then counts as read
/// (DECISIONS), so a key no one defines is blocking there, not ignored.
#[test]
fn a_dynamic_read_in_the_serving_engine_keeps_every_key_read() {
    let mut config = mistral3_config();
    config["model_type"] = json!("llava");
    config["architectures"] = json!(["LlavaForConditionalGeneration"]);
    config["frobnicate_wrapper"] = json!(3);
    let tensors = mistral3_tensors(
        "model.language_model.",
        "lm_head.",
        "model.vision_tower.",
        "model.multi_modal_projector.",
    );
    let v = plan_one(&config, &tensors);
    let f = v.artifacts[0]
        .findings
        .iter()
        .find(|f| f.subject == "config.frobnicate_wrapper")
        .expect("graded");
    assert_eq!(
        (f.code.as_str(), f.severity),
        ("config.unknown_key", Severity::Blocking)
    );
}
