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
    /// Of those, the FLOPs through the routed experts it is sent to (2 × routed parameters ×
    /// k/E): grouped expert GEMMs run at a fraction of peak of their own.
    pub expert_flops: f64,
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

/// What one step asks of one rank.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Costs {
    /// Bytes read from device memory: weights and cache.
    pub read: f64,
    /// FLOPs outside the routed experts (dense linears and attention).
    pub flops: f64,
    /// FLOPs in the routed experts.
    pub expert_flops: f64,
    /// Bytes sent to other ranks.
    pub sent: f64,
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
    pub fn costs(&self, batch: Batch) -> Costs {
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
        let flops = (tokens * (self.linear_flops - self.expert_flops)
            + batch.decode * attention(batch.decode_context)
            + batch.prefill * attention(batch.prefill_keys))
            / tp;
        let expert_flops = tokens * self.expert_flops / tp;
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
            sent +=
                2.0 * self.moe_layers as f64 * tokens * k as f64 * self.hidden as f64 * ACTIVATION_BYTES * (n - 1.0)
                    / n
                    / tp;
        }
        Costs {
            read,
            flops,
            expert_flops,
            sent,
        }
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
        let Costs {
            read,
            flops,
            expert_flops,
            sent,
        } = self.costs(batch);
        let memory = read / (hw.bandwidth * c.memory_efficiency);
        let compute =
            flops / (hw.flops * c.compute_efficiency) + expert_flops / (hw.flops * c.expert_compute_efficiency);
        let communication = match hw.link {
            Some(link) if sent > 0.0 => sent / (link * c.link_efficiency) + self.collectives() * c.collective_latency_s,
            _ => self.collectives() * c.collective_latency_s,
        };
        StepTime {
            memory,
            compute,
            communication,
            total: memory.max(compute) + communication + c.step_overhead_s + self.layers as f64 * c.layer_overhead_s,
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A dense model of a gigabyte of weights, 1,000 bytes of KV a token, on a device reading
    /// a terabyte and computing 100 TFLOP a second, at full efficiency and no fixed costs.
    pub(crate) fn dense() -> (Profile, Hardware, Constants) {
        let profile = Profile {
            layers: 10,
            hidden: 1000,
            fixed_weight_bytes: 1e9,
            expert_weight_bytes: 0.0,
            experts: None,
            moe_layers: 0,
            linear_flops: 2e9,
            expert_flops: 0.0,
            attention: vec![(1e4, None)],
            kv: vec![(1000.0, None)],
            state_bytes: 0.0,
            tensor_parallel: 1,
            expert_parallel: None,
        };
        let hw = Hardware {
            bandwidth: 1e12,
            flops: 1e14,
            link: None,
        };
        let c = Constants {
            memory_efficiency: 1.0,
            compute_efficiency: 1.0,
            expert_compute_efficiency: 1.0,
            link_efficiency: 1.0,
            collective_latency_s: 0.0,
            step_overhead_s: 0.0,
            layer_overhead_s: 0.0,
            burst_share: 0.0,
            request_overhead_s: 0.0,
        };
        (profile, hw, c)
    }

    #[test]
    fn a_small_decode_step_reads_the_weights_and_each_sequences_cache() {
        let (profile, hw, c) = dense();
        let batch = Batch {
            decode: 10.0,
            decode_context: 100.0,
            prefill: 0.0,
            prefill_keys: 0.0,
        };
        // 1e9 + 10 × 100 × 1,000 bytes; 10 × (2e9 + 100 × 1e4) FLOPs.
        let costs = profile.costs(batch);
        assert_eq!(
            (costs.read, costs.flops, costs.expert_flops, costs.sent),
            (1.001e9, 2.001e10, 0.0, 0.0)
        );
        let t = profile.time(batch, hw, &c);
        assert_eq!((t.memory, t.compute, t.total), (1.001e-3, 2.001e-4, 1.001e-3));
        assert_eq!(t.bound(), Bound::MemoryBandwidth);
        // A prompt of 10,000 tokens is compute-bound: 10,000 × 2e9 FLOPs = 0.2 s.
        let prefill = profile.time(
            Batch {
                decode: 0.0,
                decode_context: 0.0,
                prefill: 10_000.0,
                prefill_keys: 0.0,
            },
            hw,
            &c,
        );
        assert_eq!(prefill.bound(), Bound::Compute);
        assert!((prefill.total - 0.2).abs() < 1e-12);
    }

    #[test]
    fn a_step_reads_the_experts_its_tokens_route_to_and_windows_cap_the_cache() {
        let (mut profile, _, _) = dense();
        profile.experts = Some((8, 2));
        profile.expert_weight_bytes = 8e9;
        profile.kv = vec![(1000.0, Some(50))];
        let step = |tokens: f64| {
            profile
                .costs(Batch {
                    decode: tokens,
                    decode_context: 100.0,
                    prefill: 0.0,
                    prefill_keys: 0.0,
                })
                .read
        };
        // One token: a quarter of the experts, 50 windowed tokens of cache.
        assert_eq!(step(1.0), 1e9 + 8e9 * 0.25 + 50_000.0);
        // Two: 1 − (3/4)² of them.
        assert_eq!(step(2.0), 1e9 + 8e9 * (1.0 - 0.75 * 0.75) + 100_000.0);
    }

    #[test]
    fn routed_experts_compute_at_their_own_fraction_of_peak() {
        let (mut profile, hw, mut c) = dense();
        // Of a token's 2e9 linear FLOPs, 1.5e9 in the experts it routes to.
        profile.experts = Some((8, 2));
        profile.expert_flops = 1.5e9;
        c.expert_compute_efficiency = 0.25;
        let batch = Batch {
            decode: 0.0,
            decode_context: 0.0,
            prefill: 1000.0,
            prefill_keys: 0.0,
        };
        let costs = profile.costs(batch);
        assert_eq!((costs.flops, costs.expert_flops), (0.5e12, 1.5e12));
        // 0.5e12 at 1e14 FLOP/s, 1.5e12 at a quarter of it.
        let t = profile.time(batch, hw, &c);
        assert!((t.compute - (0.005 + 0.06)).abs() < 1e-12, "{t:?}");
    }

    #[test]
    fn tensor_parallel_ranks_split_the_flops_and_exchange_the_activations() {
        let (mut profile, mut hw, mut c) = dense();
        profile.tensor_parallel = 4;
        hw.link = Some(1e11);
        c.collective_latency_s = 1e-5;
        let batch = Batch {
            decode: 8.0,
            decode_context: 0.0,
            prefill: 0.0,
            prefill_keys: 0.0,
        };
        let Costs { flops, sent, .. } = profile.costs(batch);
        assert_eq!(flops, 8.0 * 2e9 / 4.0);
        // Two all-reduces in each of 10 layers, 8 tokens × 1,000 × 2 bytes each, a ring's
        // 2 × 3/4 of them.
        assert_eq!(sent, 2.0 * 10.0 * 8.0 * 1000.0 * 2.0 * 2.0 * 0.75);
        let t = profile.time(batch, hw, &c);
        assert!((t.communication - (sent / 1e11 + 20.0 * 1e-5)).abs() < 1e-15);
    }
}
