//! A thin Hugging Face Hub client on reqwest: only what staging needs, strictly.
//!
//! - Ranged reads are strict: a `206` whose `Content-Range` matches the request, with a body of
//!   exactly that length, or an error — never a silent whole-file download.
//! - Redirects are followed by hand (at most [`MAX_REDIRECTS`]): `Authorization` is sent only to
//!   the Hub's own origin, so a CDN on another origin never sees the token; each hop is counted.
//! - 5xx, 429 and transport failures are retried with exponential backoff, honouring
//!   `Retry-After` / `RateLimit`; `X-Error-Code` becomes a specific [`HubError`].
//! - Every request holds a permit: concurrency toward the Hub is bounded.
//!
//! **Invariant:** the token never appears in an error, a log line or a URL.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};
use reqwest::header::{AUTHORIZATION, CONTENT_RANGE, HeaderMap, LOCATION, RANGE, RETRY_AFTER};
use reqwest::{Method, StatusCode, Url};
use tokio::sync::Semaphore;

use preflight_formats::facts::{Gated, ListedFile, SourceMeta};

use super::config::HubConfig;
use crate::error::HubError;

/// Redirect hops followed for one request (the Hub uses one: resolve → CDN).
pub const MAX_REDIRECTS: usize = 5;
/// A `Retry-After` longer than this is not waited out: the request fails with the advice.
pub const MAX_RETRY_WAIT: Duration = Duration::from_secs(30);

/// Work done for one staging pass or probe: the verdict's `staging` figures.
#[derive(Debug, Default)]
pub struct Counters {
    pub requests: AtomicU64,
    pub redirects: AtomicU64,
    pub bytes: AtomicU64,
    /// The plan's request limit this pass draws from; `None`: not bounded here.
    pub limit: Option<Arc<RequestLimit>>,
}

impl Counters {
    /// Counters drawing every request from `limit` (a plan's).
    pub fn limited(limit: Arc<RequestLimit>) -> Counters {
        Counters {
            limit: Some(limit),
            ..Counters::default()
        }
    }

    fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// Count one request about to be sent, refusing it past the plan's limit.
    fn request(&self) -> Result<(), HubError> {
        Counters::add(&self.requests, 1);
        match &self.limit {
            Some(limit) => limit.draw(),
            None => Ok(()),
        }
    }
}

/// One plan's share of the Hub: how many requests it may send in all, and how many at once.
/// Shared by every artifact of the plan; the client's own pool bounds all plans together.
#[derive(Debug)]
pub struct RequestLimit {
    max: u64,
    used: AtomicU64,
    in_flight: Semaphore,
}

impl RequestLimit {
    pub fn new(max: u64, in_flight: usize) -> Self {
        Self {
            max,
            used: AtomicU64::new(0),
            in_flight: Semaphore::new(in_flight.max(1)),
        }
    }

    /// Requests drawn so far (refused ones included).
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    fn draw(&self) -> Result<(), HubError> {
        if self.used.fetch_add(1, Ordering::Relaxed) >= self.max {
            return Err(HubError::TooManyRequests { max: self.max });
        }
        Ok(())
    }
}

#[derive(Clone)]
pub struct HubClient {
    http: reqwest::Client,
    config: Arc<HubConfig>,
    endpoint: Url,
    permits: Arc<Semaphore>,
    budget: Option<Arc<dyn UpstreamBudget>>,
}

/// A budget every request to the Hub's own origin draws from first (the service's shared,
/// fleet-wide budget). `Err(retry_after)` refuses the request before it is sent.
pub trait UpstreamBudget: Send + Sync {
    fn draw(&self) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), Duration>> + Send + '_>>;
}

/// A ranged read: the bytes and the file's full size from `Content-Range`.
pub struct RangeRead {
    pub bytes: Vec<u8>,
    pub total: u64,
}

impl HubClient {
    pub fn new(config: HubConfig) -> Result<Self, HubError> {
        let endpoint = Url::parse(config.endpoint.trim_end_matches('/'))
            .map_err(|e| HubError::Config(format!("HF_ENDPOINT {:?} is not a URL: {e}", config.endpoint)))?;
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(config.connect_timeout)
            .user_agent(concat!("preflight/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| HubError::Config(format!("cannot build the HTTP client: {e}")))?;
        Ok(Self {
            http,
            permits: Arc::new(Semaphore::new(config.max_concurrent.max(1))),
            budget: None,
            endpoint,
            config: Arc::new(config),
        })
    }

    /// The same client, drawing from `budget` before every request to the Hub's origin.
    pub fn with_budget(mut self, budget: Arc<dyn UpstreamBudget>) -> HubClient {
        self.budget = Some(budget);
        self
    }

    /// The same client (connections, request bound) acting with another caller's token.
    pub fn with_token(&self, token: Option<String>) -> HubClient {
        let mut config = (*self.config).clone();
        config.token = token;
        HubClient {
            config: Arc::new(config),
            ..self.clone()
        }
    }

    pub fn config(&self) -> &HubConfig {
        &self.config
    }

    /// The endpoint's path followed by `segments`, **each percent-encoded as one segment**
    /// (`/` and `%` included) — never a string joined and re-parsed, which a URL library
    /// would normalise (`%2e%2e` → `..`) and so walk out of the repo. A segment that is empty,
    /// `.` or `..` is refused rather than silently dropped.
    fn url<'s>(&self, segments: impl IntoIterator<Item = &'s str>) -> Result<Url, HubError> {
        let mut url = self.endpoint.clone();
        let mut checked = Vec::new();
        for segment in segments {
            if segment.is_empty() || segment == "." || segment == ".." {
                return Err(HubError::Protocol {
                    url: self.endpoint.to_string(),
                    detail: format!("refusing a URL with the path segment {segment:?}"),
                });
            }
            checked.push(segment);
        }
        url.path_segments_mut()
            .map_err(|()| HubError::Config(format!("HF_ENDPOINT {} cannot take a path", self.endpoint)))?
            .pop_if_empty()
            .extend(checked);
        Ok(url)
    }

    /// `/{org}/{name}/resolve/{rev}/{path…}`: the revision one segment (`refs/pr/1` →
    /// `refs%2Fpr%2F1`), the path split on `/` and each part its own segment.
    pub fn resolve_url(&self, repo: &str, revision: &str, path: &str) -> Result<Url, HubError> {
        let repo_segments = repo.split('/');
        self.url(repo_segments.chain(["resolve", revision]).chain(path.split('/')))
    }

    /// Learn the commit a revision points at from `X-Repo-Commit` on a one-byte read of
    /// `path` (the redirect to the CDN is not followed: the Hub's answer carries the header).
    pub async fn probe(&self, repo: &str, revision: &str, path: &str, counters: &Counters) -> Result<String, HubError> {
        let url = self.resolve_url(repo, revision, path)?;
        let ctx = Context { repo, revision, path };
        let response = self
            .retrying(|| async {
                counters.request()?;
                self.send_once(Method::GET, url.clone(), Some("bytes=0-0"), &ctx).await
            })
            .await?;
        commit_header(response.headers()).ok_or_else(|| HubError::Protocol {
            url: url.to_string(),
            detail: "no X-Repo-Commit header on the Hub's answer".into(),
        })
    }

    /// The commit, file list (with sizes: `blobs=true`, as huggingface_hub's
    /// `model_info(files_metadata=True)` asks), card licence and gating of a revision
    /// (`/api/models/{repo}/revision/{rev}`): one request answers all of them.
    pub async fn repo_info(&self, repo: &str, revision: &str, counters: &Counters) -> Result<RepoInfo, HubError> {
        let mut url = self.url(
            ["api", "models"]
                .into_iter()
                .chain(repo.split('/'))
                .chain(["revision", revision]),
        )?;
        url.set_query(Some("blobs=true"));
        let ctx = Context {
            repo,
            revision,
            path: "",
        };
        let bytes = self.get_whole(&url, &ctx, MAX_INFO_BYTES, counters).await?;
        let info: RawInfo = serde_json::from_slice(&bytes).map_err(|e| HubError::Protocol {
            url: url.to_string(),
            detail: format!("model info is not the Hub's JSON: {e}"),
        })?;
        Ok(RepoInfo::from_raw(info))
    }

    /// A small file, whole, at most `max` bytes.
    pub async fn get_small(
        &self,
        repo: &str,
        commit: &str,
        path: &str,
        max: usize,
        counters: &Counters,
    ) -> Result<Vec<u8>, HubError> {
        let url = self.resolve_url(repo, commit, path)?;
        let ctx = Context {
            repo,
            revision: commit,
            path,
        };
        self.get_whole(&url, &ctx, max, counters).await
    }

    /// Bytes `[start, end)` of a file (clamped by the server at the file's end).
    pub async fn get_range(
        &self,
        repo: &str,
        commit: &str,
        path: &str,
        start: u64,
        end: u64,
        counters: &Counters,
    ) -> Result<RangeRead, HubError> {
        let url = self.resolve_url(repo, commit, path)?;
        let ctx = Context {
            repo,
            revision: commit,
            path,
        };
        let range = format!("bytes={start}-{}", end.saturating_sub(1).max(start));
        let attempt = || async {
            let response = self
                .send_once_following(Method::GET, url.clone(), Some(&range), &ctx, counters)
                .await?;
            let status = response.status();
            if status == StatusCode::OK {
                // The server ignored Range: stop before reading a multi-GB body.
                return Err(HubError::Protocol {
                    url: url.to_string(),
                    detail:
                        "the server ignored the Range header (200 instead of 206); refusing to download the whole file"
                            .into(),
                });
            }
            if status != StatusCode::PARTIAL_CONTENT {
                return Err(HubError::Protocol {
                    url: url.to_string(),
                    detail: format!("expected 206 Partial Content, got {status}"),
                });
            }
            let (first, last, total) = content_range(response.headers()).ok_or_else(|| HubError::Protocol {
                url: url.to_string(),
                detail: "206 without a valid Content-Range".into(),
            })?;
            let want_last = end.saturating_sub(1).min(total.saturating_sub(1));
            if first != start || last != want_last {
                return Err(HubError::Protocol {
                    url: url.to_string(),
                    detail: format!(
                        "Content-Range bytes {first}-{last}/{total} does not answer the request for bytes {start}-{want_last}"
                    ),
                });
            }
            let len = (last - first + 1) as usize;
            let bytes = read_body(response, len, &url, counters).await?;
            if bytes.len() != len {
                return Err(HubError::Truncated {
                    url: url.to_string(),
                    expected: len as u64,
                    got: bytes.len() as u64,
                });
            }
            Ok(RangeRead { bytes, total })
        };
        self.retrying(attempt).await
    }

    fn backoff(&self) -> ExponentialBuilder {
        ExponentialBuilder::default()
            .with_min_delay(self.config.retry_base)
            .with_max_delay(MAX_RETRY_WAIT)
            .with_max_times(self.config.max_retries)
            .with_jitter()
    }

    /// Run `attempt` again on transient failures (5xx, 429, timeouts, short bodies), with
    /// exponential backoff — or the server's own `Retry-After` when it gives one.
    ///
    /// **Bounded whatever the server says**: at most `max_retries` retries (the backoff
    /// schedule running out ends them, even while the server keeps sending `Retry-After`),
    /// and at most `max_retry_wait` spent waiting in all; a wait that would pass that total
    /// is not started — the last error is returned with the server's advice in it.
    async fn retrying<T, Fut>(&self, attempt: impl FnMut() -> Fut) -> Result<T, HubError>
    where
        Fut: std::future::Future<Output = Result<T, HubError>>,
    {
        let budget = self.config.max_retry_wait;
        let mut waited = Duration::ZERO;
        attempt
            .retry(self.backoff())
            .when(is_transient)
            .adjust(move |e: &HubError, scheduled| {
                // `None` from the schedule means the retries are spent: never revive them.
                let wait = e.retry_after().unwrap_or(scheduled?);
                waited = waited.checked_add(wait).filter(|total| *total <= budget)?;
                Some(wait)
            })
            .await
    }

    /// A whole body, at most `max` bytes; a short body is retried like a failed request.
    async fn get_whole(
        &self,
        url: &Url,
        ctx: &Context<'_>,
        max: usize,
        counters: &Counters,
    ) -> Result<Vec<u8>, HubError> {
        self.retrying(|| async {
            let response = self
                .send_once_following(Method::GET, url.clone(), None, ctx, counters)
                .await?;
            read_body(response, max, url, counters).await
        })
        .await
    }

    /// The Hub's own origin (scheme, host **and port**), or one of the configured redirect
    /// hosts: `name`, `.domain` (the domain and its subdomains) or either with `:port`. A
    /// redirect host is reached over the Hub's own scheme and, unless its entry names one, the
    /// scheme's default port — so an allowed name never opens every port on that machine.
    fn may_redirect_to(&self, url: &Url) -> bool {
        let Some(host) = url.host_str() else { return false };
        if !matches!(url.scheme(), "http" | "https") {
            return false;
        }
        let Some(allowed_hosts) = &self.config.redirect_hosts else {
            return true;
        };
        if url.origin() == self.endpoint.origin() {
            return true;
        }
        if url.scheme() != self.endpoint.scheme() {
            return false;
        }
        let Some(port) = url.port_or_known_default() else {
            return false;
        };
        allowed_hosts.iter().any(|allowed| {
            let (name, allowed_port) = match allowed.rsplit_once(':') {
                Some((name, p)) if !name.contains(':') || (name.starts_with('[') && name.ends_with(']')) => {
                    match p.parse::<u16>() {
                        Ok(p) => (name, Some(p)),
                        Err(_) => return false,
                    }
                }
                _ => (allowed.as_str(), None),
            };
            let port_ok = match allowed_port {
                Some(p) => p == port,
                None => url.port().is_none(),
            };
            let host_ok = match name.strip_prefix('.') {
                Some(domain) => host == domain || host.ends_with(name),
                None => host == name,
            };
            port_ok && host_ok
        })
    }

    /// Why [`Self::may_redirect_to`] refused a redirect, naming what an operator would have
    /// to allow: the host **with its port** (another port of an allowed host is refused too,
    /// and a message naming the host alone hides why).
    fn redirect_refusal(&self, url: &Url) -> String {
        let (Some(host), "http" | "https") = (url.host_str(), url.scheme()) else {
            return format!("redirect to {url} refused: not an http(s) URL");
        };
        if url.scheme() != self.endpoint.scheme() {
            return format!(
                "redirect to {} refused: the Hub is reached over {} and a redirect must keep to it",
                url.origin().ascii_serialization(),
                self.endpoint.scheme()
            );
        }
        let target = match url.port() {
            Some(port) => format!("{host}:{port}"),
            None => host.to_owned(),
        };
        format!(
            "redirect to {target} refused: neither the Hub's origin nor an allowed redirect host \
             (to allow it, list {target} in --hub-redirect-hosts / PREFLIGHT_HUB_REDIRECT_HOSTS)"
        )
    }

    /// One logical request: redirects followed by hand, the token kept on the Hub's origin.
    async fn send_once_following(
        &self,
        method: Method,
        url: Url,
        range: Option<&str>,
        ctx: &Context<'_>,
        counters: &Counters,
    ) -> Result<reqwest::Response, HubError> {
        counters.request()?;
        // The plan's own bound on requests at once, taken before the shared pool's.
        let _plan_permit = match &counters.limit {
            Some(limit) => Some(
                limit
                    .in_flight
                    .acquire()
                    .await
                    .map_err(|_| HubError::Config("the plan's request pool is closed".into()))?,
            ),
            None => None,
        };
        let mut url = url;
        for hop in 0..=MAX_REDIRECTS {
            let response = self.send_once(method.clone(), url.clone(), range, ctx).await?;
            if !response.status().is_redirection() {
                return Ok(response);
            }
            let location = response
                .headers()
                .get(LOCATION)
                .and_then(|l| l.to_str().ok())
                .ok_or_else(|| HubError::Protocol {
                    url: url.to_string(),
                    detail: "redirect without a Location".into(),
                })?;
            let next = url.join(location).map_err(|e| HubError::Protocol {
                url: url.to_string(),
                detail: format!("bad redirect Location: {e}"),
            })?;
            if !self.may_redirect_to(&next) {
                return Err(HubError::Protocol {
                    url: url.to_string(),
                    detail: self.redirect_refusal(&next),
                });
            }
            url = next;
            if hop < MAX_REDIRECTS {
                Counters::add(&counters.redirects, 1);
            }
        }
        Err(HubError::Protocol {
            url: url.to_string(),
            detail: format!("more than {MAX_REDIRECTS} redirects"),
        })
    }

    /// One HTTP exchange (counted by the caller). Redirects are returned, not followed;
    /// errors are mapped.
    async fn send_once(
        &self,
        method: Method,
        url: Url,
        range: Option<&str>,
        ctx: &Context<'_>,
    ) -> Result<reqwest::Response, HubError> {
        if let Some(budget) = &self.budget
            && url.origin() == self.endpoint.origin()
        {
            budget
                .draw()
                .await
                .map_err(|retry_after| HubError::BudgetExhausted { retry_after })?;
        }
        let _permit = self
            .permits
            .acquire()
            .await
            .map_err(|_| HubError::Config("the request pool is closed".into()))?;
        let mut request = self
            .http
            .request(method, url.clone())
            .timeout(self.config.request_timeout);
        if let Some(range) = range {
            request = request.header(RANGE, range);
        }
        if let Some(token) = &self.config.token
            && url.origin() == self.endpoint.origin()
        {
            request = request.header(AUTHORIZATION, format!("Bearer {token}"));
        }
        let response = request
            .send()
            .await
            .map_err(|e| HubError::transport(&url, e, self.config.request_timeout))?;
        let status = response.status();
        if status.is_success() || status.is_redirection() {
            return Ok(response);
        }
        Err(map_status(&response, ctx, self.config.token.is_some(), &url))
    }
}

/// Worth another try: the server or the path to it may recover — and a rate limit's
/// `Retry-After`, if it gave one, is within [`MAX_RETRY_WAIT`]. Part of the retry policy, so
/// here beside the schedule rather than on `HubError`.
fn is_transient(e: &HubError) -> bool {
    match e {
        HubError::RateLimited { retry_after, .. } => retry_after.is_none_or(|d| d <= MAX_RETRY_WAIT),
        HubError::Upstream { .. }
        | HubError::Timeout { .. }
        | HubError::Connect { .. }
        | HubError::Truncated { .. } => true,
        _ => false,
    }
}

/// Largest model-info JSON accepted (DeepSeek-V3's is ~20 KB).
const MAX_INFO_BYTES: usize = 8 << 20;

/// A revision as model info describes it.
#[derive(Debug, Clone)]
pub struct RepoInfo {
    pub sha: String,
    /// Every file of the revision, by repo path.
    pub siblings: Vec<String>,
    /// The card's licence, the repo's gating and the top-level files with their sizes.
    pub meta: SourceMeta,
}

impl RepoInfo {
    /// Read leniently past `sha` and the names: a card or gating this does not understand is
    /// unknown, never a failed request.
    fn from_raw(raw: RawInfo) -> RepoInfo {
        let card = raw.card_data.as_ref().and_then(serde_json::Value::as_object);
        let text = |key: &str| -> Option<String> {
            match card?.get(key)? {
                serde_json::Value::String(s) if !s.trim().is_empty() => Some(s.trim().to_owned()),
                serde_json::Value::Array(items) => {
                    let names: Vec<&str> = items.iter().filter_map(serde_json::Value::as_str).collect();
                    (!names.is_empty()).then(|| names.join(", "))
                }
                _ => None,
            }
        };
        let files = raw
            .siblings
            .iter()
            .filter(|s| !s.rfilename.contains('/'))
            .map(|s| ListedFile {
                name: s.rfilename.clone(),
                size: s.size,
            })
            .collect();
        RepoInfo {
            meta: SourceMeta {
                license: text("license"),
                license_name: text("license_name"),
                gated: raw.gated.as_ref().and_then(Gated::from_hub),
                files: Some(files),
            },
            sha: raw.sha,
            siblings: raw.siblings.into_iter().map(|s| s.rfilename).collect(),
        }
    }
}

#[derive(serde::Deserialize)]
struct RawInfo {
    sha: String,
    #[serde(default)]
    siblings: Vec<RawSibling>,
    #[serde(default)]
    gated: Option<serde_json::Value>,
    #[serde(default, rename = "cardData")]
    card_data: Option<serde_json::Value>,
}

#[derive(serde::Deserialize)]
struct RawSibling {
    rfilename: String,
    /// Present with `blobs=true`.
    #[serde(default)]
    size: Option<u64>,
}

struct Context<'a> {
    repo: &'a str,
    revision: &'a str,
    path: &'a str,
}

fn commit_header(headers: &HeaderMap) -> Option<String> {
    let commit = headers.get("x-repo-commit")?.to_str().ok()?;
    crate::spec::is_commit(commit).then(|| commit.to_owned())
}

/// `bytes a-b/total` → `(a, b, total)`.
fn content_range(headers: &HeaderMap) -> Option<(u64, u64, u64)> {
    let value = headers.get(CONTENT_RANGE)?.to_str().ok()?;
    let (range, total) = value.strip_prefix("bytes ")?.split_once('/')?;
    let (a, b) = range.split_once('-')?;
    let (a, b, total) = (a.parse().ok()?, b.parse().ok()?, total.parse().ok()?);
    (a <= b && b < total).then_some((a, b, total))
}

/// Read a body, refusing more than `max` bytes.
async fn read_body(
    mut response: reqwest::Response,
    max: usize,
    url: &Url,
    counters: &Counters,
) -> Result<Vec<u8>, HubError> {
    // Taken before reading: reqwest's figure shrinks as the body is consumed.
    let declared = response.content_length();
    if declared.is_some_and(|len| len > max as u64) {
        return Err(HubError::TooLarge {
            url: url.to_string(),
            max: max as u64,
        });
    }
    let mut body = Vec::with_capacity(declared.map_or(0, |l| l as usize).min(max));
    loop {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                Counters::add(&counters.bytes, chunk.len() as u64);
                if body.len() + chunk.len() > max {
                    return Err(HubError::TooLarge {
                        url: url.to_string(),
                        max: max as u64,
                    });
                }
                body.extend_from_slice(&chunk);
            }
            Ok(None) => break,
            // The connection ended early (or broke): the body is short.
            Err(_) => {
                return Err(HubError::Truncated {
                    url: url.to_string(),
                    expected: declared.unwrap_or(0),
                    got: body.len() as u64,
                });
            }
        }
    }
    if let Some(len) = declared
        && body.len() as u64 != len
    {
        return Err(HubError::Truncated {
            url: url.to_string(),
            expected: len,
            got: body.len() as u64,
        });
    }
    Ok(body)
}

/// Seconds from `Retry-After` (seconds form) or the `RateLimit` header's `t=` reset.
pub fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    if let Some(secs) = headers
        .get(RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
    {
        return Some(Duration::from_secs(secs));
    }
    let ratelimit = headers.get("ratelimit")?.to_str().ok()?;
    ratelimit
        .split(';')
        .find_map(|part| part.trim().strip_prefix("t=")?.parse::<u64>().ok())
        .map(Duration::from_secs)
}

fn map_status(response: &reqwest::Response, ctx: &Context<'_>, has_token: bool, url: &Url) -> HubError {
    let status = response.status();
    let code = response
        .headers()
        .get("x-error-code")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let repo = ctx.repo.to_owned();
    match (status.as_u16(), code) {
        (_, "GatedRepo") if !has_token => HubError::GatedNoToken { repo },
        (_, "GatedRepo") => HubError::GatedDenied { repo },
        (_, "RepoNotFound") => HubError::RepoNotFound { repo },
        (_, "RevisionNotFound") => HubError::RevisionNotFound {
            repo,
            revision: ctx.revision.to_owned(),
        },
        (_, "EntryNotFound") => HubError::EntryNotFound {
            repo,
            revision: ctx.revision.to_owned(),
            path: ctx.path.to_owned(),
        },
        (401, _) if has_token => HubError::Unauthorized { repo },
        (401, _) => HubError::RepoNotFound { repo },
        (403, _) => HubError::GatedDenied { repo },
        (404, _) => HubError::EntryNotFound {
            repo,
            revision: ctx.revision.to_owned(),
            path: ctx.path.to_owned(),
        },
        (416, _) => HubError::Protocol {
            url: url.to_string(),
            detail: "416 Range Not Satisfiable".into(),
        },
        (429, _) => HubError::RateLimited {
            url: url.to_string(),
            retry_after: retry_after(response.headers()),
        },
        (s, _) if s >= 500 => HubError::Upstream {
            url: url.to_string(),
            status: s,
        },
        (s, _) => HubError::Protocol {
            url: url.to_string(),
            detail: format!("unexpected status {s}"),
        },
    }
}
