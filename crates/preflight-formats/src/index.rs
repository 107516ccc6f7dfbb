//! `model.safetensors.index.json`: which shard holds which tensor.
//!
//! Shard names come from the file and are later joined onto a repo path or URL, so any name
//! that could escape the checkpoint's folder is refused here, once, for every caller.

use std::collections::BTreeMap;

use std::fmt;

use serde::de::{self, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Serialize};

/// Real indexes are a few MB at most (DeepSeek-V3's is ~9 MB); anything larger is refused.
pub const MAX_INDEX_BYTES: usize = 64 << 20;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Index {
    /// `metadata.total_size`: the sum of the shards' data sections, as the writer declared it.
    pub total_size: Option<u64>,
    /// tensor name → shard file name.
    pub weight_map: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IndexError {
    #[error("index is {len} bytes, over the {max}-byte cap")]
    TooLarge { len: usize, max: usize },
    #[error("index is not valid JSON: {0}")]
    Json(String),
    #[error("index has no weight_map")]
    NoWeightMap,
    #[error("index names an unsafe shard file {0:?}")]
    UnsafeShardName(String),
}

impl Index {
    /// The distinct shard files the weight map names, sorted by name (so the
    /// `model-0000N-of-0000M` convention comes out in part order).
    pub fn shards(&self) -> Vec<&str> {
        let mut shards: Vec<&str> = self.weight_map.values().map(String::as_str).collect();
        // Neighbouring tensors share a shard: dropping runs first leaves a few hundred names
        // to sort instead of every tensor's (92k on DeepSeek-V3).
        shards.dedup();
        shards.sort_unstable();
        shards.dedup();
        shards
    }
}

/// Parse an index file. Keys other than `metadata.total_size` and `weight_map` are ignored:
/// writers add their own (`total_parameters`, `format`, …).
pub fn parse(bytes: &[u8]) -> Result<Index, IndexError> {
    if bytes.len() > MAX_INDEX_BYTES {
        return Err(IndexError::TooLarge {
            len: bytes.len(),
            max: MAX_INDEX_BYTES,
        });
    }
    let RawIndex { total_size, weight_map } =
        serde_json::from_slice(bytes).map_err(|e| IndexError::Json(e.to_string()))?;
    let weight_map = weight_map.ok_or(IndexError::NoWeightMap)?;
    // Neighbouring entries name the same shard: each run is checked once, not each of 92k.
    let mut checked: Option<&str> = None;
    for name in weight_map.values() {
        if checked == Some(name.as_str()) {
            continue;
        }
        if !is_safe_shard_name(name) {
            return Err(IndexError::UnsafeShardName(name.clone()));
        }
        checked = Some(name);
    }
    Ok(Index { total_size, weight_map })
}

/// A relative path that stays inside the checkpoint folder: not empty, not absolute, no `..`
/// anywhere, no `.` or empty segments, no backslashes or control characters (which a Windows
/// path or a URL might read differently from us).
fn is_safe_shard_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('/')
        && !name.contains("..")
        && !name.contains(|c: char| c == '\\' || c.is_control())
        && name.split('/').all(|segment| !segment.is_empty() && segment != ".")
}

/// The parts of the index we read. Hand-written visitors (not derives) so only JSON objects
/// are accepted: a derived struct would also take `[metadata, weight_map]` as an array.
struct RawIndex {
    total_size: Option<u64>,
    weight_map: Option<BTreeMap<String, String>>,
}

impl<'de> Deserialize<'de> for RawIndex {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(RawIndexVisitor)
    }
}

struct RawIndexVisitor;

impl<'de> Visitor<'de> for RawIndexVisitor {
    type Value = RawIndex;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an index object with a weight_map")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawIndex, A::Error> {
        let mut index = RawIndex {
            total_size: None,
            weight_map: None,
        };
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "metadata" => {
                    index.total_size = map.next_value::<Option<RawMetadata>>()?.and_then(|m| m.0);
                }
                "weight_map" => index.weight_map = map.next_value::<Option<WeightMap>>()?.map(|w| w.0),
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(index)
    }
}

/// `weight_map` as pairs first, then one bulk build: names arrive sorted (or nearly), and
/// inserting 92k long, prefix-sharing names one by one into a B-tree costs more than the
/// rest of the index. Equal names keep the last value, as inserting would.
struct WeightMap(BTreeMap<String, String>);

impl<'de> Deserialize<'de> for WeightMap {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(WeightMapVisitor)
    }
}

struct WeightMapVisitor;

impl<'de> Visitor<'de> for WeightMapVisitor {
    type Value = WeightMap;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a weight_map object of tensor name to shard file")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<WeightMap, A::Error> {
        let mut pairs: Vec<(String, String)> = Vec::new();
        while let Some(pair) = map.next_entry::<String, String>()? {
            pairs.push(pair);
        }
        Ok(WeightMap(pairs.into_iter().collect()))
    }
}

/// `metadata`, of which only `total_size` matters.
struct RawMetadata(Option<u64>);

impl<'de> Deserialize<'de> for RawMetadata {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(RawMetadataVisitor)
    }
}

struct RawMetadataVisitor;

impl<'de> Visitor<'de> for RawMetadataVisitor {
    type Value = RawMetadata;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a metadata object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawMetadata, A::Error> {
        let mut total_size = None;
        while let Some(key) = map.next_key::<String>()? {
            if key == "total_size" {
                total_size = map.next_value::<Option<TotalSize>>()?.map(|TotalSize(n)| n);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(RawMetadata(total_size))
    }
}

/// `total_size` as writers actually emit it: an integer, an integral float (`1.6e10`, from
/// writers that sum in floating point), or a decimal string.
struct TotalSize(u64);

impl<'de> Deserialize<'de> for TotalSize {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(TotalSizeVisitor)
    }
}

struct TotalSizeVisitor;

/// 2^64 as f64: the first float too large for a u64.
const U64_LIMIT_F64: f64 = 18_446_744_073_709_551_616.0;

impl Visitor<'_> for TotalSizeVisitor {
    type Value = TotalSize;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a non-negative integer byte count")
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<TotalSize, E> {
        Ok(TotalSize(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<TotalSize, E> {
        u64::try_from(v)
            .map(TotalSize)
            .map_err(|_| E::invalid_value(de::Unexpected::Signed(v), &self))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<TotalSize, E> {
        if v.fract() == 0.0 && (0.0..U64_LIMIT_F64).contains(&v) {
            // Integral and in range, so the cast is exact.
            Ok(TotalSize(v as u64))
        } else {
            Err(E::invalid_value(de::Unexpected::Float(v), &self))
        }
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<TotalSize, E> {
        v.parse()
            .map(TotalSize)
            .map_err(|_| E::invalid_value(de::Unexpected::Str(v), &self))
    }
}
