//! What staging reads: the fewest requests and bytes, at the resolved commit.

use preflight_formats::facts::Content;
use preflight_plan::{Component, PlanOptions, plan};
use preflight_source::SourceError;
use preflight_source::hub::HubError;
use preflight_testhub::Origin;

use crate::support::{TOKEN, client, commit_of, hub, hub_requests, plan_source};

#[tokio::test]
async fn deepseek_v3_in_shards_plus_four_requests_and_near_minimal_bytes() {
    let hub = hub().await;
    let home = tempfile::tempdir().expect("tempdir");
    let client = client(&hub, None, home.path());
    let (facts, probes) = plan_source(&client, "hf://deepseek-ai/DeepSeek-V3")
        .await
        .expect("stage");
    let verdict = plan(std::slice::from_ref(&facts), &PlanOptions::default()).expect("valid options");
    assert!(verdict.admissible);
    assert_eq!(
        verdict.artifacts[0].parameters.total - verdict.artifacts[0].parameters.by_component[&Component::Mtp],
        671_026_404_352
    );

    let Content::Safetensors { files, .. } = &facts.content else {
        panic!("safetensors")
    };
    let shards = files.len() as u64;
    assert_eq!(shards, 161);
    // Counted by the client and by the server alike.
    assert_eq!(
        probes + facts.staging.requests,
        hub_requests(&hub.requests()).len() as u64
    );
    assert!(
        probes + facts.staging.requests <= shards + 4,
        "{} requests",
        probes + facts.staging.requests
    );

    let dir = preflight_testhub::fixtures_hub()
        .join("deepseek-ai/DeepSeek-V3")
        .join(commit_of("deepseek-ai/DeepSeek-V3"));
    let size = |f: &str| std::fs::metadata(dir.join(f)).expect("size").len();
    let needed = facts.staging.header_bytes + size("model.safetensors.index.json") + size("config.json");
    // The first request is the probe (one byte, counted apart from staging).
    let fetched: u64 = hub.requests().iter().skip(probes as usize).map(|r| r.body_bytes).sum();
    assert_eq!(fetched, facts.staging.bytes_fetched);
    assert!(
        fetched as f64 <= 1.1 * needed as f64,
        "fetched {fetched} for {needed} needed"
    );
}

#[tokio::test]
async fn a_pinned_commit_needs_no_probe_and_staging_never_names_a_branch() {
    let hub = hub().await;
    let home = tempfile::tempdir().expect("tempdir");
    let client = client(&hub, None, home.path());
    let commit = commit_of("Qwen/Qwen3-8B");
    let (facts, probes) = plan_source(&client, &format!("hf://Qwen/Qwen3-8B@{commit}"))
        .await
        .expect("stage");
    assert_eq!(probes, 0);
    assert!(facts.source.pinned);
    assert_eq!(facts.source.commit.as_deref(), Some(commit.as_str()));
    let log = hub.requests();
    assert!(
        hub_requests(&log).iter().all(|r| r.path.contains(&commit)),
        "every Hub read names the commit"
    );
    assert!(
        !log.iter().any(|r| r.path.contains("tokenizer.json")),
        "tokenizer.json is never fetched"
    );
}

#[tokio::test]
async fn staging_reads_the_probed_commit_even_if_the_branch_moves() {
    let root = tempfile::tempdir().expect("tempdir");
    let second =
        preflight_testhub::fork_repo(&preflight_testhub::fixtures_hub(), "Qwen/Qwen3-8B", root.path()).expect("fork");
    let hub = preflight_testhub::TestHub::builder()
        .root(root.path())
        .start()
        .await
        .expect("hub");
    let home = tempfile::tempdir().expect("tempdir");
    let client = client(&hub, None, home.path());
    let spec = crate::support::hub_spec("hf://Qwen/Qwen3-8B");
    let counters = preflight_source::hub::Counters::default();
    let commit = preflight_source::hub::stage::resolve_commit(&client, &spec, &counters)
        .await
        .expect("probe");
    // main moves to another commit between probe and read…
    hub.set_ref("Qwen/Qwen3-8B", "main", &second).expect("move main");
    hub.clear_requests();
    let budget = preflight_source::hub::stage::PlanBudget::new(client.config());
    let facts = preflight_source::hub::stage::stage(&client, &spec, &commit, None, &budget)
        .await
        .expect("stage");
    // …and every read still names the probed commit.
    assert_eq!(facts.staging.commit.as_deref(), Some(commit.as_str()));
    let log = hub.requests();
    assert!(!log.is_empty());
    assert!(
        hub_requests(&log)
            .iter()
            .all(|r| r.path.contains(&commit) && !r.path.contains(&second))
    );
}

#[tokio::test]
async fn gated_repo_fails_clearly_without_a_token_and_works_with_one() {
    let hub = hub().await;
    let home = tempfile::tempdir().expect("tempdir");
    let anonymous = client(&hub, None, home.path());
    match plan_source(&anonymous, "hf://meta-llama/Llama-3.1-8B").await {
        Err(SourceError::Hub(HubError::GatedNoToken { repo })) => assert_eq!(repo, "meta-llama/Llama-3.1-8B"),
        other => panic!("expected a gated error, got {:?}", other.map(|_| ())),
    }
    let wrong = client(&hub, Some("hf_not_granted"), home.path());
    assert!(matches!(
        plan_source(&wrong, "hf://meta-llama/Llama-3.1-8B").await,
        Err(SourceError::Hub(HubError::GatedDenied { .. }))
    ));
    let granted = client(&hub, Some(TOKEN), home.path());
    let (facts, _) = plan_source(&granted, "hf://meta-llama/Llama-3.1-8B")
        .await
        .expect("with a token");
    assert!(
        plan(&[facts], &PlanOptions::default())
            .expect("valid options")
            .admissible
    );
    // The token went to the Hub, never to the CDN origin.
    let log = hub.requests();
    assert!(log.iter().filter(|r| r.origin == Origin::Cdn).all(|r| !r.authorization));
    assert!(log.iter().any(|r| r.origin == Origin::Hub && r.authorization));
}

#[tokio::test]
async fn the_error_message_never_carries_the_token() {
    let hub = hub().await;
    let home = tempfile::tempdir().expect("tempdir");
    let secret = "hf_secret_value_123";
    let c = client(&hub, Some(secret), home.path());
    let err = plan_source(&c, "hf://meta-llama/Llama-3.1-8B")
        .await
        .map(|_| ())
        .expect_err("denied");
    assert!(!format!("{err} {err:?}").contains(secret));
}

#[tokio::test]
async fn missing_repo_revision_and_file_are_specific() {
    let hub = hub().await;
    let home = tempfile::tempdir().expect("tempdir");
    let c = client(&hub, None, home.path());
    let err = |s: &'static str| {
        let c = c.clone();
        async move { plan_source(&c, s).await.map(|_| ()).expect_err(s) }
    };
    assert!(matches!(
        err("hf://nobody/nothing").await,
        SourceError::Hub(HubError::RepoNotFound { .. })
    ));
    assert!(matches!(
        err("hf://Qwen/Qwen3-8B@no-such-branch").await,
        SourceError::Hub(HubError::RevisionNotFound { .. })
    ));
    assert!(matches!(
        err("hf://Qwen/Qwen3-8B-GGUF/missing.gguf").await,
        SourceError::FileNotInRepo { .. }
    ));
}

#[tokio::test]
async fn a_gguf_file_source_reads_its_header_in_growing_chunks() {
    let hub = hub().await;
    let home = tempfile::tempdir().expect("tempdir");
    let c = client(&hub, None, home.path());
    let (facts, probes) = plan_source(&c, "hf://Qwen/Qwen3-8B-GGUF/Qwen3-8B-Q4_K_M.gguf")
        .await
        .expect("stage");
    assert_eq!(probes, 1);
    let verdict = plan(std::slice::from_ref(&facts), &PlanOptions::default()).expect("valid options");
    assert!(verdict.admissible, "{:#?}", verdict.artifacts[0].findings);
    assert_eq!(verdict.artifacts[0].parameters.total, 8_190_735_360);
    assert_eq!(facts.staging.header_bytes, 7_302_665);
    // Doubling from 1 MiB reaches 7.3 MB in four reads, under twice the header; the repo's
    // model info (licence, gating, listing) is read beside the first.
    assert!(facts.staging.requests <= 4 + 1, "{}", facts.staging.requests);
    assert!(facts.staging.bytes_fetched < 2 * facts.staging.header_bytes);
}

#[tokio::test]
async fn a_pull_request_revision_is_encoded_as_one_segment() {
    let root = tempfile::tempdir().expect("tempdir");
    let second =
        preflight_testhub::fork_repo(&preflight_testhub::fixtures_hub(), "Qwen/Qwen3-0.6B", root.path()).expect("fork");
    let hub = preflight_testhub::TestHub::builder()
        .root(root.path())
        .start()
        .await
        .expect("hub");
    hub.set_ref("Qwen/Qwen3-0.6B", "refs/pr/1", &second).expect("a PR ref");
    let home = tempfile::tempdir().expect("tempdir");
    let (facts, probes) = plan_source(&client(&hub, None, home.path()), "hf://Qwen/Qwen3-0.6B@refs/pr/1")
        .await
        .expect("stage");
    assert_eq!((probes, facts.source.commit.as_deref()), (1, Some(second.as_str())));
    assert!(
        hub.requests()[0].path.contains("/resolve/refs%2Fpr%2F1/"),
        "{}",
        hub.requests()[0].path
    );
}

/// With an allow-list (the service's default), a redirect to any other host is refused
/// before anything is read from it; naming the host lets it through.
#[tokio::test]
async fn redirects_go_only_to_allowed_hosts() {
    let elsewhere: std::net::SocketAddr = "127.0.0.2:0".parse().expect("addr");
    let hub = preflight_testhub::TestHub::builder()
        .cdn_listen(elsewhere)
        .start()
        .await
        .expect("hub");
    let home = tempfile::tempdir().expect("tempdir");
    let config = |hosts: Vec<String>| preflight_source::hub::HubConfig {
        endpoint: hub.url().to_owned(),
        hf_home: home.path().to_owned(),
        redirect_hosts: Some(hosts),
        ..Default::default()
    };
    let cdn = hub.cdn_url().trim_start_matches("http://").to_owned();
    let strict = preflight_source::hub::HubClient::new(config(vec![".hf.co".into()])).expect("client");
    let err = plan_source(&strict, "hf://Qwen/Qwen3-0.6B")
        .await
        .map(|_| ())
        .expect_err("refused");
    assert!(err.to_string().contains(&format!("redirect to {cdn} refused")), "{err}");
    assert!(cdn.starts_with("127.0.0.2:"), "{cdn}");
    assert!(
        hub.requests().iter().all(|r| r.origin == Origin::Hub),
        "nothing was read from the other host"
    );
    let allowed = preflight_source::hub::HubClient::new(config(vec![cdn])).expect("client");
    plan_source(&allowed, "hf://Qwen/Qwen3-0.6B")
        .await
        .expect("allowed host and port");
}
