//! Access and not-found answers, with the status and `X-Error-Code` pairs
//! `huggingface_hub.hf_raise_for_status` maps to its exceptions.

use crate::*;

/// (url suffix, token, expected status, expected X-Error-Code)
type Case = (&'static str, Option<&'static str>, u16, Option<&'static str>);

async fn check(hub_url: &str, cases: &[Case]) {
    for (path, token, status, code) in cases {
        let mut req = client().get(format!("{hub_url}/{path}"));
        if let Some(token) = token {
            req = req.bearer_auth(token);
        }
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status().as_u16(), *status, "{path} token={token:?}");
        assert_eq!(header(&resp, "x-error-code"), *code, "{path} token={token:?}");
        if *status >= 400 {
            let body: serde_json::Value = resp.json().await.unwrap();
            assert!(body["error"].is_string(), "{path}: {body}");
        }
    }
}

#[tokio::test]
async fn gated_repos_need_a_granted_token_for_files_but_not_for_metadata() {
    let hub = fixtures_hub().await;
    let file = "meta-llama/Llama-3.1-8B/resolve/main/config.json";
    check(
        hub.url(),
        &[
            (file, None, 401, Some("GatedRepo")),
            (file, Some("hf_someone_else"), 403, Some("GatedRepo")),
            (file, Some(TOKEN), 200, None),
            (
                "google/gemma-3-1b-it/raw/main/config.json",
                None,
                401,
                Some("GatedRepo"),
            ),
            ("api/models/meta-llama/Llama-3.1-8B", None, 200, None),
            ("api/models/meta-llama/Llama-3.1-8B/tree/main", None, 200, None),
        ],
    )
    .await;

    let resp = client().get(format!("{}/{file}", hub.url())).send().await.unwrap();
    assert_eq!(
        header(&resp, "x-error-message"),
        Some(
            "Access to model meta-llama/Llama-3.1-8B is restricted. You must have access to it \
             and be authenticated to access it. Please log in."
        )
    );
    let info: serde_json::Value = client()
        .get(format!("{}/api/models/meta-llama/Llama-3.1-8B", hub.url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(info["gated"], "manual");
}

#[tokio::test]
async fn private_and_missing_repos_look_the_same_from_outside() {
    let (hub, _dir) = tiny_hub().await;
    let secret = "acme/secret/resolve/main/config.json";
    let missing = "acme/nothing/resolve/main/config.json";
    check(
        hub.url(),
        &[
            (secret, None, 401, Some("RepoNotFound")),
            (secret, Some("hf_someone_else"), 404, Some("RepoNotFound")),
            (secret, Some(TOKEN), 200, None),
            (missing, None, 401, Some("RepoNotFound")),
            (missing, Some(TOKEN), 404, Some("RepoNotFound")),
            ("api/models/acme/secret", None, 401, Some("RepoNotFound")),
            ("api/models/acme/secret", Some(TOKEN), 200, None),
            ("api/models/acme/nothing", Some(TOKEN), 404, Some("RepoNotFound")),
        ],
    )
    .await;
}

#[tokio::test]
async fn gated_auto_is_reported_and_enforced() {
    let (hub, _dir) = tiny_hub().await;
    check(
        hub.url(),
        &[("acme/gate/resolve/main/config.json", None, 401, Some("GatedRepo"))],
    )
    .await;
    let info: serde_json::Value = client()
        .get(format!("{}/api/models/acme/gate", hub.url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(info["gated"], "auto");
}

#[tokio::test]
async fn unknown_revisions_and_files_are_404_with_their_codes() {
    let (hub, _dir) = tiny_hub().await;
    check(
        hub.url(),
        &[
            (
                "acme/tiny/resolve/no-such-branch/config.json",
                None,
                404,
                Some("RevisionNotFound"),
            ),
            (
                "acme/tiny/resolve/0000000000000000000000000000000000000000/config.json",
                None,
                404,
                Some("RevisionNotFound"),
            ),
            ("acme/tiny/resolve/main/nope.json", None, 404, Some("EntryNotFound")),
            ("acme/tiny/resolve/main/.stubs.json", None, 404, Some("EntryNotFound")),
            (
                "api/models/acme/tiny/revision/nope",
                None,
                404,
                Some("RevisionNotFound"),
            ),
            ("api/models/acme/tiny/tree/main/nope", None, 404, Some("EntryNotFound")),
        ],
    )
    .await;
    // The Hub names the commit on EntryNotFound, so clients can cache the absence.
    let resp = client()
        .head(format!("{}/acme/tiny/resolve/main/nope.json", hub.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(header(&resp, "x-repo-commit"), Some(C1));
}

#[tokio::test]
async fn a_malformed_authorization_header_is_invalid_credentials() {
    let hub = fixtures_hub().await;
    let resp = client()
        .get(format!("{}/{QWEN_06B}/resolve/main/config.json", hub.url()))
        .header("authorization", "Basic dXNlcjpwYXNz")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 401);
    assert_eq!(header(&resp, "x-error-code"), None);
    assert_eq!(
        header(&resp, "x-error-message"),
        Some("Invalid credentials in Authorization header")
    );
}
