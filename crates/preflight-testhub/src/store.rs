//! The fixture tree, scanned once at start into an index of repos, commits and files.
//!
//! **Invariant:** no filesystem path is ever built from request data. A request names a
//! repo, a commit and a path; all three are looked up in this index, so `..` or an encoded
//! `/` can only miss, never escape the root.

use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use serde::Deserialize;
use sha1::Sha1;
use sha2::{Digest, Sha256};

use crate::Error;

/// Files above this size are always LFS: the Hub refuses plain git blobs over 10 MiB.
pub(crate) const LFS_THRESHOLD: u64 = 10 * 1024 * 1024;

/// Extensions the Hub's default `.gitattributes` routes to LFS (the subset that shows up in
/// model repos). A fixture's own `.gitattributes` is not read: every fixture is classified
/// by this list and [`LFS_THRESHOLD`], which is what the Hub does for repos created with it.
const LFS_EXTENSIONS: &[&str] = &[
    "safetensors",
    "gguf",
    "bin",
    "pt",
    "pth",
    "ckpt",
    "h5",
    "msgpack",
    "onnx",
    "ot",
    "pb",
    "tflite",
    "model",
    "npy",
    "npz",
    "pkl",
    "pickle",
    "joblib",
    "zip",
    "tar",
    "gz",
    "tgz",
    "xz",
    "zst",
    "7z",
    "parquet",
    "arrow",
];

/// The fixture's record of which files are stored as prefixes, and their real sizes.
const STUBS_FILE: &str = ".stubs.json";

pub(crate) struct Store {
    repos: BTreeMap<String, Repo>,
}

pub(crate) struct Repo {
    pub id: String,
    pub gated: Gated,
    pub private: bool,
    /// Branches, tags and `refs/pr/N` as `refs.json` has them; the live copy is in `Shared`.
    pub refs: BTreeMap<String, String>,
    pub commits: BTreeMap<String, Arc<Commit>>,
}

/// The Hub's `gated` field: `false`, `"auto"` or `"manual"`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Gated {
    No,
    Auto,
    Manual,
}

impl Gated {
    pub fn is_gated(self) -> bool {
        self != Gated::No
    }

    pub fn to_json(self) -> serde_json::Value {
        match self {
            Gated::No => false.into(),
            Gated::Auto => "auto".into(),
            Gated::Manual => "manual".into(),
        }
    }
}

pub(crate) struct Commit {
    pub sha: String,
    /// Every file at this commit by repo path, sorted (the order listings use).
    pub files: BTreeMap<String, FileEntry>,
    /// Parsed once on first use; `model_info` reports it on every call.
    pub safetensors: OnceLock<Option<crate::safetensors::ParamCounts>>,
}

pub(crate) struct FileEntry {
    pub disk: PathBuf,
    /// Bytes stored on disk (a true prefix of the file).
    pub stored: u64,
    /// The size the file is served at; past `stored` it reads as zeros.
    pub size: u64,
    pub lfs: bool,
    hashes: OnceLock<Hashes>,
}

/// Content addresses as the Hub reports them.
#[derive(Clone, Debug)]
pub(crate) struct Hashes {
    /// Git blob id: of the content for a plain file, of the LFS pointer for an LFS file.
    pub oid: String,
    pub lfs: Option<LfsObject>,
}

#[derive(Clone, Debug)]
pub(crate) struct LfsObject {
    /// The object id. For a stub this is a synthetic but stable address: hashing gigabytes
    /// of zeros per start-up would defeat the point of stubs.
    pub sha256: String,
    /// The pointer text, served by `/raw/` in place of the object, as the Hub does.
    pub pointer: String,
}

impl Store {
    pub fn load(root: &Path) -> Result<Store, Error> {
        let mut repos = BTreeMap::new();
        for org in sorted_dirs(root)? {
            for repo_dir in sorted_dirs(&org)? {
                let repo = load_repo(root, &repo_dir)?;
                repos.insert(repo.id.clone(), repo);
            }
        }
        Ok(Store { repos })
    }

    pub fn repo(&self, id: &str) -> Option<&Repo> {
        self.repos.get(id)
    }

    pub fn repos(&self) -> impl Iterator<Item = &Repo> {
        self.repos.values()
    }
}

impl Commit {
    /// A file by repo path; the fixture's own bookkeeping file is not part of the repo.
    pub fn file(&self, path: &str) -> Option<&FileEntry> {
        self.files.get(path)
    }
}

impl FileEntry {
    /// Hashes, computed on first use (blocking: call from `spawn_blocking` or via
    /// [`FileEntry::hashes_async`]).
    pub fn hashes(&self) -> io::Result<&Hashes> {
        if let Some(h) = self.hashes.get() {
            return Ok(h);
        }
        let computed = self.compute_hashes()?;
        Ok(self.hashes.get_or_init(|| computed))
    }

    fn compute_hashes(&self) -> io::Result<Hashes> {
        if !self.lfs {
            // Plain files are at most LFS_THRESHOLD bytes, so hashing the zero-filled tail is cheap
            // and the blob id is exact.
            let mut hasher = Sha1::new();
            hasher.update(format!("blob {}\0", self.size).as_bytes());
            self.feed_content(&mut hasher)?;
            return Ok(Hashes {
                oid: hex::encode(hasher.finalize()),
                lfs: None,
            });
        }
        let mut hasher = Sha256::new();
        if self.stored < self.size {
            hasher.update(format!("preflight-testhub stub {}\0", self.size).as_bytes());
            hasher.update(fs::read(&self.disk)?);
        } else {
            self.feed_content(&mut hasher)?;
        }
        let sha256 = hex::encode(hasher.finalize());
        let pointer = format!(
            "version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {}\n",
            self.size
        );
        Ok(Hashes {
            oid: git_blob_oid(pointer.as_bytes()),
            lfs: Some(LfsObject { sha256, pointer }),
        })
    }

    fn feed_content(&self, hasher: &mut impl Digest) -> io::Result<()> {
        let mut file = fs::File::open(&self.disk)?;
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = file.read(&mut buf)?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
        }
        let zeros = [0u8; 4096];
        let mut left = self.size - self.stored;
        while left > 0 {
            let n = left.min(zeros.len() as u64) as usize;
            hasher.update(&zeros[..n]);
            left -= n as u64;
        }
        Ok(())
    }
}

/// Hashes without blocking the runtime on first use.
pub(crate) async fn hashes_of(commit: &Arc<Commit>, path: &str) -> io::Result<Hashes> {
    let entry = commit
        .file(path)
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "not in index"))?;
    if let Some(h) = entry.hashes.get() {
        return Ok(h.clone());
    }
    let commit = Arc::clone(commit);
    let path = path.to_owned();
    tokio::task::spawn_blocking(move || match commit.file(&path) {
        Some(entry) => entry.hashes().cloned(),
        None => Err(io::Error::new(io::ErrorKind::NotFound, "not in index")),
    })
    .await
    .map_err(io::Error::other)?
}

pub(crate) fn git_blob_oid(content: &[u8]) -> String {
    let mut hasher = Sha1::new();
    hasher.update(format!("blob {}\0", content.len()).as_bytes());
    hasher.update(content);
    hex::encode(hasher.finalize())
}

pub(crate) fn is_commit_sha(s: &str) -> bool {
    s.len() == 40 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

#[derive(Deserialize)]
struct RepoJson {
    #[serde(default)]
    gated: GatedJson,
    #[serde(default)]
    private: bool,
}

#[derive(Deserialize, Default)]
#[serde(untagged)]
enum GatedJson {
    #[default]
    Off,
    Bool(bool),
    Mode(String),
}

fn load_repo(root: &Path, dir: &Path) -> Result<Repo, Error> {
    let id = dir
        .strip_prefix(root)
        .ok()
        .and_then(|p| p.to_str())
        .map(|p| p.replace(std::path::MAIN_SEPARATOR, "/"))
        .ok_or_else(|| fixture(dir, "repo directory name is not UTF-8"))?;

    let refs: BTreeMap<String, String> = read_json(&dir.join("refs.json"))?;
    let meta: RepoJson = if dir.join("repo.json").exists() {
        read_json(&dir.join("repo.json"))?
    } else {
        RepoJson {
            gated: GatedJson::Off,
            private: false,
        }
    };
    let gated = match meta.gated {
        GatedJson::Off | GatedJson::Bool(false) => Gated::No,
        // A plain `true` is what the big gated repos (Llama, Gemma) report: manual review.
        GatedJson::Bool(true) => Gated::Manual,
        GatedJson::Mode(m) if m == "manual" => Gated::Manual,
        GatedJson::Mode(m) if m == "auto" => Gated::Auto,
        GatedJson::Mode(m) => {
            return Err(fixture(
                &dir.join("repo.json"),
                &format!("gated must be a bool, \"auto\" or \"manual\", not {m:?}"),
            ));
        }
    };

    let mut commits = BTreeMap::new();
    for commit_dir in sorted_dirs(dir)? {
        let Some(sha) = commit_dir.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        if is_commit_sha(sha) {
            commits.insert(sha.to_owned(), Arc::new(load_commit(sha, &commit_dir)?));
        }
    }
    for (name, sha) in &refs {
        if !commits.contains_key(sha) {
            return Err(fixture(
                &dir.join("refs.json"),
                &format!("ref {name:?} points at {sha}, which has no directory"),
            ));
        }
    }
    Ok(Repo {
        id,
        gated,
        private: meta.private,
        refs,
        commits,
    })
}

fn load_commit(sha: &str, dir: &Path) -> Result<Commit, Error> {
    let stubs_path = dir.join(STUBS_FILE);
    let mut stubs: BTreeMap<String, u64> = if stubs_path.exists() {
        read_json(&stubs_path)?
    } else {
        BTreeMap::new()
    };
    let mut files = BTreeMap::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(current) = pending.pop() {
        for entry in fs::read_dir(&current).map_err(|e| io_err(&current, e))? {
            let path = entry.map_err(|e| io_err(&current, e))?.path();
            let meta = fs::metadata(&path).map_err(|e| io_err(&path, e))?;
            if meta.is_dir() {
                pending.push(path);
                continue;
            }
            let rel = path
                .strip_prefix(dir)
                .ok()
                .and_then(|p| p.to_str())
                .map(|p| p.replace(std::path::MAIN_SEPARATOR, "/"))
                .ok_or_else(|| fixture(&path, "file name is not UTF-8"))?;
            if rel == STUBS_FILE {
                continue;
            }
            let stored = meta.len();
            let size = stubs.remove(&rel).unwrap_or(stored);
            if size < stored {
                return Err(fixture(
                    &stubs_path,
                    &format!("{rel}: full size {size} is smaller than the {stored} bytes stored"),
                ));
            }
            let ext = rel.rsplit_once('.').map(|(_, e)| e).unwrap_or("");
            let lfs = LFS_EXTENSIONS.contains(&ext) || size > LFS_THRESHOLD;
            files.insert(
                rel,
                FileEntry {
                    disk: path,
                    stored,
                    size,
                    lfs,
                    hashes: OnceLock::new(),
                },
            );
        }
    }
    if let Some(missing) = stubs.keys().next() {
        return Err(fixture(&stubs_path, &format!("lists {missing:?}, which is not stored")));
    }
    Ok(Commit {
        sha: sha.to_owned(),
        files,
        safetensors: OnceLock::new(),
    })
}

fn sorted_dirs(dir: &Path) -> Result<Vec<PathBuf>, Error> {
    let mut dirs = Vec::new();
    for entry in fs::read_dir(dir).map_err(|e| io_err(dir, e))? {
        let path = entry.map_err(|e| io_err(dir, e))?.path();
        let hidden = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with('.'));
        if !hidden && path.is_dir() {
            dirs.push(path);
        }
    }
    dirs.sort();
    Ok(dirs)
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, Error> {
    let bytes = fs::read(path).map_err(|e| io_err(path, e))?;
    serde_json::from_slice(&bytes).map_err(|e| fixture(path, &e.to_string()))
}

fn fixture(path: &Path, message: &str) -> Error {
    Error::Fixture {
        path: path.to_path_buf(),
        message: message.to_owned(),
    }
}

fn io_err(path: &Path, e: io::Error) -> Error {
    fixture(path, &e.to_string())
}
