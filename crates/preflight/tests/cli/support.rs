//! Test support: the bundled fixtures, materialised as real files of their full size.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}

pub fn expected() -> BTreeMap<String, Value> {
    let mut all = BTreeMap::new();
    for file in ["expected.json", "packed/expected-release-day.json"] {
        let text = fs::read_to_string(fixtures().join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        let entries: BTreeMap<String, Value> =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{file} parses: {e}"));
        all.extend(entries);
    }
    all
}

/// The packed fixture repos (`org/name` → unpacked tree), unpacked once per test process.
pub fn packed() -> &'static BTreeMap<String, PathBuf> {
    static PACKED: std::sync::OnceLock<BTreeMap<String, PathBuf>> = std::sync::OnceLock::new();
    PACKED.get_or_init(|| {
        preflight_testhub::packed::unpack_all(&fixtures(), Path::new(env!("CARGO_TARGET_TMPDIR")))
            .expect("unpack fixtures/packed")
    })
}

/// A fixture repo's tree: the plain `hub/` tree, else the unpacked `packed/` one, else a
/// speculative draft head's (`drafts/`, not a Hub fixture: planned only beside its target).
pub fn repo_dir(repo: &str) -> PathBuf {
    let draft = fixtures().join("drafts").join(repo);
    if draft.exists() {
        return draft;
    }
    let plain = fixtures().join("hub").join(repo);
    match packed().get(repo) {
        Some(dir) if !plain.exists() => dir.clone(),
        _ => plain,
    }
}

/// Every fixture repo, plain and packed, as `org/name`.
pub fn all_repos() -> Vec<String> {
    let mut repos = hub_repos();
    repos.extend(packed().keys().cloned());
    repos.sort();
    repos
}

/// Every Hub fixture repo as `org/name`.
pub fn hub_repos() -> Vec<String> {
    let mut repos = Vec::new();
    for org in fs::read_dir(fixtures().join("hub")).expect("hub dir") {
        let org = org.expect("entry").path();
        for repo in fs::read_dir(&org).expect("org dir") {
            let repo = repo.expect("entry").path();
            let name = |p: &Path| p.file_name().expect("name").to_string_lossy().into_owned();
            repos.push(format!("{}/{}", name(&org), name(&repo)));
        }
    }
    repos.sort();
    repos
}

/// Copy a Hub fixture repo's main commit into `dest`, stubs as sparse files of their full
/// size, so local staging sees what a download would have left on disk.
pub fn materialize(repo: &str, dest: &Path) -> PathBuf {
    let repo_dir = repo_dir(repo);
    let refs: Value = serde_json::from_slice(&fs::read(repo_dir.join("refs.json")).expect("refs")).expect("refs json");
    let commit_dir = repo_dir.join(refs["main"].as_str().expect("main ref"));
    let stubs: BTreeMap<String, u64> = fs::read(commit_dir.join(".stubs.json"))
        .map(|b| serde_json::from_slice(&b).expect("stubs json"))
        .unwrap_or_default();
    let out = dest.join(repo);
    fs::create_dir_all(&out).expect("mkdir");
    for entry in fs::read_dir(&commit_dir).expect("commit dir") {
        let path = entry.expect("entry").path();
        let name = path.file_name().expect("name").to_string_lossy().into_owned();
        if name == ".stubs.json" {
            continue;
        }
        let target = out.join(&name);
        fs::copy(&path, &target).expect("copy");
        if let Some(size) = stubs.get(&name) {
            let file = fs::OpenOptions::new().write(true).open(&target).expect("open");
            file.set_len(*size).expect("sparse extend");
        }
    }
    out
}

/// A fixture Hub granting `token` access to its gated repos.
pub fn hub_with_token(token: &str) -> preflight_testhub::TestHub {
    preflight_testhub::TestHub::builder()
        .token(token)
        .start_blocking()
        .expect("fixture hub")
}

/// `preflight` against `hub` with `home` as its HF home (and its staged-facts cache beside
/// it) and no ambient token; `env` adds to that.
pub fn run_against(hub: &preflight_testhub::TestHub, home: &Path, env: &[(&str, &str)], args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_preflight"));
    cmd.args(args)
        .env("HF_ENDPOINT", hub.url())
        .env("HF_HOME", home)
        .env("PREFLIGHT_CACHE", home.join("preflight-cache"))
        .env_remove("HF_TOKEN")
        .env_remove("HF_HUB_OFFLINE");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run preflight")
}

/// Run the built `preflight` binary, with a staged-facts cache of its own (never the user's).
pub fn preflight(args: &[&str]) -> Output {
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let run = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let cache = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("facts-cache-{}-{run}", std::process::id()));
    Command::new(env!("CARGO_BIN_EXE_preflight"))
        .args(args)
        .env("PREFLIGHT_CACHE", cache)
        .output()
        .expect("run preflight")
}

/// A `preflight serve` child process, killed on drop.
pub struct Serve(pub std::process::Child);

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Start `preflight serve` on a free port against `hub`; returns the process and its base URL.
pub fn serve(hub: &preflight_testhub::TestHub, data: &Path, extra: &[&str]) -> (Serve, String) {
    serve_logging(hub, data, extra, "warn", std::process::Stdio::null())
}

/// [`serve`] logging at `level` into `stderr`.
pub fn serve_logging(
    hub: &preflight_testhub::TestHub,
    data: &Path,
    extra: &[&str],
    level: &str,
    stderr: std::process::Stdio,
) -> (Serve, String) {
    use std::io::{BufRead, BufReader};
    let mut child = Command::new(env!("CARGO_BIN_EXE_preflight"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--hub-endpoint",
            hub.url(),
            "--hub-redirect-hosts",
            hub.cdn_url().trim_start_matches("http://"),
            "--data-dir",
        ])
        .arg(data)
        .args(extra)
        .env("PREFLIGHT_LOG", level)
        .stdout(std::process::Stdio::piped())
        .stderr(stderr)
        .spawn()
        .expect("start preflight serve");
    let stdout = child.stdout.take().expect("stdout");
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).expect("listening line");
    let url = line.trim().rsplit(' ').next().expect("url").to_owned();
    assert!(url.starts_with("http://"), "unexpected first line {line:?}");
    (Serve(child), url)
}
