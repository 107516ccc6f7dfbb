//! Hostile headers cannot grow a verdict without bound: a million bad tensors yield a bounded
//! number of findings (the rest counted), whatever the format. The figures here are sizes of
//! the verdict document — deterministic — not timings; `scripts/hostile_sizes.py` measures
//! peak memory.

use preflight_formats::facts::{ArtifactFacts, Content, GgufFile, SourceRef, StagingStats};
use preflight_plan::findings::KEPT_PER_CODE;
use preflight_plan::{PlanOptions, plan};

/// The verdict a caller may be sent or a cache may store: 1 MB, whatever the input.
const VERDICT_CAP_BYTES: usize = 1 << 20;

/// As many tensor entries as the GGUF reader accepts (`MAX_TENSORS`).
const TENSORS: u64 = preflight_formats::gguf::MAX_TENSORS;

fn facts(content: Content) -> ArtifactFacts {
    ArtifactFacts {
        source: SourceRef {
            spec: "hostile".into(),
            ..SourceRef::default()
        },
        config: None,
        quant_config: None,
        content,
        meta: Default::default(),
        staging: StagingStats::default(),
    }
}

/// A GGUF v3 header naming a llama with `TENSORS` tensor entries, all empty-named and
/// zero-dimensional: every one a duplicate, and none a tensor llama.cpp defines.
fn empty_entries_gguf() -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(b"GGUF");
    b.extend_from_slice(&3u32.to_le_bytes());
    b.extend_from_slice(&TENSORS.to_le_bytes());
    b.extend_from_slice(&1u64.to_le_bytes());
    let key = b"general.architecture";
    b.extend_from_slice(&(key.len() as u64).to_le_bytes());
    b.extend_from_slice(key);
    b.extend_from_slice(&8u32.to_le_bytes());
    b.extend_from_slice(&5u64.to_le_bytes());
    b.extend_from_slice(b"llama");
    for _ in 0..TENSORS {
        b.extend_from_slice(&0u64.to_le_bytes()); // name: ""
        b.extend_from_slice(&0u32.to_le_bytes()); // no dims
        b.extend_from_slice(&0u32.to_le_bytes()); // F32
        b.extend_from_slice(&0u64.to_le_bytes()); // offset
    }
    b
}

#[test]
fn a_million_empty_gguf_entries_make_a_small_verdict() {
    let bytes = empty_entries_gguf();
    let header = preflight_formats::gguf::parse(&bytes, Some(bytes.len() as u64 + 64)).expect("parses");
    assert_eq!(header.tensors.len() as u64, TENSORS);
    let content = Content::Gguf {
        parts: vec![GgufFile {
            name: "x.gguf".into(),
            size: None,
            header,
        }],
        missing_parts: vec![],
    };
    let verdict = plan(&[facts(content)], &PlanOptions::default()).expect("valid options");
    let findings = &verdict.artifacts[0].findings;
    assert!(!verdict.admissible);
    let duplicates: Vec<_> = findings.iter().filter(|f| f.code == "tensor.duplicate").collect();
    assert_eq!(duplicates.len(), KEPT_PER_CODE + 1, "kept one by one, then one summary");
    let summary = duplicates.last().expect("summary");
    let counted = summary.observed.as_ref().and_then(|v| v.as_u64()).expect("count");
    // Every entry after the first repeats the empty name, and every repeat is counted.
    assert_eq!(counted + KEPT_PER_CODE as u64, TENSORS - 1, "every duplicate counted");
    let size = serde_json::to_vec(&verdict).expect("json").len();
    assert!(size <= VERDICT_CAP_BYTES, "verdict is {size} bytes");
}

#[test]
fn a_million_unplaced_safetensors_tensors_make_a_small_verdict() {
    // Every name a shape of its own: no component claims any of them.
    let header = preflight_testhub::facts::header((0..TENSORS).map(|i| (format!("t{i}x"), "BF16", vec![1])));
    let config = serde_json::json!({
        "model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
        "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 2,
        "vocab_size": 256, "max_position_embeddings": 4096
    });
    let facts = preflight_testhub::facts::single_file(Some(&config), header, None);
    let verdict = plan(&[facts], &PlanOptions::default()).expect("valid options");
    assert!(!verdict.admissible);
    let unplaced = verdict.artifacts[0]
        .findings
        .iter()
        .filter(|f| f.code == "tensor.unplaced")
        .count();
    assert_eq!(unplaced, KEPT_PER_CODE + 1);
    let size = serde_json::to_vec(&verdict).expect("json").len();
    assert!(size <= VERDICT_CAP_BYTES, "verdict is {size} bytes");
}
