//! `POST /v1/plan`, in design §2's order — **the order is the point**:
//!
//! 1. validate and admit (no network);
//! 2. probe each unpinned Hub source for its commit (a pinned source needs none);
//! 3. look up the cache under every artifact's commit + semantics version + options + access
//!    scope — **a hit returns here: no permit, no staging, no planning**;
//! 4. take a planning permit (refused with 429 past the bound, never queued) unless the same
//!    key is already being planned, in which case wait for that result (single flight);
//! 5. stage at the resolved commits, 6. plan (pure), 7. store under the commits actually read.
//!
//! A source without a commit (local, or a failed probe) is planned but never stored.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::join_all;
use preflight_formats::facts::{ArtifactFacts, Content, SourceRef, StagingStats};
use preflight_plan::PlanOptions;
use preflight_source::facts_cache::{self, FactsCache, FactsKey};
use preflight_source::hub::stage::{PlanBudget, resolve_commit, source_ref, stage};
use preflight_source::hub::{Counters, HubClient, HubError};
use preflight_source::spec::{self, HubSpec, SourceSpec};
use preflight_source::{SourceError, local};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use tokio::sync::Semaphore;

use crate::cache::VerdictCache;
use crate::config::Profile;
use crate::error::{ApiError, ErrorCode};
use crate::metrics::{Metrics, inc};
use crate::shared::{Lease, Shared};

/// How often a replica waiting on another's plan looks for its verdict.
const LEASE_POLL: Duration = Duration::from_millis(25);

/// design §1: a request names 1 to 8 sources.
pub const MAX_SOURCES: usize = 8;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanRequest {
    pub sources: Vec<String>,
    #[serde(default)]
    pub options: PlanOptions,
}

/// What `/v1/plan` answers: the verdict JSON and how it was served.
pub struct Planned {
    pub body: Arc<str>,
    pub cached: bool,
    pub cacheable: bool,
}

/// The shared state the pipeline runs against.
pub struct Pipeline {
    pub hub: HubClient,
    pub cache: VerdictCache,
    pub metrics: Arc<Metrics>,
    pub profile: Profile,
    pub local_roots: Vec<PathBuf>,
    pub permits: Arc<Semaphore>,
    pub permit_count: usize,
    pub retry_after: Duration,
    pub max_header_bytes: u64,
    pub upstream_timeout: Duration,
    pub lookup_after_staging: bool,
    /// The semantics version verdicts are keyed by: the planner's, unless a test says
    /// otherwise (`--debug-semantics-version`).
    pub semantics_version: u32,
    facts: FactsTier,
    flights: Mutex<HashMap<String, Flight>>,
    /// Stagings in flight by facts key: one per commit, whatever the options.
    staging_flights: Mutex<HashMap<String, StagingFlight>>,
}

/// What a plan in flight ends with: the verdict and whether it came from a cache.
type FlightResult = Option<Result<(Arc<str>, bool), ApiError>>;

/// Waiters on a plan in flight see its result here once the leader sends it.
type Flight = tokio::sync::watch::Receiver<FlightResult>;

/// The work for a key, on a task of its own: it finishes (and stores its verdict) for every
/// request waiting on it even when the request that started it hangs up. Dropping it
/// (finished, or its task gone) takes the key out of flight, so a later miss leads anew.
/// The staging of one commit's facts in flight: its result, once there.
type StagingFlight = tokio::sync::watch::Receiver<Option<Result<Arc<ArtifactFacts>, ApiError>>>;

/// The one request staging a commit's facts; its flight ends when it is dropped, done or not.
struct StagingLeader<'a> {
    pipeline: &'a Pipeline,
    id: String,
    sender: tokio::sync::watch::Sender<Option<Result<Arc<ArtifactFacts>, ApiError>>>,
}

impl Drop for StagingLeader<'_> {
    fn drop(&mut self) {
        self.pipeline
            .staging_flights
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.id);
    }
}

struct Leader {
    pipeline: Arc<Pipeline>,
    key: String,
    sender: tokio::sync::watch::Sender<FlightResult>,
}

impl Leader {
    fn finish(self, result: Result<(Arc<str>, bool), ApiError>) {
        let _ = self.sender.send(Some(result));
    }
}

impl Drop for Leader {
    fn drop(&mut self) {
        self.pipeline
            .flights
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.key);
    }
}

/// How often a plan in flight looks whether anyone still waits for it: the longest a permit
/// outlives its last requester.
const ABANDONED_CHECK: Duration = Duration::from_millis(50);

/// What the operator decided: who may plan what, and the bounds.
pub struct Policy {
    pub profile: Profile,
    /// Canonical directories local sources must sit under (`local` profile).
    pub local_roots: Vec<PathBuf>,
    /// Plans staging and planning at once.
    pub permits: usize,
    pub retry_after: Duration,
    pub max_header_bytes: u64,
    pub upstream_timeout: Duration,
    /// Test only: the broken order the deploy gate must catch.
    pub lookup_after_staging: bool,
    /// The semantics version in the verdict cache key.
    pub semantics_version: u32,
    /// Where staged facts are kept on disk (`--data-dir`/facts); `None` keeps them in
    /// memory only.
    pub facts_dir: Option<PathBuf>,
}

/// Estimated bytes the memory tier of staged facts may hold: about seven checkpoints the size
/// of DeepSeek-V3 (~37 MB of facts in memory each), or hundreds of small ones — enough for
/// the checkpoints an Explorer session flips options on, without a count of entries letting a
/// few dozen large ones take gigabytes.
const FACTS_IN_MEMORY_BYTES: u64 = 256 << 20;

/// What one tensor entry (or weight-map entry, or GGUF key) of staged facts takes in memory,
/// roughly: the entry, its name's, dtype's and shape's allocations. DeepSeek-V3's 92k tensors
/// and 92k index entries come to ~37 MB.
const BYTES_PER_FACTS_ENTRY: u64 = 200;

/// The memory tier's weight of `facts`: entries × [`BYTES_PER_FACTS_ENTRY`].
fn facts_weight(facts: &ArtifactFacts) -> u32 {
    let entries = match &facts.content {
        Content::Safetensors { files, index, .. } => {
            files.iter().map(|f| f.header.tensors.len()).sum::<usize>()
                + index.as_ref().map_or(0, |i| i.weight_map.len())
        }
        Content::Gguf { parts, .. } => parts.iter().map(|p| p.header.tensors.len() + p.header.kv.len()).sum(),
    };
    let bytes = (entries as u64).saturating_add(1).saturating_mul(BYTES_PER_FACTS_ENTRY);
    u32::try_from(bytes).unwrap_or(u32::MAX)
}

/// Staged facts by what they are (a commit's, read with a token or without): a memory tier
/// in front of checksummed files, and Redis when replicas share one (tagged like verdicts),
/// so another option set for the same commit — on any replica — plans without staging
/// (docs/design.md §5).
pub struct FactsTier {
    memory: moka::sync::Cache<String, Arc<ArtifactFacts>>,
    disk: Option<FactsCache>,
    shared: Option<Arc<Shared>>,
}

impl FactsTier {
    fn new(dir: Option<PathBuf>, shared: Option<Arc<Shared>>) -> Self {
        Self {
            memory: moka::sync::Cache::builder()
                .max_capacity(FACTS_IN_MEMORY_BYTES)
                .weigher(|_: &String, facts: &Arc<ArtifactFacts>| facts_weight(facts))
                .build(),
            disk: dir.map(FactsCache::new),
            shared,
        }
    }

    /// Memory, then disk, then Redis; what a lower tier finds is promoted into the ones
    /// above it. An entry that fails its checksum (or tag) anywhere is a miss. Shared, never
    /// copied: the planner reads them as they are.
    async fn get(&self, key: &FactsKey<'_>) -> Option<Arc<ArtifactFacts>> {
        let id = key.id();
        if let Some(facts) = self.memory.get(&id) {
            return Some(facts);
        }
        if let Some(facts) = self.disk.as_ref().and_then(|disk| disk.get(key)) {
            let facts = Arc::new(facts);
            self.memory.insert(id, facts.clone());
            return Some(facts);
        }
        let entry = self.shared.as_ref()?.get_facts(&id).await?;
        let facts = Arc::new(facts_cache::decode(&id, &entry)?);
        self.memory.insert(id, facts.clone());
        if let Some(disk) = &self.disk
            && let Err(e) = disk.put(key, &facts)
        {
            tracing::warn!(error = %e, "staged facts from redis not stored on disk");
        }
        Some(facts)
    }

    async fn put(&self, key: &FactsKey<'_>, facts: &Arc<ArtifactFacts>) {
        self.memory.insert(key.id(), facts.clone());
        if let Some(disk) = &self.disk
            && let Err(e) = disk.put(key, facts)
        {
            tracing::warn!(error = %e, "staged facts not stored");
        }
        if let Some(shared) = &self.shared {
            match facts_cache::encode(&key.id(), facts) {
                Ok(entry) => shared.put_facts(&key.id(), &entry).await,
                Err(e) => tracing::warn!(error = %e, "staged facts not encoded for redis"),
            }
        }
    }
}

/// Facts ready to plan: shared with the facts tier, and — when they came from it — how this
/// request describes its source and what reading cost it (nothing).
struct Cached {
    facts: Arc<ArtifactFacts>,
    served: Option<(SourceRef, StagingStats)>,
}

#[derive(Clone)]
enum Source {
    Hub(HubSpec),
    Local(PathBuf),
}

impl Pipeline {
    pub fn new(hub: HubClient, cache: VerdictCache, metrics: Arc<Metrics>, policy: Policy) -> Self {
        let facts = FactsTier::new(policy.facts_dir, cache.shared_handle());
        Self {
            hub,
            cache,
            metrics,
            profile: policy.profile,
            local_roots: policy.local_roots,
            permits: Arc::new(Semaphore::new(policy.permits)),
            permit_count: policy.permits,
            retry_after: policy.retry_after,
            max_header_bytes: policy.max_header_bytes,
            upstream_timeout: policy.upstream_timeout,
            lookup_after_staging: policy.lookup_after_staging,
            semantics_version: policy.semantics_version,
            facts,
            flights: Mutex::new(HashMap::new()),
            staging_flights: Mutex::new(HashMap::new()),
        }
    }

    pub fn in_flight(&self) -> u64 {
        (self.permit_count - self.permits.available_permits()) as u64
    }

    /// Answer one `POST /v1/plan`. **One deadline** (`upstream_timeout`) covers everything
    /// upstream this request waits for — probes, staging, waiting on another replica — so a
    /// slow probe leaves staging only what is left, never a fresh timeout of its own.
    pub async fn plan(self: &Arc<Self>, request: PlanRequest, token: Option<String>) -> Result<Planned, ApiError> {
        let deadline = tokio::time::Instant::now() + self.upstream_timeout;
        // 1. Validate and admit.
        let sources = self.admit(&request)?;
        let hub = self.hub.with_token(token.clone());

        // 2. Probe.
        let upstream = tokio::time::timeout_at(deadline, self.probe(&hub, &sources));
        let commits = upstream.await.map_err(|_| self.upstream_timed_out())??;

        // 3. Look up.
        let key = commits.iter().all(Option::is_some).then(|| {
            cache_key(
                self.semantics_version,
                &sources,
                &commits,
                &request.options,
                token.as_deref(),
            )
        });
        if self.lookup_after_staging {
            return self
                .plan_in_the_broken_order(&hub, &sources, &commits, &request.options, key, deadline)
                .await;
        }
        if let Some(key) = &key
            && let Some(hit) = self.lookup(key).await
        {
            return Ok(Planned {
                body: describe_request(hit.body, &sources, &commits),
                ..hit
            });
        }
        inc(&self.metrics.cache_misses);

        // 4. A permit, or the plan already in flight for this key.
        let Some(key) = key else {
            let _permit = self.permit()?;
            let body = self
                .stage_and_plan(&hub, &sources, &commits, &request.options, deadline)
                .await?;
            return Ok(Planned {
                body: body.0,
                cached: false,
                cacheable: false,
            });
        };
        let (mut waiting, joined) = match self.flight(&key) {
            Err(waiting) => {
                inc(&self.metrics.coalesced);
                (waiting, true)
            }
            Ok(leader) => {
                let waiting = leader.sender.subscribe();
                let (hub, sources, commits, options) =
                    (hub.clone(), sources.clone(), commits.clone(), request.options.clone());
                // The work runs on its own task: the requester hanging up (its future
                // dropped) must not abandon the plan for everyone who joined it. Once no one
                // at all waits, the work is dropped, and its planning permit with it.
                tokio::spawn(async move {
                    let pipeline = leader.pipeline.clone();
                    let key = leader.key.clone();
                    let work = pipeline.lead(&hub, &sources, &commits, &options, &key, deadline);
                    tokio::pin!(work);
                    let mut check = tokio::time::interval(ABANDONED_CHECK);
                    loop {
                        tokio::select! {
                            result = &mut work => {
                                leader.finish(result);
                                break;
                            }
                            _ = check.tick() => {
                                // The flight table's own receiver is the one left: every
                                // requester and joiner has gone.
                                if leader.sender.receiver_count() <= 1 {
                                    inc(&pipeline.metrics.plans_abandoned);
                                    tracing::info!(key = leader.key, "every requester left: the plan is dropped and its permit freed");
                                    break;
                                }
                            }
                        }
                    }
                });
                (waiting, false)
            }
        };
        let result = match waiting.wait_for(Option::is_some).await {
            Ok(done) => done
                .clone()
                .unwrap_or_else(|| Err(self.internal("a finished plan left no result"))),
            Err(_) => Err(ApiError::new(
                axum::http::StatusCode::SERVICE_UNAVAILABLE,
                ErrorCode::PlanAbandoned,
                "the plan this request waited on failed without an answer; retry",
            )),
        };
        result.map(|(body, cached)| Planned {
            // A joiner's sources may be spelled differently (pinned or not) from the leader's.
            body: if joined || cached {
                describe_request(body, &sources, &commits)
            } else {
                body
            },
            cached: cached && !joined,
            cacheable: true,
        })
    }

    /// Do the work for `key` (permit, stage, plan, store) — unless another replica holds the
    /// key's lease in the shared tier: then wait, bounded, for its verdict. A lease whose holder
    /// died expires and is taken again. Returns the verdict and whether it came from the cache.
    async fn lead(
        &self,
        hub: &HubClient,
        sources: &[Source],
        commits: &[Option<String>],
        options: &PlanOptions,
        key: &str,
        deadline: tokio::time::Instant,
    ) -> Result<(Arc<str>, bool), ApiError> {
        let work = || async {
            let _permit = self.permit()?;
            self.stage_plan_store(hub, sources, commits, options, key, deadline)
                .await
                .map(|body| (body, false))
        };
        let Some(shared) = self.cache.shared() else {
            return work().await;
        };
        loop {
            match shared.try_lease(key).await {
                Lease::Unavailable => return work().await,
                Lease::Acquired => {
                    // The holder before us may have stored it just as its lease went.
                    let result = match self.cache.get_shared(key).await {
                        Some(entry) => Ok((entry.body.clone(), true)),
                        None => work().await,
                    };
                    shared.release(key).await;
                    return result;
                }
                Lease::Held => {
                    inc(&self.metrics.lease_waits);
                    loop {
                        if tokio::time::Instant::now() >= deadline {
                            return Err(self.upstream_timed_out());
                        }
                        tokio::time::sleep(LEASE_POLL).await;
                        if let Some(entry) = self.cache.get_shared(key).await {
                            inc(&self.metrics.cache_hits);
                            return Ok((entry.body.clone(), true));
                        }
                        if shared.lease_held(key).await != Some(true) {
                            break;
                        }
                    }
                }
            }
        }
    }

    async fn stage_plan_store(
        &self,
        hub: &HubClient,
        sources: &[Source],
        commits: &[Option<String>],
        options: &PlanOptions,
        key: &str,
        deadline: tokio::time::Instant,
    ) -> Result<Arc<str>, ApiError> {
        let (body, read) = self.stage_and_plan(hub, sources, commits, options, deadline).await?;
        // 7. Store under the commits actually read.
        if read.iter().zip(commits).all(|(r, c)| r.as_deref() == c.as_deref()) {
            self.store(key, body.clone()).await;
        }
        Ok(body)
    }

    /// The order the deploy gate must catch (`--debug-lookup-after-staging`, tests only):
    /// staging before the lookup. Answers are the same; every hit pays for a staging pass.
    async fn plan_in_the_broken_order(
        &self,
        hub: &HubClient,
        sources: &[Source],
        commits: &[Option<String>],
        options: &PlanOptions,
        key: Option<String>,
        deadline: tokio::time::Instant,
    ) -> Result<Planned, ApiError> {
        let _permit = self.permit()?;
        let (body, _) = self.stage_and_plan(hub, sources, commits, options, deadline).await?;
        let Some(key) = key else {
            return Ok(Planned {
                body,
                cached: false,
                cacheable: false,
            });
        };
        if let Some(hit) = self.lookup(&key).await {
            return Ok(hit);
        }
        inc(&self.metrics.cache_misses);
        self.store(&key, body.clone()).await;
        Ok(Planned {
            body,
            cached: false,
            cacheable: true,
        })
    }

    fn admit(&self, request: &PlanRequest) -> Result<Vec<Source>, ApiError> {
        if request.sources.is_empty() {
            return Err(ApiError::bad_request(ErrorCode::NoSources, "name 1 to 8 sources"));
        }
        if request.sources.len() > MAX_SOURCES {
            return Err(ApiError::bad_request(
                ErrorCode::TooManySources,
                format!(
                    "{} sources named; a plan takes at most {MAX_SOURCES}",
                    request.sources.len()
                ),
            ));
        }
        request
            .options
            .validate()
            .map_err(|e| ApiError::invalid_option(e.option, e.to_string()))?;
        let mut sources = Vec::with_capacity(request.sources.len());
        for raw in &request.sources {
            match spec::parse(raw).map_err(|e| ApiError::bad_request(ErrorCode::InvalidSource, e.to_string()))? {
                SourceSpec::Hub(hub) => sources.push(Source::Hub(hub)),
                SourceSpec::Local(path) => sources.push(Source::Local(self.admit_local(raw, &path)?)),
            }
        }
        Ok(sources)
    }

    /// Local paths: refused on the public profile; elsewhere only under an allowed root,
    /// judged on the canonical path so `..` and symlinks cannot escape.
    fn admit_local(&self, raw: &str, path: &Path) -> Result<PathBuf, ApiError> {
        let forbidden = |message: String| {
            ApiError::new(
                axum::http::StatusCode::FORBIDDEN,
                ErrorCode::LocalSourceRefused,
                message,
            )
        };
        if self.profile == Profile::Public {
            // A bare `org/name` is most likely a Hub repo meant as one: say so, as the CLI does.
            let hint = preflight_source::spec::hub_suggestion(raw)
                .map_or_else(String::new, |suggestion| format!("; did you mean {suggestion}?"));
            return Err(forbidden(format!(
                "local path {raw:?} refused: this server runs the `public` profile, which plans hf:// sources only{hint}"
            )));
        }
        let canonical = path.canonicalize().map_err(|e| {
            ApiError::new(
                axum::http::StatusCode::NOT_FOUND,
                ErrorCode::NotFound,
                format!("local path {raw:?}: {e}"),
            )
        })?;
        if !self.local_roots.iter().any(|root| canonical.starts_with(root)) {
            return Err(forbidden(format!(
                "local path {raw:?} is outside the server's allowed roots"
            )));
        }
        Ok(canonical)
    }

    /// The commit of each source: pinned as named, Hub sources probed (concurrently), local
    /// sources none. A failed probe falls through (no commit: the plan is uncacheable) unless
    /// the Hub said something definite (gated, not found), which is the answer.
    async fn probe(&self, hub: &HubClient, sources: &[Source]) -> Result<Vec<Option<String>>, ApiError> {
        let probes = sources.iter().map(|source| async move {
            let Source::Hub(spec) = source else { return Ok(None) };
            if spec.is_pinned() {
                return Ok(spec.revision.clone());
            }
            inc(&self.metrics.probes);
            match resolve_commit(hub, spec, &Counters::default()).await {
                Ok(commit) => Ok(Some(commit)),
                Err(SourceError::Hub(e)) if definite(&e) => Err(ApiError::from(e)),
                Err(e @ SourceError::FileNotInRepo { .. }) => Err(ApiError::from(e)),
                Err(e) => {
                    tracing::warn!(source = %spec, error = %e, "probe failed; planning without the cache");
                    Ok(None)
                }
            }
        });
        join_all(probes).await.into_iter().collect()
    }

    async fn lookup(&self, key: &str) -> Option<Planned> {
        match self.cache.get(key).await {
            Ok(Some(entry)) => {
                inc(&self.metrics.cache_hits);
                Some(Planned {
                    body: entry.body.clone(),
                    cached: true,
                    cacheable: true,
                })
            }
            Ok(None) => None,
            Err(e) => {
                inc(&self.metrics.store_errors);
                tracing::error!(error = %e, "verdict store read failed; treating as a miss");
                None
            }
        }
    }

    async fn store(&self, key: &str, body: Arc<str>) {
        inc(&self.metrics.stored);
        if let Err(e) = self.cache.put(key, body).await {
            inc(&self.metrics.store_errors);
            tracing::error!(error = %e, "verdict store write failed; the verdict stays in memory only");
        }
    }

    fn permit(&self) -> Result<tokio::sync::OwnedSemaphorePermit, ApiError> {
        self.permits.clone().try_acquire_owned().map_err(|_| {
            inc(&self.metrics.refusals);
            ApiError::over_capacity(self.retry_after)
        })
    }

    /// Lead the plan for `key`, or wait on the one already in flight.
    fn flight(self: &Arc<Self>, key: &str) -> Result<Leader, Flight> {
        let mut flights = self.flights.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(waiting) = flights.get(key) {
            return Err(waiting.clone());
        }
        let (sender, receiver) = tokio::sync::watch::channel(None);
        flights.insert(key.to_owned(), receiver);
        Ok(Leader {
            pipeline: self.clone(),
            key: key.to_owned(),
            sender,
        })
    }

    /// Steps 5 and 6: stage every source at its commit (concurrently), then plan. Returns the
    /// verdict JSON and the commit each artifact was actually read at.
    async fn stage_and_plan(
        &self,
        hub: &HubClient,
        sources: &[Source],
        commits: &[Option<String>],
        options: &PlanOptions,
        deadline: tokio::time::Instant,
    ) -> Result<(Arc<str>, Vec<Option<String>>), ApiError> {
        // Facts first: a source whose commit's facts are cached costs no staging. A staging
        // pass is counted — as it starts — only when some source must be read.
        let lookups = sources
            .iter()
            .zip(commits)
            .map(|(source, commit)| self.cached_facts(hub, source, commit.as_deref()));
        let cached: Vec<Option<Cached>> = join_all(lookups).await;
        if cached.iter().any(Option::is_none) {
            inc(&self.metrics.staging_passes);
        }
        let budget = PlanBudget::new(hub.config());
        let reads = sources
            .iter()
            .zip(commits)
            .zip(cached)
            .map(|((source, commit), cached)| {
                let budget = &budget;
                async move {
                    match cached {
                        Some(cached) => Ok(cached),
                        None => self
                            .stage_one(hub, source, commit, budget)
                            .await
                            .map(|facts| Cached { facts, served: None }),
                    }
                }
            });
        let staged = tokio::time::timeout_at(deadline, join_all(reads))
            .await
            .map_err(|_| self.upstream_timed_out())?;
        let staged: Vec<Cached> = staged.into_iter().collect::<Result<_, _>>()?;
        for f in staged.iter().filter(|c| c.served.is_none()).map(|c| &c.facts) {
            self.metrics
                .upstream_requests
                .fetch_add(f.staging.requests, std::sync::atomic::Ordering::Relaxed);
            self.metrics
                .bytes_fetched
                .fetch_add(f.staging.bytes_fetched, std::sync::atomic::Ordering::Relaxed);
        }
        let read: Vec<Option<String>> = staged.iter().map(|c| c.facts.source.commit.clone()).collect();
        inc(&self.metrics.plans);
        let options = options.clone();
        // The request's one deadline covers planning too: a plan past it answers 503 and
        // gives its permit back (the planner's work is bounded, so the thread it leaves
        // finishes soon after).
        let planning = tokio::task::spawn_blocking(move || {
            let (facts, served): (Vec<_>, Vec<_>) = staged.into_iter().map(|c| (c.facts, c.served)).unzip();
            let mut verdict = preflight_plan::plan(&facts, &options)?;
            for ((artifact, staging), served) in verdict.artifacts.iter_mut().zip(&mut verdict.staging).zip(served) {
                if let Some((source, cost)) = served {
                    (artifact.source.reference, *staging) = (source, cost);
                }
            }
            Ok(serde_json::to_string(&verdict))
        });
        let body = tokio::time::timeout_at(deadline, planning)
            .await
            .map_err(|_| self.plan_timed_out())?
            .map_err(|e| self.internal(&format!("the planner task failed: {e}")))?
            // Options these artifacts cannot honour (a degree the model does not split): the
            // caller's mistake, a 400, never cached.
            .map_err(|e: preflight_plan::OptionsError| ApiError::invalid_option(e.option, e.to_string()))?
            .map_err(|e| self.internal(&format!("cannot render the verdict: {e}")))?;
        Ok((body.into(), read))
    }

    async fn stage_one(
        &self,
        hub: &HubClient,
        source: &Source,
        commit: &Option<String>,
        budget: &PlanBudget,
    ) -> Result<Arc<ArtifactFacts>, ApiError> {
        match source {
            Source::Local(path) => {
                let (path, roots) = (path.clone(), self.local_roots.clone());
                tokio::task::spawn_blocking(move || local::stage_confined(&path, &roots))
                    .await
                    .map_err(|e| self.internal(&format!("local staging failed: {e}")))?
                    .map(Arc::new)
                    .map_err(ApiError::from)
            }
            Source::Hub(spec) => {
                let commit = match commit {
                    Some(c) => c.clone(),
                    // The probe failed: resolve again as part of staging (an error now is final).
                    None => resolve_commit(hub, spec, &Counters::default()).await?,
                };
                let key = FactsKey::hub(spec, &commit, hub.config().token.as_deref());
                // Facts are the commit's whatever the options: concurrent misses of one
                // commit with different options stage it once, the others wait for it.
                let leader = match self.staging_flight(&key.id()) {
                    Ok(leader) => leader,
                    Err(mut waiting) => {
                        inc(&self.metrics.staging_coalesced);
                        let done = waiting.wait_for(Option::is_some).await.map(|done| done.clone()).ok();
                        return match done {
                            Some(done) => {
                                done.unwrap_or_else(|| Err(self.internal("a finished staging left no result")))
                            }
                            // The leader's request was dropped mid-staging: read it ourselves.
                            None => self.stage_hub(hub, spec, &commit, &key, budget).await,
                        };
                    }
                };
                let result = self.stage_hub(hub, spec, &commit, &key, budget).await;
                let _ = leader.sender.send(Some(result.clone()));
                result
            }
        }
    }

    /// Stage a Hub source at `commit` and keep its facts in the facts tier.
    async fn stage_hub(
        &self,
        hub: &HubClient,
        spec: &HubSpec,
        commit: &str,
        key: &FactsKey<'_>,
        budget: &PlanBudget,
    ) -> Result<Arc<ArtifactFacts>, ApiError> {
        let facts = Arc::new(stage(hub, spec, commit, None, budget).await?);
        self.facts.put(key, &facts).await;
        Ok(facts)
    }

    /// Lead the staging of the facts `id`, or wait for the staging already in flight.
    fn staging_flight(&self, id: &str) -> Result<StagingLeader<'_>, StagingFlight> {
        let mut flights = self.staging_flights.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(waiting) = flights.get(id) {
            return Err(waiting.clone());
        }
        let (sender, receiver) = tokio::sync::watch::channel(None);
        flights.insert(id.to_owned(), receiver);
        Ok(StagingLeader {
            pipeline: self,
            id: id.to_owned(),
            sender,
        })
    }

    /// A Hub source's facts from the facts tier and how to describe them to this request;
    /// `None` for a local source, an unknown commit or a miss.
    async fn cached_facts(&self, hub: &HubClient, source: &Source, commit: Option<&str>) -> Option<Cached> {
        let (Source::Hub(spec), Some(commit)) = (source, commit) else {
            return None;
        };
        if self.lookup_after_staging {
            // The broken order the deploy gate must catch stages for real, as a build without
            // any cache-before-work order would.
            return None;
        }
        let facts = self
            .facts
            .get(&FactsKey::hub(spec, commit, hub.config().token.as_deref()))
            .await?;
        inc(&self.metrics.facts_hits);
        Some(Cached {
            facts,
            served: Some(facts_cache::served(spec, commit)),
        })
    }

    fn upstream_timed_out(&self) -> ApiError {
        ApiError::new(
            axum::http::StatusCode::GATEWAY_TIMEOUT,
            ErrorCode::UpstreamTimeout,
            format!(
                "reading the sources took longer than {}s",
                self.upstream_timeout.as_secs()
            ),
        )
    }

    fn plan_timed_out(&self) -> ApiError {
        ApiError::new(
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::PlanTimedOut,
            format!(
                "staging and planning took longer than the request's {}s deadline; retry",
                self.upstream_timeout.as_secs()
            ),
        )
    }

    fn internal(&self, message: &str) -> ApiError {
        tracing::error!(message, "internal error");
        ApiError::new(
            axum::http::StatusCode::INTERNAL_SERVER_ERROR,
            ErrorCode::Internal,
            message.to_owned(),
        )
    }
}

/// A verdict answering this request describes this request's sources — its spec, revision
/// and pinning — whoever planned it first (the cache key holds commits, not spellings: a
/// pinned request and an unpinned one at the same commit share a verdict). The body is
/// re-rendered only when some source is described differently.
fn describe_request(body: Arc<str>, sources: &[Source], commits: &[Option<String>]) -> Arc<str> {
    let wanted: Vec<Option<SourceRef>> = sources
        .iter()
        .zip(commits)
        .map(|(source, commit)| match (source, commit) {
            (Source::Hub(spec), Some(commit)) => Some(source_ref(spec, commit)),
            _ => None,
        })
        .collect();
    // A `source` block opens with its reference's fields, the source's own facts after them.
    let already = wanted.iter().flatten().all(|want| {
        serde_json::to_string(want).is_ok_and(|json| {
            let open = json.strip_suffix('}').unwrap_or(&json);
            body.contains(&format!("\"source\":{open},"))
        })
    });
    if already {
        return body;
    }
    let Ok(mut verdict) = serde_json::from_str::<preflight_plan::Verdict>(&body) else {
        return body;
    };
    for (artifact, want) in verdict.artifacts.iter_mut().zip(wanted) {
        if let Some(want) = want {
            artifact.source.reference = want;
        }
    }
    serde_json::to_string(&verdict).map_or(body, Into::into)
}

/// The Hub gave a definite answer a retry at staging would only repeat.
fn definite(e: &HubError) -> bool {
    matches!(
        e,
        HubError::GatedNoToken { .. }
            | HubError::GatedDenied { .. }
            | HubError::Unauthorized { .. }
            | HubError::RepoNotFound { .. }
            | HubError::RevisionNotFound { .. }
            | HubError::EntryNotFound { .. }
            | HubError::BudgetExhausted { .. }
    )
}

/// design §2 step 3: every artifact's commit in order, the semantics version, the canonical
/// options, and the access scope. Anonymous plans share the `public` scope; a plan made with a
/// token is scoped to that token (its hash), so a gated verdict never reaches anyone else.
fn cache_key(
    semantics_version: u32,
    sources: &[Source],
    commits: &[Option<String>],
    options: &PlanOptions,
    token: Option<&str>,
) -> String {
    let mut h = Sha256::new();
    h.update(format!("semantics={semantics_version}\n"));
    h.update(format!(
        "options={}\n",
        serde_json::to_string(options).unwrap_or_default()
    ));
    let scope = token.map_or_else(
        || "public".to_owned(),
        |t| format!("token:{}", hex::encode(Sha256::digest(t.as_bytes()))),
    );
    h.update(format!("scope={scope}\n"));
    for (source, commit) in sources.iter().zip(commits) {
        if let Source::Hub(spec) = source {
            h.update(format!(
                "{}@{}/{}\n",
                spec.repo,
                commit.as_deref().unwrap_or(""),
                spec.file.as_deref().unwrap_or("")
            ));
        }
    }
    hex::encode(h.finalize())
}
