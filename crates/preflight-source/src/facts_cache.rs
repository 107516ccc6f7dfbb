//! Staged facts on disk, keyed by what they are: immutable for a repo at a commit (and a
//! file, for a GGUF), so another set of options — or another run — plans from them without
//! staging again. Never keyed by options or the planner's semantics version.
//!
//! An entry is `MAGIC`, the JSON's inflated length, the SHA-256 of its key, that length and
//! the payload, then the facts as gzip-compressed JSON. It is written to a temporary file and
//! renamed into place, so a reader sees a whole entry or none; one that fails its checksum,
//! belongs to another key or does not parse is a miss (and is removed). Facts read with a
//! token are keyed by that token's hash, so they are never served without it.
//!
//! Beside the entries, `refs/` remembers the commit each revision was last read at (as the HF
//! cache's refs do), so `HF_HUB_OFFLINE=1` can plan an unpinned source from the newest entry.
//!
//! **Invariant:** the cache deletes only what it wrote: entries that carry its magic, refs of
//! its own naming, in a directory holding its marker file — `PREFLIGHT_CACHE` pointed at a
//! git repository's `.git` is refused, not emptied. It reads only regular files, never more
//! than an entry's bound (a FIFO or a planted gigabyte cannot hang or swell it).

use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use preflight_formats::facts::{ArtifactFacts, SourceRef, StagingStats};
use sha2::{Digest, Sha256};

use crate::spec::HubSpec;

/// Bumped when staging would read something different for the same commit (a new file, a
/// new field in the facts): older entries are then simply not found. 2: the model info's
/// licence, gating and top-level listing (`ArtifactFacts::meta`).
pub const STAGING_FORMAT_VERSION: u32 = 2;

/// What an entry starts with: a format tag, so another file in the directory is never read
/// (or deleted) as facts. Version 2 binds an entry to its key and declares its length.
const MAGIC: &[u8; 8] = b"PFFACTS2";

/// Bytes before the payload: magic, inflated length, digest.
const PREAMBLE: usize = 8 + 8 + 32;

/// Facts far larger than any real checkpoint's (DeepSeek-V3's are ~2 MB compressed) are
/// refused on read, so a planted file cannot make the reader allocate without bound.
const MAX_ENTRY_BYTES: u64 = 256 << 20;

/// The JSON an entry may inflate to: twice the most header bytes staging reads for one
/// source (`DEFAULT_MAX_HEADER_BYTES`); facts re-encode what headers hold, at about their
/// size (DeepSeek-V3: 11.5 MB of headers, ~25 MB of JSON). A gzip bomb stops here.
const MAX_INFLATED_BYTES: u64 = 2 * crate::hub::config::DEFAULT_MAX_HEADER_BYTES;

/// A file at the cache's root saying the directory is a preflight cache: what `clear` and
/// `prune` require before they delete anything.
const MARKER: &str = "CACHEDIR.TAG";

/// The marker's content: the Cache Directory Tagging Specification's signature (backup tools
/// skip the directory too), then what wrote it.
const MARKER_TEXT: &str = "Signature: 8a477f597d28d172789f06886806bc55\n# preflight's staged-facts cache (safe to delete: `preflight cache rm`)\n";

/// A ref holds a 40-hex commit; anything longer is not one of ours and is not read further.
const MAX_REF_BYTES: u64 = 64;

/// The JSON writer's buffer in front of the compressor: serde writes in small pieces.
const ENCODE_BUFFER: usize = 64 << 10;

/// What a token-read entry's name carries before `.facts`.
const TOKEN_MARKER: &str = ".token";

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

    /// The entry's file name: a digest of every part, the format version included, marked
    /// `.token` when a token read it (so `cache ls` can tell two readings of one commit apart
    /// without knowing the token).
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
        let marker = if self.token.is_some() { TOKEN_MARKER } else { "" };
        format!("{}{marker}.facts", hex::encode(h.finalize()))
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
    /// Read with a token (a gated or private repo, or a token in the environment): served
    /// only to that token.
    pub read_with_token: bool,
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
        if facts.is_none() && regular_file(&path) {
            let _ = fs::remove_file(&path);
        }
        facts
    }

    /// Store facts whole, or not at all: a failure to write is not an error for the caller
    /// (the plan already has its facts), only a miss next time.
    pub fn put(&self, key: &FactsKey, facts: &ArtifactFacts) -> std::io::Result<()> {
        self.create()?;
        let bytes = encode(&key.id(), facts)?;
        let path = self.dir.join(key.file_name());
        let partial = self.dir.join(format!(".{}.{}", key.file_name(), std::process::id()));
        write_whole(&partial, &path, &bytes)
    }

    /// The directory with its marker, written once.
    fn create(&self) -> std::io::Result<()> {
        fs::create_dir_all(&self.dir)?;
        let marker = self.dir.join(MARKER);
        if !marker.exists() {
            let partial = self.dir.join(format!(".{MARKER}.{}", std::process::id()));
            write_whole(&partial, &marker, MARKER_TEXT.as_bytes())?;
        }
        Ok(())
    }

    /// Deleting needs the marker: a directory without it was never a preflight cache.
    fn ours(&self) -> std::io::Result<()> {
        match regular_file(&self.dir.join(MARKER)) {
            true => Ok(()),
            false => Err(std::io::Error::other(format!(
                "{} is not a preflight cache (no {MARKER} written by preflight): refusing to delete anything in it",
                self.dir.display()
            ))),
        }
    }

    /// Remember that `spec`'s revision (read with `token`, or without) was last read at
    /// `commit`. Written whole or not at all, like an entry.
    pub fn put_ref(&self, spec: &HubSpec, token: Option<&str>, commit: &str) -> std::io::Result<()> {
        self.create()?;
        let dir = self.dir.join(REFS);
        fs::create_dir_all(&dir)?;
        let name = ref_name(spec, token);
        let partial = dir.join(format!(".{name}.{}", std::process::id()));
        write_whole(&partial, &dir.join(name), commit.as_bytes())
    }

    /// The commit `spec`'s revision was last read at (with `token`, or without), if any run
    /// remembered one: what an offline plan of an unpinned source reads.
    pub fn latest(&self, spec: &HubSpec, token: Option<&str>) -> Option<String> {
        let bytes = read_regular(&self.dir.join(REFS).join(ref_name(spec, token)), MAX_REF_BYTES)?;
        let text = String::from_utf8(bytes).ok()?;
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
            // Only regular files of our naming and magic: a FIFO, a directory or another
            // tool's file is not an entry (and is never opened for more than its magic).
            if path.extension().is_none_or(|x| x != "facts") || !item.file_type()?.is_file() || !has_magic(&path) {
                continue;
            }
            let meta = item.metadata()?;
            let source = read_entry(&path).map(|f| {
                let repo = f.source.repo.unwrap_or_else(|| f.source.spec.clone());
                let commit = f.source.commit.unwrap_or_default();
                format!("{repo}@{commit}")
            });
            let read_with_token = path
                .file_stem()
                .and_then(|s| s.to_str())
                .is_some_and(|s| s.ends_with(TOKEN_MARKER));
            out.push(Entry {
                read_with_token,
                path,
                bytes: meta.len(),
                modified: meta.modified().ok(),
                source,
            });
        }
        out.sort_by_key(|e| std::cmp::Reverse(e.modified));
        Ok(out)
    }

    /// Remove every entry, the remembered refs and any temporary file a failed write left;
    /// returns how many entries. Refused where the directory is not a preflight cache.
    pub fn clear(&self) -> std::io::Result<usize> {
        if !self.dir.exists() {
            return Ok(0);
        }
        self.ours()?;
        let entries = self.entries()?;
        for e in &entries {
            fs::remove_file(&e.path)?;
        }
        self.remove_leftovers(&self.dir, "facts")?;
        let refs = self.dir.join(REFS);
        if refs.is_dir() {
            for item in fs::read_dir(&refs)? {
                let item = item?;
                let name = item.file_name();
                let name = name.to_string_lossy();
                if item.file_type()?.is_file() && is_ref_name(&name) {
                    fs::remove_file(item.path())?;
                }
            }
            self.remove_leftovers(&refs, "ref")?;
            // Only when empty: anything else there is not ours.
            let _ = fs::remove_dir(&refs);
        }
        Ok(entries.len())
    }

    /// Temporary files a write that died left behind (`.<digest>.<ext>.<pid>`): an entry or
    /// ref is renamed into place whole, so one still named so belongs to no live write once
    /// the cache is being cleared.
    fn remove_leftovers(&self, dir: &Path, ext: &str) -> std::io::Result<()> {
        for item in fs::read_dir(dir)? {
            let item = item?;
            let name = item.file_name();
            if item.file_type()?.is_file() && is_partial_name(&name.to_string_lossy(), ext) {
                fs::remove_file(item.path())?;
            }
        }
        Ok(())
    }

    /// Remove the oldest entries until the rest take at most `max_bytes`; returns how many
    /// were removed. Refused where the directory is not a preflight cache.
    pub fn prune(&self, max_bytes: u64) -> std::io::Result<usize> {
        if !self.dir.exists() {
            return Ok(0);
        }
        self.ours()?;
        let entries = self.entries()?;
        let mut total: u64 = entries.iter().map(|e| e.bytes).sum();
        let mut removed = 0;
        // Newest first: the oldest go first, until the rest fit.
        for e in entries.iter().rev() {
            if total <= max_bytes {
                break;
            }
            fs::remove_file(&e.path)?;
            total = total.saturating_sub(e.bytes);
            removed += 1;
        }
        Ok(removed)
    }
}

fn read_entry(path: &Path) -> Option<ArtifactFacts> {
    let key = path.file_name()?.to_str()?;
    decode(key, &read_regular(path, MAX_ENTRY_BYTES)?)
}

/// Write `bytes` to `partial`, then rename it to `path`: whole or not at all, and no
/// temporary file left behind on any error.
fn write_whole(partial: &Path, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    fs::write(partial, bytes)
        .and_then(|()| fs::rename(partial, path))
        .inspect_err(|_| {
            let _ = fs::remove_file(partial);
        })
}

/// Whether `path` is a regular file (not following a symlink to something else).
fn regular_file(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok_and(|m| m.is_file())
}

/// A regular file opened to read, non-blocking (a FIFO swapped in after the check cannot
/// hang the read); `None` for anything else.
fn open_regular(path: &Path) -> Option<fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    if !regular_file(path) {
        return None;
    }
    let file = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc_nonblock())
        .open(path)
        .ok()?;
    file.metadata().ok()?.is_file().then_some(file)
}

/// At most `max` bytes of a regular file; `None` for anything else or anything longer.
fn read_regular(path: &Path, max: u64) -> Option<Vec<u8>> {
    let mut bytes = Vec::new();
    open_regular(path)?.take(max + 1).read_to_end(&mut bytes).ok()?;
    (bytes.len() as u64 <= max).then_some(bytes)
}

/// `O_NONBLOCK` (the same value on every Linux architecture but alpha, sparc and parisc,
/// none of which preflight builds for); the rest of the crate needs no libc binding.
const fn libc_nonblock() -> i32 {
    0o4000
}

/// Whether `path` starts with an entry's magic.
fn has_magic(path: &Path) -> bool {
    let mut head = Vec::with_capacity(MAGIC.len());
    open_regular(path)
        .and_then(|file| file.take(MAGIC.len() as u64).read_to_end(&mut head).ok())
        .is_some_and(|_| head == MAGIC)
}

/// `<64 hex>.ref`: a name [`ref_name`] gives.
fn is_ref_name(name: &str) -> bool {
    name.strip_suffix(".ref")
        .is_some_and(|digest| digest.len() == 64 && digest.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// `.<64 hex>.<ext>.<pid>`: a temporary file [`FactsCache::put`] or `put_ref` writes.
fn is_partial_name(name: &str, ext: &str) -> bool {
    let Some(rest) = name.strip_prefix('.') else {
        return false;
    };
    let mut parts = rest.splitn(3, '.');
    let (Some(digest), Some(kind), Some(pid)) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    digest.len() == 64
        && digest.bytes().all(|b| b.is_ascii_hexdigit())
        && kind == ext
        && !pid.is_empty()
        && pid.bytes().all(|b| b.is_ascii_digit())
}

/// The digest an entry carries: of its key, its inflated length and its payload, so an
/// entry copied under another key's name is not that key's facts.
fn digest(key: &str, inflated: u64, payload: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(key.as_bytes());
    h.update([0]);
    h.update(inflated.to_le_bytes());
    h.update(payload);
    h.finalize().into()
}

/// Counts what passes through, so the encoder can declare the JSON's inflated length.
struct Counted<W> {
    inner: W,
    written: u64,
}

impl<W: Write> Write for Counted<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Facts as the entry for `key` (a [`FactsKey::id`]): `MAGIC`, the JSON's inflated length,
/// the [`digest`], gzip-compressed JSON. The one encoding every tier stores (the service's
/// disk and Redis tiers, the CLI's directory).
pub fn encode(key: &str, facts: &ArtifactFacts) -> std::io::Result<Vec<u8>> {
    // Streamed into the compressor: a large checkpoint's JSON (DeepSeek-V3's is ~25 MB) is
    // never held whole beside the facts it describes.
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let mut counted = Counted { inner: gz, written: 0 };
    let mut writer = std::io::BufWriter::with_capacity(ENCODE_BUFFER, &mut counted);
    serde_json::to_writer(&mut writer, facts).map_err(std::io::Error::other)?;
    writer.flush()?;
    drop(writer);
    let inflated = counted.written;
    let payload = counted.inner.finish()?;
    let mut bytes = Vec::with_capacity(PREAMBLE + payload.len());
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(&inflated.to_le_bytes());
    bytes.extend_from_slice(&digest(key, inflated, &payload));
    bytes.extend_from_slice(&payload);
    Ok(bytes)
}

/// The facts in `key`'s entry; `None` when it is too large (compressed, or as it declares
/// itself inflated), not an entry, another key's, fails its checksum, inflates past what it
/// declared, or does not parse. Parsed as it inflates: no copy of the JSON is held.
pub fn decode(key: &str, bytes: &[u8]) -> Option<ArtifactFacts> {
    if bytes.len() as u64 > MAX_ENTRY_BYTES || bytes.len() < PREAMBLE {
        return None;
    }
    let (magic, rest) = bytes.split_at(MAGIC.len());
    let (inflated, rest) = rest.split_at(8);
    let (declared_digest, payload) = rest.split_at(32);
    let inflated = u64::from_le_bytes(inflated.try_into().ok()?);
    if magic != MAGIC || inflated > MAX_INFLATED_BYTES || digest(key, inflated, payload) != declared_digest {
        return None;
    }
    let json = std::io::BufReader::new(flate2::read::GzDecoder::new(payload).take(inflated));
    serde_json::from_reader(json).ok()
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
    format!("{}.ref", hex::encode(h.finalize()))
}

#[cfg(test)]
mod tests {
    //! The second attack run's cache findings, one test each (all failed on format 1).

    use super::*;
    use preflight_formats::facts::Content;

    fn facts(name: &str) -> ArtifactFacts {
        ArtifactFacts {
            source: SourceRef {
                spec: format!("hf://org/{name}"),
                repo: Some(format!("org/{name}")),
                commit: Some("0".repeat(40)),
                ..SourceRef::default()
            },
            config: None,
            quant_config: None,
            content: Content::Gguf {
                parts: vec![],
                missing_parts: vec![],
            },
            meta: Default::default(),
            staging: StagingStats::default(),
        }
    }

    fn key(repo: &str) -> FactsKey<'_> {
        FactsKey {
            repo,
            commit: "0000000000000000000000000000000000000000",
            file: None,
            token: None,
        }
    }

    /// An entry for `key` whose payload is `json` compressed, declaring `inflated` bytes.
    fn forged(key: &str, json: &[u8], inflated: u64) -> Vec<u8> {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(json).expect("gzip");
        let payload = gz.finish().expect("gzip");
        let mut bytes = MAGIC.to_vec();
        bytes.extend_from_slice(&inflated.to_le_bytes());
        bytes.extend_from_slice(&digest(key, inflated, &payload));
        bytes.extend_from_slice(&payload);
        bytes
    }

    #[test]
    fn an_entry_round_trips_under_its_key() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cache = FactsCache::new(dir.path());
        cache.put(&key("org/a"), &facts("a")).expect("put");
        assert_eq!(cache.get(&key("org/a")), Some(facts("a")));
    }

    #[test]
    fn a_gzip_bomb_inflates_no_further_than_it_declares() {
        // 64 MiB of one byte compresses to ~64 KB: declared small, it is cut off at the
        // declaration (and fails to parse); declared past the bound, it is never inflated.
        let bomb = vec![b' '; 64 << 20];
        let id = key("org/a").id();
        assert_eq!(decode(&id, &forged(&id, &bomb, 1024)), None);
        assert_eq!(decode(&id, &forged(&id, &bomb, MAX_INFLATED_BYTES + 1)), None);
        let json = serde_json::to_vec(&facts("a")).expect("json");
        assert_eq!(decode(&id, &forged(&id, &json, json.len() as u64)), Some(facts("a")));
    }

    #[test]
    fn an_entry_copied_under_another_key_is_not_served() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cache = FactsCache::new(dir.path());
        cache.put(&key("org/a"), &facts("a")).expect("put");
        std::fs::copy(
            dir.path().join(key("org/a").file_name()),
            dir.path().join(key("org/b").file_name()),
        )
        .expect("copy");
        assert_eq!(cache.get(&key("org/b")), None, "org/a's facts under org/b's name");
        assert_eq!(cache.get(&key("org/a")), Some(facts("a")));
    }

    #[test]
    fn a_failed_write_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cache = FactsCache::new(dir.path());
        // The entry's name is taken by a directory: the rename fails after the write.
        std::fs::create_dir_all(dir.path().join(key("org/a").file_name()).join("x")).expect("dir");
        assert!(cache.put(&key("org/a"), &facts("a")).is_err());
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .expect("listing")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .filter(|name| name.starts_with('.'))
            .collect();
        assert!(left.is_empty(), "left behind: {left:?}");
    }

    #[test]
    fn clear_removes_what_a_dead_write_left() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cache = FactsCache::new(dir.path());
        cache.put(&key("org/a"), &facts("a")).expect("put");
        let partial = dir.path().join(format!(".{}.4242", key("org/b").file_name()));
        std::fs::write(&partial, b"half an entry").expect("partial");
        assert_eq!(cache.clear().expect("clear"), 1);
        assert!(!partial.exists());
    }

    #[test]
    fn a_fifo_in_the_cache_never_hangs_a_reader() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cache = FactsCache::new(dir.path());
        cache.put(&key("org/a"), &facts("a")).expect("put");
        // A FIFO under an entry's name and under a ref's: opening either to read blocks
        // until a writer comes, which none will.
        let fifo = dir.path().join(key("org/b").file_name());
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .expect("mkfifo");
        assert!(made.success());
        assert_eq!(cache.get(&key("org/b")), None);
        assert!(fifo.exists(), "not ours to remove: it is not an entry");
        let entries = cache.entries().expect("entries");
        assert_eq!(entries.len(), 1, "the FIFO is not an entry");
        assert_eq!(cache.clear().expect("clear"), 1);
    }

    #[test]
    fn a_huge_ref_is_not_read_whole() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cache = FactsCache::new(dir.path());
        let spec = crate::spec::HubSpec {
            repo: "org/a".into(),
            revision: None,
            file: None,
        };
        cache.put_ref(&spec, None, &"a".repeat(40)).expect("ref");
        assert_eq!(cache.latest(&spec, None), Some("a".repeat(40)));
        // A gigabyte under the ref's name (sparse: no disk spent) is not a commit.
        let path = dir.path().join(REFS).join(ref_name(&spec, None));
        std::fs::File::create(&path)
            .expect("ref")
            .set_len(1 << 30)
            .expect("grow");
        assert_eq!(cache.latest(&spec, None), None);
    }

    #[test]
    fn a_directory_without_the_marker_is_never_emptied() {
        // PREFLIGHT_CACHE pointed at a git repository's .git: refs/ and *.facts are not ours.
        let dir = tempfile::tempdir().expect("tempdir");
        let git = dir.path();
        std::fs::create_dir_all(git.join("refs/heads")).expect("refs");
        std::fs::write(git.join("refs/heads/main"), "a".repeat(40)).expect("head");
        std::fs::write(git.join("notes.facts"), b"someone else's").expect("facts");
        let cache = FactsCache::new(git);
        assert!(cache.clear().is_err());
        assert!(cache.prune(0).is_err());
        assert!(git.join("refs/heads/main").exists() && git.join("notes.facts").exists());
        // Even once the cache has written there, what it did not write stays.
        cache.put(&key("org/a"), &facts("a")).expect("put");
        assert_eq!(cache.clear().expect("clear"), 1);
        assert!(git.join("refs/heads/main").exists() && git.join("notes.facts").exists());
    }

    #[test]
    fn prune_removes_the_oldest_until_the_rest_fit() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cache = FactsCache::new(dir.path());
        let repos = ["org/a", "org/b", "org/c"];
        for (age, repo) in repos.iter().enumerate() {
            cache.put(&key(repo), &facts(repo)).expect("put");
            let path = dir.path().join(key(repo).file_name());
            let when = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000 + age as u64);
            std::fs::File::options()
                .write(true)
                .open(&path)
                .expect("open")
                .set_modified(when)
                .expect("mtime");
        }
        let sizes: Vec<u64> = cache.entries().expect("entries").iter().map(|e| e.bytes).collect();
        // Room for the two newest: only the oldest goes.
        assert_eq!(cache.prune(sizes[0] + sizes[1]).expect("prune"), 1);
        assert_eq!(cache.get(&key("org/a")), None);
        assert!(cache.get(&key("org/b")).is_some() && cache.get(&key("org/c")).is_some());
    }
}
