//! `/resolve` and `/raw`: direct answers for small files, 302 to the CDN for LFS files,
//! revisions in every form the Hub accepts.

use preflight_testhub::Origin;
use sha1::{Digest, Sha1};

use crate::*;

fn git_blob_oid(content: &[u8]) -> String {
    let mut h = Sha1::new();
    h.update(format!("blob {}\0", content.len()).as_bytes());
    h.update(content);
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

#[tokio::test]
async fn small_file_is_served_directly_with_commit_and_git_etag() {
    let hub = fixtures_hub().await;
    let on_disk =
        std::fs::read(preflight_testhub::fixtures_hub().join(format!("{QWEN_06B}/{QWEN_06B_COMMIT}/config.json")))
            .unwrap();
    let url = format!("{}/{QWEN_06B}/resolve/main/config.json", hub.url());

    let resp = client().get(&url).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(header(&resp, "x-repo-commit"), Some(QWEN_06B_COMMIT));
    let etag = format!("\"{}\"", git_blob_oid(&on_disk));
    assert_eq!(header(&resp, "etag"), Some(etag.as_str()));
    assert_eq!(header(&resp, "accept-ranges"), Some("bytes"));
    assert_eq!(
        header(&resp, "content-length"),
        Some(on_disk.len().to_string().as_str())
    );
    assert_eq!(resp.bytes().await.unwrap(), on_disk);

    let head = client().head(&url).send().await.unwrap();
    assert_eq!(head.status(), 200);
    assert_eq!(header(&head, "etag"), Some(etag.as_str()));
    assert_eq!(
        header(&head, "content-length"),
        Some(on_disk.len().to_string().as_str())
    );
}

#[tokio::test]
async fn tokenizer_json_under_10_mib_is_not_lfs() {
    let hub = fixtures_hub().await;
    let url = format!("{}/Qwen/Qwen3-8B/resolve/main/tokenizer.json", hub.url());
    let resp = client().head(&url).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(header(&resp, "content-length"), Some("6561631"));
}

#[tokio::test]
async fn lfs_file_redirects_to_the_cdn_with_linked_headers() {
    let hub = fixtures_hub().await;
    let url = format!("{}/{QWEN_06B}/resolve/main/model.safetensors", hub.url());
    for method in [reqwest::Method::HEAD, reqwest::Method::GET] {
        let resp = client().request(method.clone(), &url).send().await.unwrap();
        assert_eq!(resp.status(), 302, "{method}");
        assert_eq!(header(&resp, "x-repo-commit"), Some(QWEN_06B_COMMIT));
        assert_eq!(header(&resp, "x-linked-size"), Some(QWEN_06B_SIZE.to_string().as_str()));
        let linked = header(&resp, "x-linked-etag").unwrap();
        assert!(linked.len() == 66 && linked.starts_with('"'), "{linked}");
        assert!(header(&resp, "etag").is_some());
        let location = header(&resp, "location").unwrap();
        assert!(
            location.starts_with(&format!(
                "{}/lfs/{QWEN_06B}/{QWEN_06B_COMMIT}/model.safetensors?",
                hub.cdn_url()
            )),
            "{location}"
        );
    }
}

#[tokio::test]
async fn following_the_redirect_reaches_the_cdn_without_the_token() {
    let hub = fixtures_hub().await;
    let url = format!("{}/{QWEN_06B}/resolve/main/model.safetensors", hub.url());
    let resp = following()
        .get(&url)
        .bearer_auth(TOKEN)
        .header("range", "bytes=0-7")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 206);
    assert_eq!(header(&resp, "content-range"), Some("bytes 0-7/1192135096"));
    assert_eq!(resp.bytes().await.unwrap().len(), 8);

    let log = hub.requests();
    assert_eq!(log.len(), 2, "{log:?}");
    assert_eq!((log[0].origin, log[0].status), (Origin::Hub, 302));
    assert!(log[0].authorization);
    assert_eq!((log[1].origin, log[1].status), (Origin::Cdn, 206));
    assert!(!log[1].authorization, "the token must not reach the CDN");
}

#[tokio::test]
async fn the_cdn_refuses_urls_it_did_not_sign() {
    let hub = fixtures_hub().await;
    let resp = client()
        .head(format!("{}/{QWEN_06B}/resolve/main/model.safetensors", hub.url()))
        .send()
        .await
        .unwrap();
    let location = header(&resp, "location").unwrap().to_owned();
    assert_eq!(client().head(&location).send().await.unwrap().status(), 200);

    let unsigned = location.split('?').next().unwrap().to_owned();
    let forged = location.replace("model.safetensors", "config.json");
    for url in [unsigned, forged] {
        assert_eq!(client().get(&url).send().await.unwrap().status(), 403, "{url}");
    }
}

#[tokio::test]
async fn raw_serves_the_lfs_pointer_not_the_object() {
    let hub = fixtures_hub().await;
    let url = format!("{}/{QWEN_06B}/raw/main/model.safetensors", hub.url());
    let resp = client().get(&url).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let text = resp.text().await.unwrap();
    assert!(text.starts_with("version https://git-lfs.github.com/spec/v1\noid sha256:"));
    assert!(text.ends_with(&format!("size {QWEN_06B_SIZE}\n")), "{text}");
}

#[tokio::test]
async fn files_over_10_mib_are_lfs_whatever_their_extension() {
    let (hub, _dir) = tiny_hub().await;
    let resp = client()
        .head(format!("{}/acme/tiny/resolve/main/big.json", hub.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 302);
    assert_eq!(
        header(&resp, "x-linked-size"),
        Some(TINY_BIG_JSON_SIZE.to_string().as_str())
    );
}

#[tokio::test]
async fn every_revision_form_resolves_to_its_commit() {
    let (hub, _dir) = tiny_hub().await;
    let cases = [
        ("main", C1),
        ("v1.0", C1),
        (C1, C1),
        ("refs%2Fpr%2F1", C2),
        ("refs/pr/1", C2),
    ];
    for (rev, commit) in cases {
        let url = format!("{}/acme/tiny/resolve/{rev}/config.json", hub.url());
        let resp = client().get(&url).send().await.unwrap();
        assert_eq!(resp.status(), 200, "{rev}");
        assert_eq!(header(&resp, "x-repo-commit"), Some(commit), "{rev}");
    }
}

#[tokio::test]
async fn paths_in_subdirectories_resolve_encoded_or_not() {
    let (hub, _dir) = tiny_hub().await;
    for path in ["sub/dir/notes.txt", "sub%2Fdir%2Fnotes.txt"] {
        let url = format!("{}/acme/tiny/resolve/main/{path}", hub.url());
        let resp = client().get(&url).send().await.unwrap();
        assert_eq!(resp.status(), 200, "{path}");
        assert_eq!(resp.text().await.unwrap(), "hello");
    }
}

#[tokio::test]
async fn moving_a_ref_changes_what_the_branch_serves_until_reset() {
    let (hub, _dir) = tiny_hub().await;
    let url = format!("{}/acme/tiny/resolve/main/config.json", hub.url());
    hub.set_ref("acme/tiny", "main", C2).unwrap();
    let resp = client().get(&url).send().await.unwrap();
    assert_eq!(header(&resp, "x-repo-commit"), Some(C2));
    hub.reset();
    let resp = client().get(&url).send().await.unwrap();
    assert_eq!(header(&resp, "x-repo-commit"), Some(C1));

    assert!(hub.set_ref("acme/tiny", "main", "0".repeat(40).as_str()).is_err());
    assert!(hub.set_ref("acme/none", "main", C1).is_err());
}

#[tokio::test]
async fn malformed_paths_are_bad_requests_not_panics() {
    let hub = fixtures_hub().await;
    let resp = client()
        .get(format!("{}/{QWEN_06B}/resolve/main/%FF%FE", hub.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    let resp = client()
        .get(format!("{}/{QWEN_06B}/resolve/main/../../refs.json", hub.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 404);
    let resp = client()
        .get(format!("{}/{QWEN_06B}/resolve/main/%2E%2E%2Frefs.json", hub.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 404);
    let resp = client()
        .delete(format!("{}/{QWEN_06B}/resolve/main/config.json", hub.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 405);
}
