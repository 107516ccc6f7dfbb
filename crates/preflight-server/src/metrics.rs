//! Counters for the work the service does. **They live beside the work and are read by tests
//! and by `/metrics` alike** — one source of truth, per server instance (a process-global
//! recorder would mix the counts of every server a test starts).

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds (seconds) of the plan latency histogram.
const LATENCY_BUCKETS: [f64; 12] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0];

#[derive(Default)]
pub struct Histogram {
    buckets: [AtomicU64; LATENCY_BUCKETS.len()],
    count: AtomicU64,
    sum_micros: AtomicU64,
}

impl Histogram {
    pub fn observe(&self, elapsed: Duration) {
        let secs = elapsed.as_secs_f64();
        for (bound, bucket) in LATENCY_BUCKETS.iter().zip(&self.buckets) {
            if secs <= *bound {
                bucket.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_micros.fetch_add(elapsed.as_micros() as u64, Ordering::Relaxed);
    }

    fn render(&self, out: &mut String, name: &str, labels: &str) {
        for (bound, bucket) in LATENCY_BUCKETS.iter().zip(&self.buckets) {
            let _ = writeln!(
                out,
                "{name}_bucket{{{labels}le=\"{bound}\"}} {}",
                bucket.load(Ordering::Relaxed)
            );
        }
        let count = self.count.load(Ordering::Relaxed);
        let _ = writeln!(out, "{name}_bucket{{{labels}le=\"+Inf\"}} {count}");
        let sum = self.sum_micros.load(Ordering::Relaxed) as f64 / 1e6;
        let _ = writeln!(out, "{name}_sum{{{}}} {sum}", labels.trim_end_matches(','));
        let _ = writeln!(out, "{name}_count{{{}}} {count}", labels.trim_end_matches(','));
    }
}

#[derive(Default)]
pub struct Metrics {
    pub http_requests: AtomicU64,
    pub plan_requests: AtomicU64,
    pub cache_hits: AtomicU64,
    pub cache_misses: AtomicU64,
    /// Commit probes sent upstream (a pinned source needs none).
    pub probes: AtomicU64,
    /// Staging passes: one per plan that read sources.
    pub staging_passes: AtomicU64,
    /// Sources planned from cached staged facts instead of staging.
    pub facts_hits: AtomicU64,
    /// Planner invocations.
    pub plans: AtomicU64,
    /// Requests and bytes staging sent to / read from the Hub.
    pub upstream_requests: AtomicU64,
    pub bytes_fetched: AtomicU64,
    /// Plans refused for want of a planning permit.
    pub refusals: AtomicU64,
    /// Misses that joined a plan already in flight instead of staging again.
    pub coalesced: AtomicU64,
    /// Stagings that waited for the same commit's staging in flight instead of reading again.
    pub staging_coalesced: AtomicU64,
    /// Plans dropped because every requester left: their permits freed for others.
    pub plans_abandoned: AtomicU64,
    pub stored: AtomicU64,
    pub store_errors: AtomicU64,
    pub errors_4xx: AtomicU64,
    pub errors_5xx: AtomicU64,
    /// Connections accepted; closed to make room at the connection cap; open now.
    pub connections_accepted: AtomicU64,
    pub connections_shed: AtomicU64,
    pub connections_open: AtomicU64,
    /// The shared tier: reachable (1) or not (0); failures; budget refusals; lease waits.
    pub redis_up: AtomicU64,
    pub redis_errors: AtomicU64,
    pub budget_refusals: AtomicU64,
    pub lease_waits: AtomicU64,
    pub hit_latency: Histogram,
    pub miss_latency: Histogram,
}

pub fn inc(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

impl Metrics {
    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }

    /// Prometheus text exposition format.
    /// `redis`: whether a shared tier is configured (its series appear only then).
    pub fn render(&self, memory_entries: u64, memory_bytes: u64, in_flight: u64, redis: bool) -> String {
        let mut out = String::with_capacity(4096);
        let counters: [(&str, &str, &AtomicU64); 20] = [
            (
                "preflight_http_requests_total",
                "HTTP requests received",
                &self.http_requests,
            ),
            (
                "preflight_plan_requests_total",
                "POST /v1/plan requests",
                &self.plan_requests,
            ),
            (
                "preflight_cache_hits_total",
                "plans answered from the verdict cache",
                &self.cache_hits,
            ),
            (
                "preflight_cache_misses_total",
                "plans not in the verdict cache",
                &self.cache_misses,
            ),
            ("preflight_probes_total", "commit probes sent to the Hub", &self.probes),
            (
                "preflight_staging_passes_total",
                "staging passes (metadata reads)",
                &self.staging_passes,
            ),
            (
                "preflight_facts_hits_total",
                "sources planned from cached staged facts, without staging",
                &self.facts_hits,
            ),
            (
                "preflight_planner_invocations_total",
                "planner invocations",
                &self.plans,
            ),
            (
                "preflight_upstream_requests_total",
                "requests staging sent to the Hub",
                &self.upstream_requests,
            ),
            (
                "preflight_bytes_fetched_total",
                "bytes staging read from the Hub",
                &self.bytes_fetched,
            ),
            (
                "preflight_refusals_total",
                "plans refused: no planning permit",
                &self.refusals,
            ),
            (
                "preflight_coalesced_total",
                "misses that joined a plan in flight",
                &self.coalesced,
            ),
            (
                "preflight_staging_coalesced_total",
                "stagings that joined the same commit's staging in flight",
                &self.staging_coalesced,
            ),
            (
                "preflight_plans_abandoned_total",
                "plans dropped once every requester had left (their permits freed)",
                &self.plans_abandoned,
            ),
            (
                "preflight_verdicts_stored_total",
                "verdicts written to the cache",
                &self.stored,
            ),
            (
                "preflight_store_errors_total",
                "persistent store failures (served anyway)",
                &self.store_errors,
            ),
            (
                "preflight_errors_4xx_total",
                "responses with a 4xx status",
                &self.errors_4xx,
            ),
            (
                "preflight_errors_5xx_total",
                "responses with a 5xx status",
                &self.errors_5xx,
            ),
            (
                "preflight_connections_accepted_total",
                "TCP connections accepted",
                &self.connections_accepted,
            ),
            (
                "preflight_connections_shed_total",
                "idle connections closed to make room at the connection cap",
                &self.connections_shed,
            ),
        ];
        for (name, help, value) in counters {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {}",
                Self::get(value)
            );
        }
        let gauges = [
            (
                "preflight_cache_memory_entries",
                "verdicts in the memory cache",
                memory_entries,
            ),
            (
                "preflight_cache_memory_bytes",
                "bytes of verdicts in the memory cache",
                memory_bytes,
            ),
            ("preflight_plans_in_flight", "plans staging or planning now", in_flight),
            (
                "preflight_connections_open",
                "TCP connections open now",
                Self::get(&self.connections_open),
            ),
        ];
        for (name, help, value) in gauges {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {value}");
        }
        if redis {
            let shared: [(&str, &str, &str, &AtomicU64); 4] = [
                (
                    "preflight_redis_up",
                    "gauge",
                    "the shared Redis tier answers (1) or is bypassed (0)",
                    &self.redis_up,
                ),
                (
                    "preflight_redis_errors_total",
                    "counter",
                    "Redis calls that failed or timed out",
                    &self.redis_errors,
                ),
                (
                    "preflight_hub_budget_refusals_total",
                    "counter",
                    "Hub requests refused by the shared budget",
                    &self.budget_refusals,
                ),
                (
                    "preflight_lease_waits_total",
                    "counter",
                    "misses that waited on another replica's plan",
                    &self.lease_waits,
                ),
            ];
            for (name, kind, help, value) in shared {
                let _ = writeln!(
                    out,
                    "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {}",
                    Self::get(value)
                );
            }
        }
        let name = "preflight_plan_duration_seconds";
        let _ = writeln!(
            out,
            "# HELP {name} POST /v1/plan latency by outcome\n# TYPE {name} histogram"
        );
        self.hit_latency.render(&mut out, name, "outcome=\"hit\",");
        self.miss_latency.render(&mut out, name, "outcome=\"miss\",");
        out
    }
}
