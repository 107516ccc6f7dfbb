//! `preflight serve` configuration: every flag has a doc comment and an environment
//! fallback, so `--help` is the configuration reference.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, ValueEnum};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Profile {
    /// Hub sources only; local paths are refused with 403.
    Public,
    /// Hub sources and local paths under the allowed roots.
    Local,
}

impl Profile {
    pub fn as_str(self) -> &'static str {
        match self {
            Profile::Public => "public",
            Profile::Local => "local",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, env = "PREFLIGHT_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,

    /// Who the deployment serves: `public` (hf:// sources only) or `local` (also local paths
    /// under --local-root).
    #[arg(long, env = "PREFLIGHT_PROFILE", value_enum, default_value = "public")]
    pub profile: Profile,

    /// Directory for the persistent verdict store (SQLite); created if missing.
    #[arg(long, env = "PREFLIGHT_DATA_DIR", default_value = "preflight-data")]
    pub data_dir: PathBuf,

    /// Keep verdicts in memory only (no persistent store).
    #[arg(long, env = "PREFLIGHT_NO_STORE")]
    pub no_store: bool,

    /// Plans allowed to stage and plan at once; past it a miss is refused with 429 (never
    /// queued). Cache hits never need one. Default: 2 for `public`, 4 for `local`.
    #[arg(long, env = "PREFLIGHT_MAX_PLANS_IN_FLIGHT")]
    pub max_plans_in_flight: Option<usize>,

    /// Seconds a refused client is told to wait (`Retry-After`).
    #[arg(long, env = "PREFLIGHT_RETRY_AFTER_SECS", default_value_t = 1)]
    pub retry_after_secs: u64,

    /// Memory the in-memory verdict cache may use, in bytes of verdict JSON.
    #[arg(long, env = "PREFLIGHT_MEMORY_CACHE_BYTES", default_value_t = 256 << 20)]
    pub memory_cache_bytes: u64,

    /// Largest request body accepted, in bytes.
    #[arg(long, env = "PREFLIGHT_MAX_BODY_BYTES", default_value_t = 64 << 10)]
    pub max_body_bytes: usize,

    /// Seconds a client has to send a request's headers — and the longest a kept-alive
    /// connection may sit idle between requests. A connection past it is closed, so clients
    /// dripping a byte at a time cannot hold connections (and file descriptors) for long.
    #[arg(long, env = "PREFLIGHT_HEADER_TIMEOUT_SECS", default_value_t = 10)]
    pub header_timeout_secs: u64,

    /// Seconds a client has to send a request's body once its headers are in; past it the
    /// request is answered 408 and the connection closed.
    #[arg(long, env = "PREFLIGHT_BODY_TIMEOUT_SECS", default_value_t = 30)]
    pub body_timeout_secs: u64,

    /// Connections held open at once (also kept below the process's file-descriptor limit).
    /// At the cap a new connection is still served: the oldest connection with no request in
    /// progress is closed to make room, so idle or dripping clients can never lock out
    /// `/v1/health` or a real request.
    #[arg(long, env = "PREFLIGHT_MAX_CONNECTIONS", default_value_t = 50_000)]
    pub max_connections: usize,

    /// Requests one plan may send to the Hub, all its sources, retries and redirects
    /// together; past it the plan is refused (413) instead of flooding the Hub.
    #[arg(long, env = "PREFLIGHT_MAX_REQUESTS_PER_PLAN", default_value_t = preflight_source::hub::config::DEFAULT_MAX_REQUESTS_PER_PLAN)]
    pub max_requests_per_plan: u64,

    /// Header bytes one plan may read from the Hub, all its sources together.
    #[arg(long, env = "PREFLIGHT_MAX_HEADER_BYTES", default_value_t = 256 << 20)]
    pub max_header_bytes: u64,

    /// Seconds a plan may spend on upstream reads (probes and staging) before 504.
    #[arg(long, env = "PREFLIGHT_UPSTREAM_TIMEOUT_SECS", default_value_t = 120)]
    pub upstream_timeout_secs: u64,

    /// The Hub to read from.
    #[arg(long, env = "HF_ENDPOINT", default_value = preflight_source::hub::config::DEFAULT_ENDPOINT)]
    pub hub_endpoint: String,

    /// Hosts the Hub may redirect reads to besides its own (its CDNs): names, or `.domain` for
    /// a domain and its subdomains, either with `:port` — without one, only the scheme's
    /// default port (a fixture Hub's CDN on loopback: `127.0.0.1:PORT`). A redirect anywhere
    /// else is refused (design §7: the server reads nothing outside its Hub).
    #[arg(
        long,
        env = "PREFLIGHT_HUB_REDIRECT_HOSTS",
        value_delimiter = ',',
        default_value = ".hf.co,.huggingface.co"
    )]
    pub hub_redirect_hosts: Vec<String>,

    /// Retries of a failed Hub request (5xx, 429, timeouts), with exponential backoff.
    #[arg(long, env = "PREFLIGHT_UPSTREAM_RETRIES", default_value_t = 3)]
    pub upstream_retries: usize,

    /// Requests toward the Hub in flight at once, across all plans.
    #[arg(long, env = "PREFLIGHT_MAX_UPSTREAM_REQUESTS", default_value_t = 64)]
    pub max_upstream_requests: usize,

    /// Directories local sources may be read from (`local` profile; repeatable). Default:
    /// the working directory.
    #[arg(long = "local-root", env = "PREFLIGHT_LOCAL_ROOTS", value_delimiter = ',')]
    pub local_roots: Vec<PathBuf>,

    /// Redis for the shared tier when several replicas serve one endpoint
    /// (`redis://host:port/db`): verdicts, cross-replica single flight, the Hub budget.
    /// Without it, the embedded store is the only persistent tier.
    #[arg(long, env = "PREFLIGHT_CACHE_URL")]
    pub cache_url: Option<String>,

    /// The secret the replicas share to authenticate what they store in Redis (HMAC-SHA256
    /// over key and verdict): a value someone wrote into Redis without it is never served.
    /// Required with --cache-url; at least 32 characters. Prefer the environment variable
    /// (a flag shows in the process list).
    #[arg(long, env = "PREFLIGHT_CACHE_SECRET", hide_env_values = true)]
    pub cache_secret: Option<String>,

    /// How long verdicts live in the shared tier, in seconds.
    #[arg(long, env = "PREFLIGHT_CACHE_TTL_SECS", default_value_t = 7 * 24 * 3600)]
    pub cache_ttl_secs: u64,

    /// Seconds a replica holds the lease on a key it is planning; a dead holder's lease
    /// expires after this and another replica takes over.
    #[arg(long, env = "PREFLIGHT_LEASE_SECS", default_value_t = 60)]
    pub lease_secs: u64,

    /// Milliseconds any one Redis call may take before the replica carries on without it.
    #[arg(long, env = "PREFLIGHT_REDIS_TIMEOUT_MS", default_value_t = 250)]
    pub redis_timeout_ms: u64,

    /// Hub requests the whole fleet may send per --hub-budget-window-secs (counted in Redis;
    /// needs --cache-url). Past it a miss is refused with 429 instead of going upstream.
    #[arg(long, env = "PREFLIGHT_HUB_BUDGET", requires = "cache_url")]
    pub hub_budget: Option<u64>,

    /// The window of --hub-budget, in seconds (the Hub's own limits are per 5 minutes).
    #[arg(long, env = "PREFLIGHT_HUB_BUDGET_WINDOW_SECS", default_value_t = 300)]
    pub hub_budget_window_secs: u64,

    /// Log format on stderr.
    #[arg(long, env = "PREFLIGHT_LOG_FORMAT", value_enum, default_value = "text")]
    pub log_format: LogFormat,

    /// Test only: look up the cache *after* staging (the broken order the deploy gate must
    /// catch). Never use in a deployment.
    #[arg(long, hide = true, env = "PREFLIGHT_DEBUG_LOOKUP_AFTER_STAGING")]
    pub debug_lookup_after_staging: bool,

    /// Test only: key verdicts by this semantics version instead of the planner's own — what
    /// a release that bumped it would do — to show a bump re-plans from cached facts. Never
    /// use in a deployment.
    #[arg(long, hide = true, env = "PREFLIGHT_DEBUG_SEMANTICS_VERSION")]
    pub debug_semantics_version: Option<u32>,
}

impl ServeArgs {
    pub fn plans_in_flight(&self) -> usize {
        self.max_plans_in_flight
            .unwrap_or(match self.profile {
                Profile::Public => 2,
                Profile::Local => 4,
            })
            .max(1)
    }
}

/// A parser for `ServeArgs` alone, so tests and embedders can configure a server from flags.
#[derive(clap::Parser)]
struct Standalone {
    #[command(flatten)]
    args: ServeArgs,
}

impl ServeArgs {
    /// Parse flags as `preflight serve` would (environment fallbacks included).
    pub fn from_flags(flags: &[&str]) -> Result<Self, clap::Error> {
        use clap::Parser;
        Standalone::try_parse_from(std::iter::once("serve").chain(flags.iter().copied())).map(|s| s.args)
    }
}
