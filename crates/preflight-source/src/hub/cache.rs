//! The local HF cache (`$HF_HOME/hub/models--org--name/{refs,snapshots}`), as
//! huggingface_hub lays it out: a snapshot per commit, refs naming commits.

use std::path::{Path, PathBuf};

pub fn repo_dir(hf_home: &Path, repo: &str) -> PathBuf {
    hf_home.join("hub").join(format!("models--{}", repo.replace('/', "--")))
}

/// The commit a ref points at in the cache (`refs/main`, `refs/refs/pr/1`, …).
pub fn cached_ref(hf_home: &Path, repo: &str, revision: &str) -> Option<String> {
    let path = repo_dir(hf_home, repo).join("refs").join(revision);
    let commit = std::fs::read_to_string(path).ok()?.trim().to_owned();
    crate::spec::is_commit(&commit).then_some(commit)
}

/// The snapshot folder of a commit, if the cache has one.
pub fn snapshot(hf_home: &Path, repo: &str, commit: &str) -> Option<PathBuf> {
    let dir = repo_dir(hf_home, repo).join("snapshots").join(commit);
    dir.is_dir().then_some(dir)
}
