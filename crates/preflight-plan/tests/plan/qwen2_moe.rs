//! Qwen2-MoE on a small synthetic checkpoint named as transformers saves `Qwen2MoeForCausalLM`
//! (no bundled fixture: no verbatim published config was found to build one from). Its shared
//! expert and the sigmoid gate beside it are counted under `shared_experts`; `qkv_bias` and
//! `shared_expert_intermediate_size` are read, not refused.

use preflight_plan::{Component, PlanOptions, plan};
use serde_json::json;

const HIDDEN: u64 = 64;
const HEADS: u64 = 4;
const HEAD_DIM: u64 = 16;
const KV: u64 = 2;
const EXPERTS: u64 = 4;
const EXPERT_WIDTH: u64 = 32;
const SHARED_WIDTH: u64 = 96;
const VOCAB: u64 = 256;
const LAYERS: u64 = 2;

fn tensors() -> Vec<(String, Vec<u64>)> {
    let mut t = vec![
        ("model.embed_tokens.weight".to_owned(), vec![VOCAB, HIDDEN]),
        ("model.norm.weight".to_owned(), vec![HIDDEN]),
        ("lm_head.weight".to_owned(), vec![VOCAB, HIDDEN]),
    ];
    for l in 0..LAYERS {
        let p = format!("model.layers.{l}.");
        t.extend([
            (format!("{p}input_layernorm.weight"), vec![HIDDEN]),
            (format!("{p}post_attention_layernorm.weight"), vec![HIDDEN]),
            (format!("{p}self_attn.q_proj.weight"), vec![HEADS * HEAD_DIM, HIDDEN]),
            (format!("{p}self_attn.q_proj.bias"), vec![HEADS * HEAD_DIM]),
            (format!("{p}self_attn.k_proj.weight"), vec![KV * HEAD_DIM, HIDDEN]),
            (format!("{p}self_attn.k_proj.bias"), vec![KV * HEAD_DIM]),
            (format!("{p}self_attn.v_proj.weight"), vec![KV * HEAD_DIM, HIDDEN]),
            (format!("{p}self_attn.v_proj.bias"), vec![KV * HEAD_DIM]),
            (format!("{p}self_attn.o_proj.weight"), vec![HIDDEN, HEADS * HEAD_DIM]),
            (format!("{p}mlp.gate.weight"), vec![EXPERTS, HIDDEN]),
            (
                format!("{p}mlp.shared_expert.gate_proj.weight"),
                vec![SHARED_WIDTH, HIDDEN],
            ),
            (
                format!("{p}mlp.shared_expert.up_proj.weight"),
                vec![SHARED_WIDTH, HIDDEN],
            ),
            (
                format!("{p}mlp.shared_expert.down_proj.weight"),
                vec![HIDDEN, SHARED_WIDTH],
            ),
            (format!("{p}mlp.shared_expert_gate.weight"), vec![1, HIDDEN]),
        ]);
        for e in 0..EXPERTS {
            t.extend([
                (
                    format!("{p}mlp.experts.{e}.gate_proj.weight"),
                    vec![EXPERT_WIDTH, HIDDEN],
                ),
                (format!("{p}mlp.experts.{e}.up_proj.weight"), vec![EXPERT_WIDTH, HIDDEN]),
                (
                    format!("{p}mlp.experts.{e}.down_proj.weight"),
                    vec![HIDDEN, EXPERT_WIDTH],
                ),
            ]);
        }
    }
    t
}

#[test]
fn qwen2_moe_counts_its_gated_shared_expert() {
    let config = json!({
        "architectures": ["Qwen2MoeForCausalLM"], "model_type": "qwen2_moe",
        "hidden_size": HIDDEN, "intermediate_size": 128, "num_attention_heads": HEADS,
        "num_key_value_heads": KV, "num_hidden_layers": LAYERS, "vocab_size": VOCAB,
        "max_position_embeddings": 8192, "num_experts": EXPERTS, "num_experts_per_tok": 2,
        "moe_intermediate_size": EXPERT_WIDTH, "shared_expert_intermediate_size": SHARED_WIDTH,
        "decoder_sparse_step": 1, "mlp_only_layers": [], "qkv_bias": true, "norm_topk_prob": false,
        "use_sliding_window": false, "sliding_window": 4096, "max_window_layers": 21,
        "tie_word_embeddings": false, "torch_dtype": "bfloat16", "rope_theta": 1000000.0,
        "router_aux_loss_coef": 0.001, "output_router_logits": false
    });
    let header = preflight_testhub::facts::header(tensors().into_iter().map(|(name, shape)| (name, "BF16", shape)));
    let facts = preflight_testhub::facts::single_file(Some(&config), header, None);
    let verdict = plan(&[facts], &PlanOptions::default()).expect("valid options");
    let a = &verdict.artifacts[0];
    assert!(verdict.admissible, "{:#?}", a.findings);
    let shared = LAYERS * (3 * SHARED_WIDTH * HIDDEN + HIDDEN);
    assert_eq!(a.parameters.by_component[&Component::SharedExperts], shared);
    let routed = LAYERS * EXPERTS * 3 * EXPERT_WIDTH * HIDDEN;
    assert_eq!(a.parameters.by_component[&Component::Experts], routed);
    let total: u64 = tensors().iter().map(|(_, s)| s.iter().product::<u64>()).sum();
    assert_eq!(a.parameters.total, total);
    // Two of four routed experts a token, the shared one always.
    assert_eq!(
        a.parameters.active_per_token,
        Some(total - routed + routed / EXPERTS * 2)
    );
    let moe = a.architecture.as_ref().and_then(|x| x.moe.as_ref()).expect("moe");
    assert_eq!((moe.experts, moe.active, moe.shared), (EXPERTS, 2, 1));
}
