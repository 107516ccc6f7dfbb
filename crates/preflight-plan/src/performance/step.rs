//! What one engine step costs one rank: the bytes it reads, the FLOPs it computes and the
//! bytes it exchanges with the other ranks, from what the plan knows exactly (the checkpoint's
//! layers and the memory plan's per-rank bytes), and the time those take on a device at the
//! calibrated fractions of its peaks.

use super::calibration::Constants;

/// Why a step takes as long as it does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    MemoryBandwidth,
    Compute,
    Communication,
}

/// One replica's per-rank costs, independent of the batch.
#[derive(Debug, Clone)]
pub struct Profile {
    pub layers: u64,
    pub hidden: u64,
    /// Weight bytes one rank reads every step whatever the batch: everything but the routed
    /// experts (attention, dense MLPs, shared experts, embedding rows, LM head).
    pub fixed_weight_bytes: f64,
    /// The routed experts' bytes on one rank; a step reads the share its tokens route to.
    pub expert_weight_bytes: f64,
    /// Routed experts a layer has, and how many each token uses.
    pub experts: Option<(u64, u64)>,
    /// Layers with routed experts.
    pub moe_layers: u64,
    /// FLOPs of one token through the linear layers of the whole model: 2 × active parameters.
    pub linear_flops: f64,
    /// Attention FLOPs one token spends per key it attends to, per window (`None`: every key).
    pub attention: Vec<(f64, Option<u64>)>,
    /// KV bytes one rank reads per context token of one sequence, per window.
    pub kv: Vec<(f64, Option<u64>)>,
    /// Recurrent state one rank reads per sequence a step (linear attention, Mamba).
    pub state_bytes: f64,
    /// Ranks a token's linear FLOPs and its attention heads are split over.
    pub tensor_parallel: u64,
    /// Ranks the experts are spread over whole (expert parallelism), when on.
    pub expert_parallel: Option<u64>,
}

/// The device's peaks, per GPU.
#[derive(Debug, Clone, Copy)]
pub struct Hardware {
    pub bandwidth: f64,
    /// Dense FLOP/s at the type the weights compute in.
    pub flops: f64,
    /// Scale-up link bandwidth one GPU sends at (bytes/s, one direction), when known.
    pub link: Option<f64>,
}

/// What a step does: `decode` sequences one token each at `decode_context` tokens of context,
/// and `prefill` prompt tokens attending to `prefill_keys` keys on average.
#[derive(Debug, Clone, Copy)]
pub struct Batch {
    pub decode: f64,
    pub decode_context: f64,
    pub prefill: f64,
    pub prefill_keys: f64,
}

/// A step's time and its parts, in seconds.
#[derive(Debug, Clone, Copy)]
pub struct StepTime {
    pub memory: f64,
    pub compute: f64,
    pub communication: f64,
    pub total: f64,
}

impl StepTime {
    pub fn bound(&self) -> Bound {
        if self.communication > self.memory.max(self.compute) {
            Bound::Communication
        } else if self.compute > self.memory {
            Bound::Compute
        } else {
            Bound::MemoryBandwidth
        }
    }
}

/// Bytes a bf16 activation element takes on the wire.
const ACTIVATION_BYTES: f64 = 2.0;

impl Profile {
    /// The expected share of a layer's routed experts `tokens` tokens touch, each choosing
    /// `k` of `e` (uniform routing): `1 − (1 − k/e)^tokens`.
    fn touched(&self, tokens: f64) -> f64 {
        match self.experts {
            Some((e, k)) if e > 0 => 1.0 - (1.0 - (k.min(e) as f64 / e as f64)).powf(tokens.max(0.0)),
            _ => 1.0,
        }
    }

    /// Per-rank bytes read, FLOPs and bytes sent by a step of `batch`.
    pub fn costs(&self, batch: Batch) -> (f64, f64, f64) {
        let tokens = batch.decode + batch.prefill;
        let weights = self.fixed_weight_bytes + self.expert_weight_bytes * self.touched(tokens);
        let capped = |keys: f64, window: Option<u64>| window.map_or(keys, |w| keys.min(w as f64));
        let kv_per_sequence: f64 = self
            .kv
            .iter()
            .map(|&(bytes, window)| bytes * capped(batch.decode_context, window))
            .sum::<f64>()
            + self.state_bytes;
        let read = weights + batch.decode * kv_per_sequence;
        let attention = |keys: f64| -> f64 {
            self.attention
                .iter()
                .map(|&(flops, window)| flops * capped(keys, window))
                .sum()
        };
        let tp = self.tensor_parallel.max(1) as f64;
        let flops = (tokens * self.linear_flops
            + batch.decode * attention(batch.decode_context)
            + batch.prefill * attention(batch.prefill_keys))
            / tp;
        // Two all-reduces a layer (after attention and after the MLP) over the TP group, a
        // ring's 2 (n − 1)/n of the activations each; expert parallelism's dispatch and
        // combine send each token's hidden state to its k experts' ranks.
        let mut sent = 0.0;
        if self.tensor_parallel > 1 {
            let n = tp;
            sent += 2.0 * self.layers as f64 * tokens * self.hidden as f64 * ACTIVATION_BYTES * 2.0 * (n - 1.0) / n;
        }
        if let (Some(ep), Some((_, k))) = (self.expert_parallel.filter(|&ep| ep > 1), self.experts) {
            let n = ep as f64;
            sent += 2.0 * self.moe_layers as f64 * tokens * k as f64 * self.hidden as f64 * ACTIVATION_BYTES
                * (n - 1.0)
                / n
                / tp;
        }
        (read, flops, sent)
    }

    /// Collective operations a step runs (each costs a latency beside its bytes).
    fn collectives(&self) -> f64 {
        let mut n = 0.0;
        if self.tensor_parallel > 1 {
            n += 2.0 * self.layers as f64;
        }
        if self.expert_parallel.is_some_and(|ep| ep > 1) {
            n += 2.0 * self.moe_layers as f64;
        }
        n
    }

    /// The step's time on `hw` at the calibrated fractions of its peaks.
    pub fn time(&self, batch: Batch, hw: Hardware, c: &Constants) -> StepTime {
        let (read, flops, sent) = self.costs(batch);
        let memory = read / (hw.bandwidth * c.memory_efficiency);
        let compute = flops / (hw.flops * c.compute_efficiency);
        let communication = match hw.link {
            Some(link) if sent > 0.0 => sent / (link * c.link_efficiency) + self.collectives() * c.collective_latency_s,
            _ => self.collectives() * c.collective_latency_s,
        };
        StepTime {
            memory,
            compute,
            communication,
            total: memory.max(compute) + communication + c.step_overhead_s,
        }
    }
}
