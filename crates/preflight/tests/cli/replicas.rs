//! Two `preflight serve` processes sharing one real Redis and one fixture Hub.

use preflight_testhub::redis::RedisServer;
use preflight_testhub::{Origin, TestHub};
use serde_json::{Value, json};

use crate::support::serve;

fn plan(base: &str, source: &str) -> (u16, Value) {
    post(base, &json!({ "sources": [source] }))
}

fn post(base: &str, body: &Value) -> (u16, Value) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let response = reqwest::Client::new()
            .post(format!("{base}/v1/plan"))
            .json(body)
            .send()
            .await
            .expect("send");
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    })
}

/// The processes' shared secret for what they store in Redis.
const SECRET: &str = "cli-test-secret-0123456789abcdef-0123";

fn hub_requests(hub: &TestHub) -> usize {
    hub.requests().iter().filter(|r| r.origin == Origin::Hub).count()
}

#[test]
fn a_miss_on_one_process_is_a_hit_on_the_other_and_the_budget_holds_across_both() {
    let redis = RedisServer::start();
    let hub = TestHub::builder().start_blocking().expect("hub");
    let url = redis.url();
    let flags = [
        "--cache-url",
        url.as_str(),
        "--cache-secret",
        SECRET,
        "--hub-budget",
        "30",
        "--hub-budget-window-secs",
        "600",
    ];
    let (da, db) = (
        tempfile::tempdir().expect("tempdir"),
        tempfile::tempdir().expect("tempdir"),
    );
    let (_a, a) = serve(&hub, da.path(), &flags);
    let (_b, b) = serve(&hub, db.path(), &flags);

    let (status, first) = plan(&a, "hf://Qwen/Qwen3-8B");
    assert_eq!(
        (status, first["serving"]["cached"].as_bool()),
        (200, Some(false)),
        "{first}"
    );
    let before = hub_requests(&hub);
    let (status, on_b) = plan(&b, "hf://Qwen/Qwen3-8B");
    assert_eq!(
        (status, on_b["serving"]["cached"].as_bool()),
        (200, Some(true)),
        "{on_b}"
    );
    assert_eq!(hub_requests(&hub) - before, 1, "the other process paid one probe");

    // Spend the rest of the 30-request budget on misses from both processes.
    let mut refused = 0;
    for (i, source) in [
        "hf://deepseek-ai/DeepSeek-V3",
        "hf://Qwen/Qwen3-30B-A3B",
        "hf://mistralai/Mixtral-8x7B-v0.1",
        "hf://openai/gpt-oss-20b",
    ]
    .iter()
    .enumerate()
    {
        let (status, v) = plan(if i % 2 == 0 { &a } else { &b }, source);
        match status {
            200 => {}
            429 => {
                refused += 1;
                assert_eq!(v["error"]["code"], "hub_budget_exhausted");
            }
            other => panic!("{source}: {other} {v}"),
        }
    }
    assert!(refused > 0);
    assert!(hub_requests(&hub) <= 30, "the Hub saw {}", hub_requests(&hub));
}

/// 20 concurrent misses of one new repo spread over two processes stage its headers once;
/// then Redis stops mid-run (every request still 200 or 429), restarts, and sharing returns.
#[test]
fn two_processes_stage_once_and_ride_out_a_redis_outage() {
    let mut redis = RedisServer::start();
    let hub = TestHub::builder().start_blocking().expect("hub");
    hub.add_fault(preflight_testhub::Fault::latency(std::time::Duration::from_millis(50)));
    let url = redis.url();
    let flags = ["--cache-url", url.as_str(), "--cache-secret", SECRET];
    let (da, db) = (
        tempfile::tempdir().expect("tempdir"),
        tempfile::tempdir().expect("tempdir"),
    );
    let (_a, a) = serve(&hub, da.path(), &flags);
    let (_b, b) = serve(&hub, db.path(), &flags);

    let threads: Vec<_> = (0..20)
        .map(|i| {
            let base = if i % 2 == 0 { a.clone() } else { b.clone() };
            std::thread::spawn(move || plan(&base, "hf://Qwen/Qwen3-30B-A3B").0)
        })
        .collect();
    for t in threads {
        assert_eq!(t.join().expect("thread"), 200);
    }
    let shard_reads = hub
        .requests()
        .iter()
        .filter(|r| r.origin == Origin::Hub && r.path.ends_with(".safetensors"))
        .count();
    assert_eq!(
        shard_reads, 13,
        "each of the 13 shard headers read once across both processes"
    );

    redis.stop();
    for (i, source) in [
        "hf://Qwen/Qwen3-30B-A3B",
        "hf://openai/gpt-oss-20b",
        "hf://Qwen/Qwen3-8B",
        "hf://Qwen/Qwen3-0.6B",
    ]
    .iter()
    .enumerate()
    {
        let (status, v) = plan(if i % 2 == 0 { &a } else { &b }, source);
        assert!(status == 200 || status == 429, "{source}: {status} {v}");
    }
    redis.resume();
    // Each process retries Redis once its breaker's pause (≤ 5 s) is over.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    // Each attempt plans a key neither process has seen (a new context), so B can only answer
    // it from the cache if the verdict came through Redis.
    let mut shared_again = false;
    for attempt in 1u64.. {
        std::thread::sleep(std::time::Duration::from_secs(2));
        let body = json!({ "sources": ["hf://Qwen/Qwen3-0.6B"], "options": { "context": 1000 + attempt } });
        let (status, _) = post(&a, &body);
        assert!(status == 200 || status == 429);
        let (_, on_b) = post(&b, &body);
        if on_b["serving"]["cached"] == true {
            shared_again = true;
            break;
        }
        if std::time::Instant::now() > deadline {
            break;
        }
    }
    assert!(shared_again, "sharing did not come back after Redis restarted");
}
