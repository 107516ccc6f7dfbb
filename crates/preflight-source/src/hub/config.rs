//! Where the Hub is and how to talk to it, from the environment as huggingface_hub reads it.

use std::path::PathBuf;
use std::time::Duration;

pub const DEFAULT_ENDPOINT: &str = "https://huggingface.co";

#[derive(Debug, Clone)]
pub struct HubConfig {
    /// `HF_ENDPOINT`.
    pub endpoint: String,
    /// `HF_TOKEN`, else the contents of `$HF_HOME/token`.
    pub token: Option<String>,
    /// `HF_HUB_OFFLINE=1`: plan from the local HF cache only, never touch the network.
    pub offline: bool,
    /// `HF_HOME` (default `~/.cache/huggingface`); the cache is `$HF_HOME/hub`.
    pub hf_home: PathBuf,
    pub connect_timeout: Duration,
    /// Per request, including the body.
    pub request_timeout: Duration,
    /// Requests in flight toward the Hub at once.
    pub max_concurrent: usize,
    /// Retries after the first attempt, for 5xx, 429 and transport failures.
    pub max_retries: usize,
    /// First backoff delay; doubles per retry (with jitter).
    pub retry_base: Duration,
    /// Time one request may spend waiting between its retries, all waits together, whatever
    /// `Retry-After` says: a Hub that rate-limits forever costs at most this, then an error.
    pub max_retry_wait: Duration,
    /// Requests one plan may send (all its artifacts, retries and redirects' first hops
    /// included): a hostile repo costs the Hub, and us, at most this many.
    pub max_requests_per_plan: u64,
    /// Requests one plan may have in flight at once, below `max_concurrent`, so one large plan
    /// never holds the whole pool while other callers' probes wait.
    pub max_in_flight_per_plan: usize,
    /// Header bytes one plan may read, all artifacts together.
    pub max_header_bytes: u64,
    /// Hosts the Hub may redirect reads to, besides its own: a name, or `.suffix` for a
    /// domain and its subdomains, either with `:port` (else only the scheme's default port);
    /// anything else is refused, so a redirect can never make the service read from an
    /// arbitrary address. `None` (the CLI's default): any http(s) host.
    pub redirect_hosts: Option<Vec<String>>,
}

/// Where huggingface.co sends file reads: its CDNs and Xet storage bridge.
pub const DEFAULT_REDIRECT_HOSTS: &[&str] = &[".hf.co", ".huggingface.co"];

/// DeepSeek-V3's headers are 11.5 MB; twice the largest known checkpoint's, with room.
pub const DEFAULT_MAX_HEADER_BYTES: u64 = 256 << 20;

/// The largest real checkpoints need about 200 requests (DeepSeek-V3: 164 for 161 shards;
/// Llama-3.1-405B: 191 shards), so 1,000 plans a system of several of them with retries to
/// spare, while a repo built to make us flood the Hub gets no further than this.
pub const DEFAULT_MAX_REQUESTS_PER_PLAN: u64 = 1_000;

/// Retry waits of one request, all together. Long enough to ride out a short rate limit
/// (the Hub's `Retry-After` is usually a few seconds), short enough that a Hub answering
/// `429` forever ends a CLI run well inside a minute.
pub const DEFAULT_MAX_RETRY_WAIT: Duration = Duration::from_secs(20);

impl Default for HubConfig {
    fn default() -> Self {
        Self {
            endpoint: DEFAULT_ENDPOINT.to_owned(),
            token: None,
            offline: false,
            hf_home: default_hf_home(),
            connect_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(30),
            max_concurrent: 64,
            max_retries: 4,
            retry_base: Duration::from_millis(200),
            max_retry_wait: DEFAULT_MAX_RETRY_WAIT,
            max_requests_per_plan: DEFAULT_MAX_REQUESTS_PER_PLAN,
            max_in_flight_per_plan: 64,
            max_header_bytes: DEFAULT_MAX_HEADER_BYTES,
            redirect_hosts: None,
        }
    }
}

fn default_hf_home() -> PathBuf {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default()
        .join(".cache/huggingface")
}

fn truthy(v: &str) -> bool {
    matches!(v.trim().to_ascii_lowercase().as_str(), "1" | "true" | "yes" | "on")
}

impl HubConfig {
    /// Read `HF_ENDPOINT`, `HF_TOKEN`, `HF_HOME` (and `$HF_HOME/token`), `HF_HUB_OFFLINE`.
    pub fn from_env() -> Self {
        let mut config = Self::default();
        if let Ok(endpoint) = std::env::var("HF_ENDPOINT")
            && !endpoint.trim().is_empty()
        {
            config.endpoint = endpoint.trim().to_owned();
        }
        if let Some(home) = std::env::var_os("HF_HOME").filter(|h| !h.is_empty()) {
            config.hf_home = PathBuf::from(home);
        }
        config.token = token(std::env::var("HF_TOKEN").ok(), &config.hf_home);
        config.offline = std::env::var("HF_HUB_OFFLINE").is_ok_and(|v| truthy(&v));
        config
    }
}

/// `HF_TOKEN` when it holds a token; set but empty (or blank) counts as unset and the token
/// file is read, as huggingface_hub does (`HF_TOKEN=` in a shell profile must not hide it).
fn token(env: Option<String>, hf_home: &std::path::Path) -> Option<String> {
    let nonblank = |t: String| Some(t.trim().to_owned()).filter(|t| !t.is_empty());
    env.and_then(nonblank)
        .or_else(|| std::fs::read_to_string(hf_home.join("token")).ok().and_then(nonblank))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_hf_token_falls_back_to_the_token_file() {
        let home = tempfile::tempdir().expect("tempdir");
        assert_eq!(token(Some(String::new()), home.path()), None);
        std::fs::write(home.path().join("token"), "hf_from_file\n").expect("write");
        assert_eq!(token(Some(String::new()), home.path()).as_deref(), Some("hf_from_file"));
        assert_eq!(token(Some("  ".into()), home.path()).as_deref(), Some("hf_from_file"));
        assert_eq!(token(Some("hf_env".into()), home.path()).as_deref(), Some("hf_env"));
        assert_eq!(token(None, home.path()).as_deref(), Some("hf_from_file"));
    }
}
