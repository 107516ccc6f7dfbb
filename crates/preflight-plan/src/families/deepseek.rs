//! DeepSeek-V2 and V3 and the checkpoints that reuse their layout: DeepSeek-V2 (`deepseek_v2`:
//! the same MLA and MoE blocks; V2-Lite has no query down-projection, `q_lora_rank` null, so
//! `q_proj` in place of `q_a_proj`/`q_b_proj`), Kimi-K2 (`kimi_k2`, the V3 layout under its own
//! model_type) and DeepSeek-V3.2 (`deepseek_v32`: every layer adds a
//! sparse-attention indexer whose key is cached beside the latent). Multi-head latent
//! attention, MoE with shared experts after `first_k_dense_replace` dense layers, and
//! `num_nextn_predict_layers` MTP layers stored after the main stack. Kimi-K2.5's multimodal
//! wrapper is in `kimi_k25.rs`.

use super::*;
use crate::model::Deepseek2Graph;

/// Keys of the V3 config class (transformers `DeepseekV3Config`); V3.2 adds the indexer's.
const KEYS: &[(&str, Grade)] = &[
    ("moe_intermediate_size", Grade::Consumed),
    ("attention_bias", Grade::Consumed),
    ("q_lora_rank", Grade::Consumed),
    ("kv_lora_rank", Grade::Consumed),
    ("qk_rope_head_dim", Grade::Consumed),
    ("qk_nope_head_dim", Grade::Consumed),
    ("v_head_dim", Grade::Consumed),
    ("n_routed_experts", Grade::Consumed),
    ("n_shared_experts", Grade::Consumed),
    ("num_experts_per_tok", Grade::Consumed),
    ("first_k_dense_replace", Grade::Consumed),
    ("moe_layer_freq", Grade::Consumed),
    ("num_nextn_predict_layers", Grade::Consumed),
    ("index_head_dim", Grade::Consumed),
    ("index_n_heads", Grade::Consumed),
    ("index_topk", Grade::Numerics),
    ("n_group", Grade::Numerics),
    ("topk_group", Grade::Numerics),
    ("topk_method", Grade::Numerics),
    ("scoring_func", Grade::Numerics),
    ("norm_topk_prob", Grade::Numerics),
    ("routed_scaling_factor", Grade::Numerics),
    ("rope_interleave", Grade::Numerics),
    ("ep_size", Grade::Metadata),
    ("aux_loss_alpha", Grade::TrainingOnly),
    ("seq_aux", Grade::TrainingOnly),
];

/// MLA projections and norms, the indexer's, MoE with shared experts.
pub(super) const TENSORS: &[&[TensorGroup]] = &[
    EMBED_NORM_HEAD,
    &[
        group(
            "model.layers.N.self_attn.{q_a_proj,q_b_proj,q_proj,kv_a_proj_with_mqa,kv_b_proj,o_proj}.weight",
            Attention,
        ),
        group("model.layers.N.self_attn.{q_a_layernorm,kv_a_layernorm}.weight", Norm),
        group(
            "model.layers.N.self_attn.indexer.{wq_b,wk,weights_proj}.weight",
            Attention,
        ),
        group("model.layers.N.self_attn.indexer.k_norm.{weight,bias}", Norm),
        // Kimi-K2 stores the rotary inverse frequencies; transformers registers them as a
        // buffer.
        group("model.layers.N.self_attn.rotary_emb.inv_freq", Buffer),
    ],
    GATED_MLP,
    &[
        group("model.layers.N.mlp.gate.weight", Router),
        group("model.layers.N.mlp.gate.e_score_correction_bias", Buffer),
        group("model.layers.N.mlp.experts.N.{gate,up,down}_proj.weight", Experts),
        group(
            "model.layers.N.mlp.shared_experts.{gate,up,down}_proj.weight",
            SharedExperts,
        ),
    ],
];

/// The MTP layer's own tensors beside a decoder layer's (DeepSeek's `nextn` block).
pub(super) const MTP_TENSORS: &[TensorGroup] = &[group(
    "model.layers.N.{embed_tokens,enorm,hnorm,eh_proj,shared_head.norm,shared_head.head}.weight",
    Mtp,
)];

/// vLLM's DeepseekV2MLAAttention builds the latent down-projections as ReplicatedLinear, and
/// V3.2's indexer its three projections (vLLM 0.19 `deepseek_v2.py` `Indexer`, l.635-650;
/// SGLang 0.5.23 `dsa_indexer.py:344-371`); its MTP layer (`deepseek_mtp.py`
/// `DeepSeekMultiTokenPredictorLayer`) builds `eh_proj` as a plain `nn.Linear` and its norms
/// as `RMSNorm`, each whole on every rank.
pub(super) const TP_REPLICATED: &[&str] = &[
    "model.layers.N.self_attn.{q_a_proj,kv_a_proj_with_mqa}.weight",
    "model.layers.N.self_attn.indexer.{wq_b,wk,weights_proj}.weight",
    "model.layers.N.{enorm,hnorm,eh_proj,shared_head.norm}.weight",
];

pub static FAMILY: Family = Family {
    name: "deepseek",
    model_types: &["deepseek_v3", "kimi_k2", "deepseek_v32", "deepseek_v2"],
    architectures: &[
        "DeepseekV2ForCausalLM",
        "DeepseekV3ForCausalLM",
        "DeepseekV32ForCausalLM",
        "KimiK25ForConditionalGeneration",
    ],
    keys: KEYS,
    wrappers: &[super::kimi_k25::WRAPPER],
    tensors: TENSORS,
    mtp: Some(MtpLayout::Appended),
    mtp_tensors: MTP_TENSORS,
    tp_replicated: TP_REPLICATED,
    normalize,
    gguf: Some(Gguf {
        architectures: &[("deepseek2", "deepseek_v3")],
        keys: &[
            ("attention.key_length_mla", Grade::Consumed),
            ("attention.value_length_mla", Grade::Consumed),
            ("attention.q_lora_rank", Grade::Consumed),
            ("attention.kv_lora_rank", Grade::Consumed),
        ],
        tensors: &[
            group("blk.N.{attn_q_a_norm,attn_kv_a_norm}.{weight,bias}", Norm),
            group(
                "blk.N.{attn_q_a,attn_q_b,attn_kv_a_mqa,attn_kv_b,attn_k_b,attn_v_b}.{weight,bias}",
                Attention,
            ),
            group(
                "blk.N.nextn.{eh_proj,embed_tokens,enorm,hnorm,shared_head_head,shared_head_norm}.weight",
                Mtp,
            ),
        ],
        normalize: normalize_gguf,
    }),
    ..Family::BASE
};

/// llama.cpp's `deepseek2` (vendored in llama-cpp-python 0.3.36; paths under its `src/`).
///
/// MLA exactly when llama.cpp's `is_mla()` holds: `attention.key_length_mla` and
/// `attention.value_length_mla` both declared (llama-hparams.cpp:298-303, read at
/// models/deepseek2.cpp:16-17). The current converter writes them with `kv_b_proj` split into
/// `attn_k_b` / `attn_v_b` and the latent as one MQA head: `head_count_kv` 1, `key_length`
/// kv_lora_rank + qk_rope_head_dim (conversion/deepseek.py:326, 349-353). llama.cpp then caches
/// K only (`has_v = !is_mla`, llama-kv-cache.cpp:231), a row of `n_embd_k_gqa` = key_length ×
/// head_count_kv (llama-hparams.cpp:156-160, llama-kv-cache.cpp:209, 233) filled by the graph's
/// `Kcur` of kv_lora_rank + n_rot (models/deepseek2.cpp:572-576): the planner's latent. A file
/// without the two keys (written before the split, with `attn_kv_b`) runs llama.cpp's other path,
/// K and V of `key_length` / `value_length` per KV head, although it declares `kv_lora_rank`
/// too: this reader once took `kv_lora_rank` alone for MLA and planned such a file's cache at the
/// latent's size, a fraction of what llama.cpp allocates.
///
/// `block_count` holds the nextn (MTP) blocks after the main stack, as the converter appends
/// them (Glm4MoeLiteModel, conversion/glm.py:261-267): the main stack is `n_layer()` =
/// block_count − nextn_predict_layers (llama-hparams.cpp:348-350).
fn normalize_gguf(model_type: &str, kv: &mut GgufReader) -> Option<Normalized> {
    let (mut dims, kv_per_layer, v_head_dim) = llama_cpp::read_dims(kv)?;
    let nextn = kv.opt("nextn_predict_layers").unwrap_or(0);
    if nextn >= dims.layers {
        kv.unsupported(
            "nextn_predict_layers",
            "every block a nextn (MTP) block: a draft head without its model, not planned alone",
        );
        return None;
    }
    dims.layers -= nextn;
    let kv_heads_of = |i: u64| llama_cpp::kv_heads(&dims, kv_per_layer.as_ref(), i);
    let positive = |key: &str| kv.opt(key).filter(|n| *n > 0);
    let mut mla_shape = None;
    let mut graph = None;
    let layers = match (
        positive("attention.key_length_mla"),
        positive("attention.value_length_mla"),
    ) {
        (None, None) => (0..dims.layers)
            .map(|i| Mixer::Attention {
                kv_heads: kv_heads_of(i),
                head_dim: dims.head_dim,
                v_head_dim,
                span: Span::Full,
                shared_kv: false,
            })
            .collect(),
        (Some(k_mla), Some(v_mla)) => {
            let kv_lora_rank = kv.required("attention.kv_lora_rank")?;
            // `n_rot` defaults to key_length (llama-model.cpp:1446-1448).
            let rope_dim = kv.opt("rope.dimension_count").unwrap_or(dims.head_dim);
            // The graph asserts a non-rope part of each head (models/deepseek2.cpp:75-77).
            if k_mla <= rope_dim {
                kv.unsupported(
                    "attention.key_length_mla",
                    format!(
                        "not wider than rope.dimension_count ({rope_dim}): llama.cpp's deepseek2 graph asserts it is"
                    ),
                );
                return None;
            }
            let latent = kv_lora_rank.saturating_add(rope_dim);
            if dims.head_dim != latent {
                kv.unsupported(
                    "attention.key_length",
                    format!(
                        "not kv_lora_rank + rope.dimension_count ({latent}): the K cache row llama.cpp allocates would not be the latent its graph writes"
                    ),
                );
                return None;
            }
            if (0..dims.layers).any(|i| kv_heads_of(i) != 1) {
                kv.unsupported(
                    "attention.head_count_kv",
                    "not 1: llama.cpp's MLA writes one latent head a token, and sizes the K cache by head_count_kv",
                );
                return None;
            }
            let mla = Mixer::Mla {
                kv_lora_rank,
                rope_dim,
                indexer_head_dim: None,
            };
            graph = deepseek2_graph(kv, &dims, kv_lora_rank, rope_dim, k_mla, v_mla);
            // key_length_mla is a query/key head's width, nope and rope parts together.
            mla_shape = Some(MlaShape {
                dims: MlaDims {
                    kv_lora_rank,
                    q_lora_rank: kv.opt("attention.q_lora_rank").filter(|n| *n > 0),
                    qk_nope_head_dim: k_mla - rope_dim,
                    qk_rope_head_dim: rope_dim,
                    v_head_dim: v_mla,
                },
                declared_head_dim: None,
            });
            uniform(dims.layers, mla)
        }
        (k_mla, _) => {
            let (present, absent) = match k_mla {
                Some(_) => ("attention.key_length_mla", "attention.value_length_mla"),
                None => ("attention.value_length_mla", "attention.key_length_mla"),
            };
            kv.unsupported(
                present,
                format!("declared without `{absent}`: llama.cpp's is_mla() needs both (llama-hparams.cpp:298-303)"),
            );
            return None;
        }
    };
    let mut normalized = llama_cpp::finish(model_type, FAMILY.name, kv, &dims, layers);
    normalized.model.mla = mla_shape;
    normalized.model.llama_cpp_graph = graph.map(LlamaCppGraph::Deepseek2);
    Some(normalized)
}

/// The MLA graph llama.cpp builds for this file (models/deepseek2.cpp:540-592), where the
/// planner replays it: routing by softmax or sigmoid (deepseek2.cpp:22-31), no attention
/// temperature input (deepseek2.cpp:451-455). `probs_bias` is the tensors' to say
/// (`exp_probs_b` is optional, deepseek2.cpp:132): `gguf.rs` sets it.
fn deepseek2_graph(
    kv: &GgufReader,
    dims: &Dims,
    kv_lora_rank: u64,
    qk_rope: u64,
    k_mla: u64,
    v_mla: u64,
) -> Option<Deepseek2Graph> {
    let (layers, vocab) = (dims.layers, dims.vocab);
    // The lite variants read no q_lora_rank and project queries with `wq` (deepseek2.cpp:8-14, 105-110).
    let lite = layers == 27 || layers == 26 || (layers == 48 && vocab == 128_256);
    let q_lora_rank = match lite {
        true => 0,
        false => kv.opt("attention.q_lora_rank")?,
    };
    let gating = match kv.opt("expert_gating_func").unwrap_or(0) {
        0 if (layers == 47 || layers == 48) && vocab == 154_880 => 2,
        0 => 1,
        other => other,
    };
    // Softmax and sigmoid are each one in-place op on the logits (llama-graph.cpp:2054-2061);
    // the other gating functions shape the graph otherwise.
    let temperature = kv.opt_float("attention.temperature_scale").unwrap_or(0.0);
    if !matches!(gating, 1 | 2) || temperature != 0.0 {
        return None;
    }
    Some(Deepseek2Graph {
        q_lora_rank,
        kv_lora_rank,
        qk_nope: k_mla - qk_rope,
        qk_rope,
        v_head: v_mla,
        dense_lead: kv.opt("leading_dense_block_count").unwrap_or(0),
        shared_width: kv
            .opt("expert_feed_forward_length")?
            .saturating_mul(kv.opt("expert_shared_count").unwrap_or(0)),
        probs_bias: false,
        routing: llama_cpp::read_routing(kv)?,
    })
}

/// The MLA geometry every DeepSeek-layout config declares.
pub(super) struct Mla {
    pub dims: Dims,
    pub kv_lora_rank: u64,
    pub q_lora_rank: Option<u64>,
    pub qk_rope: u64,
    pub qk_nope: u64,
    pub v_head: u64,
    pub mtp_layers: u64,
    /// The config's own `head_dim`, when it declares one: a config class replaces it (V3's
    /// with `qk_rope_head_dim`), so it sizes nothing — the verdict shows it as declared.
    pub declared_head_dim: Option<u64>,
}

/// Read the MLA dimensions (shared with GLM's DSA layout).
pub(super) fn read_mla(cfg: &mut ConfigReader) -> Option<Mla> {
    let layers = cfg.layers("num_hidden_layers");
    let hidden = cfg.u64("hidden_size");
    let heads = cfg.u64("num_attention_heads");
    let kv_heads = cfg.opt_u64("num_key_value_heads").or(heads);
    let vocab = cfg.u64("vocab_size");
    let context = cfg.u64("max_position_embeddings");
    let kv_lora_rank = cfg.u64("kv_lora_rank");
    let q_lora_rank = cfg.opt_u64("q_lora_rank");
    let qk_rope = cfg.u64("qk_rope_head_dim");
    let qk_nope = cfg.u64("qk_nope_head_dim");
    let v_head = cfg.u64("v_head_dim");
    let intermediate = cfg.opt_positive("intermediate_size");
    let mtp_layers = cfg.opt_layers("num_nextn_predict_layers");
    let tie = cfg.opt_bool("tie_word_embeddings").unwrap_or(false);
    let dtype = cfg
        .opt_str("torch_dtype")
        .or_else(|| cfg.opt_str("dtype"))
        .map(str::to_owned);
    let (qk_rope, qk_nope) = (qk_rope?, qk_nope?);
    Some(Mla {
        dims: Dims {
            layers: layers?,
            hidden: hidden?,
            heads: heads?,
            kv_heads: kv_heads?,
            head_dim: qk_nope.saturating_add(qk_rope),
            vocab: vocab?,
            context: context?,
            tie,
            dtype,
            intermediate,
            // vLLM's `DeepseekV2MLAAttention` ropes only the `qk_rope_head_dim` channels.
            rope: read_rope(cfg, context?, |_| qk_rope),
        },
        kv_lora_rank: kv_lora_rank?,
        q_lora_rank,
        qk_rope,
        qk_nope,
        v_head: v_head?,
        mtp_layers: mtp_layers?,
        declared_head_dim: cfg.value("head_dim").and_then(|v| v.as_u64()).filter(|d| *d > 0),
    })
}

impl Mla {
    /// The widths as declared, for the verdict.
    pub fn shape(&self) -> MlaShape {
        MlaShape {
            dims: MlaDims {
                kv_lora_rank: self.kv_lora_rank,
                q_lora_rank: self.q_lora_rank,
                qk_nope_head_dim: self.qk_nope,
                qk_rope_head_dim: self.qk_rope,
                v_head_dim: self.v_head,
            },
            declared_head_dim: self.declared_head_dim,
        }
    }

    /// The MLA mixer, with the indexer's key width when the layer has an indexer.
    pub fn mixer(&self, indexer_head_dim: Option<u64>) -> Mixer {
        Mixer::Mla {
            kv_lora_rank: self.kv_lora_rank,
            rope_dim: self.qk_rope,
            indexer_head_dim,
        }
    }

    /// Shapes the MLA projections must have.
    pub fn shapes(&self, experts: u64) -> Vec<ShapeRule> {
        let heads = self.dims.heads;
        let mut shapes = self.dims.base_shapes();
        shapes.extend([
            ShapeRule {
                pattern: "model.layers.N.self_attn.kv_a_proj_with_mqa.weight",
                dim: 0,
                value: self.kv_lora_rank.saturating_add(self.qk_rope),
                keys: "kv_lora_rank + qk_rope_head_dim",
            },
            ShapeRule {
                pattern: "model.layers.N.self_attn.kv_b_proj.weight",
                dim: 0,
                value: heads.saturating_mul(self.qk_nope.saturating_add(self.v_head)),
                keys: "num_attention_heads × (qk_nope_head_dim + v_head_dim)",
            },
            ShapeRule {
                pattern: "model.layers.N.self_attn.o_proj.weight",
                dim: 1,
                value: heads.saturating_mul(self.v_head),
                keys: "num_attention_heads × v_head_dim",
            },
            ShapeRule {
                pattern: "model.layers.N.mlp.gate.weight",
                dim: 0,
                value: experts,
                keys: "n_routed_experts",
            },
        ]);
        let q_rows = heads.saturating_mul(self.qk_nope.saturating_add(self.qk_rope));
        match self.q_lora_rank {
            Some(rank) => shapes.extend([
                ShapeRule {
                    pattern: "model.layers.N.self_attn.q_a_proj.weight",
                    dim: 0,
                    value: rank,
                    keys: "q_lora_rank",
                },
                ShapeRule {
                    pattern: "model.layers.N.self_attn.q_b_proj.weight",
                    dim: 0,
                    value: q_rows,
                    keys: "num_attention_heads × (qk_nope_head_dim + qk_rope_head_dim)",
                },
            ]),
            None => shapes.push(ShapeRule {
                pattern: "model.layers.N.self_attn.q_proj.weight",
                dim: 0,
                value: q_rows,
                keys: "num_attention_heads × (qk_nope_head_dim + qk_rope_head_dim)",
            }),
        }
        shapes
    }
}

/// DeepSeek's MoE block: routed and shared experts after `first_k_dense_replace` dense
/// layers, every `moe_layer_freq`-th layer.
pub(super) fn read_moe(cfg: &mut ConfigReader, layers: u64) -> Option<Moe> {
    let experts = cfg.u64("n_routed_experts");
    // DeepseekV3Config / DeepseekV32Config default one shared expert when the key is absent.
    let shared = cfg.opt_u64("n_shared_experts").unwrap_or(1);
    let active = cfg.u64("num_experts_per_tok");
    let first_dense = cfg.opt_u64("first_k_dense_replace").unwrap_or(0);
    let freq = cfg.opt_u64("moe_layer_freq").unwrap_or(1).max(1);
    let expert_intermediate_size = cfg.opt_positive("moe_intermediate_size");
    Some(Moe {
        experts: experts?,
        active: active?,
        shared,
        dense_layers: (0..layers).filter(|i| *i < first_dense || i % freq != 0).collect(),
        expert_intermediate_size,
    })
}

fn normalize(model_type: &str, cfg: &mut ConfigReader) -> Option<Normalized> {
    let mla = read_mla(cfg);
    let indexer = match model_type {
        // transformers DeepseekV32Attention: every layer has an indexer.
        "deepseek_v32" => Some(cfg.u64("index_head_dim")?),
        _ => None,
    };
    let mla = mla?;
    let moe = read_moe(cfg, mla.dims.layers)?;
    let shapes = mla.shapes(moe.experts);
    let has_dense = !moe.dense_layers.is_empty();
    let mut model = mla.dims.model(
        model_type,
        FAMILY.name,
        uniform(mla.dims.layers, mla.mixer(indexer)),
        Some(moe),
    );
    model.mtp_layers = mla.mtp_layers;
    model.mtp_mixer = Some(mla.mixer(indexer));
    model.mla = Some(mla.shape());
    if !has_dense {
        model.intermediate = None;
    }
    Some(Normalized { model, shapes })
}
