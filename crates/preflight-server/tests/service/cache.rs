//! The verdict cache: what a repeat costs upstream, persistence across restarts, corruption,
//! and access scoping of gated verdicts.

use axum::http::StatusCode;

use crate::support::{Counts, TOKEN, commit_of, server};

#[tokio::test]
async fn a_repeat_costs_one_upstream_request_and_a_pinned_repeat_none() {
    let s = server(&[]).await;
    s.plan(&["hf://Qwen/Qwen3-30B-A3B"]).await;
    let before = s.upstream();
    let (_, _, v) = s.plan(&["hf://Qwen/Qwen3-30B-A3B"]).await;
    assert_eq!(v["serving"]["cached"], true);
    assert_eq!(s.upstream() - before, 1, "the probe, and nothing else");

    let pinned = format!("hf://Qwen/Qwen3-30B-A3B@{}", commit_of("Qwen/Qwen3-30B-A3B"));
    s.plan(&[&pinned]).await;
    let before = s.upstream();
    let (_, _, v) = s.plan(&[&pinned]).await;
    assert_eq!(v["serving"]["cached"], true);
    assert_eq!(s.upstream() - before, 0);
}

#[tokio::test]
async fn a_restart_keeps_the_verdict() {
    let mut s = server(&[]).await;
    let (_, _, first) = s.plan(&["hf://openai/gpt-oss-20b"]).await;
    s.restart(&[]);
    let before = s.upstream();
    let (status, _, again) = s.plan(&["hf://openai/gpt-oss-20b"]).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(again["serving"]["cached"], true, "served from the persistent store");
    assert_eq!(again["artifacts"], first["artifacts"]);
    assert_eq!(
        s.counts(),
        Counts {
            probes: 1,
            staging: 0,
            plans: 0,
            hits: 1
        }
    );
    assert_eq!(s.upstream() - before, 1);
}

#[tokio::test]
async fn a_corrupt_entry_is_a_miss_not_an_error() {
    let mut s = server(&[]).await;
    s.plan(&["hf://Qwen/Qwen3-0.6B"]).await;
    let db = rusqlite::Connection::open(s.data.path().join(preflight_server::cache::STORE_FILE)).expect("open");
    let changed = db
        .execute(
            "UPDATE verdicts SET body = replace(body, 'admissible', 'admissiblX')",
            [],
        )
        .expect("corrupt");
    assert_eq!(changed, 1);
    drop(db);
    s.restart(&[]);
    let (status, _, v) = s.plan(&["hf://Qwen/Qwen3-0.6B"]).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(v["serving"]["cached"], false, "the corrupt row was not served");
    // The staged facts are intact (their own checksummed entry): re-planned from them, with
    // no staging.
    assert_eq!(v["admissible"], true);
    assert_eq!(
        s.counts(),
        Counts {
            probes: 1,
            staging: 0,
            plans: 1,
            hits: 0
        }
    );
}

#[tokio::test]
async fn a_gated_verdict_is_served_only_to_the_same_access() {
    let s = server(&[]).await;
    let gated = serde_json::json!({ "sources": ["hf://meta-llama/Llama-3.1-8B"] });
    let (status, _, v) = s.plan_with(gated.clone(), Some(TOKEN)).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    let (_, _, again) = s.plan_with(gated.clone(), Some(TOKEN)).await;
    assert_eq!(again["serving"]["cached"], true, "the same token hits");

    let (status, _, anonymous) = s.plan_with(gated.clone(), None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{anonymous}");
    assert_eq!(anonymous["error"]["code"], "gated");
    let (status, _, other) = s.plan_with(gated, Some("hf_someone_else")).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{other}");
    assert!(!other.to_string().contains(TOKEN), "no token in any response");
}

#[tokio::test]
async fn options_are_part_of_the_key() {
    let s = server(&[]).await;
    s.plan(&["hf://Qwen/Qwen3-0.6B"]).await;
    let (_, _, v) = s
        .plan_with(
            serde_json::json!({ "sources": ["hf://Qwen/Qwen3-0.6B"], "options": {} }),
            None,
        )
        .await;
    assert_eq!(
        v["serving"]["cached"], true,
        "an empty options object is the default options"
    );
}
