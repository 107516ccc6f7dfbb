//! What each layer caches: bytes a token (attention, MLA) or a sequence (recurrent state)
//! costs, whole and on one tensor-parallel rank, grouped into layers that cache alike.

use crate::model::{Mixer, Span, StateDtype};
use crate::options::{ComputeDtype, KvDtype};
use crate::verdict::{CacheKind, StateDtypes};

/// Layers that cache alike.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LayerCache {
    pub(crate) kind: CacheKind,
    /// Tokens a sequence keeps at most; `None` grows with the context.
    pub(crate) cap: Option<u64>,
    pub(crate) layers: u64,
    /// Per-token kinds: bytes one token adds, whole and on one rank.
    pub(crate) per_token: u64,
    pub(crate) per_token_rank: u64,
    /// Per-sequence kinds: bytes one sequence holds, whole and on one rank.
    pub(crate) per_sequence: u64,
    pub(crate) per_sequence_rank: u64,
    /// Per-sequence kinds: the types the state's two parts are kept in.
    pub(crate) state_dtypes: Option<StateDtypes>,
    /// Of `per_token_rank`, the sparse-attention indexer's keys, which vLLM pages apart.
    pub(crate) indexer_per_token_rank: u64,
    /// Of `layers`, a speculative drafter's (cached in the same pool, as its kind).
    pub(crate) draft_layers: u64,
}

impl LayerCache {
    pub(crate) fn alike(&self, other: &LayerCache) -> bool {
        LayerCache {
            layers: 0,
            draft_layers: 0,
            ..self.clone()
        } == LayerCache {
            layers: 0,
            draft_layers: 0,
            ..other.clone()
        }
    }

    pub(crate) fn tokens(&self, context: u64) -> u64 {
        self.cap.map_or(context, |cap| cap.min(context))
    }

    /// Bytes of these layers for `sequences` sequences of `context` tokens.
    pub(crate) fn bytes(&self, context: u64, sequences: u64, rank: bool) -> u64 {
        let (per_token, per_sequence) = match rank {
            true => (self.per_token_rank, self.per_sequence_rank),
            false => (self.per_token, self.per_sequence),
        };
        per_token
            .saturating_mul(self.tokens(context))
            .saturating_add(per_sequence)
            .saturating_mul(self.layers)
            .saturating_mul(sequences)
    }
}

/// The dtype recurrent-state elements are kept in: the config's pinned dtype, else the model's.
fn state_element_dtype(dtype: StateDtype, model: ComputeDtype) -> ComputeDtype {
    match dtype {
        StateDtype::F32 => ComputeDtype::F32,
        StateDtype::Bf16 => ComputeDtype::Bf16,
        StateDtype::F16 => ComputeDtype::F16,
        StateDtype::Model => model,
    }
}

/// What one layer caches, whole and on one of `tp` ranks; `Ok(None)` for a layer that
/// caches nothing; `Err` says why the planner has no cache model for it.
pub(crate) fn layer_cache(
    mixer: Mixer,
    dtype: KvDtype,
    state_base: ComputeDtype,
    tp: u64,
) -> Result<Option<LayerCache>, String> {
    let per_token = |per_token: u64, per_token_rank: u64, kind: CacheKind, cap: Option<u64>| LayerCache {
        kind,
        cap,
        layers: 1,
        per_token,
        per_token_rank,
        per_sequence: 0,
        per_sequence_rank: 0,
        state_dtypes: None,
        indexer_per_token_rank: 0,
        draft_layers: 0,
    };
    match mixer {
        Mixer::Attention {
            kv_heads,
            head_dim,
            v_head_dim,
            span,
            ..
        } => {
            if kv_heads == 0 || head_dim == 0 || v_head_dim == 0 {
                return Err(
                    "a layer with no KV heads or a zero head width: a kind of layer the planner has no cache model for"
                        .into(),
                );
            }
            let (kind, cap) = match span {
                Span::Full => (CacheKind::Full, None),
                Span::Sliding(0) | Span::Chunked(0) => return Err("a window of 0 tokens is not a window".into()),
                Span::Sliding(w) => (CacheKind::Sliding, Some(w)),
                Span::Chunked(c) => (CacheKind::Chunked, Some(c)),
            };
            let bytes = |heads: u64| {
                dtype
                    .row_bytes(heads.saturating_mul(head_dim))
                    .saturating_add(dtype.row_bytes(heads.saturating_mul(v_head_dim)))
            };
            // vLLM `get_num_kv_heads`: max(1, kv / tp) — a whole head when kv < tp.
            Ok(Some(per_token(
                bytes(kv_heads),
                bytes((kv_heads / tp).max(1)),
                kind,
                cap,
            )))
        }
        Mixer::Mla { kv_lora_rank: 0, .. } => {
            Err("an MLA layer with kv_lora_rank 0 caches nothing the planner can size".into())
        }
        Mixer::Mla {
            kv_lora_rank,
            rope_dim,
            indexer_head_dim,
        } => {
            // One latent per token, no separate V; every rank holds all of it.
            let latent = dtype.row_bytes(kv_lora_rank.saturating_add(rope_dim));
            let indexer = indexer_head_dim.map_or(0, indexer_key_bytes);
            let kind = match indexer_head_dim {
                None => CacheKind::Mla,
                Some(_) => CacheKind::MlaIndexer,
            };
            let bytes = latent.saturating_add(indexer);
            Ok(Some(LayerCache {
                indexer_per_token_rank: indexer,
                ..per_token(bytes, bytes, kind, None)
            }))
        }
        Mixer::LinearAttention {
            conv_dim,
            conv_kernel,
            heads,
            key_dim,
            value_dim,
            state_dtype,
        } => {
            // vLLM `MambaStateShapeCalculator.gated_delta_net_state_shape`: conv state
            // (kernel − 1) × conv_dim in the model dtype, temporal state heads × k × v in
            // the SSM state dtype; both split over tensor-parallel ranks.
            let conv = conv_kernel.saturating_sub(1).saturating_mul(conv_dim);
            let state = heads.saturating_mul(key_dim).saturating_mul(value_dim);
            Ok(Some(state_cache(
                CacheKind::LinearAttention,
                conv,
                state,
                state_dtype,
                state_base,
                tp,
            )))
        }
        Mixer::Mamba {
            conv_dim,
            conv_kernel,
            heads,
            head_dim,
            state_size,
            state_dtype,
        } => {
            // vLLM `MambaStateShapeCalculator.mamba2_state_shape`: conv state
            // (kernel − 1) × conv_dim, SSM state heads × head_dim × state_size.
            let conv = conv_kernel.saturating_sub(1).saturating_mul(conv_dim);
            let state = heads.saturating_mul(head_dim).saturating_mul(state_size);
            Ok(Some(state_cache(
                CacheKind::Mamba,
                conv,
                state,
                state_dtype,
                state_base,
                tp,
            )))
        }
        // transformers 5.24 (modeling_deepseek_v4.py) keeps, per layer, the window's K=V rows
        // and the compressed entries (one per `ratio` tokens) in growing tensors; vLLM 0.19
        // has no DeepSeek-V4, and what an engine pages (dtype, scales, the compressor's
        // leftover buffer and overlap rows) is not established.
        Mixer::Compressed { .. } => Err(
            "compressed attention (a window plus entries compressed from every compress_ratio tokens): how an engine stores the compressed entries is not established, so its cache is not sized"
                .into(),
        ),
        Mixer::IndexedAttention { .. } => Err(
            "full attention with a sparse indexer: how an engine stores the indexer's keys beside K and V is not established, so its cache is not sized"
                .into(),
        ),
        Mixer::None => Ok(None),
    }
}

/// vLLM's DeepSeek-V3.2 indexer key cache: the key in FP8 (one byte an element) plus one
/// F32 scale per 128-element quantization block (`DeepseekV32IndexerCache`:
/// `head_dim = index_head_dim + index_head_dim // quant_block_size * 4`, dtype uint8).
pub(crate) fn indexer_key_bytes(index_head_dim: u64) -> u64 {
    const QUANT_BLOCK: u64 = 128;
    index_head_dim.saturating_add(index_head_dim / QUANT_BLOCK * 4)
}

/// A per-sequence state: conv elements in the model's dtype, recurrent elements in the
/// state dtype; each rank holds `1/tp` of both.
pub(crate) fn state_cache(
    kind: CacheKind,
    conv: u64,
    state: u64,
    state_dtype: StateDtype,
    model: ComputeDtype,
    tp: u64,
) -> LayerCache {
    let recurrent = state_element_dtype(state_dtype, model);
    let conv_bytes = |elements: u64| elements.saturating_mul(model.element_bytes());
    let state_bytes = |elements: u64| elements.saturating_mul(recurrent.element_bytes());
    LayerCache {
        kind,
        cap: None,
        layers: 1,
        per_token: 0,
        per_token_rank: 0,
        per_sequence: conv_bytes(conv).saturating_add(state_bytes(state)),
        per_sequence_rank: conv_bytes(conv / tp).saturating_add(state_bytes(state / tp)),
        state_dtypes: Some(StateDtypes {
            conv: model.kv().name().into(),
            recurrent: recurrent.kv().name().into(),
        }),
        indexer_per_token_rank: 0,
        draft_layers: 0,
    }
}
