//! safetensors header reader: the 8-byte little-endian length and the JSON header,
//! parsed from a *prefix* of the file (what one ranged read returns).
//!
//! Structural failures (truncated, over the cap, not JSON, not UTF-8) are `Err`;
//! problems with a well-formed header (bad offsets, unknown dtype, duplicate names) are
//! returned as [`HeaderIssue`]s beside the header so the planner can report them as findings.
//! The JSON is read with a typed visitor, never through a `serde_json::Value` tree: it keeps
//! header order, sees duplicate names (a JSON map would silently keep the last), and keeps a
//! 92k-tensor header to one allocation per name, dtype and shape.

use std::collections::{BTreeMap, HashSet};

use foldhash::fast::RandomState;
use std::fmt;

use serde::de::{self, Deserializer as _, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};

/// The format's own limit on the JSON header (safetensors refuses larger headers too).
pub const MAX_HEADER_BYTES: u64 = 100_000_000;

/// Bytes before the JSON header: its length, `u64` little-endian.
const LEN_PREFIX: u64 = 8;

/// The reserved key holding free-form string metadata instead of a tensor.
const METADATA_KEY: &str = "__metadata__";

/// One tensor as declared in the header. `dtype` keeps any name so an unknown dtype is a
/// finding, not a parse failure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TensorInfo {
    pub name: String,
    pub dtype: Dtype,
    pub shape: Vec<u64>,
    /// `[begin, end)` relative to the start of the data section.
    pub data_offsets: [u64; 2],
}

impl TensorInfo {
    /// Product of the shape (`[]` is a scalar: 1). Saturates at `u64::MAX` on overflow;
    /// [`parse`] reports such a tensor as [`HeaderIssue::ShapeOverflow`].
    pub fn elements(&self) -> u64 {
        checked_elements(&self.shape).unwrap_or(u64::MAX)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    /// Tensors in header order.
    pub tensors: Vec<TensorInfo>,
    /// `__metadata__`, if present (string → string).
    pub metadata: Option<std::collections::BTreeMap<String, String>>,
    /// Length of the JSON header (the value of the 8-byte prefix).
    pub json_len: u64,
    /// Problems with a header that parsed; each becomes a finding.
    pub issues: Vec<HeaderIssue>,
}

impl Header {
    /// Bytes before the data section: the 8-byte length plus the JSON header.
    pub fn header_bytes(&self) -> u64 {
        LEN_PREFIX + self.json_len
    }

    /// Length of the data section the tensors declare: the furthest `end` offset. For a
    /// header without issues this is exactly the bytes after the header.
    pub fn data_bytes(&self) -> u64 {
        self.tensors.iter().map(|t| t.data_offsets[1]).max().unwrap_or(0)
    }
}

/// Something wrong inside a header that parsed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum HeaderIssue {
    UnknownDtype {
        tensor: String,
        dtype: String,
    },
    DuplicateTensor {
        tensor: String,
    },
    /// Offsets not contiguous, not in order, overlapping, or `end < begin`.
    OffsetsInvalid {
        tensor: String,
        detail: String,
    },
    /// `end - begin` differs from elements × dtype width.
    SizeMismatch {
        tensor: String,
        declared: u64,
        expected: u64,
    },
    /// The shape's element count, or its size in bytes, does not fit in a `u64`.
    ShapeOverflow {
        tensor: String,
    },
    /// The data section runs past the file's known size. `data_end` is an absolute file
    /// offset (length prefix + JSON header + data section), comparable with `file_size`.
    BeyondFile {
        data_end: u64,
        file_size: u64,
    },
    /// The file is longer than header + data section: bytes no tensor accounts for.
    /// `data_end` is an absolute file offset, as in [`HeaderIssue::BeyondFile`].
    TrailingBytes {
        data_end: u64,
        file_size: u64,
    },
    /// `count` more issues of kind `of`, past the ones listed one by one
    /// ([`crate::issues::KEPT_PER_KIND`]).
    Repeated {
        of: IssueKind,
        count: u64,
    },
}

/// The kinds of [`HeaderIssue`], by the names its `kind` tag uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IssueKind {
    UnknownDtype,
    DuplicateTensor,
    OffsetsInvalid,
    SizeMismatch,
    ShapeOverflow,
    BeyondFile,
    TrailingBytes,
    Repeated,
}

impl crate::issues::Issue for HeaderIssue {
    type Kind = IssueKind;

    fn kind(&self) -> IssueKind {
        match self {
            HeaderIssue::UnknownDtype { .. } => IssueKind::UnknownDtype,
            HeaderIssue::DuplicateTensor { .. } => IssueKind::DuplicateTensor,
            HeaderIssue::OffsetsInvalid { .. } => IssueKind::OffsetsInvalid,
            HeaderIssue::SizeMismatch { .. } => IssueKind::SizeMismatch,
            HeaderIssue::ShapeOverflow { .. } => IssueKind::ShapeOverflow,
            HeaderIssue::BeyondFile { .. } => IssueKind::BeyondFile,
            HeaderIssue::TrailingBytes { .. } => IssueKind::TrailingBytes,
            HeaderIssue::Repeated { .. } => IssueKind::Repeated,
        }
    }

    fn repeated(of: IssueKind, count: u64) -> Self {
        HeaderIssue::Repeated { of, count }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    /// The prefix is too short; at least `need` bytes from the start of the file are required.
    #[error("safetensors header truncated: need {need} bytes, have {have}")]
    Truncated { need: u64, have: u64 },
    #[error("safetensors header length {len} exceeds the {max}-byte cap")]
    TooLarge { len: u64, max: u64 },
    #[error("safetensors header length {len} exceeds the file size {file_size}")]
    LongerThanFile { len: u64, file_size: u64 },
    /// `at` is a byte offset from the start of the file.
    #[error("safetensors header is not valid UTF-8 at byte {at}")]
    NotUtf8 { at: usize },
    #[error("safetensors header is not valid JSON: {0}")]
    Json(String),
}

/// The dtypes the format defines, with their widths in bits (sub-byte formats exist).
const DTYPES: &[(&str, u64)] = &[
    ("F4", 4),
    ("F6_E2M3", 6),
    ("F6_E3M2", 6),
    ("BOOL", 8),
    ("U8", 8),
    ("I8", 8),
    ("F8_E5M2", 8),
    ("F8_E4M3", 8),
    ("F8_E8M0", 8),
    ("I16", 16),
    ("U16", 16),
    ("F16", 16),
    ("BF16", 16),
    ("I32", 32),
    ("U32", 32),
    ("F32", 32),
    ("I64", 64),
    ("U64", 64),
    ("F64", 64),
    ("C64", 64),
];

/// A tensor's dtype as its header names it: one of the format's own in one byte (a header of
/// a million tensors holds no million dtype strings), any other name kept whole.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Dtype(DtypeName);

#[derive(Clone, PartialEq, Eq, Hash)]
enum DtypeName {
    Known(u8),
    Other(Box<str>),
}

impl Dtype {
    pub fn as_str(&self) -> &str {
        match &self.0 {
            DtypeName::Known(i) => DTYPES[usize::from(*i)].0,
            DtypeName::Other(name) => name,
        }
    }
}

impl From<&str> for Dtype {
    fn from(name: &str) -> Dtype {
        Dtype(match DTYPES.iter().position(|(known, _)| *known == name) {
            Some(i) => DtypeName::Known(i as u8),
            None => DtypeName::Other(name.into()),
        })
    }
}

impl From<String> for Dtype {
    fn from(name: String) -> Dtype {
        Dtype::from(name.as_str())
    }
}

impl std::ops::Deref for Dtype {
    type Target = str;

    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl PartialEq<str> for Dtype {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Dtype {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl fmt::Debug for Dtype {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Dtype {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Dtype {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Dtype {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct DtypeVisitor;
        impl Visitor<'_> for DtypeVisitor {
            type Value = Dtype;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a dtype name")
            }
            fn visit_str<E: de::Error>(self, name: &str) -> Result<Dtype, E> {
                Ok(Dtype::from(name))
            }
        }
        d.deserialize_str(DtypeVisitor)
    }
}

/// Width of a safetensors dtype in *bits* (sub-byte formats exist), or `None` if unknown.
pub fn dtype_bits(dtype: &str) -> Option<u64> {
    DTYPES.iter().find(|(name, _)| *name == dtype).map(|(_, bits)| *bits)
}

/// How many bytes of the file are needed to parse the header, once the first 8 are known.
pub fn required_prefix(first8: &[u8]) -> Result<u64, HeaderError> {
    json_len(first8).map(|len| LEN_PREFIX + len)
}

/// Parse a header from a prefix of the file. `file_size`, when known, bounds the data section.
pub fn parse(prefix: &[u8], file_size: Option<u64>) -> Result<Header, HeaderError> {
    let json_len = json_len(prefix)?;
    let end = LEN_PREFIX + json_len;
    if let Some(file_size) = file_size.filter(|&size| end > size) {
        return Err(HeaderError::LongerThanFile {
            len: json_len,
            file_size,
        });
    }
    // `end` is at most 8 + MAX_HEADER_BYTES, so it fits in usize on every target we build.
    let json = usize::try_from(end)
        .ok()
        .and_then(|end| prefix.get(LEN_PREFIX as usize..end))
        .ok_or(HeaderError::Truncated {
            need: end,
            have: prefix.len() as u64,
        })?;
    let json = std::str::from_utf8(json).map_err(|e| HeaderError::NotUtf8 {
        at: LEN_PREFIX as usize + e.valid_up_to(),
    })?;

    let mut failed_at = None;
    let mut de = serde_json::Deserializer::from_str(json);
    let (tensors, metadata) = de
        .deserialize_map(HeaderVisitor {
            failed_at: &mut failed_at,
        })
        .and_then(|parsed| de.end().map(|()| parsed))
        .map_err(|e| match &failed_at {
            Some(key) => HeaderError::Json(format!("entry {key:?}: {e}")),
            None => HeaderError::Json(e.to_string()),
        })?;

    let issues = validate(&tensors, json_len, file_size);
    Ok(Header {
        tensors,
        metadata,
        json_len,
        issues,
    })
}

/// The JSON header's length from the first 8 bytes, checked against the cap before anyone
/// allocates or fetches on its strength.
fn json_len(prefix: &[u8]) -> Result<u64, HeaderError> {
    let first8 = prefix.first_chunk::<8>().ok_or(HeaderError::Truncated {
        need: LEN_PREFIX,
        have: prefix.len() as u64,
    })?;
    let len = u64::from_le_bytes(*first8);
    if len > MAX_HEADER_BYTES {
        return Err(HeaderError::TooLarge {
            len,
            max: MAX_HEADER_BYTES,
        });
    }
    Ok(len)
}

fn checked_elements(shape: &[u64]) -> Option<u64> {
    shape.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d))
}

/// Bytes a tensor of `shape` occupies at `bits` per element (sub-byte dtypes round up).
/// In u128, so a size that fits in a u64 is never refused for its bit count overflowing.
fn expected_bytes(shape: &[u64], bits: u64) -> Option<u64> {
    let bits = u128::from(checked_elements(shape)?) * u128::from(bits);
    u64::try_from(bits.div_ceil(8)).ok()
}

/// Everything that can be wrong in a header that parsed, in one pass per concern.
fn validate(tensors: &[TensorInfo], json_len: u64, file_size: Option<u64>) -> Vec<HeaderIssue> {
    let mut issues = crate::issues::IssueLog::default();

    let mut seen = HashSet::with_capacity_and_hasher(tensors.len(), RandomState::default());
    for t in tensors {
        if !seen.insert(t.name.as_str()) {
            issues.push(HeaderIssue::DuplicateTensor { tensor: t.name.clone() });
        }
    }

    for t in tensors {
        let Some(bits) = dtype_bits(&t.dtype) else {
            issues.push(HeaderIssue::UnknownDtype {
                tensor: t.name.clone(),
                dtype: t.dtype.to_string(),
            });
            continue;
        };
        let [begin, end] = t.data_offsets;
        // `end < begin` is an offsets issue, reported below; its size means nothing.
        let Some(declared) = end.checked_sub(begin) else {
            continue;
        };
        match expected_bytes(&t.shape, bits) {
            None => issues.push(HeaderIssue::ShapeOverflow { tensor: t.name.clone() }),
            Some(expected) if expected != declared => issues.push(HeaderIssue::SizeMismatch {
                tensor: t.name.clone(),
                declared,
                expected,
            }),
            Some(_) => {}
        }
    }

    // Sorted by offsets, the tensors must tile the data section exactly from 0.
    let mut by_offset: Vec<&TensorInfo> = tensors.iter().collect();
    by_offset.sort_unstable_by_key(|t| t.data_offsets);
    let mut covered = 0u64;
    for t in by_offset {
        let [begin, end] = t.data_offsets;
        let detail = if end < begin {
            Some(format!("end offset {end} is before begin offset {begin}"))
        } else if begin > covered {
            Some(format!("gap: data bytes {covered}..{begin} belong to no tensor"))
        } else if begin < covered {
            Some(format!(
                "overlap: begins at {begin}, before the previous tensor ends at {covered}"
            ))
        } else {
            None
        };
        if let Some(detail) = detail {
            issues.push(HeaderIssue::OffsetsInvalid {
                tensor: t.name.clone(),
                detail,
            });
        }
        if end >= begin {
            covered = covered.max(end);
        }
    }

    if let Some(file_size) = file_size {
        // Saturating: an end past u64::MAX is past any file, which is what the issue says.
        let data_end = (LEN_PREFIX + json_len).saturating_add(covered);
        if data_end > file_size {
            issues.push(HeaderIssue::BeyondFile { data_end, file_size });
        } else if data_end < file_size {
            issues.push(HeaderIssue::TrailingBytes { data_end, file_size });
        }
    }
    issues.finish()
}

/// Reads the top-level object in order. On a malformed entry it records the entry's key in
/// `failed_at` so the error can name the tensor.
struct HeaderVisitor<'a> {
    failed_at: &'a mut Option<String>,
}

type Parsed = (Vec<TensorInfo>, Option<BTreeMap<String, String>>);

impl<'de> Visitor<'de> for HeaderVisitor<'_> {
    type Value = Parsed;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a safetensors header object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Parsed, A::Error> {
        let mut tensors = Vec::new();
        let mut metadata = None;
        while let Some(key) = map.next_key::<String>()? {
            if key == METADATA_KEY {
                if metadata.is_some() {
                    return Err(de::Error::custom("duplicate __metadata__ entry"));
                }
                match map.next_value::<BTreeMap<String, String>>() {
                    Ok(m) => metadata = Some(m),
                    Err(e) => {
                        *self.failed_at = Some(key);
                        return Err(e);
                    }
                }
                continue;
            }
            match map.next_value::<RawTensor>() {
                Ok(RawTensor {
                    dtype,
                    shape,
                    data_offsets: Offsets(data_offsets),
                }) => {
                    tensors.push(TensorInfo {
                        name: key,
                        dtype,
                        shape,
                        data_offsets,
                    });
                }
                Err(e) => {
                    *self.failed_at = Some(key);
                    return Err(e);
                }
            }
        }
        Ok((tensors, metadata))
    }
}

/// A tensor entry exactly as the format defines it: three fields, nothing else.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTensor {
    dtype: Dtype,
    shape: Vec<u64>,
    data_offsets: Offsets,
}

/// `[begin, end]`, with a clear error for any other length (serde's fixed-array impl reports
/// a third element only as "trailing characters").
struct Offsets([u64; 2]);

impl<'de> Deserialize<'de> for Offsets {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_seq(OffsetsVisitor)
    }
}

struct OffsetsVisitor;

impl<'de> Visitor<'de> for OffsetsVisitor {
    type Value = Offsets;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("data_offsets as [begin, end]")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Offsets, A::Error> {
        let wrong_len = || de::Error::custom("data_offsets must have exactly 2 entries");
        let begin = seq.next_element()?.ok_or_else(wrong_len)?;
        let end = seq.next_element()?.ok_or_else(wrong_len)?;
        if seq.next_element::<IgnoredAny>()?.is_some() {
            return Err(wrong_len());
        }
        Ok(Offsets([begin, end]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dtype_widths() {
        assert_eq!(dtype_bits("BF16"), Some(16));
        assert_eq!(dtype_bits("F8_E4M3"), Some(8));
        assert_eq!(dtype_bits("F4"), Some(4));
        assert_eq!(dtype_bits("C64"), Some(64));
        assert_eq!(dtype_bits("bf16"), None, "dtypes are case-sensitive in the format");
    }

    #[test]
    fn sizes_round_sub_byte_dtypes_up() {
        assert_eq!(expected_bytes(&[3], 4), Some(2));
        assert_eq!(expected_bytes(&[], 32), Some(4));
        assert_eq!(expected_bytes(&[u64::MAX], 8), Some(u64::MAX));
        assert_eq!(expected_bytes(&[u64::MAX], 16), None);
    }
}

#[cfg(test)]
mod dtype_tests {
    use super::Dtype;

    #[test]
    fn a_dtype_keeps_any_name_and_stores_the_formats_own_in_a_byte() {
        for name in ["BF16", "F8_E4M3", "F12", ""] {
            let dtype = Dtype::from(name);
            assert_eq!(dtype.as_str(), name);
            let json = serde_json::to_string(&dtype).expect("json");
            assert_eq!(json, format!("\"{name}\""), "serialised as the name it was");
            assert_eq!(serde_json::from_str::<Dtype>(&json).expect("parse"), dtype);
        }
        assert!(matches!(Dtype::from("BF16").0, super::DtypeName::Known(_)));
        assert!(matches!(Dtype::from("F12").0, super::DtypeName::Other(_)));
        // Smaller than the String it replaces, and no allocation for a known name.
        assert!(std::mem::size_of::<Dtype>() <= std::mem::size_of::<String>());
    }
}
