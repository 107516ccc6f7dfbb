use std::time::Duration;

use preflight_formats::facts::ArtifactFacts;
use preflight_source::SourceError;
use preflight_source::hub::stage::{PlanBudget, resolve_commit, stage};
use preflight_source::hub::{Counters, HubClient, HubConfig};
use preflight_source::spec::{self, HubSpec, SourceSpec};
use preflight_testhub::{Origin, RequestRecord, TestHub};

pub const TOKEN: &str = "hf_fixture_token";

pub async fn hub() -> TestHub {
    TestHub::builder()
        .token(TOKEN)
        .start()
        .await
        .expect("start the fixture hub")
}

/// A client for `hub` with fast retries and an empty HF cache at `hf_home`.
pub fn client(hub: &TestHub, token: Option<&str>, hf_home: &std::path::Path) -> HubClient {
    HubClient::new(HubConfig {
        endpoint: hub.url().to_owned(),
        token: token.map(str::to_owned),
        hf_home: hf_home.to_owned(),
        retry_base: Duration::from_millis(5),
        request_timeout: Duration::from_secs(10),
        ..HubConfig::default()
    })
    .expect("client")
}

pub fn hub_spec(s: &str) -> HubSpec {
    match spec::parse(s).expect("spec") {
        SourceSpec::Hub(h) => h,
        SourceSpec::Local(_) => panic!("{s} is not a hub spec"),
    }
}

/// Probe (unless pinned) and stage, as the CLI does. Returns the facts and the probe's count.
pub async fn plan_source(client: &HubClient, source: &str) -> Result<(ArtifactFacts, u64), SourceError> {
    let spec = hub_spec(source);
    let probe = Counters::default();
    let commit = resolve_commit(client, &spec, &probe).await?;
    let facts = stage(client, &spec, &commit, None, &PlanBudget::new(client.config())).await?;
    Ok((facts, probe.requests.load(std::sync::atomic::Ordering::Relaxed)))
}

pub fn hub_requests(log: &[RequestRecord]) -> Vec<&RequestRecord> {
    log.iter().filter(|r| r.origin == Origin::Hub).collect()
}

pub fn commit_of(repo: &str) -> String {
    let refs = preflight_testhub::fixtures_hub().join(repo).join("refs.json");
    let refs: serde_json::Value = serde_json::from_slice(&std::fs::read(refs).expect("refs")).expect("json");
    refs["main"].as_str().expect("main").to_owned()
}
