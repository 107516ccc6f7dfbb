//! Two `preflight serve` processes sharing one real Redis and one fixture Hub.

use preflight_testhub::redis::RedisServer;
use preflight_testhub::{Origin, TestHub};
use serde_json::{Value, json};

use crate::support::serve;

fn plan(base: &str, source: &str) -> (u16, Value) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let response = reqwest::Client::new()
            .post(format!("{base}/v1/plan"))
            .json(&json!({ "sources": [source] }))
            .send()
            .await
            .expect("send");
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    })
}

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
