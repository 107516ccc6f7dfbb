//! SGLang's memory accounting: `mem_fraction_static` of each device holds the weights and the
//! KV pool; the rest is left for activations and CUDA graphs (`model_runner`'s
//! `rest_memory = available − total × (1 − mem_fraction_static)`).

use crate::model::Rope;
use crate::options::{Fraction, PlanOptions};

/// The version whose defaults are followed (`arg_groups/memory_hook.py`).
pub const VERSION: &str = "0.5.23";

const MIB: f64 = (1u64 << 20) as f64;

/// `mem_fraction_static` as given, else SGLang's default for the device
/// (`handle_gpu_memory_settings`): `(capacity − reserved) / capacity`, rounded to 3 places,
/// where `reserved` (MiB) = 512 + 1.5 × chunked-prefill tokens + TP/8 × 1024 + 2 × the
/// decode CUDA-graph batch, at least 10 GiB on parts above 60 GiB.
pub fn fraction(options: &PlanOptions, capacity: u64, tensor_parallel: u64) -> Fraction {
    if let Some(given) = options.mem_fraction_static {
        return given;
    }
    let gpu_mib = capacity as f64 / MIB;
    let (chunked_prefill, max_bs) = match gpu_mib {
        m if m < 20.0 * 1024.0 => (2048.0, 8.0),
        m if m < 35.0 * 1024.0 => (4096.0, if tensor_parallel < 4 { 48.0 } else { 160.0 }),
        m if m < 60.0 * 1024.0 => (4096.0, if tensor_parallel < 4 { 32.0 } else { 160.0 }),
        m if m < 160.0 * 1024.0 => (8192.0, if tensor_parallel < 4 { 256.0 } else { 512.0 }),
        _ => (16384.0, 512.0),
    };
    let mut reserved =
        512.0 + f64::max(chunked_prefill, 2048.0) * 1.5 + tensor_parallel as f64 / 8.0 * 1024.0 + max_bs * 2.0;
    if gpu_mib > 60.0 * 1024.0 {
        reserved = reserved.max(10.0 * 1024.0);
    }
    // Rounded to thousandths as SGLang rounds; a device too small for SGLang's own reserve
    // gets the least share there is.
    let thousandths = ((gpu_mib - reserved) / gpu_mib * 1000.0).round().max(1.0);
    Fraction::from_ppm(thousandths as u64 * 1000)
}

/// Bytes of the RoPE cos/sin tables every rank keeps: vLLM's rows (SGLang's `get_rope`
/// classes are vLLM's, `memory/vllm.rs` `rope_table_bytes`), but in FP32 whatever the model's
/// dtype — `RotaryEmbedding.__init__` casts the cache to the model dtype only off CUDA and
/// ROCm ("cache needs to be in FP32 for numerical stability": 0.5.23
/// `layers/rotary_embedding/base.py` l.116-120; 0.4.3.post2 `layers/rotary_embedding.py`
/// l.81-86). A model SGLang implements with its own rotary module keeps other tables:
/// gemma-3's attention layers build theirs unscaled (0.5.23 `models/gemma3_causal.py`
/// l.218-225), 131,072 rows where vLLM's rule counts 8 × that for the global layers.
pub fn rope_table_bytes(ropes: &[Rope]) -> u64 {
    super::vllm::rope_table_bytes(ropes, 4)
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
