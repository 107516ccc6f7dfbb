//! Holes an attack run found (issue 14), each pinned by a test named after it: hostile
//! specs, hostile repos and a hostile Hub. Each test counts requests, never time.

use std::path::Path;
use std::time::Duration;

use preflight_formats::facts::Content;
use preflight_source::SourceError;
use preflight_source::hub::stage::{PlanBudget, stage};
use preflight_source::hub::{Counters, HubClient, HubConfig, HubError};
use preflight_testhub::{Fault, Origin, TestHub};

use crate::support::{client, hub, hub_spec, plan_source};

/// A commit id for hand-made repos.
const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";

/// Lay out `repo` at [`COMMIT`] (its `main`) under `root`, with `files` (path, bytes) and the
/// real sizes of stubs.
fn make_repo(root: &Path, repo: &str, files: &[(&str, &[u8])], stubs: &[(&str, u64)]) {
    let dir = root.join(repo);
    let commit = dir.join(COMMIT);
    for (path, bytes) in files {
        let path = commit.join(path);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, bytes).expect("write");
    }
    let stubs: serde_json::Map<_, _> = stubs.iter().map(|(p, n)| ((*p).to_owned(), (*n).into())).collect();
    std::fs::write(commit.join(".stubs.json"), serde_json::to_vec(&stubs).expect("json")).expect("stubs");
    std::fs::write(dir.join("refs.json"), format!("{{\"main\": \"{COMMIT}\"}}")).expect("refs");
}

async fn hub_at(root: &Path) -> TestHub {
    TestHub::builder().root(root).start().await.expect("fixture hub")
}

fn fast_client(hub: &TestHub, home: &Path, tweak: impl FnOnce(&mut HubConfig)) -> HubClient {
    let mut config = HubConfig {
        endpoint: hub.url().to_owned(),
        hf_home: home.to_owned(),
        retry_base: Duration::from_millis(5),
        request_timeout: Duration::from_secs(10),
        ..HubConfig::default()
    };
    tweak(&mut config);
    HubClient::new(config).expect("client")
}

/// A one-tensor safetensors file.
fn tiny_safetensors() -> Vec<u8> {
    let header = br#"{"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}"#;
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(header);
    bytes.extend_from_slice(&[0; 4]);
    bytes
}

/// Hole 1: a file path is built into a URL segment by segment, so a `..` (or what decodes
/// to one) can never walk out of `/{repo}/resolve/{rev}/`.
#[tokio::test]
async fn encoded_dot_dot_in_a_file_path_cannot_leave_the_repo_url() {
    let hub = hub().await;
    let home = tempfile::tempdir().expect("tempdir");
    let client = client(&hub, None, home.path());
    for hostile in ["../../Qwen/Qwen3-8B/resolve/main/config.json", "a/./b", "a//b"] {
        assert!(
            client.resolve_url("Qwen/Qwen3-0.6B", "main", hostile).is_err(),
            "{hostile}"
        );
    }
    let url = client
        .resolve_url("Qwen/Qwen3-0.6B", "main", "%2e%2e/%2e%2e/x.gguf")
        .expect("a literal name");
    assert!(
        url.path()
            .ends_with("/Qwen/Qwen3-0.6B/resolve/main/%252e%252e/%252e%252e/x.gguf"),
        "{url}"
    );
    assert_eq!(
        url.join(".").expect("join").path(),
        "/Qwen/Qwen3-0.6B/resolve/main/%252e%252e/%252e%252e/",
        "normalising keeps it in the repo"
    );
}

/// Hole 2: a hostile index names a shard `%2e%2e/…/OTHER/REPO/resolve/main/model.safetensors`
/// (and the repo really holds a file by that literal name, so the listing agrees). Joined as
/// a string, the URL library reads `%2e%2e` as `..` and the read lands in another repo.
#[tokio::test]
async fn encoded_dot_dot_in_an_index_shard_name_reads_another_repo() {
    let root = tempfile::tempdir().expect("tempdir");
    preflight_testhub::fork_repo(&preflight_testhub::fixtures_hub(), "Qwen/Qwen3-0.6B", root.path()).expect("fork");
    let shard = "%2e%2e/%2e%2e/%2e%2e/%2e%2e/Qwen/Qwen3-0.6B/resolve/main/model.safetensors";
    let index = format!(r#"{{"metadata": {{}}, "weight_map": {{"x": "{shard}"}}}}"#);
    let tiny = tiny_safetensors();
    make_repo(
        root.path(),
        "evil/shards",
        &[("model.safetensors.index.json", index.as_bytes()), (shard, &tiny)],
        &[],
    );
    let hub = hub_at(root.path()).await;
    let home = tempfile::tempdir().expect("tempdir");
    let (facts, _) = plan_source(&client(&hub, None, home.path()), "hf://evil/shards")
        .await
        .expect("the repo's own file, under its literal name");
    let Content::Safetensors { files, .. } = &facts.content else {
        panic!("safetensors")
    };
    assert_eq!(files[0].header.tensors.len(), 1, "the hostile repo's one-tensor file");
    let log = hub.requests();
    let strays: Vec<_> = log
        .iter()
        .filter(|r| r.origin == Origin::Hub && !r.path.contains("/evil/shards/"))
        .map(|r| r.path.clone())
        .collect();
    assert!(strays.is_empty(), "requests outside the repo: {strays:?}");
}

/// A tiny GGUF (v3, no tensors, no metadata) stored whole, served at `size` bytes.
fn tiny_gguf() -> Vec<u8> {
    let mut bytes = b"GGUF".to_vec();
    bytes.extend_from_slice(&3u32.to_le_bytes());
    bytes.extend_from_slice(&0u64.to_le_bytes());
    bytes.extend_from_slice(&0u64.to_le_bytes());
    bytes
}

/// Hole 4: a repo whose only file is `x-00001-of-99999.gguf` made one plan send ~100,000
/// requests (one per named part). The split count is bounded and checked against the
/// listing before anything is read.
#[tokio::test]
async fn a_split_count_flood_is_refused_before_any_part_is_read() {
    let root = tempfile::tempdir().expect("tempdir");
    let gguf = tiny_gguf();
    make_repo(root.path(), "evil/flood", &[("x-00001-of-99999.gguf", &gguf)], &[]);
    make_repo(root.path(), "evil/sparse", &[("y-00001-of-00200.gguf", &gguf)], &[]);
    let hub = hub_at(root.path()).await;
    let home = tempfile::tempdir().expect("tempdir");
    let client = fast_client(&hub, home.path(), |_| {});
    for source in ["hf://evil/flood/x-00001-of-99999.gguf", "hf://evil/flood"] {
        hub.clear_requests();
        let err = plan_source(&client, source).await.map(|_| ()).expect_err("refused");
        assert!(matches!(err, SourceError::NotACheckpoint { .. }), "{source}: {err}");
        // A probe (plus the model-info fallback when config.json is absent) and the listing.
        let sent = hub.requests().len();
        assert!(sent <= 5, "{source}: {sent} requests");
    }
    // Within the bound, parts the listing does not name are missing without a request.
    hub.clear_requests();
    let (facts, _) = plan_source(&client, "hf://evil/sparse/y-00001-of-00200.gguf")
        .await
        .expect("part 1 is planned");
    let Content::Gguf { parts, missing_parts } = &facts.content else {
        panic!("gguf")
    };
    assert_eq!((parts.len(), missing_parts.len()), (1, 199));
    assert!(hub.requests().len() <= 5, "{} requests", hub.requests().len());
}

/// Hole 4: requests per plan are bounded whatever the repo holds.
#[tokio::test]
async fn a_plan_sends_no_more_requests_than_its_budget() {
    let hub = hub().await;
    let home = tempfile::tempdir().expect("tempdir");
    let client = fast_client(&hub, home.path(), |c| c.max_requests_per_plan = 20);
    let spec = hub_spec(&format!(
        "hf://deepseek-ai/DeepSeek-V3@{}",
        crate::support::commit_of("deepseek-ai/DeepSeek-V3")
    ));
    let budget = PlanBudget::new(client.config());
    let err = stage(&client, &spec, spec.revision_or_main(), None, &budget)
        .await
        .map(|_| ())
        .expect_err("161 shards do not fit in 20 requests");
    assert!(
        matches!(err, SourceError::Hub(HubError::TooManyRequests { max: 20 })),
        "{err}"
    );
    let sent = hub.requests().iter().filter(|r| r.origin == Origin::Hub).count();
    assert!(sent <= 20, "{sent} requests reached the Hub");
}

/// Hole 4: one plan never holds the whole request pool: a probe for another caller gets a
/// permit while a large, slow plan is still reading.
#[tokio::test]
async fn one_large_plan_cannot_hold_the_shared_request_pool() {
    let hub = hub().await;
    let home = tempfile::tempdir().expect("tempdir");
    let client = fast_client(&hub, home.path(), |c| {
        c.max_concurrent = 4;
        c.max_in_flight_per_plan = 2;
    });
    hub.add_fault(Fault::latency(Duration::from_millis(100)).path_contains("model-00"));
    let big = plan_source(&client, "hf://deepseek-ai/DeepSeek-V3");
    let probe = async {
        // Let the big plan queue its shard reads first.
        while hub.requests().iter().filter(|r| r.path.contains("model-00")).count() < 2 {
            tokio::task::yield_now().await;
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        preflight_source::hub::stage::resolve_commit(&client, &hub_spec("hf://Qwen/Qwen3-8B"), &Counters::default())
            .await
    };
    tokio::pin!(big);
    tokio::select! {
        commit = probe => {
            commit.expect("probe");
        }
        _ = &mut big => panic!("the probe waited for the whole large plan"),
    }
}

/// Hole 5: `429` with a short `Retry-After` was retried forever (the server's advice revived
/// a spent retry schedule). Retries are bounded in count…
#[tokio::test]
async fn rate_limited_forever_with_a_short_retry_after_gives_up_after_max_retries() {
    let hub = hub().await;
    let home = tempfile::tempdir().expect("tempdir");
    hub.add_fault(Fault::rate_limit(1));
    let client = fast_client(&hub, home.path(), |c| c.max_retries = 2);
    let outcome = tokio::time::timeout(Duration::from_secs(60), plan_source(&client, "hf://Qwen/Qwen3-8B"))
        .await
        .expect("a bounded number of retries, not forever");
    assert!(
        matches!(outcome, Err(SourceError::Hub(HubError::RateLimited { .. }))),
        "{:?}",
        outcome.map(|_| ())
    );
    assert_eq!(
        hub.requests().iter().filter(|r| r.status == 429).count(),
        3,
        "1 + 2 retries"
    );
}

/// …and in total waiting time: a `Retry-After` the remaining wait cannot cover is not waited.
#[tokio::test]
async fn rate_limited_with_a_retry_after_past_the_wait_budget_is_not_waited_out() {
    let hub = hub().await;
    let home = tempfile::tempdir().expect("tempdir");
    hub.add_fault(Fault::rate_limit(25));
    let client = fast_client(&hub, home.path(), |c| c.max_retry_wait = Duration::from_secs(1));
    let outcome = tokio::time::timeout(Duration::from_secs(20), plan_source(&client, "hf://Qwen/Qwen3-8B"))
        .await
        .expect("the 25 s advice is past the 1 s budget: no wait");
    assert!(matches!(outcome, Err(SourceError::Hub(HubError::RateLimited { .. }))));
    assert_eq!(hub.requests().iter().filter(|r| r.status == 429).count(), 1);
}

/// Hole 10: the redirect allow-list compared hosts only, so a Hub redirect to another port
/// on an allowed host (here: the Hub's own host) was followed. The refusal names the host
/// **and port** it refused and the flag that allows it (issue 27: "redirect to 127.0.0.1
/// refused" left an operator guessing which port to list).
#[tokio::test]
async fn a_redirect_to_another_port_of_an_allowed_host_is_refused() {
    let hub = hub().await; // its CDN listens on 127.0.0.1 too, on another port
    let cdn = hub.cdn_url().trim_start_matches("http://").to_owned();
    let home = tempfile::tempdir().expect("tempdir");
    let hub_host = hub
        .url()
        .trim_start_matches("http://")
        .split(':')
        .next()
        .expect("host")
        .to_owned();
    for hosts in [vec![], vec![hub_host.clone()], vec![format!("{hub_host}:1")]] {
        let strict = fast_client(&hub, home.path(), |c| c.redirect_hosts = Some(hosts.clone()));
        hub.clear_requests();
        let err = plan_source(&strict, "hf://Qwen/Qwen3-0.6B")
            .await
            .map(|_| ())
            .expect_err("refused");
        let message = err.to_string();
        assert!(
            message.contains(&format!("redirect to {cdn} refused"))
                && message.contains(&format!("list {cdn} in --hub-redirect-hosts")),
            "{hosts:?}: {message}"
        );
        assert!(
            hub.requests().iter().all(|r| r.origin == Origin::Hub),
            "{hosts:?}: nothing was read from the other port"
        );
    }
}

/// First use: a GGUF name the repo does not have is answered with the ones it does.
#[tokio::test]
async fn a_missing_gguf_name_lists_the_repos_gguf_files() {
    let hub = hub().await;
    let home = tempfile::tempdir().expect("tempdir");
    let client = fast_client(&hub, home.path(), |_| {});
    let err = plan_source(&client, "hf://Qwen/Qwen3-8B-GGUF/Qwen3-8B-Q8_0.gguf")
        .await
        .map(|_| ())
        .expect_err("no such file");
    match &err {
        SourceError::FileNotInRepo { available, .. } => {
            assert_eq!(available, &["Qwen3-8B-Q4_K_M.gguf"]);
        }
        other => panic!("{other}"),
    }
    assert_eq!(err.code(), "file_not_found");
}
