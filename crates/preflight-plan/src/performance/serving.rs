//! The engine's scheduler over a workload: continuous batching with chunked prefill, as vLLM
//! and SGLang run it. In the steady state every running request decodes one token a step and
//! the prompts of the requests replacing finished ones are prefilled in the same steps, so a
//! step carries `batch` decode tokens and, on average, `batch × isl / osl` prompt tokens.
//! Closed loops hold `concurrency` requests in the system (those past what the engine runs
//! wait for a slot); open loops hold what Little's law gives for the rate.

use super::calibration::Constants;
use super::step::{Batch, Bound, Hardware, Profile};
use crate::workload::{Arrivals, Scheduler, Workload};

/// Why the batch is what it is, or what bounds the step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    MemoryBandwidth,
    Compute,
    Communication,
    /// The KV pool holds no more requests of this length.
    KvCapacity,
    /// The engine runs no more requests at once (`max_num_seqs`).
    Scheduling,
}

/// The steady state of one replica.
#[derive(Debug, Clone, Copy)]
pub struct Outcome {
    /// Requests the replica runs at once (a mean: may be fractional under an open loop).
    pub batch: f64,
    pub tpot_s: f64,
    /// `None` when an open loop arrives faster than the replica completes: the queue grows
    /// without bound.
    pub ttft_s: Option<f64>,
    /// Requests a second the replica completes.
    pub requests_per_s: f64,
    pub limited_by: Limit,
    pub overloaded: bool,
}

/// The replica's steady state under `workload`'s share for one of `replicas` replicas.
/// `None` when the pool cannot hold one request of the workload's length.
pub fn steady_state(
    profile: &Profile,
    hw: Hardware,
    c: &Constants,
    scheduler: Scheduler,
    workload: &Workload,
    replicas: u64,
) -> Option<Outcome> {
    let (isl, osl) = (workload.isl as f64, workload.osl as f64);
    // A request holds its prompt and, on average, half its output.
    let held = isl + osl / 2.0;
    let by_pool = (scheduler.pool_tokens as f64 / held).floor();
    if by_pool < 1.0 {
        return None;
    }
    let capacity = by_pool.min(scheduler.max_running as f64);
    let capacity_limit = if by_pool <= scheduler.max_running as f64 {
        Limit::KvCapacity
    } else {
        Limit::Scheduling
    };
    let replicas = replicas.max(1) as f64;
    let step_tokens = scheduler.step_tokens.max(1) as f64;
    // The steady state at `batch` running requests: TPOT, the prompt's service time, E2E.
    let decode_context = isl + osl / 2.0;
    let step = |decode: f64, prefill: f64| {
        profile.time(
            Batch {
                decode,
                decode_context,
                prefill,
                prefill_keys: isl / 2.0,
            },
            hw,
            c,
        )
    };
    // The steady state at `batch` running requests: the time between one output token and
    // the next (with the prompts replacing finished requests, `batch × isl ÷ osl` tokens a
    // step on average), the prompt's service time, the request's end to end.
    let serve = |batch: f64| {
        let prompts = batch * isl / osl;
        let (tpot, decode_bound) = match scheduler.mixes_prefill {
            true => {
                let mixed = step(batch, prompts);
                (mixed.total, mixed.bound())
            }
            // Prefill batches of their own, as full as the prompts waiting make them: a decode
            // step, then its share of one.
            false => {
                let decode = step(batch, 0.0);
                let prefill_batch = step_tokens.min(isl.max(prompts));
                let prefill = step(0.0, prefill_batch);
                (decode.total + prefill.total * prompts / prefill_batch, decode.bound())
            }
        };
        // A new prompt waits half a step for the next, then takes its chunks' steps.
        let room = match scheduler.mixes_prefill {
            true => step_tokens - batch,
            false => step_tokens,
        };
        let chunk = room.max(1.0).min(isl);
        let chunk_step = |tokens: f64| match scheduler.mixes_prefill {
            true => step(batch, tokens).total,
            false => step(0.0, tokens).total,
        };
        let full = (isl / chunk).floor();
        let rest = isl - full * chunk;
        let prompt = full * chunk_step(chunk) + if rest > 0.0 { chunk_step(rest) } else { 0.0 };
        let ttft = c.request_overhead_s + tpot / 2.0 + prompt;
        let e2e = ttft + (osl - 1.0).max(0.0) * tpot;
        (tpot, decode_bound, ttft, e2e)
    };
    let bound = |b: Bound| match b {
        Bound::MemoryBandwidth => Limit::MemoryBandwidth,
        Bound::Compute => Limit::Compute,
        Bound::Communication => Limit::Communication,
    };
    match workload.arrivals {
        Arrivals::Concurrency(clients) => {
            let clients = (clients as f64 / replicas).max(1.0);
            let batch = clients.min(capacity);
            let (tpot, decode_bound, ttft, e2e) = serve(batch);
            // Clients past the running batch queue for a slot: a closed loop's cycle is
            // clients ÷ throughput, of which the decode is the running part.
            let queued = clients > batch;
            let ttft = match queued {
                true => clients / (batch / e2e) - (osl - 1.0).max(0.0) * tpot,
                false => ttft,
            };
            // The clients' first prompts arrive at once: on average a request waits for half
            // of the wave's other prompts, prefilled at a full step's tokens a step.
            let wave = (clients - 1.0) * isl / 2.0 / step_tokens * step(0.0, step_tokens).total;
            let ttft = ttft + c.burst_share * wave;
            Some(Outcome {
                batch,
                tpot_s: tpot,
                ttft_s: Some(ttft),
                // Every client completes a request each end-to-end latency.
                requests_per_s: clients / (ttft + (osl - 1.0).max(0.0) * tpot),
                limited_by: if queued { capacity_limit } else { bound(decode_bound) },
                overloaded: false,
            })
        }
        Arrivals::RateMilli(_) => {
            let rate = workload.arrivals.rate().unwrap_or(0.0) / replicas;
            let (full_tpot, _, _, full_e2e) = serve(capacity);
            if rate * full_e2e >= capacity {
                // More arrive than the replica completes at its largest batch.
                return Some(Outcome {
                    batch: capacity,
                    tpot_s: full_tpot,
                    ttft_s: None,
                    requests_per_s: capacity / full_e2e,
                    limited_by: capacity_limit,
                    overloaded: true,
                });
            }
            // Little's law: the batch (a mean: under 1 when the replica idles between requests)
            // is the rate times the time a request spends running; iterate to its fixed point
            // (the step time grows with the batch).
            let mut batch = 1.0f64.min(capacity);
            for _ in 0..64 {
                let (.., e2e) = serve(batch);
                let next = (rate * e2e).clamp(1e-6, capacity);
                if (next - batch).abs() < 1e-6 {
                    break;
                }
                batch = next;
            }
            let (tpot, decode_bound, ttft, _) = serve(batch);
            Some(Outcome {
                batch,
                tpot_s: tpot,
                ttft_s: Some(ttft),
                requests_per_s: rate,
                limited_by: bound(decode_bound),
                overloaded: false,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::performance::step::tests::dense;

    fn workload(text: &str) -> Workload {
        text.parse().expect("valid workload")
    }

    const ROOMY: Scheduler = Scheduler {
        max_running: 256,
        step_tokens: 8192,
        pool_tokens: 1_000_000,
        mixes_prefill: true,
    };

    #[test]
    fn a_closed_loop_runs_every_client_while_the_pool_holds_them() {
        let (profile, hw, c) = dense();
        let o = steady_state(&profile, hw, &c, ROOMY, &workload("isl=1000,osl=100,concurrency=4"), 1).expect("fits");
        assert_eq!(o.batch, 4.0);
        assert!(!o.overloaded);
        // The closed loop's identity: clients = throughput × (TTFT + (osl − 1) × TPOT).
        let e2e = o.ttft_s.expect("bounded") + 99.0 * o.tpot_s;
        assert!((o.requests_per_s * e2e - 4.0).abs() < 1e-9);
        // Two replicas split the clients.
        let two = steady_state(&profile, hw, &c, ROOMY, &workload("isl=1000,osl=100,concurrency=4"), 2).expect("fits");
        assert_eq!(two.batch, 2.0);
    }

    #[test]
    fn prefill_batches_of_their_own_hold_the_decode_up_for_their_share() {
        let (profile, hw, c) = dense();
        let apart = Scheduler {
            mixes_prefill: false,
            ..ROOMY
        };
        let w = workload("isl=1000,osl=100,concurrency=4");
        let o = steady_state(&profile, hw, &c, apart, &w, 1).expect("fits");
        // Four decodes a step, and the 40 prompt tokens a step needs as 40/1,000 of a
        // 1,000-token prefill batch.
        let at = |decode: f64, prefill: f64| {
            let batch = Batch {
                decode,
                decode_context: 1050.0,
                prefill,
                prefill_keys: 500.0,
            };
            profile.time(batch, hw, &c).total
        };
        assert!(
            (o.tpot_s - (at(4.0, 0.0) + at(0.0, 1000.0) * 0.04)).abs() < 1e-12,
            "{o:?}"
        );
        // Mixed into the decode steps, the prompts' FLOPs hide under the weights' reading.
        let mixed = steady_state(&profile, hw, &c, ROOMY, &w, 1).expect("fits");
        assert_eq!(mixed.tpot_s, at(4.0, 40.0));
        assert!(mixed.tpot_s < o.tpot_s);
    }

    #[test]
    fn clients_past_the_pool_queue_for_a_slot() {
        let (profile, hw, c) = dense();
        // 10,500 tokens hold 10 requests of 1,000 + 100/2.
        let small = Scheduler {
            pool_tokens: 10_500,
            ..ROOMY
        };
        let o = steady_state(&profile, hw, &c, small, &workload("isl=1000,osl=100,concurrency=40"), 1).expect("fits");
        assert_eq!((o.batch, o.limited_by), (10.0, Limit::KvCapacity));
        let roomy =
            steady_state(&profile, hw, &c, ROOMY, &workload("isl=1000,osl=100,concurrency=10"), 1).expect("fits");
        assert!(o.ttft_s.expect("bounded") > roomy.ttft_s.expect("bounded") * 3.0);
        // The scheduler's own limit, where the pool has room.
        let capped = Scheduler {
            max_running: 8,
            ..ROOMY
        };
        let o = steady_state(
            &profile,
            hw,
            &c,
            capped,
            &workload("isl=1000,osl=100,concurrency=40"),
            1,
        )
        .expect("fits");
        assert_eq!((o.batch, o.limited_by), (8.0, Limit::Scheduling));
        // Not one request fits: no steady state.
        let tiny = Scheduler {
            pool_tokens: 1000,
            ..ROOMY
        };
        assert!(steady_state(&profile, hw, &c, tiny, &workload("isl=1000,osl=100,concurrency=1"), 1).is_none());
    }

    #[test]
    fn an_open_loop_holds_what_littles_law_gives_until_it_overloads() {
        let (profile, hw, c) = dense();
        let o = steady_state(&profile, hw, &c, ROOMY, &workload("isl=1000,osl=100,rate=2"), 1).expect("fits");
        assert!(!o.overloaded);
        let e2e = o.ttft_s.expect("bounded") + 99.0 * o.tpot_s;
        assert!((o.batch - 2.0 * e2e).abs() < 1e-3, "{o:?}");
        assert_eq!(o.requests_per_s, 2.0);
        // Far past what 256 requests at a time complete.
        let flood = steady_state(&profile, hw, &c, ROOMY, &workload("isl=1000,osl=100,rate=100000"), 1).expect("fits");
        assert!(flood.overloaded && flood.ttft_s.is_none());
        assert!(flood.requests_per_s < 100_000.0);
    }
}
