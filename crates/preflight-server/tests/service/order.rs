//! design §2's order, proven by counting work — never by timing.

use std::time::Duration;

use axum::http::StatusCode;
use preflight_testhub::Fault;

use crate::support::{Counts, commit_of, server};

const REPO: &str = "hf://Qwen/Qwen3-8B";

#[tokio::test]
async fn a_cache_hit_stages_nothing_and_plans_nothing() {
    let s = server(&[]).await;
    let (status, _, first) = s.plan(&[REPO]).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(first["serving"]["cached"], false);
    assert_eq!(
        s.counts(),
        Counts {
            probes: 1,
            staging: 1,
            plans: 1,
            hits: 0
        }
    );

    let before = s.counts();
    let (status, _, repeat) = s.plan(&[REPO]).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(repeat["serving"]["cached"], true);
    assert_eq!(
        s.counts() - before,
        Counts {
            probes: 1,
            staging: 0,
            plans: 0,
            hits: 1
        }
    );
    assert_eq!(
        repeat["artifacts"], first["artifacts"],
        "the hit answers the same verdict"
    );
}

#[tokio::test]
async fn a_pinned_hit_needs_not_even_a_probe() {
    let s = server(&[]).await;
    let pinned = format!("hf://Qwen/Qwen3-8B@{}", commit_of("Qwen/Qwen3-8B"));
    s.plan(&[&pinned]).await;
    assert_eq!(
        s.counts(),
        Counts {
            probes: 0,
            staging: 1,
            plans: 1,
            hits: 0
        }
    );
    let before = s.counts();
    let (_, _, repeat) = s.plan(&[&pinned]).await;
    assert_eq!(repeat["serving"]["cached"], true);
    assert_eq!(
        s.counts() - before,
        Counts {
            probes: 0,
            staging: 0,
            plans: 0,
            hits: 1
        }
    );
}

#[tokio::test]
async fn a_different_resolved_commit_is_a_miss() {
    let (s, second, _root) = crate::support::server_forked("Qwen/Qwen3-8B", &[]).await;
    s.plan(&[REPO]).await;
    // main moves: the probe learns a new commit, so the cached verdict does not apply.
    s.hub.set_ref("Qwen/Qwen3-8B", "main", &second).expect("move main");
    let before = s.counts();
    let (_, _, v) = s.plan(&[REPO]).await;
    assert_eq!(v["serving"]["cached"], false);
    assert_eq!(
        s.counts() - before,
        Counts {
            probes: 1,
            staging: 1,
            plans: 1,
            hits: 0
        }
    );
}

#[tokio::test]
async fn a_local_source_is_planned_and_never_stored() {
    let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
    let root = fixtures.canonicalize().expect("fixtures");
    let s = server(&["--profile", "local", "--local-root", root.to_str().expect("utf8")]).await;
    let local = root.join("local/tiny-llama");
    let local = local.to_str().expect("utf8");
    for _ in 0..2 {
        let (status, _, v) = s.plan(&[local]).await;
        assert_eq!(status, StatusCode::OK, "{v}");
        assert_eq!(
            (v["serving"]["cached"].clone(), v["serving"]["cacheable"].clone()),
            (false.into(), false.into())
        );
    }
    assert_eq!(
        s.counts(),
        Counts {
            probes: 0,
            staging: 2,
            plans: 2,
            hits: 0
        }
    );
}

#[tokio::test]
async fn one_artifact_without_a_commit_makes_the_whole_plan_uncacheable() {
    let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .canonicalize()
        .expect("fixtures");
    let s = server(&["--profile", "local", "--local-root", fixtures.to_str().expect("utf8")]).await;
    let local = fixtures.join("local/tiny-llama-f32.gguf");
    let sources = [REPO, local.to_str().expect("utf8")];
    for _ in 0..2 {
        let (status, _, v) = s.plan(&sources).await;
        assert_eq!(status, StatusCode::OK, "{v}");
        assert_eq!(v["serving"]["cacheable"], false);
        assert_eq!(v["serving"]["cached"], false);
    }
    assert_eq!(
        s.counts(),
        Counts {
            probes: 2,
            staging: 2,
            plans: 2,
            hits: 0
        }
    );
}

#[tokio::test]
async fn a_failed_probe_falls_through_to_planning() {
    let s = server(&[]).await;
    // The probe (one-byte read of config.json at main) fails on both of its attempts…
    s.hub
        .add_fault(Fault::status(503).times(2).path_contains("/resolve/main/config.json"));
    let (status, _, v) = s.plan(&[REPO]).await;
    // …so the plan goes ahead without the cache: staged, planned, not stored.
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v["serving"]["cacheable"], false);
    assert_eq!(
        s.counts(),
        Counts {
            probes: 1,
            staging: 1,
            plans: 1,
            hits: 0
        }
    );
    let (_, _, again) = s.plan(&[REPO]).await;
    assert_eq!(
        again["serving"]["cached"], false,
        "nothing was stored from the uncacheable plan"
    );
}

#[tokio::test]
async fn a_full_permit_pool_refuses_a_miss_but_still_serves_a_hit() {
    let s = server(&["--max-plans-in-flight", "1", "--retry-after-secs", "7"]).await;
    s.plan(&[REPO]).await; // warm: now a hit
    s.hub
        .add_fault(Fault::latency(Duration::from_secs(2)).path_contains("DeepSeek"));
    let slow = crate::support::spawn_plan(&s.app, "hf://deepseek-ai/DeepSeek-V3");
    while s.state.pipeline.in_flight() == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let (status, headers, body) = s.plan(&["hf://Qwen/Qwen3-0.6B"]).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    assert_eq!(headers.get("retry-after").and_then(|v| v.to_str().ok()), Some("7"));
    assert_eq!(body["error"]["code"], "over_capacity");
    let (status, _, hit) = s.plan(&[REPO]).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(hit["serving"]["cached"], true);
    assert_eq!(
        s.state.pipeline.in_flight(),
        1,
        "the slow plan still holds the only permit"
    );
    slow.abort();
}

#[tokio::test]
async fn concurrent_misses_of_one_key_do_the_work_once() {
    let s = server(&["--max-plans-in-flight", "1"]).await;
    s.hub.add_fault(Fault::latency(Duration::from_millis(100)));
    let plans = (0..10).map(|_| crate::support::spawn_plan(&s.app, REPO));
    let statuses: Vec<StatusCode> = futures_join(plans).await.into_iter().map(|r| r.0).collect();
    assert!(
        statuses.iter().all(|s| *s == StatusCode::OK),
        "{statuses:?}: joiners need no permit"
    );
    let c = s.counts();
    assert_eq!((c.staging, c.plans), (1, 1));
    assert_eq!(crate::support::Counts { probes: 10, ..c }, c);
}

async fn futures_join<T>(handles: impl Iterator<Item = tokio::task::JoinHandle<T>>) -> Vec<T> {
    let mut out = Vec::new();
    for h in handles {
        out.push(h.await.expect("task"));
    }
    out
}

#[tokio::test]
async fn a_plan_every_requester_left_frees_its_permit() {
    // Two such requests used to hold both permits for minutes after their clients left,
    // and every other miss got 429.
    let s = server(&["--max-plans-in-flight", "1"]).await;
    s.hub
        .add_fault(Fault::latency(Duration::from_secs(30)).path_contains("DeepSeek"));
    // Pinned: no probe, so the plan is keyed and runs as a flight of its own.
    let pinned = format!(
        "hf://deepseek-ai/DeepSeek-V3@{}",
        crate::support::commit_of("deepseek-ai/DeepSeek-V3")
    );
    let slow = crate::support::spawn_plan(&s.app, Box::leak(pinned.into_boxed_str()));
    while s.state.pipeline.in_flight() == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    slow.abort();
    // The Hub would keep the plan waiting 30 s; its permit comes back as soon as the plan
    // sees no one is waiting.
    for _ in 0..2000 {
        if s.state.pipeline.in_flight() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(
        s.state.pipeline.in_flight(),
        0,
        "the abandoned plan still holds its permit"
    );
    let (status, _, body) = s.plan(&["hf://Qwen/Qwen3-0.6B"]).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        preflight_server::metrics::Metrics::get(&s.state.metrics.plans_abandoned),
        1
    );
}

#[tokio::test]
async fn concurrent_misses_with_different_options_stage_one_commit_once() {
    // Each option set is its own verdict key, but the facts are the commit's: eight used to
    // stage separately (8 × 16 Hub requests).
    let pinned: &'static str =
        Box::leak(format!("hf://Qwen/Qwen3-8B@{}", crate::support::commit_of("Qwen/Qwen3-8B")).into_boxed_str());
    let once = server(&[]).await;
    once.plan(&[pinned]).await;
    let one_staging = once.hub.requests().len();

    let s = server(&["--max-plans-in-flight", "8"]).await;
    s.hub.add_fault(Fault::latency(Duration::from_millis(200)));
    let plans: Vec<_> = (0..8)
        .map(|i| {
            let app = s.app.clone();
            tokio::spawn(async move {
                let body = serde_json::json!({"sources": [pinned], "options": {"context": 1024 * (i + 1)}});
                crate::support::send(
                    &app,
                    axum::http::Request::post("/v1/plan")
                        .body(axum::body::Body::from(body.to_string()))
                        .expect("request"),
                )
                .await
            })
        })
        .collect();
    for plan in plans {
        assert_eq!(plan.await.expect("task").0, StatusCode::OK);
    }
    assert_eq!(
        s.hub.requests().len(),
        one_staging,
        "one staging's Hub requests, not eight"
    );
    assert_eq!(s.counts().plans, 8, "every option set planned");
    assert_eq!(
        preflight_server::metrics::Metrics::get(&s.state.metrics.staging_coalesced),
        7
    );
}
