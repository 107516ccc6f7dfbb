//! Counts as people write them, and the most of each the planner accepts: shared by the
//! options and the workload, which both read token counts.

/// Longest context accepted: llama.cpp holds contexts in 32 bits, and no model declares one
/// within three orders of magnitude of it. It also keeps every byte product far from `u64`.
pub const MAX_CONTEXT: u64 = 1 << 32;

/// Most concurrent sequences accepted: three orders of magnitude past vLLM's default
/// `max_num_seqs` (256–1024), while products with per-token bytes stay far from overflow.
pub const MAX_SEQUENCES: u64 = 1 << 20;

/// A token count as people type it: `32768`, `32k`, `128K`, `1M`. Context windows are
/// powers of two, so k is 1,024 (Qwen3's "32K" is 32,768 tokens, Llama 3.1's "128K"
/// 131,072). The CLI's `--context` and the API's `"context"` read it alike.
pub fn tokens(s: &str) -> Result<u64, String> {
    let text = s.trim();
    let (digits, scale) = match text.char_indices().last() {
        Some((i, 'k' | 'K')) => (&text[..i], 1 << 10),
        Some((i, 'm' | 'M')) => (&text[..i], 1 << 20),
        _ => (text, 1),
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(scale))
        .ok_or_else(|| format!("`{s}` is not a token count: a whole number, or with k or M (32k, 128K, 1M)"))
}
