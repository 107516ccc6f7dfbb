//! Connections: the accept loop, with the bounds a public listener needs. It must never let
//! clients that send nothing (or a byte a second) hold connections for long, nor let them
//! use up the file descriptors `/v1/health` and real requests need.
//!
//! - **Header timeout**, which is also the idle timeout: hyper's clock starts whenever the
//!   connection waits for a request head — the first, or the next on a kept-alive
//!   connection — and closes it when the head is not complete in time.
//! - **Body timeout**: in the one route that reads a body (`routes.rs`), answered 408.
//! - **A connection cap** kept below the process's descriptor limit; at the cap a new
//!   connection still gets in: the oldest connection with no request in progress is closed
//!   to make room (slow or idle clients are exactly those), so health keeps answering.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::{Notify, watch};
use tower::ServiceExt;

use crate::AppState;
use crate::metrics::inc;

/// Descriptors kept back from the connection cap for everything else the process opens:
/// the SQLite store, Redis, outbound Hub connections (up to `--max-upstream-requests`), logs.
const RESERVED_DESCRIPTORS: u64 = 512;
/// After `accept` fails for want of descriptors, wait this long before trying again (the
/// failing accept would otherwise spin).
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);
/// How long a shutdown waits for connections with requests in progress.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Time to send a request head; also the longest a kept-alive connection may idle.
    pub header_timeout: Duration,
    pub max_connections: usize,
}

/// One open connection, as the cap sees it.
struct Conn {
    /// Requests being handled on it now: a connection with one is never shed.
    busy: AtomicUsize,
    shed: Notify,
}

/// Open connections by accept order (oldest first).
#[derive(Default)]
struct Registry(Mutex<BTreeMap<u64, Arc<Conn>>>);

impl Registry {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Arc<Conn>>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Close the oldest connection with no request in progress, if any.
    fn shed_oldest_idle(&self) -> bool {
        let mut conns = self.lock();
        let oldest = conns
            .iter()
            .find(|(_, c)| c.busy.load(Ordering::Acquire) == 0)
            .map(|(id, _)| *id);
        match oldest.and_then(|id| conns.remove(&id)) {
            Some(conn) => {
                conn.shed.notify_one();
                true
            }
            None => false,
        }
    }
}

/// Raise the soft descriptor limit to the hard one and return `wanted` capped below it
/// (less [`RESERVED_DESCRIPTORS`]): the cap must bind before the kernel's limit does.
pub fn fit_to_descriptors(wanted: usize) -> usize {
    let available = raise_descriptor_limit();
    let fits = available.saturating_sub(RESERVED_DESCRIPTORS).max(16);
    wanted.clamp(1, usize::try_from(fits).unwrap_or(usize::MAX))
}

#[cfg(unix)]
#[allow(unsafe_code)]
fn raise_descriptor_limit() -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read and write the struct passed by pointer.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return 1024;
        }
        if limit.rlim_cur < limit.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: limit.rlim_max,
                rlim_max: limit.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                limit = raised;
            }
        }
    }
    limit.rlim_cur
}

#[cfg(not(unix))]
fn raise_descriptor_limit() -> u64 {
    u64::MAX
}

/// Serve `state`'s routes on `listener` until `shutdown` resolves, then let requests in
/// progress finish (within [`SHUTDOWN_GRACE`]).
pub async fn serve(listener: TcpListener, state: Arc<AppState>, limits: Limits, shutdown: impl Future<Output = ()>) {
    let app = crate::app(state.clone());
    let registry = Arc::new(Registry::default());
    let (stop, stopping) = watch::channel(false);
    let mut tasks = tokio::task::JoinSet::new();
    let mut next_id = 0u64;
    tokio::pin!(shutdown);
    loop {
        let (stream, _) = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of descriptors (or a connection reset before accept): make room
                    // and try again shortly, never spin.
                    tracing::warn!(error = %e, "accept failed");
                    if registry.shed_oldest_idle() {
                        inc(&state.metrics.connections_shed);
                    }
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
        };
        // Reap finished connection tasks so the set does not grow without bound.
        while tasks.try_join_next().is_some() {}
        inc(&state.metrics.connections_accepted);
        if registry.lock().len() >= limits.max_connections && registry.shed_oldest_idle() {
            inc(&state.metrics.connections_shed);
        }
        let conn = Arc::new(Conn {
            busy: AtomicUsize::new(0),
            shed: Notify::new(),
        });
        let id = next_id;
        next_id += 1;
        registry.lock().insert(id, conn.clone());
        state.metrics.connections_open.fetch_add(1, Ordering::Relaxed);
        let (app, registry, state, mut stopping) = (app.clone(), registry.clone(), state.clone(), stopping.clone());
        tasks.spawn(async move {
            let tracked = conn.clone();
            let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
                let (app, tracked) = (app.clone(), tracked.clone());
                async move {
                    tracked.busy.fetch_add(1, Ordering::AcqRel);
                    let response = app.oneshot(request).await;
                    tracked.busy.fetch_sub(1, Ordering::AcqRel);
                    response
                }
            });
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_timeout)
                .serve_connection(TokioIo::new(stream), service);
            tokio::pin!(connection);
            let stop_asked = async move {
                let _ = stopping.wait_for(|s| *s).await;
            };
            let graceful = tokio::select! {
                _ = connection.as_mut() => false,
                () = conn.shed.notified() => false,
                () = stop_asked => true,
            };
            if graceful {
                connection.as_mut().graceful_shutdown();
                let _ = connection.await;
            }
            registry.lock().remove(&id);
            state.metrics.connections_open.fetch_sub(1, Ordering::Relaxed);
        });
    }
    drop(listener);
    let _ = stop.send(true);
    let drained = async { while tasks.join_next().await.is_some() {} };
    if tokio::time::timeout(SHUTDOWN_GRACE, drained).await.is_err() {
        tracing::warn!("connections still open after the shutdown grace; closing them");
    }
}
