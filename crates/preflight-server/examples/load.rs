//! Load on loopback: many concurrent clients mixing cache hits and misses against a real
//! `preflight serve` process backed by the fixture Hub. Bounded in clients and time; stops
//! by itself. Prints hits/s, latency percentiles, refusals, errors and the server's peak RSS,
//! then checks that RSS does not grow across 10,000 hits after warm-up.
//!
//! cargo build --release -p preflight -p preflight-testhub
//! cargo run --release -p preflight-server --example load -- [--clients 200] [--seconds 60]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Repos warmed before the run; hits draw from them.
const WARM: &[&str] = &[
    "hf://Qwen/Qwen3-0.6B",
    "hf://Qwen/Qwen3-8B",
    "hf://openai/gpt-oss-20b",
    "hf://mistralai/Mixtral-8x7B-v0.1",
    "hf://Qwen/Qwen3-30B-A3B",
];
/// One request in this many is a miss (options no one asked for before).
const MISS_EVERY: u64 = 10;
const HIT_PHASE: u64 = 10_000;

struct Proc(Child);
impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn(bin: &str, args: &[&str]) -> (Proc, String) {
    let mut child = Command::new(bin)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{bin}: {e}"));
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("first line");
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .expect("url in first line")
        .to_owned();
    (Proc(child), url)
}

/// Posts plans; cheap to clone into each client task.
#[derive(Clone)]
struct Planner {
    http: reqwest::Client,
    url: Arc<str>,
}

impl Planner {
    /// Status, whether the answer was a cache hit, and the round trip.
    async fn plan(&self, body: serde_json::Value) -> (u16, bool, Duration) {
        let started = Instant::now();
        let response = self.http.post(&*self.url).json(&body).send().await;
        let status = response.as_ref().map(|r| r.status().as_u16()).unwrap_or(0);
        let cached = match response {
            Ok(r) => r
                .json::<serde_json::Value>()
                .await
                .ok()
                .and_then(|v| v["serving"]["cached"].as_bool())
                .unwrap_or(false),
            Err(_) => false,
        };
        (status, cached, started.elapsed())
    }
}

fn rss_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

fn arg(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize].as_secs_f64() * 1e3
}

#[tokio::main]
async fn main() {
    let clients = arg("--clients", 200);
    let seconds = arg("--seconds", 60);
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/release");
    let data = tempfile::tempdir().expect("tempdir");
    let (_hub, hub_url) = spawn(&format!("{root}/preflight-testhub"), &["--listen", "127.0.0.1:0"]);
    let info: serde_json::Value = reqwest::get(format!("{hub_url}/_testhub/info"))
        .await
        .expect("testhub info")
        .json()
        .await
        .expect("info json");
    let cdn = info["cdn"]
        .as_str()
        .expect("cdn url")
        .trim_start_matches("http://")
        .to_owned();
    let data_dir = data.path().to_str().expect("utf8");
    let (server, url) = spawn(
        &format!("{root}/preflight"),
        &[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--hub-endpoint",
            &hub_url,
            "--hub-redirect-hosts",
            &cdn,
            "--data-dir",
            data_dir,
        ],
    );
    let pid = server.0.id();
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(clients as usize)
        .build()
        .expect("client");
    let plan = Planner {
        http,
        url: format!("{url}/v1/plan").into(),
    };
    for source in WARM {
        let (status, _, _) = plan.plan(serde_json::json!({ "sources": [source] })).await;
        assert_eq!(status, 200, "warming {source}");
    }

    // Phase 1: mixed load.
    let stop = Arc::new(AtomicBool::new(false));
    let counter = Arc::new(AtomicU64::new(0));
    let peak = Arc::new(AtomicU64::new(0));
    let sampler = {
        let (stop, peak) = (stop.clone(), peak.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                peak.fetch_max(rss_kib(pid, "VmRSS:"), Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let workers: Vec<_> = (0..clients)
        .map(|_| {
            let (counter, plan) = (counter.clone(), plan.clone());
            tokio::spawn(async move {
                let mut seen = Vec::new();
                while Instant::now() < deadline {
                    let n = counter.fetch_add(1, Ordering::Relaxed);
                    let body = if n % MISS_EVERY == 0 {
                        serde_json::json!({ "sources": [WARM[0]], "options": { "context": 1 + n } })
                    } else {
                        serde_json::json!({ "sources": [WARM[(n as usize) % WARM.len()]] })
                    };
                    seen.push(plan.plan(body).await);
                }
                seen
            })
        })
        .collect();
    let mut results = Vec::new();
    for w in workers {
        results.extend(w.await.expect("worker"));
    }
    stop.store(true, Ordering::Relaxed);
    sampler.await.ok();
    let elapsed = seconds as f64;
    let hits: Vec<Duration> = {
        let mut v: Vec<_> = results.iter().filter(|r| r.0 == 200 && r.1).map(|r| r.2).collect();
        v.sort();
        v
    };
    let misses = results.iter().filter(|r| r.0 == 200 && !r.1).count();
    let refused = results.iter().filter(|r| r.0 == 429).count();
    let errors_5xx = results.iter().filter(|r| r.0 >= 500 || r.0 == 0).count();
    let mut all: Vec<Duration> = results.iter().map(|r| r.2).collect();
    all.sort();
    println!("| figure | value |\n|---|---|");
    println!("| clients × seconds | {clients} × {seconds} |");
    println!("| requests | {} |", results.len());
    println!("| hits/s | {:.0} |", hits.len() as f64 / elapsed);
    println!(
        "| hit latency p50 / p99 (ms) | {:.2} / {:.2} |",
        percentile(&hits, 0.5),
        percentile(&hits, 0.99)
    );
    println!(
        "| all latency p50 / p99 (ms) | {:.2} / {:.2} |",
        percentile(&all, 0.5),
        percentile(&all, 0.99)
    );
    println!("| misses planned | {misses} |");
    println!("| refusals (429) | {refused} |");
    println!("| 5xx or transport errors | {errors_5xx} |");
    println!(
        "| server peak RSS (MiB) | {:.1} (VmHWM {:.1}) |",
        peak.load(Ordering::Relaxed) as f64 / 1024.0,
        rss_kib(pid, "VmHWM:") as f64 / 1024.0
    );

    // Phase 2: RSS across 10,000 hits after warm-up.
    for _ in 0..1000 {
        plan.plan(serde_json::json!({ "sources": [WARM[1]] })).await;
    }
    let before = rss_kib(pid, "VmRSS:");
    let per_client = HIT_PHASE / 50;
    let tasks: Vec<_> = (0..50)
        .map(|i| {
            let plan = plan.clone();
            tokio::spawn(async move {
                for j in 0..per_client {
                    plan.plan(serde_json::json!({ "sources": [WARM[((i + j) as usize) % WARM.len()]] }))
                        .await;
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.expect("hit task");
    }
    let after = rss_kib(pid, "VmRSS:");
    println!(
        "| RSS before / after {HIT_PHASE} hits (MiB) | {:.1} / {:.1} ({:+.1}) |",
        before as f64 / 1024.0,
        after as f64 / 1024.0,
        (after as f64 - before as f64) / 1024.0
    );
    if errors_5xx > 0 {
        eprintln!("load: {errors_5xx} requests failed with 5xx or transport errors");
        std::process::exit(1);
    }
}
