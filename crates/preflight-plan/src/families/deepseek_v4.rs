//! DeepSeek-V4 (`deepseek_v4`): shared-KV multi-query attention (one `head_dim`-wide head
//! read as both K and V) over a sliding window, plus per layer one of two compressed
//! branches, chosen by `compress_ratios` (transformers 5.24 `configuration_deepseek_v4.py`
//! `_COMPRESS_RATIO_TO_LAYER_TYPE`): 4 → compressed sparse attention (an entry per 4
//! tokens, and a Lightning Indexer with its own compressed key: `csa_indexer`), 128 →
//! heavily compressed attention (an entry per 128 tokens, no indexer: `hca`), 0 → the window
//! alone (`sliding`). A grouped low-rank output projection (`o_groups`, `o_lora_rank`),
//! manifold-constrained hyper-connections around every block (`hc_*`, `hc_mult` residual
//! streams), a routed MoE on every layer (the first `num_hash_layers` route by a frozen
//! `tid2eid` table, a buffer, as is every router's bias), and `num_nextn_predict_layers`
//! MTP blocks under `mtp.N.`.
//!
//! Tensors by DeepSeek's own names (`embed`, `head`, `norm`, `layers.N.{attn,ffn}.…`,
//! `mtp.N.…`), as the published checkpoint stores them; routed experts FP4 (`expert_dtype`),
//! the rest FP8 with F8_E8M0 `.scale` blocks (quant.rs).
//!
//! Memory: transformers keeps, per layer, the window's rows and the compressed entries as
//! growing tensors (`DeepseekV4HCACache`, `DeepseekV4CSACache`); how an engine pages them is
//! not established, so the cache is refused (memory.rs `layer_cache`), never guessed.

use super::*;

const KEYS: &[(&str, Grade)] = &[
    ("num_hidden_layers", Grade::Consumed),
    ("hidden_size", Grade::Consumed),
    ("moe_intermediate_size", Grade::Consumed),
    ("num_attention_heads", Grade::Consumed),
    // Checked to be 1: the cache model is one shared K=V head.
    ("num_key_value_heads", Grade::Consumed),
    ("head_dim", Grade::Consumed),
    ("vocab_size", Grade::Consumed),
    ("max_position_embeddings", Grade::Consumed),
    ("q_lora_rank", Grade::Consumed),
    ("o_groups", Grade::Consumed),
    ("o_lora_rank", Grade::Consumed),
    ("qk_rope_head_dim", Grade::Consumed),
    ("partial_rotary_factor", Grade::Consumed),
    ("sliding_window", Grade::Consumed),
    ("compress_ratios", Grade::Consumed),
    ("layer_types", Grade::Consumed),
    ("compress_rates", Grade::Consumed),
    ("compress_rate_csa", Grade::Consumed),
    ("compress_rate_hca", Grade::Consumed),
    ("index_head_dim", Grade::Consumed),
    ("index_n_heads", Grade::Consumed),
    ("n_routed_experts", Grade::Consumed),
    ("n_shared_experts", Grade::Consumed),
    ("num_experts_per_tok", Grade::Consumed),
    ("num_nextn_predict_layers", Grade::Consumed),
    ("hc_mult", Grade::Consumed),
    ("expert_dtype", Grade::Consumed),
    // Checked to be false: the projections have no biases.
    ("attention_bias", Grade::Consumed),
    ("mlp_bias", Grade::Consumed),
    // Hash routing changes which experts a token meets, not what is stored (the table is a
    // buffer either way).
    ("num_hash_layers", Grade::Numerics),
    ("mlp_layer_types", Grade::Numerics),
    ("index_topk", Grade::Numerics),
    ("compress_rope_theta", Grade::Numerics),
    ("hc_sinkhorn_iters", Grade::Numerics),
    ("hc_eps", Grade::Numerics),
    ("swiglu_limit", Grade::Numerics),
    ("scoring_func", Grade::Numerics),
    ("topk_method", Grade::Numerics),
    ("norm_topk_prob", Grade::Numerics),
    ("routed_scaling_factor", Grade::Numerics),
    ("router_jitter_noise", Grade::TrainingOnly),
];

/// The attention and compressor projections, norms and sinks; the indexer's; the MoE.
/// `hc_*` (the hyper-connections' mixing weights, F32) count as norms: small, held whole by
/// every rank, never quantized.
const TENSORS: &[&[TensorGroup]] = &[&[
    group("embed.weight", Embedding),
    group("head.weight", LmHead),
    group("norm.weight", Norm),
    group("hc_head_{fn,base,scale}", Norm),
    group("layers.N.{attn_norm,ffn_norm}.weight", Norm),
    group("layers.N.hc_{attn,ffn}_{fn,base,scale}", Norm),
    group("layers.N.attn.{wq_a,wq_b,wkv,wo_a,wo_b}.weight", Attention),
    group("layers.N.attn.{q_norm,norm}.weight", Norm),
    group("layers.N.attn.attn_sink", Attention),
    group("layers.N.attn.compressor.{wkv,wgate}.weight", Attention),
    group("layers.N.attn.compressor.ape", Attention),
    group("layers.N.attn.compressor.norm.weight", Norm),
    group("layers.N.attn.indexer.{wq_b,weights_proj}.weight", Attention),
    group("layers.N.attn.indexer.compressor.{wkv,wgate}.weight", Attention),
    group("layers.N.attn.indexer.compressor.ape", Attention),
    group("layers.N.attn.indexer.compressor.norm.weight", Norm),
    group("layers.N.ffn.gate.weight", Router),
    group("layers.N.ffn.gate.{bias,tid2eid}", Buffer),
    group("layers.N.ffn.experts.N.{w1,w2,w3}.weight", Experts),
    group("layers.N.ffn.shared_experts.{w1,w2,w3}.weight", SharedExperts),
]];

/// The MTP block's own tensors beside its decoder layer's (read as `layers.N.…`).
const MTP_TENSORS: &[TensorGroup] = &[
    group("mtp.N.{e_proj,h_proj}.weight", Mtp),
    group("mtp.N.{enorm,hnorm,norm}.weight", Mtp),
    group("mtp.N.hc_head_{fn,base,scale}", Mtp),
];

pub static FAMILY: Family = Family {
    name: "deepseek_v4",
    model_types: &["deepseek_v4"],
    architectures: &["DeepseekV4ForCausalLM"],
    keys: KEYS,
    tensors: TENSORS,
    mtp: Some(MtpLayout::Prefixed("mtp.", "layers.")),
    mtp_tensors: MTP_TENSORS,
    normalize,
    ..Family::BASE
};

/// transformers' compress ratio → layer type table; the rate each type compresses at comes
/// from `compress_rates`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Sliding,
    Csa,
    Hca,
}

fn kinds(cfg: &mut ConfigReader, layers: u64) -> Option<Vec<Kind>> {
    let kinds: Vec<Kind> = if cfg.value("layer_types").is_some() {
        let mut out = Vec::new();
        for t in cfg.opt_str_list("layer_types")? {
            out.push(match t {
                "sliding_attention" => Kind::Sliding,
                "compressed_sparse_attention" => Kind::Csa,
                "heavily_compressed_attention" => Kind::Hca,
                other => {
                    cfg.unsupported(
                        "layer_types",
                        format!("layer type `{other}` is not one DeepSeek-V4 builds"),
                    );
                    return None;
                }
            });
        }
        out
    } else if cfg.value("compress_ratios").is_some() {
        let mut out = Vec::new();
        for r in cfg.opt_u64_list("compress_ratios")? {
            out.push(match r {
                0 => Kind::Sliding,
                4 => Kind::Csa,
                128 => Kind::Hca,
                other => {
                    cfg.unsupported(
                        "compress_ratios",
                        format!("compress ratio {other} is none of 0, 4, 128 (transformers' table)"),
                    );
                    return None;
                }
            });
        }
        out
    } else {
        // DeepseekV4Config's default: two HCA layers, then CSA and HCA interleaved.
        (0..layers)
            .map(|i| match i {
                0 | 1 => Kind::Hca,
                i if i % 2 == 1 => Kind::Csa,
                _ => Kind::Hca,
            })
            .collect()
    };
    // transformers truncates to the main stack (a longer list names the MTP layers too).
    if (kinds.len() as u64) < layers {
        cfg.findings.mismatch(
            crate::findings::Code::ConfigInvalidValue,
            "config.compress_ratios",
            layers,
            kinds.len(),
            "one compress ratio (or layer type) per layer is needed",
        );
        return None;
    }
    Some(kinds.into_iter().take(layers as usize).collect())
}

/// `compress_rates` (or the legacy scalars): the CSA and HCA ratios.
fn rates(cfg: &mut ConfigReader) -> Option<(u64, u64)> {
    let (mut csa, mut hca) = (4, 128);
    if let Some(rates) = cfg.opt_object("compress_rates") {
        let rate = |key: &str| rates.get(key).and_then(serde_json::Value::as_u64);
        csa = rate("compressed_sparse_attention").unwrap_or(csa);
        hca = rate("heavily_compressed_attention").unwrap_or(hca);
    }
    csa = cfg.opt_u64("compress_rate_csa").unwrap_or(csa);
    hca = cfg.opt_u64("compress_rate_hca").unwrap_or(hca);
    if csa == 0 || hca == 0 {
        cfg.unsupported("compress_rates", "a compress rate of 0 compresses nothing");
        return None;
    }
    Some((csa, hca))
}

fn normalize(model_type: &str, cfg: &mut ConfigReader) -> Option<Normalized> {
    let layers = cfg.layers("num_hidden_layers");
    let hidden = cfg.u64("hidden_size");
    let heads = cfg.u64("num_attention_heads");
    let head_dim = cfg.u64("head_dim");
    let vocab = cfg.u64("vocab_size");
    let context = cfg.u64("max_position_embeddings");
    let window = cfg.u64("sliding_window");
    let index_head_dim = cfg.u64("index_head_dim");
    let index_heads = cfg.u64("index_n_heads");
    let q_lora_rank = cfg.u64("q_lora_rank");
    let experts = cfg.u64("n_routed_experts");
    let active = cfg.u64("num_experts_per_tok");
    let shared = cfg.opt_u64("n_shared_experts").unwrap_or(1);
    let expert_width = cfg.opt_positive("moe_intermediate_size");
    let mtp_layers = cfg.opt_layers("num_nextn_predict_layers");
    let tie = cfg.opt_bool("tie_word_embeddings").unwrap_or(false);
    let dtype = cfg
        .opt_str("torch_dtype")
        .or_else(|| cfg.opt_str("dtype"))
        .map(str::to_owned);
    if cfg.opt_u64("num_key_value_heads").is_some_and(|kv| kv != 1) {
        cfg.unsupported(
            "num_key_value_heads",
            "DeepSeek-V4 attention is one shared K=V head; another count is not this model",
        );
        return None;
    }
    for key in ["attention_bias", "mlp_bias"] {
        if cfg.opt_bool(key) == Some(true) {
            cfg.unsupported(key, "DeepSeek-V4's projections have no biases");
            return None;
        }
    }
    let (csa, hca) = rates(cfg)?;
    let layers = layers?;
    let kinds = kinds(cfg, layers)?;
    let (head_dim, window, index_head_dim) = (head_dim?, window?, index_head_dim?);
    if window == 0 {
        cfg.unsupported("sliding_window", "every layer attends over a window; 0 is not one");
        return None;
    }
    // `qk_rope_head_dim` (legacy) or `partial_rotary_factor` × head_dim, as transformers reads it.
    let rope_dim = match cfg.opt_u64("qk_rope_head_dim") {
        Some(dim) => dim,
        None => {
            let factor = cfg.opt_f64("partial_rotary_factor").unwrap_or(64.0 / 512.0);
            (head_dim as f64 * factor) as u64
        }
    };
    let context = context?;
    let dims = Dims {
        layers,
        hidden: hidden?,
        heads: heads?,
        kv_heads: 1,
        head_dim,
        vocab: vocab?,
        context,
        tie,
        dtype,
        intermediate: None,
        rope: read_rope(cfg, context, |_| rope_dim),
    };
    let mixer = |kind: Kind| match kind {
        Kind::Sliding => Mixer::Attention {
            kv_heads: 1,
            head_dim,
            v_head_dim: head_dim,
            span: Span::Sliding(window),
            shared_kv: true,
        },
        Kind::Csa => Mixer::Compressed {
            head_dim,
            window,
            ratio: csa,
            indexer_head_dim: Some(index_head_dim),
        },
        Kind::Hca => Mixer::Compressed {
            head_dim,
            window,
            ratio: hca,
            indexer_head_dim: None,
        },
    };
    let moe = Moe {
        experts: experts?,
        active: active?,
        shared,
        dense_layers: Vec::new(),
        expert_intermediate_size: expert_width,
    };
    let mut shapes = vec![
        ShapeRule {
            pattern: "embed.weight",
            dim: 0,
            value: dims.vocab,
            keys: "vocab_size",
        },
        ShapeRule {
            pattern: "embed.weight",
            dim: 1,
            value: dims.hidden,
            keys: "hidden_size",
        },
        ShapeRule {
            pattern: "head.weight",
            dim: 0,
            value: dims.vocab,
            keys: "vocab_size",
        },
        ShapeRule {
            pattern: "layers.N.attn.wkv.weight",
            dim: 0,
            value: head_dim,
            keys: "head_dim (one shared K=V head)",
        },
        ShapeRule {
            pattern: "layers.N.attn.wq_b.weight",
            dim: 0,
            value: dims.heads.saturating_mul(head_dim),
            keys: "num_attention_heads × head_dim",
        },
        ShapeRule {
            pattern: "layers.N.ffn.gate.weight",
            dim: 0,
            value: moe.experts,
            keys: "n_routed_experts",
        },
        ShapeRule {
            pattern: "layers.N.attn.indexer.weights_proj.weight",
            dim: 0,
            value: index_heads?,
            keys: "index_n_heads",
        },
    ];
    if let Some(rank) = Some(q_lora_rank?) {
        shapes.push(ShapeRule {
            pattern: "layers.N.attn.wq_a.weight",
            dim: 0,
            value: rank,
            keys: "q_lora_rank",
        });
    }
    let mut model = dims.model(
        model_type,
        FAMILY.name,
        kinds.into_iter().map(mixer).collect(),
        Some(moe),
    );
    model.intermediate = None;
    model.mtp_layers = mtp_layers?;
    // `COMPRESS_RATIO_NEXTN_LAYER = 0`: the MTP block attends over the window alone.
    model.mtp_mixer = Some(mixer(Kind::Sliding));
    model.mtp_first_index = 0;
    Some(Normalized { model, shapes })
}
