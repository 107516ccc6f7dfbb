//! Staging a Hub source at a resolved commit — never at the branch name, which may move
//! between probe and read. The fewest requests and bytes: the shard list from one model-info
//! call, config and index whole, then **one ranged GET per shard**, sized from the tensor names
//! the index assigns it (calibrated on the first shard read), with a second read only when a
//! guess falls short. GGUF headers are read in growing chunks. `tokenizer.json` is never read.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures_util::future::try_join_all;
use preflight_formats::facts::{ArtifactFacts, Content, GgufFile, SafetensorsFile, SourceRef, StagingStats};
use preflight_formats::{config, gguf, index, safetensors};

use super::cache;
use super::client::{Counters, HubClient, RepoInfo, RequestLimit};
use super::config::HubConfig;
use crate::error::{HubError, SourceError};
use crate::spec::HubSpec;

const CONFIG: &str = "config.json";
/// NVIDIA ModelOpt's quantization record; read only when the listing shows it.
const QUANT_CONFIG: &str = "hf_quant_config.json";
const INDEX: &str = "model.safetensors.index.json";
const SINGLE: &str = "model.safetensors";
/// What staging a whole repo yields: config, quantization record, content, the small files
/// read, and the model info.
type Staged = (Option<config::Config>, Option<config::Config>, Content, usize, RepoInfo);

/// First read of a safetensors file whose tensor names are unknown (no index): most headers
/// of single-file models fit (Qwen3-0.6B's is 35 KB).
const UNKNOWN_HEADER_GUESS: u64 = 128 << 10;
/// Bytes per index entry beyond its name before any header was seen: a generous
/// `"name":{"dtype":"F8_E4M3","shape":[18432,7168],"data_offsets":[…,…]},`.
const FIRST_ENTRY_OVERHEAD: u64 = 96;
/// Above this many shards, one is read first to calibrate the guesses for the rest: one
/// round trip buys near-exact reads of the others (below it, a few loose guesses cost less).
const CALIBRATE_ABOVE_SHARDS: usize = 8;
/// Slack added to a calibrated guess, per entry and in total.
const ENTRY_SLACK: u64 = 4;
const GUESS_SLACK: u64 = 256;
/// First read of a GGUF; doubled until the header parses.
const GGUF_FIRST_READ: u64 = 1 << 20;
/// Parts a split GGUF may have. llama.cpp's `gguf-split` cuts at 128 tensors a part by
/// default, so even the largest published models come in a few dozen parts; a name claiming
/// `-of-99999` is a request flood, refused before any part is read.
pub const MAX_SPLIT_PARTS: u32 = 256;

/// Resolve the commit to read: a pinned revision as is; offline, the cache's ref; otherwise
/// one probe (`X-Repo-Commit` on a one-byte read), counted in `counters`.
pub async fn resolve_commit(client: &HubClient, spec: &HubSpec, counters: &Counters) -> Result<String, SourceError> {
    let revision = spec.revision_or_main();
    if spec.is_pinned() {
        return Ok(revision.to_owned());
    }
    let config = client.config();
    if config.offline {
        return cache::cached_ref(&config.hf_home, &spec.repo, revision).ok_or_else(|| {
            HubError::Offline {
                what: format!("the ref {revision:?} of {}", spec.repo),
            }
            .into()
        });
    }
    let path = spec.file.as_deref().unwrap_or(CONFIG);
    match client.probe(&spec.repo, revision, path, counters).await {
        Ok(commit) => Ok(commit),
        // A repo without config.json (GGUF-only): ask the revision API instead.
        Err(HubError::EntryNotFound { .. }) if spec.file.is_none() => {
            Ok(client.repo_info(&spec.repo, revision, counters).await?.sha)
        }
        // A file the repo does not have: say which files it does have.
        Err(HubError::EntryNotFound { .. }) => {
            let info = client.repo_info(&spec.repo, revision, counters).await?;
            Err(file_not_in_repo(spec, path, info.siblings))
        }
        Err(e) => Err(e.into()),
    }
}

/// `file` is not in `listing`: the error names the GGUF files that are.
fn file_not_in_repo(spec: &HubSpec, file: &str, listing: Vec<String>) -> SourceError {
    SourceError::FileNotInRepo {
        spec: spec.to_string(),
        file: file.to_owned(),
        revision: spec.revision_or_main().to_owned(),
        available: listing.into_iter().filter(|f| f.ends_with(".gguf")).collect(),
    }
}

/// For a caller with no cache to consult (the CLI): learn the commit *and* the model info
/// (file list, card licence, gating) in one model-info request, so staging needs none of its
/// own. The info is `None` when the source is pinned or offline (then this is
/// [`resolve_commit`]).
pub async fn resolve_with_listing(
    client: &HubClient,
    spec: &HubSpec,
    counters: &Counters,
) -> Result<(String, Option<RepoInfo>), SourceError> {
    if spec.is_pinned() || client.config().offline {
        return Ok((resolve_commit(client, spec, counters).await?, None));
    }
    let info = client.repo_info(&spec.repo, spec.revision_or_main(), counters).await?;
    if !crate::spec::is_commit(&info.sha) {
        let detail = format!("model info names {:?} as the commit", info.sha);
        return Err(HubError::Protocol {
            url: spec.to_string(),
            detail,
        }
        .into());
    }
    Ok((info.sha.clone(), Some(info)))
}

/// Stage `spec` at `commit`: from the HF cache when the snapshot holds everything, else over
/// HTTP. `info` is the commit's model info when the caller already has it (else staging asks
/// for it: its listing, licence and gating are part of the facts). Nothing is returned unless
/// every read succeeded.
///
/// A snapshot planned from the HF cache costs no request: its licence and gating are then
/// what `info` says, or unknown.
pub async fn stage(
    client: &HubClient,
    spec: &HubSpec,
    commit: &str,
    info: Option<RepoInfo>,
    budget: &PlanBudget,
) -> Result<ArtifactFacts, SourceError> {
    let hub = client.config();
    let source = source_ref(spec, commit);
    if let Some(snapshot) = cache::snapshot(&hub.hf_home, &spec.repo, commit) {
        let path = spec
            .file
            .as_ref()
            .map_or_else(|| snapshot.clone(), |f| snapshot.join(f));
        match crate::local::stage(&path) {
            Ok(mut facts) if complete(&facts.content) => {
                facts.staging.commit = Some(commit.to_owned());
                facts.source = source;
                if let Some(info) = info {
                    facts.meta = info.meta;
                }
                return Ok(facts);
            }
            Ok(_) | Err(_) if !hub.offline => {}
            Ok(_) => {
                return Err(HubError::Offline {
                    what: format!("every file of {spec} at {commit}"),
                }
                .into());
            }
            Err(e) => return Err(e),
        }
    } else if hub.offline {
        return Err(HubError::Offline {
            what: format!("{spec} at {commit}"),
        }
        .into());
    }
    let counters = Counters::limited(budget.requests.clone());
    let reader = Reader {
        client,
        repo: &spec.repo,
        commit,
        counters: &counters,
        budget,
    };
    let (config, quant_config, content, files, info) = match &spec.file {
        Some(file) if file.ends_with(".gguf") => {
            let (content, info) = match info {
                Some(info) => (reader.named_gguf(spec, file, Some(info.siblings.clone())).await?, info),
                // A split GGUF's parts are checked against the listing before any is read.
                None if gguf::split_part(file).is_some() => {
                    let info = reader.info().await?;
                    (reader.named_gguf(spec, file, Some(info.siblings.clone())).await?, info)
                }
                // One file: its header and the model info side by side, no round trip added.
                None => {
                    let (content, info) = tokio::join!(reader.named_gguf(spec, file, None), reader.info());
                    (content?, info?)
                }
            };
            (None, None, content, 0, info)
        }
        Some(file) if file.ends_with(".safetensors") => {
            let (file, info) = match info {
                Some(info) => (reader.safetensors(file, UNKNOWN_HEADER_GUESS).await?, info),
                None => {
                    let (file, info) = tokio::join!(reader.safetensors(file, UNKNOWN_HEADER_GUESS), reader.info());
                    (file?, info?)
                }
            };
            let content = Content::Safetensors {
                files: vec![file],
                index: None,
                missing_files: vec![],
            };
            (None, None, content, 0, info)
        }
        Some(file) => {
            return Err(SourceError::NotACheckpoint {
                path: file.into(),
                reason: "a file source must be a .gguf or .safetensors file".into(),
            });
        }
        None => reader.repo(info).await?,
    };
    let (parsed, header_bytes) = match &content {
        Content::Safetensors { files, .. } => (files.len(), files.iter().map(|f| f.header.header_bytes()).sum()),
        Content::Gguf { parts, .. } => (parts.len(), parts.iter().map(|p| p.header.header_bytes).sum()),
    };
    let staging = StagingStats {
        commit: Some(commit.to_owned()),
        files: (files + parsed) as u64,
        requests: counters.requests.load(Ordering::Relaxed),
        redirects: counters.redirects.load(Ordering::Relaxed),
        bytes_fetched: counters.bytes.load(Ordering::Relaxed),
        header_bytes,
    };
    Ok(ArtifactFacts {
        source,
        config,
        quant_config,
        content,
        meta: info.meta,
        staging,
    })
}

/// How a verdict names a Hub source read at `commit`: the request's own spec, revision and
/// pinning, whoever staged the facts first (a cached verdict is relabelled with this).
pub fn source_ref(spec: &HubSpec, commit: &str) -> SourceRef {
    SourceRef {
        spec: spec.to_string(),
        repo: Some(spec.repo.clone()),
        revision: spec.revision.clone(),
        commit: Some(commit.to_owned()),
        pinned: spec.is_pinned(),
    }
}

/// Everything the content names is present (a cache snapshot may hold only some shards).
fn complete(content: &Content) -> bool {
    match content {
        Content::Safetensors { missing_files, .. } => missing_files.is_empty(),
        Content::Gguf { missing_parts, .. } => missing_parts.is_empty(),
    }
}

/// What one plan may cost, shared by all its artifacts: header bytes (memory and bandwidth)
/// and requests to the Hub (in all, and at once). A hostile or enormous checkpoint costs at
/// most this much, and never the whole request pool other callers share.
pub struct PlanBudget {
    max: u64,
    used: AtomicU64,
    requests: Arc<RequestLimit>,
}

impl PlanBudget {
    /// The bounds `config` sets for one plan.
    pub fn new(config: &HubConfig) -> Self {
        Self {
            max: config.max_header_bytes,
            used: AtomicU64::new(0),
            requests: Arc::new(RequestLimit::new(
                config.max_requests_per_plan,
                config.max_in_flight_per_plan.min(config.max_concurrent),
            )),
        }
    }

    /// Requests drawn from this budget so far.
    pub fn requests(&self) -> u64 {
        self.requests.used()
    }

    /// Header bytes drawn from this budget so far.
    pub fn header_bytes(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    fn take(&self, n: u64, file: &str) -> Result<(), SourceError> {
        let used = self.used.fetch_add(n, Ordering::Relaxed) + n;
        if used > self.max {
            return Err(SourceError::HeaderTooLarge {
                file: file.to_owned(),
                max: self.max,
            });
        }
        Ok(())
    }
}

struct Reader<'a> {
    client: &'a HubClient,
    repo: &'a str,
    commit: &'a str,
    counters: &'a Counters,
    budget: &'a PlanBudget,
}

impl Reader<'_> {
    /// A small file that may be absent: `None` on the Hub's EntryNotFound.
    async fn optional_small(&self, path: &str, max: usize, expected: bool) -> Result<Option<Vec<u8>>, SourceError> {
        if !expected {
            return Ok(None);
        }
        match self
            .client
            .get_small(self.repo, self.commit, path, max, self.counters)
            .await
        {
            Ok(bytes) => Ok(Some(bytes)),
            Err(HubError::EntryNotFound { .. }) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// A whole repo: config, index, every shard header (or the GGUF). Without the model
    /// info, it, config and index are requested together: one round trip, not three.
    /// Returns the small files read alongside the content, and the model info.
    async fn repo(&self, info: Option<RepoInfo>) -> Result<Staged, SourceError> {
        let (info, config_bytes, index_bytes) = match info {
            Some(info) => {
                let has = |p: &str| info.siblings.iter().any(|s| s == p);
                let (config, index) = tokio::join!(
                    self.optional_small(CONFIG, config::MAX_CONFIG_BYTES, has(CONFIG)),
                    self.optional_small(INDEX, index::MAX_INDEX_BYTES, has(INDEX)),
                );
                (info, config?, index?)
            }
            None => {
                let (info, config, index) = tokio::join!(
                    self.info(),
                    self.optional_small(CONFIG, config::MAX_CONFIG_BYTES, true),
                    self.optional_small(INDEX, index::MAX_INDEX_BYTES, true),
                );
                (info?, config?, index?)
            }
        };
        let siblings = &info.siblings;
        let quant_bytes = match siblings.iter().any(|s| s == QUANT_CONFIG) {
            true => {
                self.optional_small(QUANT_CONFIG, config::MAX_CONFIG_BYTES, true)
                    .await?
            }
            false => None,
        };
        let small_files = [&config_bytes, &index_bytes, &quant_bytes]
            .iter()
            .filter(|b| b.is_some())
            .count();
        let parse = |bytes: Option<Vec<u8>>, file: &str| -> Result<Option<config::Config>, SourceError> {
            bytes
                .map(|bytes| {
                    config::parse(&bytes).map_err(|source| SourceError::Config {
                        file: file.into(),
                        source,
                    })
                })
                .transpose()
        };
        let config = parse(config_bytes, CONFIG)?;
        let quant_config = parse(quant_bytes, QUANT_CONFIG)?;
        if let Some(bytes) = index_bytes {
            let index = index::parse(&bytes).map_err(|source| SourceError::Index {
                file: INDEX.into(),
                source,
            })?;
            let (files, missing_files) = self.shards(&index, |s| siblings.iter().any(|x| x == s)).await?;
            let content = Content::Safetensors {
                files,
                index: Some(index),
                missing_files,
            };
            return Ok((config, quant_config, content, small_files, info));
        }
        let root_files: Vec<&String> = siblings.iter().filter(|s| !s.contains('/')).collect();
        let shards: Vec<&&String> = root_files.iter().filter(|s| s.ends_with(".safetensors")).collect();
        if !shards.is_empty() {
            let files = try_join_all(shards.iter().map(|s| self.safetensors(s, UNKNOWN_HEADER_GUESS))).await?;
            let content = Content::Safetensors {
                files,
                index: None,
                missing_files: vec![],
            };
            return Ok((config, quant_config, content, small_files, info));
        }
        let first_parts: Vec<&String> = root_files
            .into_iter()
            .filter(|s| s.ends_with(".gguf") && gguf::split_part(s).is_none_or(|(i, _)| i == 1))
            .collect();
        match first_parts.as_slice() {
            [one] => {
                let content = self.gguf(one, siblings).await?;
                Ok((config, quant_config, content, small_files, info))
            }
            [] => Err(SourceError::NotACheckpoint {
                path: self.repo.into(),
                reason: format!("no {INDEX}, {SINGLE}, .safetensors or .gguf files at {}", self.commit),
            }),
            many => Err(SourceError::NotACheckpoint {
                path: self.repo.into(),
                reason: format!(
                    "several GGUF files ({}): name one, as hf://{}/FILE.gguf",
                    many.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", "),
                    self.repo
                ),
            }),
        }
    }

    /// Every shard the index names, each in one ranged GET sized from its tensor names. With
    /// many shards, the first is read alone to calibrate the bytes an entry takes beyond its
    /// name, so the rest are fetched tight; the rest go concurrently (the client bounds how
    /// many are in flight).
    async fn shards(
        &self,
        index: &index::Index,
        present: impl Fn(&str) -> bool,
    ) -> Result<(Vec<SafetensorsFile>, Vec<String>), SourceError> {
        let mut names_by_shard: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
        for (tensor, shard) in &index.weight_map {
            let entry = names_by_shard.entry(shard.as_str()).or_default();
            entry.0 += 1;
            entry.1 += tensor.len() as u64;
        }
        let (shards, missing): (Vec<&str>, Vec<&str>) = index.shards().into_iter().partition(|s| present(s));
        let missing = missing.into_iter().map(str::to_owned).collect();
        let guess = |overhead: u64, shard: &str| {
            let (count, names) = names_by_shard.get(shard).copied().unwrap_or_default();
            8 + names + count * overhead + GUESS_SLACK
        };
        let (mut files, rest, overhead) = match shards.split_first() {
            Some((first, rest)) if shards.len() > CALIBRATE_ABOVE_SHARDS => {
                let first_file = self.safetensors(first, guess(FIRST_ENTRY_OVERHEAD, first)).await?;
                let overhead = match names_by_shard.get(first).copied().unwrap_or_default() {
                    (0, _) => FIRST_ENTRY_OVERHEAD,
                    (count, names) => first_file.header.json_len.saturating_sub(names).div_ceil(count) + ENTRY_SLACK,
                };
                (vec![first_file], rest, overhead)
            }
            _ => (vec![], shards.as_slice(), FIRST_ENTRY_OVERHEAD),
        };
        files.extend(try_join_all(rest.iter().map(|s| self.safetensors(s, guess(overhead, s)))).await?);
        Ok((files, missing))
    }

    /// One safetensors header: a ranged GET of `guess` bytes, and the remainder if short.
    async fn safetensors(&self, name: &str, guess: u64) -> Result<SafetensorsFile, SourceError> {
        let bad = |source| SourceError::Safetensors {
            file: name.to_owned(),
            source,
        };
        let first = self
            .client
            .get_range(self.repo, self.commit, name, 0, guess.max(8), self.counters)
            .await?;
        let total = first.total;
        let mut prefix = first.bytes;
        let need = safetensors::required_prefix(&prefix).map_err(bad)?;
        if need > total {
            return Err(bad(safetensors::HeaderError::LongerThanFile {
                len: need - 8,
                file_size: total,
            }));
        }
        if need > prefix.len() as u64 {
            self.budget.take(need, name)?;
            let rest = self
                .client
                .get_range(self.repo, self.commit, name, prefix.len() as u64, need, self.counters)
                .await?;
            prefix.extend(rest.bytes);
        } else {
            self.budget.take(need, name)?;
        }
        prefix.truncate(need as usize);
        let header = safetensors::parse(&prefix, Some(total)).map_err(bad)?;
        Ok(SafetensorsFile {
            name: name.to_owned(),
            size: Some(total),
            header,
        })
    }

    /// The GGUF a spec names. A split GGUF is checked against the repo's listing first (one
    /// request, unless the caller has it), so only parts that exist are read; a name that is
    /// not in the repo is answered with the GGUF files that are.
    async fn named_gguf(
        &self,
        spec: &HubSpec,
        file: &str,
        listing: Option<Vec<String>>,
    ) -> Result<Content, SourceError> {
        let listing = match listing {
            Some(listing) => Some(listing),
            None if gguf::split_part(file).is_some() => Some(self.listing().await?),
            None => None,
        };
        let result = match &listing {
            Some(listing) if !listing.iter().any(|f| f == file) => Err(SourceError::Hub(HubError::EntryNotFound {
                repo: self.repo.to_owned(),
                revision: self.commit.to_owned(),
                path: file.to_owned(),
            })),
            Some(listing) => self.gguf(file, listing).await,
            None => self.gguf(file, &[]).await,
        };
        match result {
            Err(SourceError::Hub(HubError::EntryNotFound { path, .. })) if path == file => {
                let listing = match listing {
                    Some(listing) => listing,
                    None => self.listing().await?,
                };
                Err(file_not_in_repo(spec, file, listing))
            }
            other => other,
        }
    }

    async fn listing(&self) -> Result<Vec<String>, SourceError> {
        Ok(self.info().await?.siblings)
    }

    /// The commit's model info: its listing, card licence and gating.
    async fn info(&self) -> Result<RepoInfo, SourceError> {
        Ok(self.client.repo_info(self.repo, self.commit, self.counters).await?)
    }

    /// A GGUF (and the other parts of a split GGUF), each header read in doubling chunks.
    /// `listing` is the repo's file list (empty when unknown and the GGUF is not split): a
    /// part it does not name is missing without a request, and a split count past
    /// [`MAX_SPLIT_PARTS`] is refused before anything is read.
    async fn gguf(&self, first: &str, listing: &[String]) -> Result<Content, SourceError> {
        if let Some((_, count)) = gguf::split_part(first)
            && count > MAX_SPLIT_PARTS
        {
            return Err(SourceError::NotACheckpoint {
                path: first.into(),
                reason: format!("a GGUF split into {count} parts; at most {MAX_SPLIT_PARTS} are planned"),
            });
        }
        let names = gguf::split_siblings(first).unwrap_or_else(|| vec![first.to_owned()]);
        let listed = |name: &str| name == first || listing.iter().any(|f| f == name);
        let reads = names.iter().map(|name| async move {
            if !listed(name) {
                return Ok(None);
            }
            match self.gguf_part(name).await {
                Ok(part) => Ok(Some(part)),
                Err(SourceError::Hub(HubError::EntryNotFound { .. })) if name != first => Ok(None),
                Err(e) => Err(e),
            }
        });
        let results = try_join_all(reads).await?;
        let mut parts = Vec::new();
        let mut missing_parts = Vec::new();
        for (name, part) in names.iter().zip(results) {
            match part {
                Some(p) => parts.push(p),
                None => missing_parts.push(name.clone()),
            }
        }
        Ok(Content::Gguf { parts, missing_parts })
    }

    async fn gguf_part(&self, name: &str) -> Result<GgufFile, SourceError> {
        let first = self
            .client
            .get_range(self.repo, self.commit, name, 0, GGUF_FIRST_READ, self.counters)
            .await?;
        let total = first.total;
        let mut prefix = first.bytes;
        loop {
            let have = prefix.len() as u64;
            match gguf::parse(&prefix, Some(total)) {
                Ok(header) => {
                    self.budget.take(header.header_bytes, name)?;
                    return Ok(GgufFile {
                        name: name.to_owned(),
                        size: Some(total),
                        header,
                    });
                }
                Err(gguf::GgufError::Truncated { need, .. }) if have < total && need <= total => {
                    let target = need.max(have * 2).min(total);
                    if target > self.budget.max {
                        return Err(SourceError::HeaderTooLarge {
                            file: name.to_owned(),
                            max: self.budget.max,
                        });
                    }
                    let more = self
                        .client
                        .get_range(self.repo, self.commit, name, have, target, self.counters)
                        .await?;
                    prefix.extend(more.bytes);
                }
                Err(source) => {
                    return Err(SourceError::Gguf {
                        file: name.to_owned(),
                        source,
                    });
                }
            }
        }
    }
}
