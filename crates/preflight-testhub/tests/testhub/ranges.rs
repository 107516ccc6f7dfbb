//! `Range` on both origins, and stubs served at full size with zeros past the prefix.

use crate::*;

/// (Range header, expected status, expected Content-Range, expected body range in the file).
type Case = (Option<String>, u16, Option<String>, Option<(u64, u64)>);

fn cases(total: u64) -> Vec<Case> {
    let last = total - 1;
    vec![
        (None, 200, None, Some((0, last))),
        (
            Some("bytes=0-3".into()),
            206,
            Some(format!("bytes 0-3/{total}")),
            Some((0, 3)),
        ),
        (
            Some(format!("bytes=2-{}", total + 100)),
            206,
            Some(format!("bytes 2-{last}/{total}")),
            Some((2, last)),
        ),
        (
            Some("bytes=5-".into()),
            206,
            Some(format!("bytes 5-{last}/{total}")),
            Some((5, last)),
        ),
        (
            Some("bytes=-4".into()),
            206,
            Some(format!("bytes {}-{last}/{total}", total - 4)),
            Some((total - 4, last)),
        ),
        (
            Some(format!("bytes={total}-")),
            416,
            Some(format!("bytes */{total}")),
            None,
        ),
        (Some("bytes=-0".into()), 416, Some(format!("bytes */{total}")), None),
    ]
}

async fn check_ranges(url: &str, content: &[u8]) {
    let total = content.len() as u64;
    for (range, status, content_range, body) in cases(total) {
        let mut req = following().get(url);
        if let Some(range) = &range {
            req = req.header("range", range);
        }
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status().as_u16(), status, "{url} {range:?}");
        assert_eq!(
            header(&resp, "content-range"),
            content_range.as_deref(),
            "{url} {range:?}"
        );
        if let Some((a, b)) = body {
            let bytes = resp.bytes().await.unwrap();
            assert_eq!(&bytes[..], &content[a as usize..=b as usize], "{url} {range:?}");
        }
    }
}

#[tokio::test]
async fn range_forms_on_the_hub_origin() {
    let (hub, dir) = tiny_hub().await;
    let content = std::fs::read(dir.path().join(format!("acme/tiny/{C1}/config.json"))).unwrap();
    check_ranges(&format!("{}/acme/tiny/resolve/main/config.json", hub.url()), &content).await;
}

#[tokio::test]
async fn range_forms_on_the_cdn_origin_over_a_stub() {
    let (hub, _dir) = tiny_hub().await;
    let mut content = tiny_safetensors_prefix();
    content.resize(TINY_MODEL_SIZE as usize, 0);
    check_ranges(
        &format!("{}/acme/tiny/resolve/main/model.safetensors", hub.url()),
        &content,
    )
    .await;
}

#[tokio::test]
async fn a_stub_reads_as_its_prefix_then_zeros_at_full_size() {
    let hub = fixtures_hub().await;
    let stored = std::fs::read(
        preflight_testhub::fixtures_hub().join(format!("{QWEN_06B}/{QWEN_06B_COMMIT}/model.safetensors")),
    )
    .unwrap();
    let boundary = stored.len() as u64;
    let url = format!("{}/{QWEN_06B}/resolve/main/model.safetensors", hub.url());
    let resp = following()
        .get(&url)
        .header("range", format!("bytes={}-{}", boundary - 4, boundary + 3))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 206);
    assert_eq!(
        header(&resp, "content-range"),
        Some(format!("bytes {}-{}/{QWEN_06B_SIZE}", boundary - 4, boundary + 3).as_str())
    );
    let bytes = resp.bytes().await.unwrap();
    assert_eq!(&bytes[..4], &stored[stored.len() - 4..]);
    assert_eq!(&bytes[4..], &[0, 0, 0, 0]);

    // Far past the prefix, near the end of a 1.2 GB file the tree stores 35 KB of.
    let resp = following()
        .get(&url)
        .header("range", "bytes=-1000")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.bytes().await.unwrap(), vec![0u8; 1000]);
}

#[tokio::test]
async fn a_whole_stub_streams_at_full_size() {
    let (hub, _dir) = tiny_hub().await;
    let url = format!("{}/acme/tiny/resolve/main/model.safetensors", hub.url());
    let resp = following().get(&url).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.content_length(), Some(TINY_MODEL_SIZE));
    let body = resp.bytes().await.unwrap();
    let prefix = tiny_safetensors_prefix();
    assert_eq!(body.len() as u64, TINY_MODEL_SIZE);
    assert_eq!(&body[..prefix.len()], &prefix[..]);
    assert!(body[prefix.len()..].iter().all(|b| *b == 0));
}

#[tokio::test]
async fn malformed_or_multiple_ranges_are_ignored_as_the_rfc_allows() {
    let (hub, _dir) = tiny_hub().await;
    let url = format!("{}/acme/tiny/resolve/main/config.json", hub.url());
    for range in ["bytes=abc", "bytes=5-2", "bytes=0-1,4-5", "lines=1-2"] {
        let resp = client().get(&url).header("range", range).send().await.unwrap();
        assert_eq!(resp.status(), 200, "{range}");
    }
}
