//! Staging from the local filesystem: a checkpoint directory (config.json + safetensors, an
//! HF cache snapshot folder), a lone `.safetensors` or a `.gguf` file (split GGUFs: name any
//! part). Each read is counted as a request, as over HTTP, so verdicts compare.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use preflight_formats::facts::{
    ArtifactFacts, Content, GgufFile, ListedFile, SafetensorsFile, SourceMeta, SourceRef, StagingStats,
};
use preflight_formats::{config, gguf, index, safetensors};

use crate::error::SourceError;

/// A GGUF header larger than this is refused; real ones (full tokenizer arrays) are ~10 MB.
pub const MAX_GGUF_HEADER_BYTES: u64 = 256 << 20;
/// The first read of a GGUF: enough for most headers without a tokenizer list.
const GGUF_FIRST_READ: u64 = 1 << 20;

const CONFIG: &str = "config.json";
/// NVIDIA ModelOpt's quantization record beside config.json.
const QUANT_CONFIG: &str = "hf_quant_config.json";
const INDEX: &str = "model.safetensors.index.json";

/// Where local reads may land. The CLI reads wherever its user points it; the service's
/// `local` profile only under its roots — **every file judged by where it resolves**, not
/// only the directory named, so a symlink inside a root cannot lead out of it.
#[derive(Clone, Copy)]
enum Roots<'a> {
    Anywhere,
    Under(&'a [PathBuf]),
}

/// Stage a local path (the CLI: anywhere the user can read).
pub fn stage(path: &Path) -> Result<ArtifactFacts, SourceError> {
    stage_in(path, Roots::Anywhere).map_err(|e| did_you_mean(path, e))
}

/// Stage a local path reading only files that resolve under one of `roots` (canonical
/// directories). A file that resolves elsewhere is refused before it is opened.
pub fn stage_confined(path: &Path, roots: &[PathBuf]) -> Result<ArtifactFacts, SourceError> {
    stage_in(path, Roots::Under(roots))
}

/// A missing path that reads as `ORG/NAME` was most likely meant as a Hub repo.
fn did_you_mean(path: &Path, e: SourceError) -> SourceError {
    match (&e, path.to_str()) {
        (SourceError::Io { source, .. }, Some(text)) if source.kind() == std::io::ErrorKind::NotFound => {
            match crate::spec::hub_suggestion(text) {
                Some(suggestion) => SourceError::DidYouMean {
                    path: path.to_owned(),
                    suggestion,
                },
                None => e,
            }
        }
        _ => e,
    }
}

/// Open a file for reading, after checking where it resolves when reads are confined.
fn open(path: &Path, roots: Roots<'_>) -> Result<File, SourceError> {
    match roots {
        Roots::Anywhere => File::open(path).map_err(SourceError::io(path)),
        Roots::Under(roots) => {
            let real = path.canonicalize().map_err(SourceError::io(path))?;
            if !roots.iter().any(|root| real.starts_with(root)) {
                return Err(SourceError::OutsideRoot { path: path.to_owned() });
            }
            File::open(&real).map_err(SourceError::io(path))
        }
    }
}

fn stage_in(path: &Path, roots: Roots<'_>) -> Result<ArtifactFacts, SourceError> {
    let meta = std::fs::metadata(path).map_err(SourceError::io(path))?;
    let mut stats = StagingStats::default();
    let (config, quant_config, content) = if meta.is_dir() {
        stage_dir(path, &mut stats, roots)?
    } else {
        match extension(path) {
            Some("safetensors") => {
                let file = read_safetensors(path, &mut stats, roots)?;
                // A lone file keeps the config beside it (an HF snapshot's `model.safetensors`
                // is planned as its model, not as an unknown architecture).
                let dir = path
                    .parent()
                    .filter(|d| !d.as_os_str().is_empty())
                    .unwrap_or(Path::new("."));
                (
                    optional_config(dir, CONFIG, &mut stats, roots)?,
                    optional_config(dir, QUANT_CONFIG, &mut stats, roots)?,
                    Content::Safetensors {
                        files: vec![file],
                        index: None,
                        missing_files: vec![],
                    },
                )
            }
            Some("gguf") => (None, None, stage_gguf(path, &mut stats, roots)?),
            _ => {
                return Err(not_a_checkpoint(
                    path,
                    "expected a directory, a .safetensors or a .gguf file",
                ));
            }
        }
    };
    // The folder the checkpoint's files sit in: its listing names the files beside the weights.
    let folder = match meta.is_dir() {
        true => path,
        false => path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new(".")),
    };
    let (repo, commit) = hf_cache_snapshot(path).unzip();
    Ok(ArtifactFacts {
        source: SourceRef {
            spec: path.display().to_string(),
            repo,
            commit,
            pinned: false,
            ..SourceRef::default()
        },
        config,
        quant_config,
        content,
        meta: SourceMeta {
            files: Some(listing(folder, roots)),
            ..SourceMeta::default()
        },
        staging: stats,
    })
}

/// `…/models--ORG--NAME/snapshots/COMMIT[/…]`: a folder (or a file inside one) of the HF
/// cache, which names the repo and the commit it holds — so the verdict can call it
/// `ORG/NAME` at that commit rather than by the folder's hash. huggingface_hub writes a repo
/// id's `/` as `--`, and refuses `--` inside a repo id, so the first `--` splits it back.
pub fn hf_cache_snapshot(path: &Path) -> Option<(String, String)> {
    let path = std::path::absolute(path).ok()?;
    let parts: Vec<&str> = path
        .components()
        .filter_map(|c| match c {
            std::path::Component::Normal(part) => part.to_str(),
            _ => None,
        })
        .collect();
    parts.windows(3).rev().find_map(|w| {
        let [folder, snapshots, commit] = w else { return None };
        let repo = folder.strip_prefix("models--")?;
        let valid = |s: &str| !s.is_empty() && !s.contains("--");
        let repo = match repo.split_once("--") {
            Some((org, name)) if valid(org) && valid(name) => format!("{org}/{name}"),
            None if valid(repo) => repo.to_owned(),
            _ => return None,
        };
        (*snapshots == "snapshots" && crate::spec::is_commit(commit)).then(|| (repo, (*commit).to_owned()))
    })
}

/// A folder's files (not its subfolders), sorted, with their sizes; reads confined to roots
/// list only what resolves under one (a symlink out of a root is not even sized).
fn listing(dir: &Path, roots: Roots<'_>) -> Vec<ListedFile> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<ListedFile> = entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let path = entry.path();
            let inside = match roots {
                Roots::Anywhere => true,
                Roots::Under(roots) => path
                    .canonicalize()
                    .is_ok_and(|real| roots.iter().any(|root| real.starts_with(root))),
            };
            // Follows symlinks, as a snapshot's point into the cache's blobs.
            let meta = std::fs::metadata(&path).ok().filter(|m| inside && m.is_file())?;
            Some(ListedFile {
                name: entry.file_name().to_str()?.to_owned(),
                size: Some(meta.len()),
            })
        })
        .collect();
    files.sort_by(|a, b| a.name.cmp(&b.name));
    files
}

fn not_a_checkpoint(path: &Path, reason: &str) -> SourceError {
    SourceError::NotACheckpoint {
        path: path.to_owned(),
        reason: reason.to_owned(),
    }
}

fn extension(path: &Path) -> Option<&str> {
    path.extension().and_then(|e| e.to_str())
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned())
}

/// A directory's config, quantization record and weights.
type Staged = (Option<config::Config>, Option<config::Config>, Content);

/// A small JSON file beside the weights, when present.
fn optional_config(
    dir: &Path,
    name: &str,
    stats: &mut StagingStats,
    roots: Roots<'_>,
) -> Result<Option<config::Config>, SourceError> {
    let path = dir.join(name);
    if !path.is_file() {
        return Ok(None);
    }
    let bytes = read_small(&path, config::MAX_CONFIG_BYTES, stats, roots)?;
    config::parse(&bytes).map(Some).map_err(|source| SourceError::Config {
        file: name.into(),
        source,
    })
}

fn stage_dir(dir: &Path, stats: &mut StagingStats, roots: Roots<'_>) -> Result<Staged, SourceError> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(SourceError::io(dir))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    let config = optional_config(dir, CONFIG, stats, roots)?;
    let quant_config = optional_config(dir, QUANT_CONFIG, stats, roots)?;
    let index_path = dir.join(INDEX);
    if index_path.is_file() {
        let bytes = read_small(&index_path, index::MAX_INDEX_BYTES, stats, roots)?;
        let index = index::parse(&bytes).map_err(|source| SourceError::Index {
            file: INDEX.into(),
            source,
        })?;
        let mut present = Vec::new();
        let mut missing_files = Vec::new();
        for shard in index.shards() {
            let path = dir.join(shard);
            if path.is_file() {
                present.push(path);
            } else {
                missing_files.push(shard.to_owned());
            }
        }
        let files = read_all_safetensors(&present, stats, roots)?;
        return Ok((
            config,
            quant_config,
            Content::Safetensors {
                files,
                index: Some(index),
                missing_files,
            },
        ));
    }
    let shards: Vec<PathBuf> = entries
        .iter()
        .filter(|p| extension(p) == Some("safetensors"))
        .cloned()
        .collect();
    if !shards.is_empty() {
        let files = read_all_safetensors(&shards, stats, roots)?;
        return Ok((
            config,
            quant_config,
            Content::Safetensors {
                files,
                index: None,
                missing_files: vec![],
            },
        ));
    }
    let ggufs: Vec<&PathBuf> = entries.iter().filter(|p| extension(p) == Some("gguf")).collect();
    let first_parts: Vec<&&PathBuf> = ggufs
        .iter()
        .filter(|p| gguf::split_part(&file_name(p)).is_none_or(|(i, _)| i == 1))
        .collect();
    match first_parts.as_slice() {
        [one] => Ok((config, quant_config, stage_gguf(one, stats, roots)?)),
        [] => Err(not_a_checkpoint(
            dir,
            "no model.safetensors.index.json, .safetensors or .gguf files",
        )),
        _ => Err(not_a_checkpoint(dir, "several GGUF files: name the one to plan")),
    }
}

fn stage_gguf(path: &Path, stats: &mut StagingStats, roots: Roots<'_>) -> Result<Content, SourceError> {
    let name = file_name(path);
    let names = gguf::split_siblings(&name).unwrap_or_else(|| vec![name.clone()]);
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut parts = Vec::new();
    let mut missing_parts = Vec::new();
    for part in names {
        let part_path = dir.join(&part);
        if part_path.is_file() {
            parts.push(read_gguf(&part_path, stats, roots)?);
        } else {
            missing_parts.push(part);
        }
    }
    Ok(Content::Gguf { parts, missing_parts })
}

fn read_small(path: &Path, max: usize, stats: &mut StagingStats, roots: Roots<'_>) -> Result<Vec<u8>, SourceError> {
    let file = open(path, roots)?;
    let mut bytes = Vec::new();
    // One byte past the cap tells "too large" from "exactly at the cap".
    file.take(max as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(SourceError::io(path))?;
    stats.files += 1;
    stats.requests += 1;
    stats.bytes_fetched += bytes.len() as u64;
    Ok(bytes)
}

/// Read `len` bytes at `offset` (fewer at end of file), counted as one request.
fn read_at(
    file: &mut File,
    path: &Path,
    offset: u64,
    len: u64,
    stats: &mut StagingStats,
) -> Result<Vec<u8>, SourceError> {
    file.seek(SeekFrom::Start(offset)).map_err(SourceError::io(path))?;
    let mut buf = Vec::new();
    file.take(len).read_to_end(&mut buf).map_err(SourceError::io(path))?;
    stats.requests += 1;
    stats.bytes_fetched += buf.len() as u64;
    Ok(buf)
}

/// Threads that read and parse shard headers side by side: parsing is CPU-bound (DeepSeek-V3's
/// 161 headers are ~45% of a local plan), so it spreads over the cores; more than this buys
/// nothing on a page-cached disk and only costs threads.
const MAX_HEADER_READERS: usize = 8;

/// Read every shard's header, in parallel, returned in the order of `paths`. On failure the
/// error is the first failing path's (in that order), whatever thread met it first, so the
/// answer does not depend on scheduling.
fn read_all_safetensors(
    paths: &[PathBuf],
    stats: &mut StagingStats,
    roots: Roots<'_>,
) -> Result<Vec<SafetensorsFile>, SourceError> {
    let readers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, MAX_HEADER_READERS)
        .min(paths.len());
    if readers <= 1 {
        return paths.iter().map(|p| read_safetensors(p, stats, roots)).collect();
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut read = Vec::with_capacity(paths.len());
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..readers)
            .map(|_| {
                scope.spawn(|| {
                    let mut own = StagingStats::default();
                    let mut read = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(path) = paths.get(i) else { break };
                        read.push((i, read_safetensors(path, &mut own, roots)));
                    }
                    (own, read)
                })
            })
            .collect();
        for worker in workers {
            let (own, mut theirs) = worker.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            stats.files += own.files;
            stats.requests += own.requests;
            stats.bytes_fetched += own.bytes_fetched;
            stats.header_bytes += own.header_bytes;
            read.append(&mut theirs);
        }
    });
    read.sort_unstable_by_key(|(i, _)| *i);
    read.into_iter().map(|(_, file)| file).collect()
}

fn read_safetensors(path: &Path, stats: &mut StagingStats, roots: Roots<'_>) -> Result<SafetensorsFile, SourceError> {
    let name = file_name(path);
    let mut file = open(path, roots)?;
    let size = file.metadata().map_err(SourceError::io(path))?.len();
    let first8 = read_at(&mut file, path, 0, 8, stats)?;
    let bad = |source| SourceError::Safetensors {
        file: name.clone(),
        source,
    };
    let need = safetensors::required_prefix(&first8).map_err(bad)?;
    let mut prefix = first8;
    prefix.extend(read_at(&mut file, path, 8, need.saturating_sub(8), stats)?);
    let header = safetensors::parse(&prefix, Some(size)).map_err(bad)?;
    stats.files += 1;
    stats.header_bytes += prefix.len() as u64;
    Ok(SafetensorsFile {
        name,
        size: Some(size),
        header,
    })
}

/// Read a GGUF header in growing chunks until it parses, within [`MAX_GGUF_HEADER_BYTES`].
fn read_gguf(path: &Path, stats: &mut StagingStats, roots: Roots<'_>) -> Result<GgufFile, SourceError> {
    let name = file_name(path);
    let mut file = open(path, roots)?;
    let size = file.metadata().map_err(SourceError::io(path))?.len();
    let mut prefix = read_at(&mut file, path, 0, GGUF_FIRST_READ, stats)?;
    loop {
        match gguf::parse(&prefix, Some(size)) {
            Ok(header) => {
                stats.files += 1;
                stats.header_bytes += header.header_bytes;
                return Ok(GgufFile {
                    name,
                    size: Some(size),
                    header,
                });
            }
            Err(gguf::GgufError::Truncated { need, .. })
                if need <= size && need <= MAX_GGUF_HEADER_BYTES && (prefix.len() as u64) < size =>
            {
                let have = prefix.len() as u64;
                let target = need.max(have * 2).min(size).min(MAX_GGUF_HEADER_BYTES);
                prefix.extend(read_at(&mut file, path, have, target - have, stats)?);
            }
            Err(gguf::GgufError::Truncated { need, .. }) if need > size || prefix.len() as u64 >= size => {
                return Err(SourceError::Gguf {
                    file: name,
                    source: gguf::GgufError::Truncated { need, have: size },
                });
            }
            Err(gguf::GgufError::Truncated { .. }) => {
                return Err(SourceError::HeaderTooLarge {
                    file: name,
                    max: MAX_GGUF_HEADER_BYTES,
                });
            }
            Err(source) => return Err(SourceError::Gguf { file: name, source }),
        }
    }
}
