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
    /// Header bytes one plan may read, all artifacts together.
    pub max_header_bytes: u64,
    /// Hosts the Hub may redirect reads to, besides its own: a name, or `.suffix` for a
    /// domain and its subdomains; anything else is refused, so a redirect can never make the
    /// service read from an arbitrary address. `None` (the CLI's default): any http(s) host.
    pub redirect_hosts: Option<Vec<String>>,
}

/// Where huggingface.co sends file reads: its CDNs and Xet storage bridge.
pub const DEFAULT_REDIRECT_HOSTS: &[&str] = &[".hf.co", ".huggingface.co"];

/// DeepSeek-V3's headers are 11.5 MB; twice the largest known checkpoint's, with room.
pub const DEFAULT_MAX_HEADER_BYTES: u64 = 256 << 20;

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
        config.token = std::env::var("HF_TOKEN")
            .ok()
            .or_else(|| std::fs::read_to_string(config.hf_home.join("token")).ok())
            .map(|t| t.trim().to_owned())
            .filter(|t| !t.is_empty());
        config.offline = std::env::var("HF_HUB_OFFLINE").is_ok_and(|v| truthy(&v));
        config
    }
}
