//! `GET /api/models/{repo}[/revision/{rev}]` (model info) and `/api/models/{repo}/tree/…`,
//! shaped as `huggingface_hub`'s `ModelInfo`, `RepoFile` and `RepoFolder` read them.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use axum::Json;
use axum::body::Body;
use axum::http::{HeaderValue, Method, Response, header};
use axum::response::IntoResponse;
use serde_json::{Map, Value, json};

use crate::access::{Need, open_repo, resolve_revision, split_revision};
use crate::error::HubError;
use crate::log::Call;
use crate::store::{self, Commit, Hashes, Repo};

/// Tree listings page at this many entries, as the Hub does (its OpenAPI document:
/// 1,000 by default, 100 with `expand=true`); `huggingface_hub` follows the `Link` header.
const TREE_PAGE: usize = 1000;
const TREE_PAGE_EXPANDED: usize = 100;

/// Fixture repos carry no history; every date the API reports is this one.
const FIXTURE_DATE: &str = "2025-01-01T00:00:00.000Z";

/// The `expand[]` values the Hub accepts (from its own validation error); others are a 400.
const EXPAND_KEYS: &[&str] = &[
    "author",
    "baseModels",
    "cardData",
    "config",
    "createdAt",
    "disabled",
    "downloads",
    "downloadsAllTime",
    "evalResults",
    "gated",
    "inference",
    "inferenceProviderMapping",
    "lastModified",
    "library_name",
    "likes",
    "mask_token",
    "model-index",
    "pipeline_tag",
    "private",
    "safetensors",
    "sha",
    "siblings",
    "spaces",
    "tags",
    "transformersInfo",
    "trendingScore",
    "widgetData",
    "gguf",
    "resourceGroup",
    "xetEnabled",
    "childrenModelCount",
    "usedStorage",
];

pub(crate) async fn models(
    call: &Call,
    repo_id: &str,
    rest: &[&str],
    query: &str,
    body: &[u8],
) -> Result<Response<Body>, HubError> {
    let repo = open_repo(call, repo_id, Need::Metadata)?;
    let params = pairs(query.as_bytes());
    if let ["paths-info", rev @ ..] = rest {
        if call.method != Method::POST {
            return Err(HubError::MethodNotAllowed);
        }
        return match split_revision(rev) {
            Some((rev, [])) => {
                let commit = resolve_revision(call, repo, &rev)?;
                paths_info(call, &commit, body).await
            }
            _ => Err(HubError::NoRoute),
        };
    }
    if call.method != Method::GET && call.method != Method::HEAD {
        return Err(HubError::MethodNotAllowed);
    }
    match rest {
        [] => model_info(call, repo, "main", &params).await,
        ["revision", rev @ ..] => match split_revision(rev) {
            Some((rev, [])) => model_info(call, repo, &rev, &params).await,
            _ => Err(HubError::NoRoute),
        },
        ["tree", rev @ ..] => {
            let (rev, path) = split_revision(rev).ok_or(HubError::NoRoute)?;
            let commit = resolve_revision(call, repo, &rev)?;
            tree(call, &commit, &path.join("/"), &params).await
        }
        _ => Err(HubError::NoRoute),
    }
}

async fn model_info(
    call: &Call,
    repo: &Repo,
    rev: &str,
    params: &[(String, String)],
) -> Result<Response<Body>, HubError> {
    let commit = resolve_revision(call, repo, rev)?;
    let expand: Vec<&str> = params
        .iter()
        .filter(|(k, _)| k == "expand" || k == "expand[]")
        .map(|(_, v)| v.as_str())
        .collect();
    if let Some(bad) = expand.iter().find(|e| !EXPAND_KEYS.contains(e)) {
        return Err(HubError::BadRequest(format!(
            "\"expand\" must be one of [{}], not {bad:?}",
            EXPAND_KEYS.join(", ")
        )));
    }
    let blobs = flag(params, "blobs")? || expand.contains(&"siblings");
    let hashes = if blobs { Some(all_hashes(&commit).await?) } else { None };
    let safetensors = {
        let commit = Arc::clone(&commit);
        tokio::task::spawn_blocking(move || {
            commit
                .safetensors
                .get_or_init(|| crate::safetensors::count(|name| commit.file(name).map(|f| f.disk.as_path())))
                .clone()
        })
        .await
        .map_err(|e| HubError::Internal(e.to_string()))?
    };

    let (org, _) = repo.id.split_once('/').unwrap_or((&repo.id, ""));
    let config = read_json(&commit, "config.json");
    let architectures: Vec<&str> = config
        .as_ref()
        .and_then(|c| c.get("architectures"))
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let model_type = config
        .as_ref()
        .and_then(|c| c.get("model_type"))
        .and_then(Value::as_str);
    let has_gguf = commit.files.keys().any(|p| p.ends_with(".gguf"));
    let library = if config.is_some() {
        Some("transformers")
    } else if has_gguf {
        Some("gguf")
    } else {
        None
    };
    let pipeline = architectures
        .iter()
        .any(|a| a.ends_with("ForCausalLM"))
        .then_some("text-generation");

    let mut tags: Vec<String> = library.iter().map(|l| l.to_string()).collect();
    if safetensors.is_some() {
        tags.push("safetensors".into());
    }
    if has_gguf && library != Some("gguf") {
        tags.push("gguf".into());
    }
    tags.extend(model_type.map(str::to_owned));
    tags.extend(pipeline.map(str::to_owned));
    let card = card_data(&commit);
    if let Some(license) = card.get("license").and_then(Value::as_str) {
        tags.push(format!("license:{license}"));
    }
    tags.push("region:us".into());

    let siblings: Vec<Value> = commit
        .files
        .iter()
        .map(|(path, entry)| {
            let mut sibling = json!({ "rfilename": path });
            if let Some(h) = hashes.as_ref().and_then(|h| h.get(path)) {
                sibling["size"] = entry.size.into();
                sibling["blobId"] = h.oid.clone().into();
                if let Some(lfs) = &h.lfs {
                    sibling["lfs"] = json!({
                        "sha256": lfs.sha256, "size": entry.size, "pointerSize": lfs.pointer.len()
                    });
                }
            }
            sibling
        })
        .collect();

    let mut info = Map::new();
    info.insert("_id".into(), object_id(&repo.id).into());
    info.insert("id".into(), repo.id.clone().into());
    info.insert("modelId".into(), repo.id.clone().into());
    info.insert("author".into(), org.into());
    info.insert("sha".into(), commit.sha.clone().into());
    info.insert("lastModified".into(), FIXTURE_DATE.into());
    info.insert("createdAt".into(), FIXTURE_DATE.into());
    info.insert("private".into(), repo.private.into());
    info.insert("gated".into(), repo.gated.to_json());
    info.insert("disabled".into(), false.into());
    info.insert("downloads".into(), 0.into());
    info.insert("likes".into(), 0.into());
    if let Some(library) = library {
        info.insert("library_name".into(), library.into());
    }
    info.insert("tags".into(), tags.into());
    if let Some(pipeline) = pipeline {
        info.insert("pipeline_tag".into(), pipeline.into());
    }
    if let Some(config) = &config {
        info.insert("config".into(), config_summary(config, &commit));
    }
    if !card.is_empty() {
        info.insert("cardData".into(), Value::Object(card));
    }
    info.insert("siblings".into(), siblings.into());
    info.insert("spaces".into(), json!([]));
    if let Some(counts) = &safetensors {
        info.insert("safetensors".into(), json!(counts));
    }
    let used: u64 = commit.files.values().map(|f| f.size).sum();
    info.insert("usedStorage".into(), used.into());
    if flag(params, "securityStatus")? {
        info.insert(
            "securityRepoStatus".into(),
            json!({ "scansDone": true, "filesWithIssues": [] }),
        );
    }
    if !expand.is_empty() {
        info.retain(|k, _| k == "_id" || k == "id" || expand.contains(&k.as_str()));
    }
    Ok(Json(Value::Object(info)).into_response())
}

/// The `config` object the Hub derives from `config.json` and `tokenizer_config.json`.
fn config_summary(config: &Value, commit: &Commit) -> Value {
    let mut summary = Map::new();
    for key in ["architectures", "model_type"] {
        if let Some(v) = config.get(key) {
            summary.insert(key.into(), v.clone());
        }
    }
    if let Some(method) = config.pointer("/quantization_config/quant_method") {
        summary.insert("quantization_config".into(), json!({ "quant_method": method }));
    }
    if let Some(tokenizer) = read_json(commit, "tokenizer_config.json") {
        let picked: Map<String, Value> = ["bos_token", "eos_token", "pad_token", "unk_token", "chat_template"]
            .iter()
            .filter_map(|k| tokenizer.get(*k).map(|v| ((*k).to_owned(), v.clone())))
            .collect();
        if !picked.is_empty() {
            summary.insert("tokenizer_config".into(), Value::Object(picked));
        }
    }
    Value::Object(summary)
}

/// The card data the Hub derives from the README's YAML front matter.
fn card_data(commit: &Commit) -> Map<String, Value> {
    commit
        .file("README.md")
        .and_then(|f| std::fs::read_to_string(&f.disk).ok())
        .map(|text| front_matter(&text))
        .unwrap_or_default()
}

/// The scalar `key: value` lines of a README's YAML front matter (enough for `license`,
/// `license_name` and `license_link`).
pub(crate) fn front_matter(text: &str) -> Map<String, Value> {
    let Some(front) = text
        .strip_prefix("---\n")
        .and_then(|rest| rest.split_once("\n---").map(|(front, _)| front))
    else {
        return Map::new();
    };
    front
        .lines()
        .filter(|line| !line.starts_with([' ', '-', '#']))
        .filter_map(|line| line.split_once(':'))
        .filter(|(_, v)| !v.trim().is_empty())
        .map(|(k, v)| (k.trim().to_owned(), Value::from(v.trim().trim_matches('"'))))
        .collect()
}

async fn tree(
    call: &Call,
    commit: &Arc<Commit>,
    dir: &str,
    params: &[(String, String)],
) -> Result<Response<Body>, HubError> {
    let recursive = flag(params, "recursive")?;
    let expand = flag(params, "expand")?;
    let page_max = if expand { TREE_PAGE_EXPANDED } else { TREE_PAGE };
    let limit = match param(params, "limit") {
        Some(v) => v
            .parse::<usize>()
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| HubError::BadRequest(format!("limit must be a positive integer, not {v:?}")))?
            .min(page_max),
        None => page_max,
    };
    // Opaque to clients; here simply the offset of the page's first entry.
    let cursor = match param(params, "cursor") {
        Some(v) => v
            .parse::<usize>()
            .map_err(|_| HubError::BadRequest(format!("invalid cursor {v:?}")))?,
        None => 0,
    };

    let prefix = if dir.is_empty() {
        String::new()
    } else {
        format!("{dir}/")
    };
    // Every file and directory below `dir`, as a sorted set of paths.
    let mut entries: BTreeSet<String> = BTreeSet::new();
    for path in commit.files.keys().filter(|p| p.starts_with(&prefix)) {
        let below = &path[prefix.len()..];
        let mut at = 0;
        while let Some(slash) = below[at..].find('/') {
            entries.insert(format!("{prefix}{}", &below[..at + slash]));
            at += slash + 1;
            if !recursive {
                break;
            }
        }
        if recursive || !below.contains('/') {
            entries.insert(path.clone());
        }
    }
    if entries.is_empty() && !dir.is_empty() {
        return Err(HubError::EntryNotFound {
            commit: commit.sha.clone(),
        });
    }

    let hashes = all_hashes(commit).await?;
    let page: Vec<Value> = entries
        .iter()
        .skip(cursor)
        .take(limit)
        .map(|path| path_json(commit, path, &hashes, expand))
        .collect();

    let mut resp = Json(page).into_response();
    let next = cursor.saturating_add(limit);
    if next < entries.len() {
        let link = next_link(call, params, next);
        if let Ok(v) = HeaderValue::from_str(&link) {
            resp.headers_mut().insert(header::LINK, v);
        }
    }
    Ok(resp)
}

/// `POST /api/models/{repo}/paths-info/{rev}` with `paths=…&paths=…[&expand=…]` (a form,
/// as `huggingface_hub.get_paths_info` sends it): entries for the paths that exist, in the
/// order asked; missing ones are left out, as the Hub does.
async fn paths_info(call: &Call, commit: &Arc<Commit>, body: &[u8]) -> Result<Response<Body>, HubError> {
    let is_json = call
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    let (paths, expand) = if is_json {
        let value: Value =
            serde_json::from_slice(body).map_err(|e| HubError::BadRequest(format!("invalid JSON body: {e}")))?;
        let paths = value["paths"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect())
            .unwrap_or_default();
        (paths, value["expand"].as_bool().unwrap_or(false))
    } else {
        let form = pairs(body);
        let paths: Vec<String> = form
            .iter()
            .filter(|(k, _)| k == "paths" || k == "paths[]")
            .map(|(_, v)| v.clone())
            .collect();
        (paths, flag(&form, "expand")?)
    };
    let hashes = all_hashes(commit).await?;
    let found: Vec<Value> = paths
        .iter()
        .map(|p| p.trim_matches('/'))
        .filter(|p| commit.file(p).is_some() || commit.files.keys().any(|f| f.starts_with(&format!("{p}/"))))
        .map(|p| path_json(commit, p, &hashes, expand))
        .collect();
    Ok(Json(found).into_response())
}

/// One tree entry as `RepoFile`/`RepoFolder` read it; `path` is a file or a directory.
fn path_json(commit: &Commit, path: &str, hashes: &BTreeMap<String, Hashes>, expand: bool) -> Value {
    let mut entry = match commit.file(path).zip(hashes.get(path)) {
        Some((file, h)) => {
            let mut e = json!({"type": "file", "oid": h.oid, "size": file.size, "path": path});
            if let Some(lfs) = &h.lfs {
                e["lfs"] = json!({"oid": lfs.sha256, "size": file.size, "pointerSize": lfs.pointer.len()});
            }
            e
        }
        None => json!({
            "type": "directory", "oid": directory_oid(path, hashes), "size": 0, "path": path
        }),
    };
    if expand {
        entry["lastCommit"] = json!({
            "id": commit.sha, "title": "Fixture commit", "date": FIXTURE_DATE
        });
    }
    entry
}

/// `Link: <…&cursor=N>; rel="next"`, the request's own URL with the cursor moved on.
fn next_link(call: &Call, params: &[(String, String)], cursor: usize) -> String {
    let path = call.target.split('?').next().unwrap_or(&call.target);
    let mut query = form_urlencoded::Serializer::new(String::new());
    for (k, v) in params.iter().filter(|(k, _)| k != "cursor") {
        query.append_pair(k, v);
    }
    query.append_pair("cursor", &cursor.to_string());
    format!("<{}{path}?{}>; rel=\"next\"", call.shared.hub_url, query.finish())
}

/// Not git's tree hash (that would need modes and the whole subtree), but stable and
/// different whenever anything below the directory changes.
fn directory_oid(dir: &str, hashes: &BTreeMap<String, Hashes>) -> String {
    let prefix = format!("{dir}/");
    let listing: String = hashes
        .iter()
        .filter(|(p, _)| p.starts_with(&prefix))
        .map(|(p, h)| format!("{p} {}\n", h.oid))
        .collect();
    store::git_blob_oid(listing.as_bytes())
}

async fn all_hashes(commit: &Arc<Commit>) -> Result<BTreeMap<String, Hashes>, HubError> {
    let commit = Arc::clone(commit);
    let hashes = tokio::task::spawn_blocking(move || {
        commit
            .files
            .iter()
            .map(|(path, entry)| Ok((path.clone(), entry.hashes()?.clone())))
            .collect::<std::io::Result<BTreeMap<_, _>>>()
    })
    .await
    .map_err(|e| HubError::Internal(e.to_string()))??;
    Ok(hashes)
}

fn read_json(commit: &Commit, path: &str) -> Option<Value> {
    let bytes = std::fs::read(&commit.file(path)?.disk).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// A stable 24-hex id in the shape of the Hub's Mongo `_id`.
fn object_id(repo: &str) -> String {
    store::git_blob_oid(repo.as_bytes())[..24].to_owned()
}

fn pairs(encoded: &[u8]) -> Vec<(String, String)> {
    form_urlencoded::parse(encoded)
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

fn param<'a>(params: &'a [(String, String)], name: &str) -> Option<&'a str> {
    params.iter().rev().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

fn flag(params: &[(String, String)], name: &str) -> Result<bool, HubError> {
    match param(params, name) {
        None => Ok(false),
        Some("true" | "True" | "1" | "") => Ok(true),
        Some("false" | "False" | "0") => Ok(false),
        Some(other) => Err(HubError::BadRequest(format!(
            "{name} must be true or false, not {other:?}"
        ))),
    }
}
