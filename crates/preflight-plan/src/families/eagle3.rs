//! An EAGLE-3 draft head (`speculative: eagle3:K`, the second source): one Llama decoder layer
//! whose attention reads the token embedding and the fused target features side by side
//! (`2 × hidden` in), an `fc` fusing three of the target's hidden states (`3 × hidden` →
//! `hidden`), a final norm, its own `lm_head` over a reduced draft vocabulary
//! (`draft_vocab_size`) and the `d2t` / `t2d` maps between the two vocabularies; no token
//! embedding of its own (the engines use the target's). The layout is the one EAGLE's training
//! code saves (SafeAILab/EAGLE `eagle/traineagle3/cnets.py` `Model`: `midlayer`, `norm`, `fc`,
//! `lm_head`, buffers `d2t`/`t2d`; frozen parameters — the embedding — left out by
//! `save_16bit_model(exclude_frozen_parameters=True)` in `main.py`), and the one vLLM 0.19.0
//! loads (`model_executor/models/llama_eagle3.py`: `midlayer.` read as `layers.0.`, `d2t` into
//! `draft_id_to_target_id`, `t2d` skipped).
//!
//! Not in [`super::FAMILIES`]: its `config.json` says `llama` (yuhuili's even names
//! `LlamaForCausalLM`), so it is read this way only for the source the option names the draft.

use super::*;

/// `midlayer.*` is the head's one decoder layer (vLLM `llama_eagle3.py` `load_weights`:
/// `name.replace("midlayer.", "layers.0.")`).
const TENSORS: &[TensorGroup] = &[
    group("midlayer.self_attn.{q,k,v,o}_proj.weight", Attention),
    group("midlayer.mlp.{gate,up,down}_proj.weight", Mlp),
    group(
        "midlayer.{input_layernorm,hidden_norm,post_attention_layernorm}.weight",
        Norm,
    ),
    group("norm.weight", Norm),
    // `LlamaModel.fc`: a `ReplicatedLinear` (`llama_eagle3.py:186-194`), held whole by every rank.
    group("fc.weight", Mlp),
    group("lm_head.weight", LmHead),
    // Shipped by some heads (SpecForge's); the engines may share the target's instead.
    group("embed_tokens.weight", Embedding),
    // The vocabulary maps: int64 `d2t` (loaded), bool `t2d` (skipped by both engines).
    group("d2t", Buffer),
    group("t2d", Buffer),
];

pub static DRAFT: Family = Family {
    name: "eagle3",
    model_types: &["llama"],
    architectures: &["LlamaForCausalLMEagle3", "Eagle3LlamaForCausalLM", "LlamaForCausalLM"],
    keys: &[
        ("attention_bias", Grade::Consumed),
        ("mlp_bias", Grade::Consumed),
        // The reduced vocabulary of `lm_head` and `d2t` (`Eagle3LlamaForCausalLM.__init__`).
        ("draft_vocab_size", Grade::Consumed),
        // The target's hidden size, when it differs: `fc` takes three of them.
        ("target_hidden_size", Grade::Consumed),
        // SpecForge and speculators heads: which target layers feed `fc`, and norm placement.
        ("eagle_config", Grade::Consumed),
        ("norm_before_residual", Grade::Numerics),
        ("norm_before_fc", Grade::Consumed),
    ],
    tensors: &[TENSORS],
    tp_replicated: &["fc.weight"],
    normalize,
    ..Family::BASE
};

fn normalize(model_type: &str, cfg: &mut ConfigReader) -> Option<Normalized> {
    let dims = read_dims(cfg, false)?;
    if dims.layers != 1 {
        cfg.unsupported(
            "num_hidden_layers",
            "an EAGLE-3 head of more than one decoder layer (stored past `midlayer`) is not modelled",
        );
        return None;
    }
    let draft_vocab = cfg.opt_positive("draft_vocab_size").unwrap_or(dims.vocab);
    let target_hidden = cfg.opt_positive("target_hidden_size").unwrap_or(dims.hidden);
    let q = dims.heads.saturating_mul(dims.head_dim);
    let kv = dims.kv_heads.saturating_mul(dims.head_dim);
    // The layer's attention reads [embedding, fused hidden state]: 2 × hidden in
    // (`llama_eagle3.py:51-66`); `fc` fuses three target hidden states.
    let rule = |pattern, dim, value, keys| ShapeRule {
        pattern,
        dim,
        value,
        keys,
    };
    let shapes = vec![
        rule(
            "midlayer.self_attn.q_proj.weight",
            0,
            q,
            "num_attention_heads × head_dim",
        ),
        rule(
            "midlayer.self_attn.k_proj.weight",
            0,
            kv,
            "num_key_value_heads × head_dim",
        ),
        rule(
            "midlayer.self_attn.v_proj.weight",
            0,
            kv,
            "num_key_value_heads × head_dim",
        ),
        rule(
            "midlayer.self_attn.{q,k,v}_proj.weight",
            1,
            dims.hidden.saturating_mul(2),
            "2 × hidden_size",
        ),
        rule(
            "midlayer.self_attn.o_proj.weight",
            1,
            q,
            "num_attention_heads × head_dim",
        ),
        rule("fc.weight", 0, dims.hidden, "hidden_size"),
        rule(
            "fc.weight",
            1,
            target_hidden.saturating_mul(3),
            "3 × target_hidden_size (else hidden_size)",
        ),
        rule("lm_head.weight", 0, draft_vocab, "draft_vocab_size (else vocab_size)"),
        rule("lm_head.weight", 1, dims.hidden, "hidden_size"),
        rule("d2t", 0, draft_vocab, "draft_vocab_size"),
        rule("t2d", 0, dims.vocab, "vocab_size"),
        rule("embed_tokens.weight", 0, dims.vocab, "vocab_size"),
    ];
    let model = dims.model(model_type, DRAFT.name, uniform(1, dims.attention(Span::Full)), None);
    Some(Normalized { model, shapes })
}
