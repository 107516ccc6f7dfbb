//! What a person reads, snapshotted for every bundled checkpoint (as ruff snapshots every
//! diagnostic): `preflight plan` on each fixture, default options. A change to any line —
//! a figure, a finding, its wording — shows up as a reviewed snapshot diff
//! (`cargo insta review`, or `INSTA_UPDATE=always`), never silently.

use crate::support::{all_repos, fixtures, materialize, preflight};

#[test]
fn every_bundled_checkpoint_reads_as_snapshotted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().to_string_lossy().into_owned();
    let mut settings = insta::Settings::clone_current();
    settings.set_prepend_module_to_snapshot(false);
    settings.set_snapshot_path("snapshots");
    let _guard = settings.bind_to_scope();
    let local = ["tiny-llama", "tiny-llama-f32.gguf", "tiny-qwen3-moe-sharded"]
        .map(|name| (format!("local/{name}"), fixtures().join("local").join(name)));
    let hub = all_repos().into_iter().map(|repo| {
        let path = materialize(&repo, dir.path());
        // A GGUF repo is planned as its GGUF file, as `hf://org/name/file.gguf` would be.
        let gguf = std::fs::read_dir(&path)
            .expect("dir")
            .filter_map(Result::ok)
            .map(|e| e.path())
            .find(|p| p.extension().is_some_and(|x| x == "gguf"));
        (repo, gguf.unwrap_or(path))
    });
    for (name, path) in local.into_iter().chain(hub) {
        let out = preflight(&["plan", path.to_str().expect("utf8")]);
        let text = String::from_utf8_lossy(&out.stdout)
            .replace(&root, "<fixture>")
            .replace(&fixtures().to_string_lossy().into_owned(), "<fixtures>");
        let exit = out.status.code().map_or("signal".to_owned(), |c| c.to_string());
        insta::assert_snapshot!(name.replace('/', "__"), format!("exit {exit}\n{text}"));
    }
}
