//! `/api/models/…`: model info and tree listings.

use serde_json::Value;

use crate::*;

async fn get_json(url: &str) -> Value {
    let resp = client().get(url).bearer_auth(TOKEN).send().await.unwrap();
    assert_eq!(resp.status(), 200, "{url}");
    resp.json().await.unwrap()
}

/// One row per checkpoint of the plain `hub/` tree in `expected.json` (the packed repos are
/// not served by the fixture Hub): the commit, and the Hub's per-dtype parameter summary
/// equal to the raw stored elements.
#[tokio::test]
async fn model_info_matches_expected_json_for_every_repo() {
    let hub = fixtures_hub().await;
    let mut checked = 0;
    for (repo, facts) in expected() {
        let Some(commit) = facts["commit"].as_str() else {
            continue;
        };
        if !preflight_testhub::fixtures_hub().join(&repo).exists() {
            continue;
        }
        let info = get_json(&format!("{}/api/models/{repo}", hub.url())).await;
        assert_eq!(info["id"], repo.as_str());
        assert_eq!(info["modelId"], repo.as_str());
        assert_eq!(info["sha"], commit, "{repo}");
        assert_eq!(info["safetensors"]["parameters"], facts["elements_by_dtype"], "{repo}");
        let total: u64 = facts["elements_by_dtype"]
            .as_object()
            .unwrap()
            .values()
            .map(|v| v.as_u64().unwrap())
            .sum();
        assert_eq!(info["safetensors"]["total"], total, "{repo}");
        assert!(info["siblings"].as_array().unwrap().len() > 1, "{repo}");
        assert!(info["config"]["model_type"].is_string(), "{repo}");
        checked += 1;
    }
    assert!(checked >= 9, "only {checked} repos checked");
}

#[tokio::test]
async fn model_info_at_a_revision_and_with_blobs() {
    let (hub, _dir) = tiny_hub().await;
    let info = get_json(&format!("{}/api/models/acme/tiny/revision/refs%2Fpr%2F1", hub.url())).await;
    assert_eq!(info["sha"], C2);
    assert_eq!(info["siblings"], serde_json::json!([{"rfilename": "config.json"}]));

    let info = get_json(&format!("{}/api/models/acme/tiny?blobs=true", hub.url())).await;
    let siblings = info["siblings"].as_array().unwrap();
    let names: Vec<&str> = siblings.iter().map(|s| s["rfilename"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "big.json",
            "config.json",
            "model.safetensors",
            "sub/dir/notes.txt",
            "sub/top.txt"
        ]
    );
    let model = &siblings[2];
    assert_eq!(model["size"], TINY_MODEL_SIZE);
    assert_eq!(model["lfs"]["size"], TINY_MODEL_SIZE);
    assert_eq!(model["lfs"]["sha256"].as_str().unwrap().len(), 64);
    assert!(siblings[1]["lfs"].is_null());
    assert_eq!(siblings[1]["blobId"].as_str().unwrap().len(), 40);
    assert_eq!(
        info["safetensors"],
        serde_json::json!({"parameters": {"BF16": 200, "F32": 7}, "total": 207})
    );
}

#[tokio::test]
async fn expand_selects_fields_and_rejects_unknown_ones() {
    let hub = fixtures_hub().await;
    let info = get_json(&format!(
        "{}/api/models/{QWEN_06B}?expand=sha&expand[]=safetensors",
        hub.url()
    ))
    .await;
    let mut keys: Vec<&str> = info.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort();
    assert_eq!(keys, ["_id", "id", "safetensors", "sha"]);

    let resp = client()
        .get(format!("{}/api/models/{QWEN_06B}?expand=weights", hub.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
}

#[tokio::test]
async fn tree_lists_files_with_lfs_details() {
    let hub = fixtures_hub().await;
    let tree = get_json(&format!("{}/api/models/Qwen/Qwen3-8B/tree/main", hub.url())).await;
    let entries = tree.as_array().unwrap();
    assert_eq!(entries.len(), 10);
    let shard = entries
        .iter()
        .find(|e| e["path"] == "model-00001-of-00004.safetensors")
        .unwrap();
    assert_eq!(shard["type"], "file");
    assert_eq!(shard["size"], 4_902_257_696u64);
    assert_eq!(shard["lfs"]["size"], 4_902_257_696u64);
    assert_eq!(shard["oid"].as_str().unwrap().len(), 40);
    assert!(shard["lfs"]["pointerSize"].as_u64().unwrap() > 100);
    let config = entries.iter().find(|e| e["path"] == "config.json").unwrap();
    assert!(config.get("lfs").is_none());

    let deepseek = get_json(&format!(
        "{}/api/models/deepseek-ai/DeepSeek-V3/tree/main?recursive=true",
        hub.url()
    ))
    .await;
    assert_eq!(deepseek.as_array().unwrap().len(), 166);
}

#[tokio::test]
async fn tree_directories_recursion_and_subpaths() {
    let (hub, _dir) = tiny_hub().await;
    let paths = |tree: Value| -> Vec<(String, String)> {
        tree.as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["type"].as_str().unwrap().to_owned(),
                    e["path"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    };
    let base = format!("{}/api/models/acme/tiny/tree/main", hub.url());
    let top = paths(get_json(&base).await);
    assert!(top.contains(&("directory".into(), "sub".into())), "{top:?}");
    assert!(!top.iter().any(|(_, p)| p.contains('/')), "{top:?}");

    let all = paths(get_json(&format!("{base}?recursive=true")).await);
    assert!(all.contains(&("directory".into(), "sub/dir".into())), "{all:?}");
    assert!(all.contains(&("file".into(), "sub/dir/notes.txt".into())), "{all:?}");

    let sub = paths(get_json(&format!("{base}/sub")).await);
    assert_eq!(
        sub,
        [
            ("directory".to_owned(), "sub/dir".to_owned()),
            ("file".to_owned(), "sub/top.txt".to_owned())
        ]
    );
    let expanded = get_json(&format!("{base}?expand=true")).await;
    assert_eq!(expanded[0]["lastCommit"]["id"], C1);
}

#[tokio::test]
async fn tree_pages_follow_the_link_header() {
    let hub = fixtures_hub().await;
    let first = format!(
        "{}/api/models/deepseek-ai/DeepSeek-V3/tree/main?recursive=true&limit=50",
        hub.url()
    );
    let mut next = Some(first);
    let mut seen = Vec::new();
    let mut pages = 0;
    while let Some(url) = next.take() {
        let resp = client().get(&url).send().await.unwrap();
        assert_eq!(resp.status(), 200);
        next = header(&resp, "link").map(|link| {
            assert!(link.ends_with("; rel=\"next\""), "{link}");
            link[1..link.find('>').unwrap()].to_owned()
        });
        let page: Vec<Value> = resp.json().await.unwrap();
        seen.extend(page.into_iter().map(|e| e["path"].as_str().unwrap().to_owned()));
        pages += 1;
    }
    assert_eq!(pages, 4);
    assert_eq!(seen.len(), 166);
    let mut sorted = seen.clone();
    sorted.dedup();
    assert_eq!(sorted.len(), 166, "no entry twice");
}

#[tokio::test]
async fn bad_query_values_are_400() {
    let hub = fixtures_hub().await;
    for query in [
        "recursive=maybe",
        "limit=0",
        "limit=x",
        "cursor=-1",
        "cursor=99999999999999999999999",
    ] {
        let resp = client()
            .get(format!("{}/api/models/{QWEN_06B}/tree/main?{query}", hub.url()))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 400, "{query}");
    }
    let resp = client()
        .get(format!(
            "{}/api/models/{QWEN_06B}/tree/main?cursor={}",
            hub.url(),
            usize::MAX
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200, "a cursor past the end is an empty page");
    let resp = client()
        .get(format!("{}/api/models/{QWEN_06B}/nonsense", hub.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 404);
}

#[tokio::test]
async fn paths_info_answers_for_the_paths_that_exist() {
    let (hub, _dir) = tiny_hub().await;
    let url = format!("{}/api/models/acme/tiny/paths-info/main", hub.url());
    let resp = client()
        .post(&url)
        .form(&[
            ("paths", "sub"),
            ("paths", "nope"),
            ("paths", "model.safetensors"),
            ("expand", "False"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let found: Value = resp.json().await.unwrap();
    assert_eq!(found[0]["type"], "directory");
    assert_eq!(found[0]["path"], "sub");
    assert_eq!(found[1]["path"], "model.safetensors");
    assert_eq!(found[1]["lfs"]["size"], TINY_MODEL_SIZE);
    assert_eq!(found.as_array().unwrap().len(), 2);

    let resp = client().get(&url).send().await.unwrap();
    assert_eq!(resp.status(), 405);
}
