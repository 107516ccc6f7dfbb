//! Staged facts are cached by what they are — a commit's — not by options: another option
//! set for the same commit costs a probe (none when pinned) and a plan, never a restage.
//! Counted, not timed.

use axum::http::StatusCode;
use serde_json::json;

use preflight_server::metrics::Metrics;

use crate::support::{TOKEN, commit_of, server};

const DEEPSEEK: &str = "hf://deepseek-ai/DeepSeek-V3";

#[tokio::test]
async fn other_option_sets_for_the_same_commit_plan_from_cached_facts() {
    let s = server(&[]).await;
    let (status, _, first) = s.plan(&[DEEPSEEK]).await;
    assert_eq!(status, StatusCode::OK, "{first}");
    let before = s.counts();
    let commit = first["artifacts"][0]["source"]["commit"]
        .as_str()
        .expect("commit")
        .to_owned();
    for options in [
        json!({"context": 4096}),
        json!({"context": 8192}),
        json!({"context": 16384}),
    ] {
        let upstream = s.upstream();
        let (status, _, v) = s
            .plan_with(json!({ "sources": [DEEPSEEK], "options": options }), None)
            .await;
        assert_eq!(status, StatusCode::OK, "{v}");
        assert_eq!(s.upstream() - upstream, 1, "one probe, no staging ({options})");
        assert_eq!(v["artifacts"][0]["parameters"], first["artifacts"][0]["parameters"]);
        assert!(v["memory"].is_object());
    }
    let after = s.counts();
    assert_eq!(after.staging - before.staging, 0, "no staging pass");
    assert_eq!(after.plans - before.plans, 3, "three planner invocations");
    // Pinned: not even the probe, for three more option sets.
    let pinned = format!("{DEEPSEEK}@{commit}");
    for options in [
        json!({"sequences": 3}),
        json!({"kv_dtype": "fp8"}),
        json!({"devices": "h200:8"}),
    ] {
        let upstream = s.upstream();
        let (status, _, v) = s
            .plan_with(json!({ "sources": [&pinned], "options": options }), None)
            .await;
        assert_eq!(status, StatusCode::OK, "{v}");
        assert_eq!(s.upstream(), upstream, "pinned: no upstream request ({options})");
        assert_eq!(
            v["artifacts"][0]["source"]["pinned"], true,
            "the answer describes this request"
        );
    }
    let pinned_counts = s.counts() - after;
    assert_eq!((pinned_counts.staging, pinned_counts.plans), (0, 3));
}

#[tokio::test]
async fn a_semantics_version_bump_replans_from_cached_facts() {
    let mut s = server(&[]).await;
    let repo = "hf://Qwen/Qwen3-8B";
    let (status, _, first) = s.plan(&[repo]).await;
    assert_eq!(status, StatusCode::OK, "{first}");
    // A release with another semantics version: every verdict it stored before misses, the
    // facts (keyed without it) do not.
    let bumped = (preflight_plan::SEMANTICS_VERSION + 1).to_string();
    s.restart(&["--debug-semantics-version", &bumped]);
    let upstream = s.upstream();
    let (status, _, v) = s.plan(&[repo]).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v["serving"]["cached"], false, "re-planned, not served the old verdict");
    let counts = s.counts();
    assert_eq!((counts.staging, counts.plans), (0, 1), "planned again without staging");
    assert_eq!(s.upstream() - upstream, 1, "the probe alone");
    assert_eq!(v["artifacts"][0]["parameters"], first["artifacts"][0]["parameters"]);
}

#[tokio::test]
async fn facts_read_with_a_token_are_not_served_without_it() {
    let s = server(&[]).await;
    let gated = "hf://meta-llama/Llama-3.1-8B";
    let (status, _, v) = s.plan_with(json!({ "sources": [gated] }), Some(TOKEN)).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    let (status, _, v) = s
        .plan_with(json!({ "sources": [gated], "options": {"context": 1024} }), None)
        .await;
    assert_eq!(
        status,
        StatusCode::UNAUTHORIZED,
        "refused, not answered from cached facts: {v}"
    );
}

#[tokio::test]
async fn pinned_facts_read_with_a_token_are_not_served_without_it() {
    // Pinned, so no probe stands in the way: only the facts tier's scoping can refuse.
    let s = server(&[]).await;
    let gated = format!("hf://meta-llama/Llama-3.1-8B@{}", commit_of("meta-llama/Llama-3.1-8B"));
    let (status, _, v) = s.plan_with(json!({ "sources": [&gated] }), Some(TOKEN)).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    let upstream = s.upstream();
    let (status, _, v) = s
        .plan_with(json!({ "sources": [&gated], "options": {"context": 1024} }), None)
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{v}");
    assert!(s.upstream() > upstream, "asked the Hub, which refused");
    assert_eq!(Metrics::get(&s.state.metrics.facts_hits), 0);
    // The token's holder, with other options, plans from its facts.
    let (status, _, v) = s
        .plan_with(
            json!({ "sources": [&gated], "options": {"context": 1024} }),
            Some(TOKEN),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(Metrics::get(&s.state.metrics.facts_hits), 1);
    assert_eq!(s.counts().staging, 2, "the token's first read, and the refused one");
}

#[tokio::test]
async fn a_corrupt_facts_entry_on_disk_is_a_miss_and_restaged() {
    let mut s = server(&[]).await;
    let repo = "hf://Qwen/Qwen3-0.6B";
    let (status, _, v) = s.plan(&[repo]).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    let dir = s.data.path().join("facts");
    let entries: Vec<_> = std::fs::read_dir(&dir)
        .expect("facts dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "facts"))
        .collect();
    assert_eq!(entries.len(), 1);
    let mut bytes = std::fs::read(&entries[0]).expect("read");
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x55;
    std::fs::write(&entries[0], bytes).expect("corrupt");
    // A fresh process (empty memory tier) with another option set: the verdict misses, the
    // facts entry fails its checksum, and the source is staged again.
    s.restart(&[]);
    let (status, _, v) = s
        .plan_with(json!({ "sources": [repo], "options": {"context": 2048} }), None)
        .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(s.counts().staging, 1, "restaged");
    // And stored afresh: a third option set now plans without staging.
    let (status, _, _) = s
        .plan_with(json!({ "sources": [repo], "options": {"context": 1024} }), None)
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(s.counts().staging, 1);
}
