//! The request log: what tests count requests and bytes with.

use preflight_testhub::{Origin, RequestRecord};

use crate::*;

#[tokio::test]
async fn every_request_on_both_origins_is_recorded() {
    let (hub, _dir) = tiny_hub().await;
    let model = format!("{}/acme/tiny/resolve/main/model.safetensors", hub.url());
    let body = following()
        .get(&model)
        .bearer_auth(TOKEN)
        .header("range", "bytes=0-99")
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    assert_eq!(body.len(), 100);
    client()
        .head(format!("{}/acme/tiny/resolve/main/config.json", hub.url()))
        .send()
        .await
        .unwrap();

    let log = hub.requests();
    assert_eq!(log.len(), 3, "{log:?}");
    assert_eq!(
        log[0],
        RequestRecord {
            origin: Origin::Hub,
            method: "GET".into(),
            path: "/acme/tiny/resolve/main/model.safetensors".into(),
            range: Some("bytes=0-99".into()),
            authorization: true,
            status: 302,
            body_bytes: 0,
            faults: vec![],
        }
    );
    assert_eq!(log[1].origin, Origin::Cdn);
    assert!(log[1].path.starts_with("/lfs/acme/tiny/") && log[1].path.contains("?sig="));
    assert_eq!((log[1].status, log[1].body_bytes), (206, 100));
    assert!(!log[1].authorization);
    assert_eq!((log[2].method.as_str(), log[2].status), ("HEAD", 200));
    assert_eq!(log[2].body_bytes, 0, "HEAD sends no body");
}

#[tokio::test]
async fn admin_requests_are_not_logged_and_reset_clears() {
    let (hub, _dir) = tiny_hub().await;
    client()
        .get(format!("{}/acme/tiny/resolve/main/config.json", hub.url()))
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    let over_http: Vec<RequestRecord> = client()
        .get(format!("{}/_testhub/requests", hub.url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(over_http, hub.requests());
    assert_eq!(over_http.len(), 1);

    let resp = client()
        .post(format!("{}/_testhub/reset", hub.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 204);
    assert!(hub.requests().is_empty());
}

#[tokio::test]
async fn refs_move_over_the_admin_endpoint() {
    let (hub, _dir) = tiny_hub().await;
    let refs = format!("{}/_testhub/refs", hub.url());
    let body = serde_json::json!({"repo": "acme/tiny", "ref": "main", "commit": C2});
    let resp = client().post(&refs).json(&body).send().await.unwrap();
    assert_eq!(resp.status(), 204);
    let info: serde_json::Value = client()
        .get(format!("{}/api/models/acme/tiny", hub.url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(info["sha"], C2);

    let unknown = serde_json::json!({"repo": "acme/tiny", "ref": "main", "commit": "abc"});
    let resp = client().post(&refs).json(&unknown).send().await.unwrap();
    assert_eq!(resp.status(), 400);
}
