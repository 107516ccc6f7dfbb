//! SGLang 0.5.23's memory accounting (docs/memory.md § SGLang 0.5.23): `mem_fraction_static`
//! of the memory free before loading holds the weights (with SGLang's FP32 RoPE tables) and the
//! KV pool; the rest is left for activations and CUDA graphs (`kv_cache_configurator.py`
//! `_profile_available_bytes`: `rest = available − pre_model_load_memory × (1 −
//! mem_fraction_static)`). The pool's tokens follow its pool configurators: one pool, a hybrid
//! SWA pair, or Mamba state slots first.

use crate::model::Rope;
use crate::options::{Fraction, PlanOptions};

const MIB: f64 = (1u64 << 20) as f64;

/// `mem_fraction_static` as given, else SGLang's default for the device (0.5.23
/// `arg_groups/memory_hook.py` `handle_gpu_memory_settings`, l.89-170 and l.278-337):
/// `(capacity − reserved) / capacity`, rounded to 3 places, where `reserved` (MiB) = 512 +
/// 1.5 × the chunked-prefill tokens (2k–16k by the device's memory) + TP/8 × 1024 + the graphs'
/// reserve (`reserve_for_graph_mb`, l.357-399: 2 × the decode CUDA-graph batch, and 8 for
/// each prefill CUDA-graph size — the breakable prefill graph is on by default on CUDA,
/// `cuda_graph_config.py` `default_prefill_backend` l.119-123), at least 10 GiB on parts above
/// 60 GiB. Not modelled: an MLA model's prefill graphs reserve 1.5 GiB instead (its fraction
/// is 0.01–0.02 lower on an 80–141 GiB part), ROCm captures no prefill graph, and a VLM's
/// default is lowered again (`adjust_mem_fraction_for_vlm`). `tensor_parallel` is SGLang's
/// `--tp-size` (attention-DP groups included); with `attn_dp` attention-DP groups, the
/// graphs' reserve adds 3 × the decode batch × `attn_dp`, and 1.5 × that again when the batch
/// is over 300 (l.370-378). The fraction is set before `handle_data_parallelism` divides the
/// chunked-prefill tokens by `attn_dp` (`arg_groups/resolution_hooks.py` order;
/// `parallel_hook.py:326-341`), so the undivided tokens count here.
pub fn fraction(options: &PlanOptions, capacity: u64, tensor_parallel: u64, attn_dp: u64) -> Fraction {
    if let Some(given) = options.mem_fraction_static {
        return given;
    }
    let gpu_mib = capacity as f64 / MIB;
    let (chunked_prefill, max_bs) = defaults(capacity, tensor_parallel);
    let max_bs = max_bs as f64;
    // The prefill graphs capture up to the chunked-prefill tokens (l.233-238).
    let prefill_graphs = prefill_capture_sizes(chunked_prefill) as f64;
    let mut reserved = 512.0
        + chunked_prefill.max(2048) as f64 * 1.5
        + tensor_parallel as f64 / 8.0 * 1024.0
        + max_bs * 2.0
        + prefill_graphs * 8.0;
    if attn_dp > 1 {
        reserved += max_bs * attn_dp as f64 * 3.0;
        if max_bs > 300.0 {
            reserved += max_bs * attn_dp as f64 * 1.5;
        }
    }
    if gpu_mib > 60.0 * 1024.0 {
        reserved = reserved.max(10.0 * 1024.0);
    }
    // Rounded to thousandths as SGLang rounds; a device too small for SGLang's own reserve
    // gets the least share there is.
    let thousandths = ((gpu_mib - reserved) / gpu_mib * 1000.0).round().max(1.0);
    Fraction::from_ppm(thousandths as u64 * 1000)
}

/// The chunked-prefill tokens and the decode CUDA-graph batch SGLang defaults to on a device
/// of `capacity` at `--tp-size` `tensor_parallel` (`handle_gpu_memory_settings`, l.89-170).
pub fn defaults(capacity: u64, tensor_parallel: u64) -> (u64, u64) {
    match capacity as f64 / MIB {
        m if m < 20.0 * 1024.0 => (2048, 8),
        m if m < 35.0 * 1024.0 => (4096, if tensor_parallel < 4 { 48 } else { 160 }),
        m if m < 60.0 * 1024.0 => (4096, if tensor_parallel < 4 { 32 } else { 160 }),
        m if m < 160.0 * 1024.0 => (8192, if tensor_parallel < 4 { 256 } else { 512 }),
        _ => (16384, 512),
    }
}

/// Requests a scheduler runs at once by default, per attention-DP worker, from the pool's
/// tokens and the context length (`mem_cache/kv_cache_configurator.py` `resolve_max_num_reqs`,
/// l.3119-3132): `pool ÷ context × 512` held to 2,048–4,096, and at most half the pool's tokens.
pub fn max_running_requests(pool_tokens: u64, context: u64) -> u64 {
    let estimated = (pool_tokens as f64 / context.max(1) as f64 * 512.0) as u64;
    estimated.clamp(2048, 4096).min(pool_tokens / 2)
}

/// How many token counts SGLang captures prefill CUDA graphs for, up to `max_bs`
/// (`arg_groups/cuda_graph_hook.py` `generate_prefill_cuda_graph_batch_sizes`, l.480-497):
/// 4–32 by 4, 48–256 by 16, 288–512 by 32, 576–1,024 by 64, 1,280–4,096 by 256, then by 512.
fn prefill_capture_sizes(max_bs: u64) -> usize {
    let runs: [(u64, u64, u64); 5] = [
        (4, 32, 4),
        (48, 256, 16),
        (288, 512, 32),
        (576, 1024, 64),
        (1280, 4096, 256),
    ];
    let fixed = runs
        .iter()
        .flat_map(|&(from, to, step)| (from..=to).step_by(step as usize))
        .filter(|&s| s <= max_bs)
        .count();
    fixed + (4608..=max_bs).step_by(512).count()
}

/// Bytes of the RoPE cos/sin tables every rank keeps: vLLM's rows (SGLang's `get_rope`
/// classes are vLLM's, `memory/buffers.rs` `rope_table_bytes`), but in FP32 whatever the model's
/// dtype — `RotaryEmbedding.__init__` casts the cache to the model dtype only off CUDA and
/// ROCm ("cache needs to be in FP32 for numerical stability": 0.5.23
/// `layers/rotary_embedding/base.py` l.116-120; 0.4.3.post2 `layers/rotary_embedding.py`
/// l.81-86). A model SGLang implements with its own rotary module keeps other tables:
/// gemma-3's attention layers build theirs unscaled (0.5.23 `models/gemma3_causal.py`
/// l.218-225), 131,072 rows where vLLM's rule counts 8 × that for the global layers.
pub fn rope_table_bytes(ropes: &[Rope]) -> u64 {
    crate::memory::rope_table_bytes(ropes, 4)
}

/// `--swa-full-tokens-ratio`'s default: SWA-pool tokens per full-pool token (0.5.23
/// `arg_groups/fields/schedule.py` l.150-162, `fallback=0.8`; no model override for the
/// architectures preflight sizes — DeepSeek-V4's 0.1 is for a cache preflight does not size).
const SWA_FULL_TOKENS_RATIO: f64 = 0.8;

/// The pool's size in tokens, as SGLang reports it (`max_total_num_tokens`), from the bytes it
/// may fill and what a token costs its full pool (`full`) and its SWA pool (`swa`, 0 unless
/// the architecture has one). One pool: `available_bytes // cell_size`
/// (`model_executor/pool_configurator.py` `DefaultPoolConfigurator.calculate_pool_sizes`,
/// l.637-647). Hybrid SWA: a full-pool token brings `ratio` SWA tokens along, so
/// `int(available_bytes // (full + ratio × swa))` full tokens (`HybridSWAPoolConfigurator`,
/// `_recompute_cell_size` l.786-803 and `calculate_pool_sizes` l.907-916); all-SWA, the SWA
/// cell alone. Page alignment (`// page_size * page_size`) is left out: a page of 1 on the
/// default backends, under one page elsewhere.
pub fn pool_tokens(pool_bytes: u64, full: u64, swa: u64) -> Option<u64> {
    match (full, swa) {
        (0, 0) => None,
        (0, swa) => Some(pool_bytes / swa),
        (full, 0) => Some(pool_bytes / full),
        (full, swa) => Some((pool_bytes as f64 / (full as f64 + SWA_FULL_TOKENS_RATIO * swa as f64)).floor() as u64),
    }
}

/// `--mamba-full-memory-ratio`'s default: state bytes per KV byte (0.5.23
/// `arg_groups/fields/schedule.py` l.220-227, `fallback=0.9`).
const MAMBA_FULL_MEMORY_RATIO: f64 = 0.9;

/// Bytes of the pool a hybrid Mamba or linear-attention model's state slots take, from the
/// pool's bytes and one request's state on a rank (every such layer's conv and SSM state;
/// 0 for a model without). SGLang splits the rest so that state : KV = 0.9, then holds as
/// many whole slots as fit, plus its padding slot (0.5.23 `mem_cache/kv_cache_configurator.py`
/// `_handle_max_mamba_cache`, l.3229-3409, with no speculative decoding and no
/// `--max-mamba-cache-size`: `max_mamba_cache_size = int((budget − per_req) // per_req)`,
/// `mamba_state_memory = (max_mamba_cache_size + 1) × per_req`); the KV pool is what remains.
pub fn state_pool_bytes(pool_bytes: u64, per_request: u64) -> u64 {
    if per_request == 0 {
        return 0;
    }
    let budget = pool_bytes as f64 * MAMBA_FULL_MEMORY_RATIO / (1.0 + MAMBA_FULL_MEMORY_RATIO);
    let slots = ((budget - per_request as f64) / per_request as f64).floor().max(0.0) as u64;
    slots.saturating_add(1).saturating_mul(per_request)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    #[test]
    fn prefill_graph_sizes_as_sglang_generates_them() {
        // 8 + 14 + 8 + 8 up to 1,024; 12 more to 4,096; 8 more (4,608–8,192) to 8,192.
        assert_eq!(prefill_capture_sizes(2048), 42);
        assert_eq!(prefill_capture_sizes(4096), 50);
        assert_eq!(prefill_capture_sizes(8192), 58);
        assert_eq!(prefill_capture_sizes(16384), 74);
    }

    #[test]
    fn state_slots_take_nine_nineteenths_of_the_pool() {
        // 19 GiB of pool, 1 MiB a request: a budget of 9 GiB = 9,216 requests' state, less
        // one, plus the padding slot.
        assert_eq!(state_pool_bytes(19 * GIB, 1 << 20), 9 * GIB);
        assert_eq!(state_pool_bytes(19 * GIB, 0), 0);
    }

    #[test]
    fn default_fraction_by_the_device() {
        let at = |capacity: u64, tp: u64| fraction(&PlanOptions::default(), capacity, tp, 1).ppm() as f64 / 1e6;
        // An H100 as CUDA shows it (79.19 GiB, 81,089.6 MiB), TP 1: 512 + 8,192 × 1.5 + 128 +
        // 256 × 2 + 58 × 8 = 13,904 MiB reserved → (81,089.6 − 13,904) / 81,089.6 = 0.829.
        assert_eq!(at(85_029_615_042, 1), 0.829);
        // TP 8: 512 + 12,288 + 1,024 + 512 × 2 + 464 = 15,312 → 0.811.
        assert_eq!(at(85_029_615_042, 8), 0.811);
        // A 24 GiB part, TP 1: 512 + 4,096 × 1.5 + 128 + 48 × 2 + 50 × 8 = 7,280 → 0.704.
        assert_eq!(at(24 * GIB, 1), 0.704);
        // TP size 8 in 4 attention-DP groups: 15,312 + 512 × 4 × 3 + 512 × 4 × 1.5 = 24,528
        // → (81,089.6 − 24,528) / 81,089.6 = 0.698.
        let dp = fraction(&PlanOptions::default(), 85_029_615_042, 8, 4).ppm() as f64 / 1e6;
        assert_eq!(dp, 0.698);
        // A given fraction is kept.
        let given = PlanOptions {
            mem_fraction_static: Some(Fraction::from_ppm(800_000)),
            ..PlanOptions::default()
        };
        assert_eq!(fraction(&given, 24 * GIB, 1, 1).ppm(), 800_000);
    }
}
