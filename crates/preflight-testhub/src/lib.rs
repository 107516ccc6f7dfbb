//! A fixture Hugging Face Hub on loopback, for tests, benches and demos.
//!
//! Serves a tree in the `fixtures/hub` layout the way the real Hub answers
//! `huggingface_hub`: `/resolve` and `/raw` with `X-Repo-Commit`, ETags and ranges, large
//! (LFS) files redirected with a 302 to a second origin standing in for the CDN, gated and
//! private repos with the Hub's error codes, and enough of `/api/models` for `model_info`
//! and `list_repo_tree`. Stub files are served at their full size, zeros past the stored
//! prefix, without ever allocating that size. It never reaches the network: both origins
//! listen on loopback only.
//!
//! Tests steer it with [`Fault`] switches and read its [request log](TestHub::requests);
//! the same is reachable over HTTP on the Hub origin (for other processes):
//!
//! | route | |
//! |---|---|
//! | `GET /_testhub/info` | `{"hub": URL, "cdn": URL}`: where each origin listens |
//! | `GET /_testhub/requests` | the log, as a JSON list of [`RequestRecord`] |
//! | `DELETE /_testhub/requests` | clear the log |
//! | `GET /_testhub/faults` | armed faults, with the uses left |
//! | `POST /_testhub/faults` | arm one [`Fault`] or a list (JSON, e.g. `{"kind":"status","status":503,"times":1}`) |
//! | `PUT /_testhub/faults` | replace the armed faults |
//! | `DELETE /_testhub/faults` | disarm all |
//! | `POST /_testhub/refs` | move a ref: `{"repo":"Qwen/Qwen3-8B","ref":"main","commit":"<sha>"}` |
//! | `POST /_testhub/reset` | clear the log and faults, restore refs from disk |
//!
//! ```no_run
//! # async fn demo() -> Result<(), preflight_testhub::Error> {
//! use preflight_testhub::{Fault, TestHub};
//!
//! let hub = TestHub::builder().token("hf_test").start().await?;
//! // HF_ENDPOINT=hub.url() for the code under test; then, to fail one shard once:
//! hub.add_fault(Fault::status(503).times(1).path_contains("model-00002"));
//! // … run the code under test …
//! let to_cdn = hub.requests().iter().filter(|r| r.origin == preflight_testhub::Origin::Cdn).count();
//! # let _ = to_cdn;
//! # Ok(()) }
//! ```
//!
//! Fidelity notes: a file is LFS when its extension is one the Hub's default
//! `.gitattributes` sends to LFS (`*.safetensors`, `*.gguf`, `*.bin`, …) or when its full size
//! exceeds 10 MiB; so the fixtures' 6.5 MB `tokenizer.json` is a plain file served by
//! `/resolve` directly. A stub's LFS sha256 is a stable synthetic address, not the hash of
//! the zero-filled bytes.

mod access;
mod admin;
mod api;
mod body;
mod cdn;
mod content;
mod error;
pub mod facts;
mod faults;
mod hub;
mod log;
pub mod packed;
mod range;
pub mod redis;
mod safetensors;
mod store;

use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasher, Hasher, RandomState};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, mpsc};
use std::time::Duration;

use axum::Router;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub use faults::{Fault, FaultKind, Origin};
pub use log::RequestRecord;

use faults::Faults;
use log::Log;
use store::Store;

/// How long a stop waits for responses in flight before cutting them off: long enough for
/// any header-sized body, short enough that a client stuck on a multi-GB stub can't hang
/// a test's teardown.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("fixture {path}: {message}")]
    Fixture { path: PathBuf, message: String },
    #[error("{addr} is not a loopback address; the test hub only listens on loopback")]
    NotLoopback { addr: SocketAddr },
    #[error("cannot listen on {addr}: {source}")]
    Bind { addr: SocketAddr, source: std::io::Error },
    #[error("no repo {0:?} in the fixture tree")]
    UnknownRepo(String),
    #[error("repo {repo:?} has no commit {commit:?}")]
    UnknownCommit { repo: String, commit: String },
    #[error("cannot start the test hub's runtime: {0}")]
    Runtime(std::io::Error),
}

/// The repository's own fixture tree (`fixtures/hub`), the default root.
pub fn fixtures_hub() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/hub")
}

/// Lay out a fixture tree at `dest` holding only `repo`, with its `main` commit plus a second
/// commit of the same files (hard links), and return that second commit. Tests move `main`
/// to it (with [`TestHub::set_ref`]) to see what a branch moving between two reads does.
pub fn fork_repo(root: &Path, repo: &str, dest: &Path) -> std::io::Result<String> {
    let source = root.join(repo);
    let refs: serde_json::Value = serde_json::from_slice(&std::fs::read(source.join("refs.json"))?)?;
    let main = refs["main"]
        .as_str()
        .ok_or_else(|| std::io::Error::other("refs.json has no main"))?
        .to_owned();
    // Same length, different value: the commit reversed.
    let second: String = main.chars().rev().collect();
    let out = dest.join(repo);
    for commit in [&main, &second] {
        let dir = out.join(commit);
        std::fs::create_dir_all(&dir)?;
        for entry in std::fs::read_dir(source.join(&main))? {
            let path = entry?.path();
            std::fs::hard_link(&path, dir.join(path.file_name().unwrap_or_default()))?;
        }
    }
    for file in ["refs.json", "repo.json"] {
        std::fs::copy(source.join(file), out.join(file))?;
    }
    Ok(second)
}

/// State both origins share.
pub(crate) struct Shared {
    store: Store,
    /// Live refs: start as `refs.json` has them; tests may move them.
    refs: Mutex<HashMap<String, BTreeMap<String, String>>>,
    tokens: Vec<String>,
    faults: Faults,
    log: Log,
    hub_url: String,
    cdn_url: String,
    sign_key: [u8; 16],
}

impl Shared {
    fn ref_target(&self, repo: &str, name: &str) -> Option<String> {
        self.lock_refs().get(repo)?.get(name).cloned()
    }

    fn set_ref(&self, repo: &str, name: &str, commit: &str) -> Result<(), Error> {
        let known = self
            .store
            .repo(repo)
            .ok_or_else(|| Error::UnknownRepo(repo.to_owned()))?;
        if !known.commits.contains_key(commit) {
            return Err(Error::UnknownCommit {
                repo: repo.to_owned(),
                commit: commit.to_owned(),
            });
        }
        self.lock_refs()
            .entry(repo.to_owned())
            .or_default()
            .insert(name.to_owned(), commit.to_owned());
        Ok(())
    }

    fn reset(&self) {
        self.log.clear();
        self.faults.replace(Vec::new());
        *self.lock_refs() = disk_refs(&self.store);
    }

    fn lock_refs(&self) -> MutexGuard<'_, HashMap<String, BTreeMap<String, String>>> {
        self.refs.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn disk_refs(store: &Store) -> HashMap<String, BTreeMap<String, String>> {
    store.repos().map(|r| (r.id.clone(), r.refs.clone())).collect()
}

/// Configures and starts a [`TestHub`].
#[derive(Clone, Debug)]
pub struct TestHubBuilder {
    root: PathBuf,
    tokens: Vec<String>,
    listen: SocketAddr,
    cdn_listen: SocketAddr,
}

impl TestHubBuilder {
    /// The fixture tree to serve; defaults to [`fixtures_hub`].
    pub fn root(mut self, root: impl Into<PathBuf>) -> Self {
        self.root = root.into();
        self
    }

    /// A bearer token with access to every gated and private repo (repeatable). Any other
    /// token is treated as a real account without grants: 403 on gated repos, private
    /// repos hidden behind 404.
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.tokens.push(token.into());
        self
    }

    /// Address of the Hub origin; the default `127.0.0.1:0` picks a free port.
    pub fn listen(mut self, addr: SocketAddr) -> Self {
        self.listen = addr;
        self
    }

    /// Address of the CDN origin; the default `127.0.0.1:0` picks a free port.
    pub fn cdn_listen(mut self, addr: SocketAddr) -> Self {
        self.cdn_listen = addr;
        self
    }

    /// Scan the tree, bind both origins and serve on the current Tokio runtime. The hub
    /// stops when the [`TestHub`] is dropped or [shut down](TestHub::shutdown).
    pub async fn start(self) -> Result<TestHub, Error> {
        let (stop, stopped) = watch::channel(false);
        let (shared, servers) = self.launch(stopped).await?;
        Ok(TestHub::new(shared, stop, servers, None))
    }

    /// Like [`start`](Self::start), on a runtime of its own in a background thread, for
    /// synchronous tests and benches. Dropping the hub stops it and joins the thread.
    pub fn start_blocking(self) -> Result<TestHub, Error> {
        let (stop, stopped) = watch::channel(false);
        let (tx, rx) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("preflight-testhub".into())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = tx.send(Err(Error::Runtime(e)));
                        return;
                    }
                };
                runtime.block_on(async move {
                    let mut stop_seen = stopped.clone();
                    match self.launch(stopped).await {
                        Ok((shared, servers)) => {
                            let _ = tx.send(Ok(shared));
                            let _ = stop_seen.wait_for(|s| *s).await;
                            drain(servers).await;
                        }
                        Err(e) => {
                            let _ = tx.send(Err(e));
                        }
                    }
                });
            })
            .map_err(Error::Runtime)?;
        let shared = rx
            .recv()
            .map_err(|_| Error::Runtime(std::io::Error::other("test hub thread died")))??;
        Ok(TestHub::new(shared, stop, Vec::new(), Some(thread)))
    }

    async fn launch(self, stopped: watch::Receiver<bool>) -> Result<(Arc<Shared>, Vec<JoinHandle<()>>), Error> {
        for addr in [self.listen, self.cdn_listen] {
            if !addr.ip().is_loopback() {
                return Err(Error::NotLoopback { addr });
            }
        }
        let root = self.root.clone();
        let store = tokio::task::spawn_blocking(move || Store::load(&root))
            .await
            .map_err(|e| Error::Runtime(std::io::Error::other(e)))??;
        let hub_listener = bind(self.listen).await?;
        let cdn_listener = bind(self.cdn_listen).await?;
        let url_of = |l: &TcpListener, addr| {
            l.local_addr()
                .map(|a| format!("http://{a}"))
                .map_err(|source| Error::Bind { addr, source })
        };
        let shared = Arc::new(Shared {
            refs: Mutex::new(disk_refs(&store)),
            store,
            tokens: self.tokens,
            faults: Faults::default(),
            log: Log::default(),
            hub_url: url_of(&hub_listener, self.listen)?,
            cdn_url: url_of(&cdn_listener, self.cdn_listen)?,
            sign_key: random_key(),
        });
        let hub_app = admin::routes().fallback(hub::handle).with_state(Arc::clone(&shared));
        let cdn_app = Router::new().fallback(cdn::handle).with_state(Arc::clone(&shared));
        let servers = [(hub_listener, hub_app), (cdn_listener, cdn_app)]
            .into_iter()
            .map(|(listener, app)| {
                let mut stopped = stopped.clone();
                tokio::spawn(async move {
                    let _ = axum::serve(listener, app)
                        .with_graceful_shutdown(async move {
                            // A dropped sender (the TestHub went away) stops the server too.
                            let _ = stopped.wait_for(|s| *s).await;
                        })
                        .await;
                })
            })
            .collect();
        Ok((shared, servers))
    }
}

async fn bind(addr: SocketAddr) -> Result<TcpListener, Error> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| Error::Bind { addr, source })
}

/// Wait for the servers to finish their responses in flight, at most [`SHUTDOWN_GRACE`].
async fn drain(mut servers: Vec<JoinHandle<()>>) {
    let all = async {
        for server in &mut servers {
            let _ = server.await;
        }
    };
    if tokio::time::timeout(SHUTDOWN_GRACE, all).await.is_err() {
        for server in &servers {
            server.abort();
        }
    }
}

/// The CDN signing key: per hub, so URLs from one hub don't work on another.
fn random_key() -> [u8; 16] {
    let mut key = [0u8; 16];
    for half in key.chunks_mut(8) {
        let mut hasher = RandomState::new().build_hasher();
        hasher.write_u64(std::process::id().into());
        half.copy_from_slice(&hasher.finish().to_le_bytes());
    }
    key
}

/// A running fixture Hub: two loopback origins (the Hub and its CDN) over one fixture tree.
pub struct TestHub {
    shared: Arc<Shared>,
    stop: watch::Sender<bool>,
    servers: Vec<JoinHandle<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl TestHub {
    pub fn builder() -> TestHubBuilder {
        let loopback_any_port = SocketAddr::from(([127, 0, 0, 1], 0));
        TestHubBuilder {
            root: fixtures_hub(),
            tokens: Vec::new(),
            listen: loopback_any_port,
            cdn_listen: loopback_any_port,
        }
    }

    fn new(
        shared: Arc<Shared>,
        stop: watch::Sender<bool>,
        servers: Vec<JoinHandle<()>>,
        thread: Option<std::thread::JoinHandle<()>>,
    ) -> TestHub {
        TestHub {
            shared,
            stop,
            servers,
            thread,
        }
    }

    /// The Hub endpoint (`http://127.0.0.1:PORT`, no trailing slash): use it as `HF_ENDPOINT`.
    pub fn url(&self) -> &str {
        &self.shared.hub_url
    }

    /// The CDN origin large files are redirected to.
    pub fn cdn_url(&self) -> &str {
        &self.shared.cdn_url
    }

    /// Every request either origin has answered since start or the last reset, in the order
    /// their responses started; `body_bytes` keeps counting while a body streams.
    pub fn requests(&self) -> Vec<RequestRecord> {
        self.shared.log.snapshot()
    }

    pub fn clear_requests(&self) {
        self.shared.log.clear();
    }

    /// Arm a fault after those already armed (the first matching one applies).
    pub fn add_fault(&self, fault: Fault) {
        self.shared.faults.extend([fault]);
    }

    /// Replace every armed fault.
    pub fn set_faults(&self, faults: Vec<Fault>) {
        self.shared.faults.replace(faults);
    }

    /// The armed faults, `times` counting the uses left.
    pub fn faults(&self) -> Vec<Fault> {
        self.shared.faults.snapshot()
    }

    pub fn clear_faults(&self) {
        self.shared.faults.replace(Vec::new());
    }

    /// Point a branch or tag at another commit of the repo (e.g. to move `main` between a
    /// client's probe and its reads).
    pub fn set_ref(&self, repo: &str, name: &str, commit: &str) -> Result<(), Error> {
        self.shared.set_ref(repo, name, commit)
    }

    /// Clear the log and the faults, and restore every ref to what `refs.json` says.
    pub fn reset(&self) {
        self.shared.reset();
    }

    /// Stop both origins, letting responses in flight finish (within a short grace).
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        drain(std::mem::take(&mut self.servers)).await;
    }
}

impl Drop for TestHub {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
