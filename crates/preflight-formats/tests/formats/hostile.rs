//! The hostile-input corpus: one test per attack, each asserting the specific error or issue.
//! Inputs are built byte by byte with the `writers`, so each test shows its lie.

use crate::writers::{Gguf, safetensors as st_file};
use preflight_formats::gguf::{self, GgufError};
use preflight_formats::safetensors::{self, HeaderError, HeaderIssue, MAX_HEADER_BYTES};
use preflight_formats::{config, index};

/// Deeper than any JSON parser's recursion limit, and deep enough to overflow a stack that
/// recursed once per level.
const DEEP: usize = 100_000;

fn deep_json() -> String {
    "[".repeat(DEEP) + &"]".repeat(DEEP)
}

// ---------------------------------------------------------------- safetensors

/// One F32 tensor `name` of `shape` at `offsets`.
fn entry(name: &str, shape: &str, offsets: [u64; 2]) -> String {
    format!(
        r#""{name}":{{"dtype":"F32","shape":{shape},"data_offsets":[{},{}]}}"#,
        offsets[0], offsets[1]
    )
}

fn st_issues(json: &str, data_len: usize) -> Vec<HeaderIssue> {
    let file = st_file(json, data_len);
    safetensors::parse(&file, Some(file.len() as u64))
        .expect("header parses")
        .issues
}

fn st_error(json: &str) -> HeaderError {
    let file = st_file(json, 0);
    safetensors::parse(&file, None).expect_err("header is refused")
}

fn assert_offsets_invalid(issues: &[HeaderIssue], tensor: &str, words: &str) {
    assert!(
        issues
            .iter()
            .any(|i| matches!(i, HeaderIssue::OffsetsInvalid { tensor: t, detail }
            if t == tensor && detail.contains(words))),
        "expected OffsetsInvalid({tensor}, ..{words}..) in {issues:?}"
    );
}

#[test]
fn st_truncated_at_0_bytes() {
    assert_eq!(
        safetensors::parse(&[], None),
        Err(HeaderError::Truncated { need: 8, have: 0 })
    );
    assert_eq!(
        safetensors::required_prefix(&[]),
        Err(HeaderError::Truncated { need: 8, have: 0 })
    );
}

#[test]
fn st_truncated_at_4_bytes() {
    let file = st_file("{}", 0);
    assert_eq!(
        safetensors::parse(&file[..4], None),
        Err(HeaderError::Truncated { need: 8, have: 4 })
    );
}

#[test]
fn st_truncated_at_8_bytes() {
    let json = format!("{{{}}}", entry("a", "[2]", [0, 8]));
    let file = st_file(&json, 8);
    let need = 8 + json.len() as u64;
    assert_eq!(safetensors::required_prefix(&file[..8]), Ok(need));
    assert_eq!(
        safetensors::parse(&file[..8], None),
        Err(HeaderError::Truncated { need, have: 8 })
    );
}

#[test]
fn st_truncated_one_byte_short() {
    let json = format!("{{{}}}", entry("a", "[2]", [0, 8]));
    let file = st_file(&json, 0);
    let short = &file[..file.len() - 1];
    assert_eq!(
        safetensors::parse(short, None),
        Err(HeaderError::Truncated {
            need: file.len() as u64,
            have: short.len() as u64
        })
    );
}

#[test]
fn st_length_prefix_2_pow_63() {
    let file = (1u64 << 63).to_le_bytes();
    let err = HeaderError::TooLarge {
        len: 1 << 63,
        max: MAX_HEADER_BYTES,
    };
    assert_eq!(safetensors::parse(&file, None), Err(err.clone()));
    assert_eq!(safetensors::required_prefix(&file), Err(err));
}

#[test]
fn st_length_prefix_u64_max() {
    let file = u64::MAX.to_le_bytes();
    let err = HeaderError::TooLarge {
        len: u64::MAX,
        max: MAX_HEADER_BYTES,
    };
    assert_eq!(safetensors::parse(&file, Some(100)), Err(err.clone()));
    assert_eq!(safetensors::required_prefix(&file), Err(err));
}

#[test]
fn st_length_prefix_one_over_the_cap() {
    let file = (MAX_HEADER_BYTES + 1).to_le_bytes();
    assert!(matches!(
        safetensors::parse(&file, None),
        Err(HeaderError::TooLarge { .. })
    ));
    assert_eq!(
        safetensors::required_prefix(&MAX_HEADER_BYTES.to_le_bytes()),
        Ok(8 + MAX_HEADER_BYTES)
    );
}

#[test]
fn st_header_longer_than_file() {
    let file = st_file("{}", 0);
    assert_eq!(
        safetensors::parse(&file, Some(9)),
        Err(HeaderError::LongerThanFile { len: 2, file_size: 9 })
    );
}

#[test]
fn st_offsets_overlap() {
    let json = format!("{{{},{}}}", entry("a", "[2]", [0, 8]), entry("b", "[2]", [4, 12]));
    let issues = st_issues(&json, 12);
    assert_offsets_invalid(&issues, "b", "overlap");
}

#[test]
fn st_offsets_with_gap() {
    let json = format!("{{{},{}}}", entry("a", "[2]", [0, 8]), entry("b", "[2]", [12, 20]));
    let issues = st_issues(&json, 20);
    assert_offsets_invalid(&issues, "b", "gap");
}

#[test]
fn st_first_tensor_not_at_zero() {
    let json = format!("{{{}}}", entry("a", "[2]", [4, 12]));
    assert_offsets_invalid(&st_issues(&json, 12), "a", "gap");
}

#[test]
fn st_offsets_past_the_file() {
    let json = format!("{{{}}}", entry("a", "[2]", [0, 8]));
    let file = st_file(&json, 4);
    let header = safetensors::parse(&file, Some(file.len() as u64)).unwrap();
    assert_eq!(
        header.issues,
        [HeaderIssue::BeyondFile {
            data_end: 8 + json.len() as u64 + 8,
            file_size: file.len() as u64
        }]
    );
}

#[test]
fn st_offsets_near_u64_max_saturate() {
    let json = format!(
        r#"{{"a":{{"dtype":"U8","shape":[{n}],"data_offsets":[0,{n}]}}}}"#,
        n = u64::MAX
    );
    let file = st_file(&json, 0);
    let header = safetensors::parse(&file, Some(file.len() as u64)).unwrap();
    assert_eq!(
        header.issues,
        [HeaderIssue::BeyondFile {
            data_end: u64::MAX,
            file_size: file.len() as u64
        }]
    );
}

#[test]
fn st_bytes_after_the_data_section() {
    let json = format!("{{{}}}", entry("a", "[2]", [0, 8]));
    let file = st_file(&json, 10);
    let header = safetensors::parse(&file, Some(file.len() as u64)).unwrap();
    assert_eq!(
        header.issues,
        [HeaderIssue::TrailingBytes {
            data_end: file.len() as u64 - 2,
            file_size: file.len() as u64
        }]
    );
}

#[test]
fn st_end_before_begin() {
    let json = format!("{{{},{}}}", entry("a", "[2]", [0, 8]), entry("b", "[2]", [16, 8]));
    let issues = st_issues(&json, 8);
    assert_offsets_invalid(&issues, "b", "before begin");
    // A reversed range has no meaningful size to compare.
    assert!(
        !issues.iter().any(|i| matches!(i, HeaderIssue::SizeMismatch { .. })),
        "{issues:?}"
    );
}

#[test]
fn st_size_mismatch() {
    let json = format!("{{{}}}", entry("a", "[3]", [0, 8]));
    assert_eq!(
        st_issues(&json, 8),
        [HeaderIssue::SizeMismatch {
            tensor: "a".into(),
            declared: 8,
            expected: 12
        }]
    );
}

#[test]
fn st_shape_overflow() {
    let json = format!("{{{}}}", entry("a", &format!("[{},4]", u64::MAX / 2), [0, 8]));
    assert_eq!(st_issues(&json, 8), [HeaderIssue::ShapeOverflow { tensor: "a".into() }]);
}

#[test]
fn st_duplicate_names_are_kept_and_reported() {
    let json = format!("{{{},{}}}", entry("a", "[2]", [0, 8]), entry("a", "[2]", [8, 16]));
    let file = st_file(&json, 16);
    let header = safetensors::parse(&file, Some(file.len() as u64)).unwrap();
    assert_eq!(header.tensors.len(), 2, "a JSON map would have kept only the last");
    assert_eq!(header.issues, [HeaderIssue::DuplicateTensor { tensor: "a".into() }]);
}

#[test]
fn st_unknown_dtype() {
    let json = r#"{"a":{"dtype":"F12","shape":[2],"data_offsets":[0,3]}}"#;
    assert_eq!(
        st_issues(json, 3),
        [HeaderIssue::UnknownDtype {
            tensor: "a".into(),
            dtype: "F12".into()
        }]
    );
}

#[test]
fn st_not_utf8() {
    let mut file = st_file(r#"{"ab":{}}"#, 0);
    file[8 + 3] = 0xff;
    assert_eq!(safetensors::parse(&file, None), Err(HeaderError::NotUtf8 { at: 11 }));
}

#[test]
fn st_deeply_nested_json_in_a_tensor() {
    let err = st_error(&format!(r#"{{"a":{{"dtype":"F32","shape":{}}}}}"#, deep_json()));
    assert!(matches!(err, HeaderError::Json(_)), "{err:?}");
}

#[test]
fn st_deeply_nested_json_in_metadata() {
    let err = st_error(&format!(r#"{{"__metadata__":{{"k":{}}}}}"#, deep_json()));
    assert!(matches!(err, HeaderError::Json(_)), "{err:?}");
}

#[test]
fn st_deeply_nested_json_at_top_level() {
    assert!(matches!(st_error(&deep_json()), HeaderError::Json(_)));
}

#[test]
fn st_top_level_not_an_object() {
    let HeaderError::Json(msg) = st_error("[]") else {
        panic!("expected Json")
    };
    assert!(msg.contains("safetensors header object"), "{msg}");
}

#[test]
fn st_shape_is_a_string() {
    let HeaderError::Json(msg) = st_error(r#"{"w":{"dtype":"F32","shape":"2","data_offsets":[0,8]}}"#) else {
        panic!("expected Json")
    };
    assert!(msg.contains(r#""w""#), "the message names the tensor: {msg}");
}

#[test]
fn st_shape_is_negative() {
    let err = st_error(r#"{"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}}"#);
    assert!(matches!(err, HeaderError::Json(_)), "{err:?}");
}

#[test]
fn st_dtype_is_a_number() {
    let err = st_error(r#"{"w":{"dtype":32,"shape":[2],"data_offsets":[0,8]}}"#);
    assert!(matches!(err, HeaderError::Json(_)), "{err:?}");
}

#[test]
fn st_three_data_offsets() {
    let HeaderError::Json(msg) = st_error(r#"{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8,16]}}"#) else {
        panic!("expected Json")
    };
    assert!(msg.contains("exactly 2"), "{msg}");
}

#[test]
fn st_one_data_offset() {
    let err = st_error(r#"{"w":{"dtype":"F32","shape":[2],"data_offsets":[0]}}"#);
    assert!(matches!(err, HeaderError::Json(m) if m.contains("exactly 2")));
}

#[test]
fn st_missing_field() {
    let err = st_error(r#"{"w":{"dtype":"F32","shape":[2]}}"#);
    assert!(matches!(err, HeaderError::Json(m) if m.contains("data_offsets")));
}

#[test]
fn st_extra_field() {
    let err = st_error(r#"{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"sneaky":1}}"#);
    assert!(matches!(err, HeaderError::Json(m) if m.contains("sneaky")));
}

#[test]
fn st_tensor_is_not_an_object() {
    assert!(matches!(st_error(r#"{"w":[1,2]}"#), HeaderError::Json(_)));
}

#[test]
fn st_metadata_value_not_a_string() {
    let err = st_error(r#"{"__metadata__":{"format":1}}"#);
    assert!(matches!(err, HeaderError::Json(m) if m.contains("__metadata__")));
}

#[test]
fn st_metadata_twice() {
    let err = st_error(r#"{"__metadata__":{},"__metadata__":{}}"#);
    assert!(matches!(err, HeaderError::Json(m) if m.contains("duplicate __metadata__")));
}

#[test]
fn st_trailing_garbage_after_the_object() {
    assert!(matches!(st_error("{} x"), HeaderError::Json(_)));
}

#[test]
fn st_space_padding_is_allowed() {
    // Writers pad the header with spaces to align the data section.
    let file = st_file(r#"{"__metadata__":{"format":"pt"}}      "#, 0);
    let header = safetensors::parse(&file, Some(file.len() as u64)).unwrap();
    assert_eq!(header.issues, []);
    assert_eq!(header.metadata.unwrap()["format"], "pt");
}

#[test]
fn st_scalar_and_sub_byte_sizes() {
    // [] is one element; F4 rounds 3 elements (12 bits) up to 2 bytes.
    let json = r#"{"s":{"dtype":"F32","shape":[],"data_offsets":[0,4]},"q":{"dtype":"F4","shape":[3],"data_offsets":[4,6]},"z":{"dtype":"BF16","shape":[0,5],"data_offsets":[6,6]}}"#;
    assert_eq!(st_issues(json, 6), []);
}

// ---------------------------------------------------------------- index

fn index_json(weight_map: &str) -> Vec<u8> {
    format!(r#"{{"metadata":{{"total_size":16}},"weight_map":{weight_map}}}"#).into_bytes()
}

fn assert_unsafe_shard(name: &str) {
    let json = serde_json::json!({"weight_map": {"a": name}}).to_string();
    assert_eq!(
        index::parse(json.as_bytes()),
        Err(index::IndexError::UnsafeShardName(name.into())),
        "{name:?}"
    );
}

#[test]
fn index_absolute_shard_name() {
    assert_unsafe_shard("/etc/passwd");
}

#[test]
fn index_parent_dir_shard_name() {
    assert_unsafe_shard("../../secrets.safetensors");
    assert_unsafe_shard("sub/../../x.safetensors");
}

#[test]
fn index_backslash_shard_name() {
    assert_unsafe_shard(r"..\x.safetensors");
    assert_unsafe_shard(r"C:\x.safetensors");
}

#[test]
fn index_empty_shard_name() {
    assert_unsafe_shard("");
    assert_unsafe_shard("sub//x.safetensors");
    assert_unsafe_shard("./x.safetensors");
    assert_unsafe_shard("x.safetensors\0");
}

#[test]
fn index_subfolder_shard_name_is_fine() {
    let index = index::parse(&index_json(r#"{"a":"sub/x.safetensors"}"#)).unwrap();
    assert_eq!(index.shards(), ["sub/x.safetensors"]);
}

#[test]
fn index_without_weight_map() {
    assert_eq!(index::parse(br#"{"metadata":{}}"#), Err(index::IndexError::NoWeightMap));
    assert_eq!(
        index::parse(br#"{"weight_map":null}"#),
        Err(index::IndexError::NoWeightMap)
    );
}

#[test]
fn index_over_the_cap() {
    let bytes = vec![b' '; index::MAX_INDEX_BYTES + 1];
    assert_eq!(
        index::parse(&bytes),
        Err(index::IndexError::TooLarge {
            len: index::MAX_INDEX_BYTES + 1,
            max: index::MAX_INDEX_BYTES
        })
    );
}

#[test]
fn index_deeply_nested_json() {
    let json = format!(r#"{{"weight_map":{{"a":{}}}}}"#, deep_json());
    assert!(matches!(index::parse(json.as_bytes()), Err(index::IndexError::Json(_))));
    let json = format!(r#"{{"metadata":{{"total_size":{}}},"weight_map":{{}}}}"#, deep_json());
    assert!(matches!(index::parse(json.as_bytes()), Err(index::IndexError::Json(_))));
}

#[test]
fn index_deeply_nested_json_in_an_ignored_key() {
    // serde_json skips an ignored value iteratively: no recursion, so no limit needed.
    let json = format!(r#"{{"weight_map":{{}},"extra":{}}}"#, deep_json());
    assert_eq!(index::parse(json.as_bytes()).map(|i| i.weight_map.len()), Ok(0));
}

#[test]
fn index_weight_map_wrong_types() {
    assert!(matches!(
        index::parse(br#"{"weight_map":{"a":1}}"#),
        Err(index::IndexError::Json(_))
    ));
    assert!(matches!(
        index::parse(br#"{"weight_map":[]}"#),
        Err(index::IndexError::Json(_))
    ));
    assert!(matches!(index::parse(b"[]"), Err(index::IndexError::Json(_))));
    assert!(matches!(
        index::parse(br#"[{"total_size":1},{"a":"x"}]"#),
        Err(index::IndexError::Json(_))
    ));
    assert!(matches!(
        index::parse(br#"{"metadata":[1],"weight_map":{}}"#),
        Err(index::IndexError::Json(_))
    ));
}

#[test]
fn index_total_size_forms() {
    let total = |v: &str| {
        index::parse(format!(r#"{{"metadata":{{"total_size":{v}}},"weight_map":{{}}}}"#).as_bytes())
            .map(|i| i.total_size)
    };
    assert_eq!(total("16"), Ok(Some(16)));
    assert_eq!(total("16.0"), Ok(Some(16)));
    assert_eq!(total("1.6e10"), Ok(Some(16_000_000_000)));
    assert_eq!(total(r#""16""#), Ok(Some(16)));
    assert_eq!(total("null"), Ok(None));
    assert_eq!(index::parse(br#"{"weight_map":{}}"#).map(|i| i.total_size), Ok(None));
    for bad in ["-1", "16.5", "1e30", r#""lots""#, "[]"] {
        assert!(matches!(total(bad), Err(index::IndexError::Json(_))), "{bad}");
    }
}

#[test]
fn index_shards_are_distinct_and_sorted() {
    let index = index::parse(&index_json(
        r#"{"a":"m-2.safetensors","b":"m-1.safetensors","c":"m-2.safetensors"}"#,
    ))
    .unwrap();
    assert_eq!(index.shards(), ["m-1.safetensors", "m-2.safetensors"]);
}

// ---------------------------------------------------------------- config

#[test]
fn config_deeply_nested_json() {
    let json = format!(r#"{{"a":{}}}"#, deep_json());
    assert!(matches!(
        config::parse(json.as_bytes()),
        Err(config::ConfigError::Json(_))
    ));
    assert!(matches!(
        config::parse(deep_json().as_bytes()),
        Err(config::ConfigError::Json(_))
    ));
}

#[test]
fn config_not_an_object() {
    assert_eq!(config::parse(b"[1,2]"), Err(config::ConfigError::NotAnObject));
    assert_eq!(config::parse(b"null"), Err(config::ConfigError::NotAnObject));
}

#[test]
fn config_not_json() {
    assert!(matches!(
        config::parse(b"{model_type: llama}"),
        Err(config::ConfigError::Json(_))
    ));
    assert!(matches!(config::parse(b"\xff"), Err(config::ConfigError::Json(_))));
}

#[test]
fn config_over_the_cap() {
    let bytes = vec![b' '; config::MAX_CONFIG_BYTES + 1];
    assert!(matches!(
        config::parse(&bytes),
        Err(config::ConfigError::TooLarge { .. })
    ));
}

// ---------------------------------------------------------------- GGUF

// GGUF value types.
const U8: u32 = 0;
const U32: u32 = 4;
const STRING: u32 = 8;
const ARRAY: u32 = 9;
// ggml types.
const F32: u32 = 0;
const Q4_K: u32 = 12;

/// A small, valid v3 file: scalars, a kept array, a skipped fixed-width array, a skipped
/// string array, and two tensors, through the end of the tensor infos.
fn small_gguf() -> Vec<u8> {
    let long = gguf::KEEP_ARRAY_LEN + 1;
    let tokens = (0..long).fold(Gguf::default(), |w, i| w.str(&format!("t{i}"))).0;
    Gguf::header(3, 2, 5)
        .str("general.architecture")
        .u32(STRING)
        .str("llama")
        .str("general.alignment")
        .u32(U32)
        .u32(64)
        .str("llama.per_layer")
        .u32(ARRAY)
        .u32(U32)
        .u64(3)
        .u32(1)
        .u32(2)
        .u32(3)
        .str("tokenizer.ggml.token_type")
        .u32(ARRAY)
        .u32(U8)
        .u64(long)
        .raw(&vec![1; long as usize])
        .str("tokenizer.ggml.tokens")
        .u32(ARRAY)
        .u32(STRING)
        .u64(long)
        .raw(&tokens)
        .tensor("a", &[64, 2], F32, 0)
        .tensor("b", &[256], Q4_K, 512)
        .0
}

fn gguf_issues(w: Gguf, file_size: u64) -> Vec<gguf::HeaderIssue> {
    gguf::parse(&w.0, Some(file_size)).expect("header parses").issues
}

#[test]
fn gguf_small_file_parses() {
    let file = small_gguf();
    let header = gguf::parse(&file, Some(1 << 30)).unwrap();
    assert_eq!(header.issues, []);
    assert_eq!(header.alignment, 64);
    assert_eq!(header.header_bytes, file.len() as u64);
    assert_eq!(header.data_offset, (file.len() as u64).next_multiple_of(64));
    assert_eq!(
        header.kv["llama.per_layer"],
        gguf::Value::Array(vec![gguf::Value::UInt(1), gguf::Value::UInt(2), gguf::Value::UInt(3)])
    );
    assert_eq!(
        header.kv["tokenizer.ggml.token_type"],
        gguf::Value::SkippedArray {
            element_type: "uint8".into(),
            len: gguf::KEEP_ARRAY_LEN + 1
        }
    );
    assert_eq!(
        header.kv["tokenizer.ggml.tokens"],
        gguf::Value::SkippedArray {
            element_type: "string".into(),
            len: gguf::KEEP_ARRAY_LEN + 1
        }
    );
}

#[test]
fn gguf_truncated_at_every_cut_point() {
    let file = small_gguf();
    let len = file.len();
    // Every cut through the fixed part and the first kvs, then a stride through the rest.
    let cuts = (0..600).chain((600..len).step_by(37)).chain([len - 1]);
    for cut in cuts {
        match gguf::parse(&file[..cut], None) {
            Err(GgufError::Truncated { need, have }) => {
                assert_eq!(have, cut as u64);
                assert!(need > have && need <= len as u64, "cut {cut}: need {need}");
            }
            other => panic!("cut {cut}: {other:?}"),
        }
    }
}

#[test]
fn gguf_truncated_inside_a_skipped_array_names_its_end() {
    let w = Gguf::header(3, 0, 1).str("k").u32(ARRAY).u32(U32).u64(10_000);
    let start = w.0.len() as u64;
    let file = w.raw(&[0; 100]).0;
    assert_eq!(
        gguf::parse(&file, None),
        Err(GgufError::Truncated {
            need: start + 40_000,
            have: file.len() as u64
        })
    );
}

#[test]
fn gguf_truncated_inside_a_string_names_its_end() {
    let w = Gguf::header(3, 0, 1).str("k").u32(STRING).u64(1000);
    let start = w.0.len() as u64;
    let file = w.raw(b"abc").0;
    assert_eq!(
        gguf::parse(&file, None),
        Err(GgufError::Truncated {
            need: start + 1000,
            have: file.len() as u64
        })
    );
}

#[test]
fn gguf_wrong_magic() {
    assert_eq!(
        gguf::parse(b"GGML\x03\0\0\0", None),
        Err(GgufError::BadMagic {
            found: b"GGML".to_vec()
        })
    );
    // A first byte is enough to know.
    assert_eq!(
        gguf::parse(b"{", None),
        Err(GgufError::BadMagic { found: b"{".to_vec() })
    );
}

#[test]
fn gguf_version_1() {
    assert_eq!(
        gguf::parse(&Gguf::header(1, 0, 0).0, None),
        Err(GgufError::UnsupportedVersion(1))
    );
}

#[test]
fn gguf_version_4() {
    assert_eq!(
        gguf::parse(&Gguf::header(4, 0, 0).0, None),
        Err(GgufError::UnsupportedVersion(4))
    );
}

#[test]
fn gguf_version_0() {
    assert_eq!(
        gguf::parse(&Gguf::header(0, 0, 0).0, None),
        Err(GgufError::UnsupportedVersion(0))
    );
}

#[test]
fn gguf_big_endian_file() {
    let file = Gguf(b"GGUF".to_vec()).raw(&3u32.to_be_bytes()).0;
    assert_eq!(gguf::parse(&file, None), Err(GgufError::UnsupportedVersion(3 << 24)));
}

#[test]
fn gguf_tensor_count_2_pow_63() {
    assert_eq!(
        gguf::parse(&Gguf::header(3, 1 << 63, 0).0, None),
        Err(GgufError::CountTooLarge {
            what: "tensor",
            count: 1 << 63,
            max: gguf::MAX_TENSORS
        })
    );
}

#[test]
fn gguf_tensor_count_at_the_cap_with_no_bytes_behind_it() {
    // Allowed by the cap, but the reservation must follow the bytes, not the count.
    let file = Gguf::header(3, gguf::MAX_TENSORS, 0).0;
    assert_eq!(
        gguf::parse(&file, None),
        Err(GgufError::Truncated {
            need: file.len() as u64 + 8,
            have: file.len() as u64
        })
    );
}

#[test]
fn gguf_kv_count_absurd() {
    assert_eq!(
        gguf::parse(&Gguf::header(3, 0, u64::MAX).0, None),
        Err(GgufError::CountTooLarge {
            what: "key/value",
            count: u64::MAX,
            max: gguf::MAX_KVS
        })
    );
}

#[test]
fn gguf_key_length_absurd() {
    let file = Gguf::header(3, 0, 1).u64(1 << 63).0;
    assert_eq!(
        gguf::parse(&file, None),
        Err(GgufError::LengthTooLarge {
            what: "key",
            len: 1 << 63,
            max: gguf::MAX_NAME_BYTES
        })
    );
}

#[test]
fn gguf_string_length_absurd() {
    let file = Gguf::header(3, 0, 1).str("k").u32(STRING).u64(u64::MAX).0;
    assert_eq!(
        gguf::parse(&file, None),
        Err(GgufError::LengthTooLarge {
            what: "string",
            len: u64::MAX,
            max: gguf::MAX_STRING_BYTES
        })
    );
}

#[test]
fn gguf_string_length_absurd_inside_a_skipped_array() {
    let file = Gguf::header(3, 0, 1)
        .str("k")
        .u32(ARRAY)
        .u32(STRING)
        .u64(gguf::KEEP_ARRAY_LEN + 1)
        .str("fine")
        .u64(1 << 40)
        .0;
    assert!(matches!(
        gguf::parse(&file, None),
        Err(GgufError::LengthTooLarge { what: "string", .. })
    ));
}

#[test]
fn gguf_tensor_name_length_absurd() {
    let file = Gguf::header(3, 1, 0).u64(1 << 40).0;
    assert!(matches!(
        gguf::parse(&file, None),
        Err(GgufError::LengthTooLarge {
            what: "tensor name",
            ..
        })
    ));
}

#[test]
fn gguf_array_length_absurd() {
    let file = Gguf::header(3, 0, 1).str("k").u32(ARRAY).u32(U8).u64(1 << 62).0;
    assert_eq!(
        gguf::parse(&file, None),
        Err(GgufError::LengthTooLarge {
            what: "array",
            len: 1 << 62,
            max: gguf::MAX_ARRAY_LEN
        })
    );
}

#[test]
fn gguf_too_many_dims() {
    let file = Gguf::header(3, 1, 0).tensor("t", &[1, 1, 1, 1, 1], F32, 0).0;
    assert_eq!(
        gguf::parse(&file, None),
        Err(GgufError::TooManyDims {
            tensor: "t".into(),
            dims: 5,
            max: gguf::MAX_DIMS
        })
    );
    let file = Gguf::header(3, 1, 0).str("t").u32(u32::MAX).0;
    assert!(matches!(
        gguf::parse(&file, None),
        Err(GgufError::TooManyDims { dims: u32::MAX, .. })
    ));
}

#[test]
fn gguf_unknown_value_type() {
    let file = Gguf::header(3, 0, 1).str("k").u32(13).u32(0).0;
    assert_eq!(gguf::parse(&file, None), Err(GgufError::UnknownValueType(13)));
}

#[test]
fn gguf_unknown_array_element_type() {
    let file = Gguf::header(3, 0, 1).str("k").u32(ARRAY).u32(99).u64(0).0;
    assert_eq!(gguf::parse(&file, None), Err(GgufError::UnknownValueType(99)));
}

#[test]
fn gguf_array_of_arrays_is_fine() {
    let file = Gguf::header(3, 0, 1)
        .str("k")
        .u32(ARRAY)
        .u32(ARRAY)
        .u64(1)
        .u32(U32)
        .u64(1)
        .u32(7)
        .0;
    let header = gguf::parse(&file, None).unwrap();
    assert_eq!(
        header.kv["k"],
        gguf::Value::Array(vec![gguf::Value::Array(vec![gguf::Value::UInt(7)])])
    );
}

#[test]
fn gguf_arrays_nested_too_deep() {
    let file = Gguf::header(3, 0, 1)
        .str("k")
        .u32(ARRAY)
        .u32(ARRAY)
        .u64(1)
        .u32(ARRAY)
        .u64(1)
        .u32(U32)
        .u64(0)
        .0;
    assert_eq!(
        gguf::parse(&file, None),
        Err(GgufError::ArrayTooDeep {
            max: gguf::MAX_ARRAY_DEPTH
        })
    );
}

#[test]
fn gguf_arrays_nested_too_deep_inside_a_skipped_array() {
    let file = Gguf::header(3, 0, 1)
        .str("k")
        .u32(ARRAY)
        .u32(ARRAY)
        .u64(gguf::KEEP_ARRAY_LEN + 1)
        .u32(ARRAY)
        .u64(1)
        .0;
    assert_eq!(
        gguf::parse(&file, None),
        Err(GgufError::ArrayTooDeep {
            max: gguf::MAX_ARRAY_DEPTH
        })
    );
}

#[test]
fn gguf_many_short_arrays_stop_being_kept() {
    // 300 arrays of 4096 bytes: each short enough to keep, together past the kept budget.
    let n = 300;
    let w = (0..n).fold(Gguf::header(3, 0, n), |w, i| {
        w.str(&format!("k{i:03}"))
            .u32(ARRAY)
            .u32(U8)
            .u64(gguf::KEEP_ARRAY_LEN)
            .raw(&[0; 4096])
    });
    let header = gguf::parse(&w.0, None).unwrap();
    let kept = header
        .kv
        .values()
        .filter(|v| matches!(v, gguf::Value::Array(_)))
        .count() as u64;
    assert_eq!(kept, gguf::MAX_KEPT_ELEMENTS / gguf::KEEP_ARRAY_LEN);
    assert!(matches!(header.kv["k299"], gguf::Value::SkippedArray { len: 4096, .. }));
}

#[test]
fn gguf_key_not_utf8() {
    let file = Gguf::header(3, 0, 1).u64(2).raw(b"\xff\xfe").u32(U32).u32(0).0;
    assert_eq!(gguf::parse(&file, None), Err(GgufError::NotUtf8 { what: "key" }));
}

#[test]
fn gguf_duplicate_keys() {
    let file = Gguf::header(3, 0, 2)
        .str("k")
        .u32(U32)
        .u32(1)
        .str("k")
        .u32(U32)
        .u32(2)
        .0;
    assert_eq!(gguf::parse(&file, None), Err(GgufError::DuplicateKey("k".into())));
}

#[test]
fn gguf_alignment_not_a_power_of_two() {
    let file = Gguf::header(3, 0, 1).str("general.alignment").u32(U32).u32(48).0;
    assert_eq!(gguf::parse(&file, None), Err(GgufError::BadAlignment(48)));
}

#[test]
fn gguf_alignment_zero() {
    let file = Gguf::header(3, 0, 1).str("general.alignment").u32(U32).u32(0).0;
    assert_eq!(gguf::parse(&file, None), Err(GgufError::BadAlignment(0)));
}

#[test]
fn gguf_alignment_not_an_integer() {
    let file = Gguf::header(3, 0, 1).str("general.alignment").u32(STRING).str("32").0;
    assert_eq!(gguf::parse(&file, None), Err(GgufError::AlignmentNotUnsigned));
}

#[test]
fn gguf_alignment_2_pow_63_is_a_power_of_two() {
    let file = Gguf::header(3, 0, 1).str("general.alignment").u32(10).u64(1 << 63).0;
    let header = gguf::parse(&file, None).unwrap();
    assert_eq!(header.data_offset, 1 << 63);
}

#[test]
fn gguf_unknown_ggml_type() {
    let w = Gguf::header(3, 1, 0).tensor("t", &[32], 31, 0);
    assert_eq!(
        gguf_issues(w, 1 << 20),
        [gguf::HeaderIssue::UnknownType {
            tensor: "t".into(),
            ggml_type: 31
        }]
    );
}

#[test]
fn gguf_block_mismatch() {
    // 100 elements per row, Q4_K blocks hold 256.
    let w = Gguf::header(3, 1, 0).tensor("t", &[100, 256], Q4_K, 0);
    let issues = gguf_issues(w, 1 << 20);
    assert!(
        matches!(&issues[..], [gguf::HeaderIssue::BlockMismatch { tensor, .. }] if tensor == "t"),
        "{issues:?}"
    );
}

#[test]
fn gguf_shape_overflow() {
    let w = Gguf::header(3, 1, 0).tensor("t", &[1 << 40, 1 << 40], F32, 0);
    assert_eq!(
        gguf_issues(w, 1 << 20),
        [gguf::HeaderIssue::ShapeOverflow { tensor: "t".into() }]
    );
}

#[test]
fn gguf_tensor_end_overflows() {
    let w = Gguf::header(3, 1, 0).tensor("t", &[32], F32, u64::MAX - 31);
    let issues = gguf_issues(w, 1 << 20);
    assert!(
        issues.contains(&gguf::HeaderIssue::ShapeOverflow { tensor: "t".into() }),
        "{issues:?}"
    );
}

#[test]
fn gguf_misaligned_offset() {
    let w = Gguf::header(3, 1, 0).tensor("t", &[4], F32, 8);
    let issues = gguf_issues(w, 1 << 20);
    assert!(
        matches!(&issues[..], [gguf::HeaderIssue::OffsetsInvalid { tensor, detail }] if tensor == "t" && detail.contains("alignment")),
        "{issues:?}"
    );
}

#[test]
fn gguf_overlapping_tensors() {
    let w = Gguf::header(3, 2, 0)
        .tensor("a", &[64], F32, 0)
        .tensor("b", &[64], F32, 128);
    let issues = gguf_issues(w, 1 << 20);
    assert!(
        matches!(&issues[..], [gguf::HeaderIssue::OffsetsInvalid { tensor, detail }] if tensor == "b" && detail.contains("overlaps")),
        "{issues:?}"
    );
}

#[test]
fn gguf_duplicate_tensor_names() {
    let w = Gguf::header(3, 2, 0)
        .tensor("a", &[8], F32, 0)
        .tensor("a", &[8], F32, 32);
    assert_eq!(
        gguf_issues(w, 1 << 20),
        [gguf::HeaderIssue::DuplicateTensor { tensor: "a".into() }]
    );
}

#[test]
fn gguf_tensor_data_past_the_file() {
    let w = Gguf::header(3, 1, 0).tensor("t", &[1024], F32, 0);
    let header_end = w.0.len() as u64;
    let data_offset = header_end.next_multiple_of(32);
    let file_size = data_offset + 4095;
    assert_eq!(
        gguf_issues(w, file_size),
        [gguf::HeaderIssue::BeyondFile {
            data_end: data_offset + 4096,
            file_size
        }]
    );
}
