//! Several replicas sharing one real Redis (`redis-server`, started per test on a free
//! loopback port — never a mock) and one fixture Hub.

use std::time::{Duration, Instant};

use axum::http::StatusCode;
use preflight_testhub::redis::RedisServer;
use preflight_testhub::{Fault, Origin, TestHub};

use serde_json::json;

use crate::support::{Server, commit_of, hub};

/// The replicas' shared secret (what `PREFLIGHT_CACHE_SECRET` holds in a deployment).
pub const SECRET: &str = "test-secret-0123456789abcdef-0123456789";

/// Two replicas (each with its own data dir) on one fixture Hub and one Redis.
/// Two replicas sharing `redis`. Redis calls get 2 s unless `flags` say otherwise: on a loaded
/// CI machine a shorter timeout lets a replica fail open (no lease, its own staging pass),
/// which is right for the service and wrong for a test that counts staging passes.
async fn replicas(redis: &RedisServer, flags: &[&str]) -> (Server, Server) {
    let hub = hub().await;
    let url = redis.url();
    let mut all = vec!["--cache-url", url.as_str(), "--cache-secret", SECRET];
    if !flags.contains(&"--redis-timeout-ms") {
        all.extend_from_slice(&["--redis-timeout-ms", "2000"]);
    }
    all.extend_from_slice(flags);
    let a = crate::support::server_on(hub, &all);
    let b = a.sibling(&all);
    (a, b)
}

fn hub_requests(hub: &TestHub) -> usize {
    hub.requests().iter().filter(|r| r.origin == Origin::Hub).count()
}

#[tokio::test]
async fn a_miss_on_one_replica_is_a_hit_on_another_for_one_upstream_request() {
    let redis = RedisServer::start();
    let (a, b) = replicas(&redis, &[]).await;
    let (status, _, first) = a.plan(&["hf://Qwen/Qwen3-8B"]).await;
    assert_eq!(
        (status, first["serving"]["cached"].as_bool()),
        (StatusCode::OK, Some(false))
    );
    let before = hub_requests(&a.hub);
    let (_, _, on_b) = b.plan(&["hf://Qwen/Qwen3-8B"]).await;
    assert_eq!(on_b["serving"]["cached"], true);
    assert_eq!(hub_requests(&a.hub) - before, 1, "B paid one probe and nothing else");
    assert_eq!((b.counts().staging, b.counts().plans), (0, 0));

    let pinned = format!("hf://Qwen/Qwen3-8B@{}", commit_of("Qwen/Qwen3-8B"));
    a.plan(&[&pinned]).await;
    let before = hub_requests(&a.hub);
    let (_, _, on_b) = b.plan(&[&pinned]).await;
    assert_eq!(on_b["serving"]["cached"], true);
    assert_eq!(hub_requests(&a.hub) - before, 0, "a pinned hit costs nothing upstream");
}

#[tokio::test]
async fn concurrent_misses_across_replicas_stage_the_headers_once() {
    let redis = RedisServer::start();
    let (a, b) = replicas(&redis, &[]).await;
    a.hub.add_fault(Fault::latency(Duration::from_millis(50)));
    let tasks: Vec<_> = (0..20)
        .map(|i| crate::support::spawn_plan(if i % 2 == 0 { &a.app } else { &b.app }, "hf://Qwen/Qwen3-30B-A3B"))
        .collect();
    for t in tasks {
        assert_eq!(t.await.expect("task").0, StatusCode::OK);
    }
    assert_eq!(
        a.counts().staging + b.counts().staging,
        1,
        "one staging pass across the fleet"
    );
    let shard_reads = a
        .hub
        .requests()
        .iter()
        .filter(|r| r.origin == Origin::Hub && r.path.ends_with(".safetensors"))
        .count();
    assert_eq!(shard_reads, 13, "each of the 13 shard headers read once");
}

#[tokio::test]
async fn a_dead_leaseholders_lease_expires_and_the_work_is_retried() {
    let redis = RedisServer::start();
    let (a, b) = replicas(&redis, &["--lease-secs", "1"]).await;
    a.hub
        .add_fault(Fault::latency(Duration::from_millis(400)).path_contains("gpt-oss"));
    // A takes the lease, then its request is abandoned mid-staging: the lease is never released.
    let abandoned = crate::support::spawn_plan(&a.app, "hf://openai/gpt-oss-20b");
    while a.counts().staging == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    abandoned.abort();
    let started = Instant::now();
    let (status, _, v) = b.plan(&["hf://openai/gpt-oss-20b"]).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(b.counts().staging, 1, "B did the work once the lease expired");
    assert!(started.elapsed() < Duration::from_secs(30));
    assert_eq!(preflight_server::metrics::Metrics::get(&b.state.metrics.lease_waits), 1);
}

#[tokio::test]
async fn stopping_redis_loses_no_request_and_restarting_restores_sharing() {
    let mut redis = RedisServer::start();
    // The outage as the earlier runs had it: a reconnect attempt gives up after 200 ms.
    let (a, b) = replicas(&redis, &["--redis-timeout-ms", "200"]).await;
    let mut statuses = Vec::new();
    for round in 0..30 {
        if round == 10 {
            redis.stop();
        }
        let replica = if round % 2 == 0 { &a } else { &b };
        // Before the outage two repos; during it, three new ones (misses that need Redis).
        let source = match round {
            0..10 => ["hf://Qwen/Qwen3-0.6B", "hf://Qwen/Qwen3-8B"][round % 2],
            _ => [
                "hf://openai/gpt-oss-20b",
                "hf://Qwen/Qwen3-30B-A3B",
                "hf://microsoft/Phi-3-mini-4k-instruct",
            ][round % 3],
        };
        statuses.push(replica.plan(&[source]).await.0);
    }
    assert!(
        statuses
            .iter()
            .all(|s| *s == StatusCode::OK || *s == StatusCode::TOO_MANY_REQUESTS),
        "{statuses:?}"
    );
    let errors = |s: &Server| preflight_server::metrics::Metrics::get(&s.state.metrics.redis_errors);
    assert!(errors(&a) + errors(&b) > 0, "the outage was noticed");

    redis.resume();
    // Each replica goes back to Redis once its breaker lets a call through (backoff ≤ 5 s).
    let deadline = Instant::now() + Duration::from_secs(20);
    for replica in [&a, &b] {
        let shared = replica.state.pipeline.cache.shared().expect("shared tier");
        while !shared.ping().await {
            assert!(Instant::now() < deadline, "redis never came back");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    // Sharing is restored: a new verdict on A is a hit on B.
    let (status, _, _) = a.plan(&["hf://mistralai/Mixtral-8x7B-v0.1"]).await;
    assert_eq!(status, StatusCode::OK);
    let staged = b.counts().staging;
    let (_, _, v) = b.plan(&["hf://mistralai/Mixtral-8x7B-v0.1"]).await;
    assert_eq!(v["serving"]["cached"], true);
    assert_eq!(b.counts().staging, staged);
}

#[tokio::test]
async fn the_shared_hub_budget_holds_across_replicas() {
    let redis = RedisServer::start();
    let budget = 12;
    let (a, b) = replicas(&redis, &["--hub-budget", "12", "--hub-budget-window-secs", "600"]).await;
    let sources = [
        "hf://Qwen/Qwen3-0.6B",
        "hf://Qwen/Qwen3-8B",
        "hf://openai/gpt-oss-20b",
        "hf://mistralai/Mixtral-8x7B-v0.1",
        "hf://Qwen/Qwen3-30B-A3B",
        "hf://deepseek-ai/DeepSeek-V3",
    ];
    let mut refused = 0;
    for (i, source) in sources.iter().enumerate() {
        let replica = if i % 2 == 0 { &a } else { &b };
        let (status, headers, v) = replica.plan(&[source]).await;
        if status == StatusCode::TOO_MANY_REQUESTS {
            refused += 1;
            assert_eq!(v["error"]["code"], "hub_budget_exhausted", "{v}");
            assert!(headers.get("retry-after").is_some());
        } else {
            assert_eq!(status, StatusCode::OK, "{v}");
        }
    }
    assert!(
        hub_requests(&a.hub) <= budget,
        "the Hub saw {} requests, budget {budget}",
        hub_requests(&a.hub)
    );
    assert!(refused > 0, "the budget was reached");
    assert!(
        preflight_server::metrics::Metrics::get(&a.state.metrics.budget_refusals)
            + preflight_server::metrics::Metrics::get(&b.state.metrics.budget_refusals)
            > 0
    );
}

#[tokio::test]
async fn staged_facts_in_redis_spare_another_replica_its_staging() {
    let redis = RedisServer::start();
    let url = redis.url();
    let flags = [
        "--cache-url",
        url.as_str(),
        "--cache-secret",
        SECRET,
        "--redis-timeout-ms",
        "2000",
    ];
    let a = crate::support::server_on(hub().await, &flags);
    let repo = "hf://Qwen/Qwen3-30B-A3B";
    assert_eq!(a.plan(&[repo]).await.0, StatusCode::OK);

    // B never staged it, and no one asked for these options: its verdict misses, its facts
    // come from Redis — one probe, one plan, no staging.
    let b = a.sibling(&flags);
    let before = hub_requests(&a.hub);
    let (status, _, v) = b
        .plan_with(json!({ "sources": [repo], "options": {"context": 4096} }), None)
        .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v["serving"]["cached"], false);
    assert_eq!((b.counts().staging, b.counts().plans), (0, 1));
    assert_eq!(hub_requests(&a.hub) - before, 1, "the probe alone");
    assert_eq!(preflight_server::metrics::Metrics::get(&b.state.metrics.facts_hits), 1);

    // A facts value altered in Redis fails its tag: a fresh replica stages again.
    let client = redis::Client::open(url.as_str()).expect("redis client");
    let mut conn = client.get_multiplexed_async_connection().await.expect("connect");
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("preflight:*facts:*")
        .query_async(&mut conn)
        .await
        .expect("keys");
    assert_eq!(keys.len(), 1, "{keys:?}");
    let mut value: Vec<u8> = redis::cmd("GET")
        .arg(&keys[0])
        .query_async(&mut conn)
        .await
        .expect("get");
    let middle = value.len() / 2;
    value[middle] ^= 0x55;
    let _: () = redis::cmd("SET")
        .arg(&keys[0])
        .arg(value)
        .query_async(&mut conn)
        .await
        .expect("set");
    let c = a.sibling(&flags);
    let (status, _, v) = c
        .plan_with(json!({ "sources": [repo], "options": {"context": 8192} }), None)
        .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(c.counts().staging, 1, "restaged");
    assert_eq!(preflight_server::metrics::Metrics::get(&c.state.metrics.facts_hits), 0);
}

/// What the verdict and facts keys of one plan are, in the shared Redis.
async fn shared_keys(conn: &mut redis::aio::MultiplexedConnection, kind: &str) -> Vec<String> {
    redis::cmd("KEYS")
        .arg(format!("preflight:*{kind}:*"))
        .query_async(conn)
        .await
        .expect("keys")
}

#[tokio::test]
async fn a_planted_value_is_deleted_on_first_read_and_never_trips_the_breaker() {
    let redis = RedisServer::start();
    let url = redis.url();
    let flags = [
        "--cache-url",
        url.as_str(),
        "--cache-secret",
        SECRET,
        "--redis-timeout-ms",
        "2000",
    ];
    let a = crate::support::server_on(hub().await, &flags);
    let repo = "hf://Qwen/Qwen3-8B";
    assert_eq!(a.plan(&[repo]).await.0, StatusCode::OK);
    let client = redis::Client::open(url.as_str()).expect("redis client");
    let mut conn = client.get_multiplexed_async_connection().await.expect("connect");
    let verdict = shared_keys(&mut conn, "verdict").await.pop().expect("a verdict key");
    let facts = shared_keys(&mut conn, "facts").await.pop().expect("a facts key");
    // A hash where a verdict string belongs (a WRONGTYPE error on every GET before), and a
    // 40 MB string where facts belong (read whole into a replica before).
    let _: () = redis::cmd("DEL")
        .arg(&verdict)
        .query_async(&mut conn)
        .await
        .expect("del");
    let _: () = redis::cmd("HSET")
        .arg(&verdict)
        .arg("f")
        .arg("v")
        .query_async(&mut conn)
        .await
        .expect("hset");
    let _: () = redis::cmd("SET")
        .arg(&facts)
        .arg(vec![b'x'; 40 << 20])
        .query_async(&mut conn)
        .await
        .expect("set");

    let b = a.sibling(&flags);
    for _ in 0..3 {
        let (status, _, v) = b.plan(&[repo]).await;
        assert_eq!(status, StatusCode::OK, "{v}");
    }
    let errors = preflight_server::metrics::Metrics::get(&b.state.metrics.redis_errors);
    assert_eq!(errors, 0, "a planted value is a miss, not a Redis failure");
    assert_eq!(b.counts().staging, 1, "the planted facts were not served");
    let kind: String = redis::cmd("TYPE")
        .arg(&verdict)
        .query_async(&mut conn)
        .await
        .expect("type");
    assert_eq!(kind, "string", "the hash was deleted and the verdict stored again");
    let len: u64 = redis::cmd("STRLEN")
        .arg(&facts)
        .query_async(&mut conn)
        .await
        .expect("strlen");
    assert!(len < 40 << 20, "the planted value was deleted ({len} bytes there)");
}
