//! The plan service. Routes in [`routes`], the pipeline's order in [`pipeline`], caches in
//! [`cache`], errors → statuses in [`error`], counters in [`metrics`].
//!
//! **Invariant: a cache hit stages nothing and plans nothing**, and never waits for a
//! planning permit (`pipeline.rs`).

pub mod cache;
pub mod config;
pub mod error;
pub mod listen;
pub mod metrics;
pub mod openapi;
pub mod pipeline;
pub mod routes;
pub mod shared;

use std::sync::Arc;
use std::time::{Duration, Instant};

use preflight_source::hub::{HubClient, HubConfig};

pub use config::{LogFormat, Profile, ServeArgs};

pub struct AppState {
    pub pipeline: Arc<pipeline::Pipeline>,
    pub metrics: Arc<metrics::Metrics>,
    pub profile: Profile,
    pub max_body_bytes: usize,
    /// How long a request's body may take to arrive once its headers are in.
    pub body_timeout: Duration,
    pub started: Instant,
    /// The routes actually mounted (what capabilities report).
    pub mounted: Vec<routes::RouteInfo>,
    /// The OpenAPI document of `mounted`, written once with the state (it depends on nothing
    /// else); `routes` serves it without calling into `openapi`, which reads the route table.
    pub openapi: serde_json::Value,
}

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(transparent)]
    Store(#[from] cache::StoreError),
    #[error("{0}")]
    Hub(#[from] preflight_source::hub::HubError),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: std::net::SocketAddr,
        source: std::io::Error,
    },
    #[error("local root {path}: {source}")]
    LocalRoot {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("server: {0}")]
    Io(#[from] std::io::Error),
    #[error("--cache-url: {0}")]
    Redis(#[from] redis::RedisError),
    #[error("{0}")]
    Config(String),
}

/// Build the state from flags. The Hub client reads HF_HUB_OFFLINE and HF_HOME from the
/// environment but **never an ambient token**: verdicts made with a caller's token are
/// scoped to that token, and the server lends no access of its own.
pub fn state(args: &ServeArgs) -> Result<Arc<AppState>, ServeError> {
    let mut hub_config = HubConfig::from_env();
    hub_config.endpoint = args.hub_endpoint.clone();
    hub_config.token = None;
    hub_config.max_retries = args.upstream_retries;
    hub_config.redirect_hosts = Some(args.hub_redirect_hosts.clone());
    hub_config.max_concurrent = args.max_upstream_requests.max(1);
    hub_config.max_header_bytes = args.max_header_bytes;
    hub_config.max_requests_per_plan = args.max_requests_per_plan.max(1);
    // Each plan in flight gets an equal share of the pool with one share left over, so
    // probes (which every request, hits included, may need) always find a free permit.
    hub_config.max_in_flight_per_plan = (hub_config.max_concurrent / (args.plans_in_flight() + 1)).max(1);
    let metrics = Arc::new(metrics::Metrics::default());
    let secret = match (&args.cache_url, &args.cache_secret) {
        (Some(_), None) => {
            return Err(ServeError::Config(
                "--cache-url needs --cache-secret (PREFLIGHT_CACHE_SECRET): the replicas authenticate what they store in Redis with it".into(),
            ));
        }
        (Some(_), Some(secret)) if secret.len() < shared::MIN_SECRET_LEN => {
            return Err(ServeError::Config(format!(
                "--cache-secret must be at least {} characters",
                shared::MIN_SECRET_LEN
            )));
        }
        (_, secret) => secret.clone().unwrap_or_default().into_bytes(),
    };
    let shared = match &args.cache_url {
        Some(url) => Some(Arc::new(shared::Shared::new(
            shared::SharedConfig {
                url: url.clone(),
                ttl: Duration::from_secs(args.cache_ttl_secs.max(1)),
                lease: Duration::from_secs(args.lease_secs.max(1)),
                op_timeout: Duration::from_millis(args.redis_timeout_ms.max(1)),
                budget: args
                    .hub_budget
                    .map(|n| (n, Duration::from_secs(args.hub_budget_window_secs.max(1)))),
                secret,
            },
            metrics.clone(),
        )?)),
        None => None,
    };
    let mut hub = HubClient::new(hub_config)?;
    if let Some(shared) = &shared
        && args.hub_budget.is_some()
    {
        hub = hub.with_budget(shared.clone());
    }
    let store = if args.no_store {
        None
    } else {
        Some(cache::SqliteStore::open(&args.data_dir)?)
    };
    let cache = cache::VerdictCache::new(args.memory_cache_bytes, store, shared);
    let roots = if args.local_roots.is_empty() {
        vec![std::env::current_dir()?]
    } else {
        args.local_roots.clone()
    };
    let local_roots = roots
        .into_iter()
        .map(|path| {
            path.canonicalize()
                .map_err(|source| ServeError::LocalRoot { path, source })
        })
        .collect::<Result<_, _>>()?;
    let policy = pipeline::Policy {
        profile: args.profile,
        local_roots,
        permits: args.plans_in_flight(),
        retry_after: Duration::from_secs(args.retry_after_secs.max(1)),
        max_header_bytes: args.max_header_bytes,
        upstream_timeout: Duration::from_secs(args.upstream_timeout_secs.max(1)),
        lookup_after_staging: args.debug_lookup_after_staging,
        semantics_version: args
            .debug_semantics_version
            .unwrap_or(preflight_plan::SEMANTICS_VERSION),
        facts_dir: (!args.no_store).then(|| args.data_dir.join("facts")),
    };
    let pipeline = Arc::new(pipeline::Pipeline::new(hub, cache, metrics.clone(), policy));
    if args.debug_lookup_after_staging {
        tracing::warn!("cache lookup AFTER staging: the broken order, for testing the deploy gate only");
    }
    let mounted = routes::ROUTES.to_vec();
    Ok(Arc::new(AppState {
        pipeline,
        metrics,
        profile: args.profile,
        max_body_bytes: args.max_body_bytes,
        body_timeout: Duration::from_secs(args.body_timeout_secs.max(1)),
        started: Instant::now(),
        openapi: openapi::document(&mounted),
        mounted,
    }))
}

/// Bound glibc's allocator to two arenas (elsewhere, or when the operator set
/// `MALLOC_ARENA_MAX`, nothing). glibc gives each thread that allocates its own arena (up to
/// 8 per core) and keeps what each one held, so plans run on ever-new blocking-pool threads
/// grew RSS by ~20 MB per thread: 117 → 157 MiB over 200 DeepSeek-V3 what-ifs, flat at
/// ~96 MiB with two arenas (`scripts/bench_service_rss.py`). Call before any thread starts:
/// a thread keeps the arena it first allocated from.
#[allow(unsafe_code)]
pub fn bound_allocator_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        const ARENAS: i32 = 2;
        // SAFETY: mallopt only sets an allocator parameter; no other thread exists yet.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, ARENAS);
        }
    }
}

pub fn app(state: Arc<AppState>) -> axum::Router {
    routes::router(state)
}

/// Serve until SIGINT/SIGTERM, then finish the requests in flight.
pub async fn serve(args: ServeArgs) -> Result<(), ServeError> {
    let state = state(&args)?;
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|source| ServeError::Bind {
            addr: args.listen,
            source,
        })?;
    let addr = listener.local_addr()?;
    let limits = listen::Limits {
        header_timeout: Duration::from_secs(args.header_timeout_secs.max(1)),
        max_connections: listen::fit_to_descriptors(args.max_connections),
    };
    tracing::info!(%addr, profile = args.profile.as_str(), max_connections = limits.max_connections, "preflight serve listening");
    println!("preflight serve listening on http://{addr}");
    listen::serve(listener, state, limits, shutdown_signal()).await;
    tracing::info!("shut down");
    Ok(())
}

async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(s) => s,
            Err(_) => return interrupt.await.unwrap_or(()),
        };
        tokio::select! {
            _ = interrupt => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    interrupt.await.unwrap_or(());
}
