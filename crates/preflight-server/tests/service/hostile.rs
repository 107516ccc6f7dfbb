//! Holes an attack run found in the service (issue 14), each pinned by a test named after it.
//! Tests count work and look at outcomes; none asserts on elapsed time (the guards around
//! network reads only stop a broken build from hanging the suite).

use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use preflight_server::listen::{self, Limits};
use preflight_server::metrics::Metrics;
use preflight_testhub::Fault;
use preflight_testhub::redis::RedisServer;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::{Server, commit_of, server, server_on, spawn_plan};

/// Generous bound on a read that must end: a build without the fix hangs here, then fails.
const GUARD: Duration = Duration::from_secs(20);

/// Hole 7: a client hanging up failed everyone who had joined its plan (`503
/// plan_abandoned`). The work now runs on its own task and finishes, and is stored, for those
/// still waiting.
#[tokio::test]
async fn a_leader_hanging_up_fails_everyone_who_joined_its_plan() {
    let s = server(&[]).await;
    s.hub
        .add_fault(Fault::latency(Duration::from_millis(300)).path_contains("model-0000"));
    let leader = spawn_plan(&s.app, "hf://Qwen/Qwen3-8B");
    while s.state.pipeline.in_flight() == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let joiner = spawn_plan(&s.app, "hf://Qwen/Qwen3-8B");
    while Metrics::get(&s.state.metrics.coalesced) == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    leader.abort(); // the first client disconnects: its request future is dropped
    let (status, _, v) = joiner.await.expect("joiner task");
    assert_eq!(status, StatusCode::OK, "{v}");
    let (_, _, again) = s.plan(&["hf://Qwen/Qwen3-8B"]).await;
    assert_eq!(
        again["serving"]["cached"], true,
        "the abandoned leader's work was stored"
    );
    assert_eq!((s.counts().staging, s.counts().plans), (1, 1));
}

/// Hole 8: a slow probe and then staging each got a fresh `--upstream-timeout-secs`, so a
/// request could take twice the bound. One deadline now covers both: here each phase alone
/// fits in the 2 s bound, together they do not.
#[tokio::test]
async fn probe_and_staging_each_got_their_own_upstream_timeout() {
    let s = server(&["--upstream-timeout-secs", "2"]).await;
    let commit = commit_of("Qwen/Qwen3-0.6B");
    s.hub.add_fault(
        Fault::latency(Duration::from_millis(1300))
            .path_contains("/resolve/main/config.json")
            .times(1),
    );
    s.hub.add_fault(
        Fault::latency(Duration::from_millis(1300))
            .path_contains(&commit)
            .times(1),
    );
    let (status, _, v) = s.plan(&["hf://Qwen/Qwen3-0.6B"]).await;
    assert_eq!(status, StatusCode::GATEWAY_TIMEOUT, "{v}");
    assert_eq!(v["error"]["code"], "upstream_timeout");
}

/// Hole 9: a hit answered with the first requester's description of the source (a pinned
/// request was told `"pinned": false` and the other spelling). A hit describes the request
/// it answers.
#[tokio::test]
async fn a_cached_verdict_describes_the_first_requesters_source() {
    let s = server(&[]).await;
    let commit = commit_of("Qwen/Qwen3-8B");
    let pinned = format!("hf://Qwen/Qwen3-8B@{commit}");
    let (_, _, first) = s.plan(&["hf://Qwen/Qwen3-8B"]).await;
    assert_eq!(first["artifacts"][0]["source"]["pinned"], false);

    let (status, _, hit) = s.plan(&[&pinned]).await;
    assert_eq!(
        (status, hit["serving"]["cached"].as_bool()),
        (StatusCode::OK, Some(true))
    );
    let source = &hit["artifacts"][0]["source"];
    assert_eq!(source["spec"], pinned.as_str());
    assert_eq!(source["pinned"], true);
    assert_eq!(source["revision"], commit.as_str());
    assert_eq!(source["commit"], commit.as_str());
    // What the source says of itself stays: it belongs to the commit, not to the spelling.
    for key in ["license", "gated", "remote_code", "download_bytes"] {
        assert_eq!(source[key], first["artifacts"][0]["source"][key], "{key}");
    }
    assert_eq!(
        (&source["license"], &source["gated"]),
        (&Value::from("other"), &Value::from(false))
    );
    // Everything else is the same verdict.
    let without_source = |v: &Value| {
        let mut v = v.clone();
        v["artifacts"][0]["source"] = Value::Null;
        v["serving"] = Value::Null;
        v
    };
    assert_eq!(without_source(&first), without_source(&hit));

    let (_, _, back) = s.plan(&["hf://Qwen/Qwen3-8B"]).await;
    assert_eq!(back["artifacts"][0]["source"], first["artifacts"][0]["source"]);
    assert_eq!((s.counts().staging, s.counts().plans), (1, 1));
}

/// Hole 11: the local profile judged only the directory named, so a checkpoint inside the
/// root whose `model.safetensors` links to a file outside was read (and the error message
/// carried its first bytes). Every file is judged by where it resolves, before it is opened.
#[cfg(unix)]
#[tokio::test]
async fn the_local_profile_follows_symlinks_out_of_the_local_root() {
    let root = tempfile::tempdir().expect("root");
    let outside = tempfile::tempdir().expect("outside");
    let secret = outside.path().join("secret");
    std::fs::write(&secret, b"SECRET-SECRET-SECRET and more private text").expect("secret");
    let checkpoint = root.path().join("ckpt");
    std::fs::create_dir(&checkpoint).expect("mkdir");
    let tiny = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/local/tiny-llama");
    std::fs::copy(tiny.join("config.json"), checkpoint.join("config.json")).expect("config");
    std::os::unix::fs::symlink(&secret, checkpoint.join("model.safetensors")).expect("symlink");
    let s = server(&[
        "--profile",
        "local",
        "--local-root",
        root.path().to_str().expect("utf8"),
    ])
    .await;
    let (status, _, v) = s.plan(&[checkpoint.to_str().expect("utf8")]).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{v}");
    assert_eq!(v["error"]["code"], "local_source_refused");
    assert!(!v.to_string().contains("SECRET"), "{v}");
}

/// Hole 12: a verdict written into Redis by anyone with write access was served if its
/// SHA-256 matched. Stored values carry an HMAC under the replicas' shared secret, bound to
/// their key: a forged value, or a genuine one moved to another key, is a miss.
#[tokio::test]
async fn a_verdict_forged_in_redis_with_a_valid_checksum_is_served() {
    let redis = RedisServer::start();
    let url = redis.url();
    let flags = ["--cache-url", url.as_str(), "--cache-secret", crate::shared::SECRET];
    let a = server_on(crate::support::hub().await, &flags);
    for source in ["hf://Qwen/Qwen3-0.6B", "hf://Qwen/Qwen3-8B"] {
        assert_eq!(a.plan(&[source]).await.0, StatusCode::OK);
    }
    let client = redis::Client::open(url.as_str()).expect("redis client");
    let mut conn = client.get_multiplexed_async_connection().await.expect("connect");
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("preflight:*verdict:*")
        .query_async(&mut conn)
        .await
        .expect("keys");
    assert_eq!(keys.len(), 2, "{keys:?}");
    let values: Vec<String> = redis::cmd("MGET")
        .arg(&keys)
        .query_async(&mut conn)
        .await
        .expect("mget");

    // A forgery: the body altered, a correct SHA-256 beside it (what the old check accepted).
    let (_, body) = values[0].split_once('\n').expect("tag and body");
    let forged = body.replacen("\"admissible\":true", "\"admissible\":false", 1);
    assert_ne!(forged, body);
    let digest = sha2_hex(forged.as_bytes());
    let _: () = redis::cmd("SET")
        .arg(&keys[0])
        .arg(format!("{digest}\n{forged}"))
        .query_async(&mut conn)
        .await
        .expect("set");
    // A replay: the other key's genuine value under this key.
    let _: () = redis::cmd("SET")
        .arg(&keys[1])
        .arg(&values[0])
        .query_async(&mut conn)
        .await
        .expect("set");

    let b = a.sibling(&flags);
    for source in ["hf://Qwen/Qwen3-0.6B", "hf://Qwen/Qwen3-8B"] {
        let (status, _, v) = b.plan(&[source]).await;
        assert_eq!(status, StatusCode::OK, "{v}");
        assert_eq!(
            v["serving"]["cached"], false,
            "{source}: a value without a valid tag was served"
        );
        assert_eq!(v["admissible"], true);
        assert_eq!(v["artifacts"][0]["source"]["spec"], source);
    }
    assert_eq!(b.counts().plans, 2, "both were planned afresh");
    assert_eq!(b.counts().staging, 0, "from the facts A staged, which verify");
}

fn sha2_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// Hole 12: the shared tier is not started without a secret to authenticate it.
#[test]
fn the_shared_tier_needs_a_secret() {
    let args = preflight_server::ServeArgs::from_flags(&["--cache-url", "redis://127.0.0.1:1/0"]).expect("flags");
    assert!(matches!(
        preflight_server::state(&args),
        Err(preflight_server::ServeError::Config(_))
    ));
    let args =
        preflight_server::ServeArgs::from_flags(&["--cache-url", "redis://127.0.0.1:1/0", "--cache-secret", "short"])
            .expect("flags");
    assert!(preflight_server::state(&args).is_err());
}

/// A real listener (hyper's connection handling is what is under test) over `s`'s state.
async fn listen_on(s: &Server, limits: Limits) -> (std::net::SocketAddr, tokio::sync::oneshot::Sender<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let state = Arc::clone(&s.state);
    tokio::spawn(listen::serve(listener, state, limits, async {
        let _ = stopped.await;
    }));
    (addr, stop)
}

/// Everything the server sends until it closes the connection (or resets it).
async fn until_closed(stream: &mut TcpStream) -> String {
    let mut buf = Vec::new();
    let read = tokio::time::timeout(GUARD, stream.read_to_end(&mut buf)).await;
    assert!(read.is_ok(), "the server kept the connection open");
    String::from_utf8_lossy(&buf).into_owned()
}

/// Hole 6: no header, body or idle timeouts — a connection sending nothing, dripping a
/// header, or promising a body it never sends stayed open for 600 s and more. Each is
/// closed once its (here short) timeout passes.
#[tokio::test]
async fn slow_and_idle_connections_were_held_open_without_a_timeout() {
    let s = server(&["--body-timeout-secs", "1"]).await;
    let limits = Limits {
        header_timeout: Duration::from_millis(300),
        max_connections: 1000,
    };
    let (addr, _stop) = listen_on(&s, limits).await;

    // Idle from the start: nothing sent.
    let mut idle = TcpStream::connect(addr).await.expect("connect");
    assert_eq!(until_closed(&mut idle).await, "");

    // A header that never completes.
    let mut drip = TcpStream::connect(addr).await.expect("connect");
    drip.write_all(b"GET /v1/health HTTP/1.1\r\nHost: x\r\nX-Slow: a")
        .await
        .expect("write");
    assert!(!until_closed(&mut drip).await.contains("200 OK"));

    // Kept alive after a request, then idle.
    let mut kept = TcpStream::connect(addr).await.expect("connect");
    kept.write_all(b"GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .expect("write");
    let answered = until_closed(&mut kept).await;
    assert!(answered.starts_with("HTTP/1.1 200"), "{answered}");

    // A body promised and never sent: within the body limit, then past it.
    let mut short = TcpStream::connect(addr).await.expect("connect");
    short
        .write_all(
            b"POST /v1/plan HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{}",
        )
        .await
        .expect("write");
    let answered = until_closed(&mut short).await;
    assert!(answered.starts_with("HTTP/1.1 408"), "{answered}");
    assert!(answered.contains("body_timeout"), "{answered}");

    let mut huge = TcpStream::connect(addr).await.expect("connect");
    huge.write_all(b"POST /v1/plan HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999\r\n\r\n{}")
        .await
        .expect("write");
    let answered = until_closed(&mut huge).await;
    assert!(answered.starts_with("HTTP/1.1 413"), "{answered}");
    assert_eq!(
        Metrics::get(&s.state.metrics.connections_open),
        0,
        "every connection closed"
    );
}

/// Hole 6: connections are capped below the descriptor limit, and at the cap the oldest idle
/// connection makes room — so health still answers while the cap is full of idle clients.
#[tokio::test]
async fn idle_connections_at_the_cap_lock_out_health() {
    let s = server(&[]).await;
    let limits = Limits {
        header_timeout: Duration::from_secs(60),
        max_connections: 3,
    };
    let (addr, _stop) = listen_on(&s, limits).await;
    let mut idle = Vec::new();
    for _ in 0..3 {
        idle.push(TcpStream::connect(addr).await.expect("connect"));
    }
    while Metrics::get(&s.state.metrics.connections_open) < 3 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let mut health = TcpStream::connect(addr).await.expect("connect");
    health
        .write_all(b"GET /v1/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .expect("write");
    let answered = until_closed(&mut health).await;
    assert!(answered.starts_with("HTTP/1.1 200"), "{answered}");
    assert_eq!(Metrics::get(&s.state.metrics.connections_shed), 1);
    assert_eq!(
        until_closed(&mut idle[0]).await,
        "",
        "the oldest idle connection made room"
    );
}
