//! Staged facts on disk, keyed by what they are: immutable for a repo at a commit (and a
//! file, for a GGUF), so another set of options — or another run — plans from them without
//! staging again. Never keyed by options or the planner's semantics version.
//!
//! An entry is `MAGIC`, the SHA-256 of the rest, then the facts as gzip-compressed JSON. It
//! is written to a temporary file and renamed into place, so a reader sees a whole entry or
//! none; one that fails its checksum or does not parse is a miss (and is removed). Facts read
//! with a token are keyed by that token's hash, so they are never served without it.
//!
//! Beside the entries, `refs/` remembers the commit each revision was last read at (as the HF
//! cache's refs do), so `HF_HUB_OFFLINE=1` can plan an unpinned source from the newest entry.

use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use preflight_formats::facts::{ArtifactFacts, SourceRef, StagingStats};
use sha2::{Digest, Sha256};

use crate::spec::HubSpec;

/// Bumped when staging would read something different for the same commit (a new file, a
/// new field in the facts): older entries are then simply not found.
pub const STAGING_FORMAT_VERSION: u32 = 1;

/// What an entry starts with: a format tag, so another file in the directory is never read
/// as facts.
const MAGIC: &[u8; 8] = b"PFFACTS1";

/// Facts far larger than any real checkpoint's (DeepSeek-V3's are ~2 MB compressed) are
/// refused on read, so a planted file cannot make the reader allocate without bound.
const MAX_ENTRY_BYTES: u64 = 256 << 20;

/// The JSON writer's buffer in front of the compressor: serde writes in small pieces.
const ENCODE_BUFFER: usize = 64 << 10;

/// Where the revisions' last commits are kept, under the cache directory.
const REFS: &str = "refs";

/// What identifies staged facts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FactsKey<'a> {
    pub repo: &'a str,
    pub commit: &'a str,
    /// The GGUF (or lone safetensors file) named in the source, if any.
    pub file: Option<&'a str>,
    /// The token the facts were read with, if any: gated facts stay with their reader.
    pub token: Option<&'a str>,
}

impl<'a> FactsKey<'a> {
    /// The key of a Hub source at its resolved commit, read with `token` (or without).
    pub fn hub(spec: &'a HubSpec, commit: &'a str, token: Option<&'a str>) -> Self {
        FactsKey {
            repo: &spec.repo,
            commit,
            file: spec.file.as_deref(),
            token,
        }
    }

    /// A stable identifier of the key (its digest), for tiers that key by string.
    pub fn id(&self) -> String {
        self.file_name()
    }

    /// The entry's file name: a digest of every part, the format version included.
    fn file_name(&self) -> String {
        let mut h = Sha256::new();
        for part in [
            self.repo,
            self.commit,
            self.file.unwrap_or(""),
            &STAGING_FORMAT_VERSION.to_string(),
        ] {
            h.update(part.as_bytes());
            h.update([0]);
        }
        if let Some(token) = self.token {
            h.update(b"token\0");
            h.update(Sha256::digest(token.as_bytes()));
        }
        format!("{}.facts", hex(&h.finalize()))
    }
}

/// Cached facts as the answer to this request: the commit's facts, described by [`served`].
pub fn as_served(mut facts: ArtifactFacts, spec: &HubSpec, commit: &str) -> ArtifactFacts {
    (facts.source, facts.staging) = served(spec, commit);
    facts
}

/// How cached facts answering this request are described: the source as this request names
/// it (a pinned spec stays pinned), and no staging cost.
pub fn served(spec: &HubSpec, commit: &str) -> (SourceRef, StagingStats) {
    let staging = StagingStats {
        commit: Some(commit.to_owned()),
        ..StagingStats::default()
    };
    (crate::hub::stage::source_ref(spec, commit), staging)
}

/// One cached entry, as `cache ls` shows it.
#[derive(Debug, Clone)]
pub struct Entry {
    pub path: PathBuf,
    pub bytes: u64,
    pub modified: Option<SystemTime>,
    /// `repo@commit[/file]`, read from the entry; `None` when it does not verify.
    pub source: Option<String>,
}

/// A directory of staged facts.
#[derive(Debug, Clone)]
pub struct FactsCache {
    dir: PathBuf,
}

impl FactsCache {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The facts for `key`, or `None` (absent, unreadable, corrupt — the last two removed).
    pub fn get(&self, key: &FactsKey) -> Option<ArtifactFacts> {
        let path = self.dir.join(key.file_name());
        let facts = read_entry(&path);
        if facts.is_none() && path.exists() {
            let _ = fs::remove_file(&path);
        }
        facts
    }

    /// Store facts whole, or not at all: a failure to write is not an error for the caller
    /// (the plan already has its facts), only a miss next time.
    pub fn put(&self, key: &FactsKey, facts: &ArtifactFacts) -> std::io::Result<()> {
        fs::create_dir_all(&self.dir)?;
        let bytes = encode(facts)?;
        let path = self.dir.join(key.file_name());
        let partial = self.dir.join(format!(".{}.{}", key.file_name(), std::process::id()));
        fs::write(&partial, &bytes)?;
        fs::rename(&partial, &path).inspect_err(|_| {
            let _ = fs::remove_file(&partial);
        })
    }

    /// Remember that `spec`'s revision (read with `token`, or without) was last read at
    /// `commit`. Written whole or not at all, like an entry.
    pub fn put_ref(&self, spec: &HubSpec, token: Option<&str>, commit: &str) -> std::io::Result<()> {
        let dir = self.dir.join(REFS);
        fs::create_dir_all(&dir)?;
        let name = ref_name(spec, token);
        let partial = dir.join(format!(".{name}.{}", std::process::id()));
        fs::write(&partial, commit)?;
        fs::rename(&partial, dir.join(name)).inspect_err(|_| {
            let _ = fs::remove_file(&partial);
        })
    }

    /// The commit `spec`'s revision was last read at (with `token`, or without), if any run
    /// remembered one: what an offline plan of an unpinned source reads.
    pub fn latest(&self, spec: &HubSpec, token: Option<&str>) -> Option<String> {
        let text = fs::read_to_string(self.dir.join(REFS).join(ref_name(spec, token))).ok()?;
        crate::spec::is_commit(&text).then_some(text)
    }

    /// Every entry, newest first.
    pub fn entries(&self) -> std::io::Result<Vec<Entry>> {
        let mut out = Vec::new();
        let listing = match fs::read_dir(&self.dir) {
            Ok(listing) => listing,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
            Err(e) => return Err(e),
        };
        for item in listing {
            let item = item?;
            let path = item.path();
            if path.extension().is_none_or(|x| x != "facts") {
                continue;
            }
            let meta = item.metadata()?;
            let source = read_entry(&path).map(|f| {
                let repo = f.source.repo.unwrap_or_else(|| f.source.spec.clone());
                let commit = f.source.commit.unwrap_or_default();
                format!("{repo}@{commit}")
            });
            out.push(Entry {
                path,
                bytes: meta.len(),
                modified: meta.modified().ok(),
                source,
            });
        }
        out.sort_by_key(|e| std::cmp::Reverse(e.modified));
        Ok(out)
    }

    /// Remove every entry (and the remembered refs); returns how many entries.
    pub fn clear(&self) -> std::io::Result<usize> {
        let entries = self.entries()?;
        for e in &entries {
            fs::remove_file(&e.path)?;
        }
        match fs::remove_dir_all(self.dir.join(REFS)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        Ok(entries.len())
    }

    /// Remove the oldest entries until the rest take at most `max_bytes`; returns how many
    /// were removed.
    pub fn prune(&self, max_bytes: u64) -> std::io::Result<usize> {
        let mut kept = 0u64;
        let mut removed = 0;
        for e in self.entries()? {
            if kept.saturating_add(e.bytes) <= max_bytes {
                kept += e.bytes;
            } else {
                fs::remove_file(&e.path)?;
                removed += 1;
            }
        }
        Ok(removed)
    }
}

fn read_entry(path: &Path) -> Option<ArtifactFacts> {
    let file = fs::File::open(path).ok()?;
    let mut bytes = Vec::new();
    file.take(MAX_ENTRY_BYTES + 1).read_to_end(&mut bytes).ok()?;
    decode(&bytes)
}

/// Facts as an entry: `MAGIC`, the SHA-256 of the rest, gzip-compressed JSON. The one
/// encoding every tier stores (the service's disk and Redis tiers, the CLI's directory).
pub fn encode(facts: &ArtifactFacts) -> std::io::Result<Vec<u8>> {
    // Streamed into the compressor: a large checkpoint's JSON (DeepSeek-V3's is ~25 MB) is
    // never held whole beside the facts it describes.
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let mut writer = std::io::BufWriter::with_capacity(ENCODE_BUFFER, &mut gz);
    serde_json::to_writer(&mut writer, facts).map_err(std::io::Error::other)?;
    writer.flush()?;
    drop(writer);
    let payload = gz.finish()?;
    let mut bytes = Vec::with_capacity(MAGIC.len() + 32 + payload.len());
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(&Sha256::digest(&payload));
    bytes.extend_from_slice(&payload);
    Ok(bytes)
}

/// The facts in an entry; `None` when it is too large, not an entry, fails its checksum or
/// does not parse.
pub fn decode(bytes: &[u8]) -> Option<ArtifactFacts> {
    if bytes.len() as u64 > MAX_ENTRY_BYTES || bytes.len() < MAGIC.len() + 32 {
        return None;
    }
    let (magic, rest) = bytes.split_at(MAGIC.len());
    let (digest, payload) = rest.split_at(32);
    if magic != MAGIC || Sha256::digest(payload).as_slice() != digest {
        return None;
    }
    let mut json = Vec::new();
    flate2::read::GzDecoder::new(payload)
        .take(MAX_ENTRY_BYTES * 8)
        .read_to_end(&mut json)
        .ok()?;
    serde_json::from_slice(&json).ok()
}

/// A ref's file name: a digest of the repo, revision, file and token (hashed), so a gated
/// repo's refs, like its entries, belong to the token that read them.
fn ref_name(spec: &HubSpec, token: Option<&str>) -> String {
    let mut h = Sha256::new();
    for part in [
        spec.repo.as_str(),
        spec.revision_or_main(),
        spec.file.as_deref().unwrap_or(""),
    ] {
        h.update(part.as_bytes());
        h.update([0]);
    }
    if let Some(token) = token {
        h.update(b"token\0");
        h.update(Sha256::digest(token.as_bytes()));
    }
    format!("{}.ref", hex(&h.finalize()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
