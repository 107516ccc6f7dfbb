//! The Hub's `safetensors` summary in model info: elements per dtype over the checkpoint.
//!
//! Deliberately minimal and independent of `preflight-formats`: the fixture Hub must not
//! share a parser with the code it is used to test, or a bug in one would hide in both.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::Read;
use std::path::Path;

use serde::Serialize;

/// The safetensors format's own cap on the JSON header, so a broken fixture can't make us
/// allocate without bound.
const MAX_HEADER_BYTES: u64 = 100 * 1024 * 1024;

const INDEX_FILE: &str = "model.safetensors.index.json";
const SINGLE_FILE: &str = "model.safetensors";

#[derive(Clone, Debug, Serialize)]
pub(crate) struct ParamCounts {
    pub parameters: BTreeMap<String, u64>,
    pub total: u64,
}

/// Counts over the shards the index names, else over `model.safetensors` — the files
/// `huggingface_hub.get_safetensors_metadata` reads. `None` when there are none or one
/// does not parse (the Hub then omits the field). `disk` finds a repo file on disk (a
/// commit's files), so this reader needs nothing of the store that caches its answer.
pub(crate) fn count<'a>(disk: impl Fn(&str) -> Option<&'a Path>) -> Option<ParamCounts> {
    let shards: BTreeSet<String> = match disk(INDEX_FILE) {
        Some(index) => {
            let bytes = std::fs::read(index).ok()?;
            let json: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
            json.get("weight_map")?
                .as_object()?
                .values()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        }
        None if disk(SINGLE_FILE).is_some() => BTreeSet::from([SINGLE_FILE.to_owned()]),
        None => return None,
    };
    let mut parameters = BTreeMap::new();
    for shard in &shards {
        for (dtype, n) in header_counts(disk(shard)?)? {
            *parameters.entry(dtype).or_insert(0u64) += n;
        }
    }
    let total = parameters.values().sum();
    Some(ParamCounts { parameters, total })
}

fn header_counts(path: &Path) -> Option<BTreeMap<String, u64>> {
    let mut file = File::open(path).ok()?;
    let mut len = [0u8; 8];
    file.read_exact(&mut len).ok()?;
    let len = u64::from_le_bytes(len);
    if len > MAX_HEADER_BYTES {
        return None;
    }
    let mut header = vec![0u8; usize::try_from(len).ok()?];
    file.read_exact(&mut header).ok()?;
    let header: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(&header).ok()?;
    let mut counts = BTreeMap::new();
    for (name, tensor) in &header {
        if name == "__metadata__" {
            continue;
        }
        let dtype = tensor.get("dtype")?.as_str()?;
        let elements = tensor
            .get("shape")?
            .as_array()?
            .iter()
            .try_fold(1u64, |acc, d| acc.checked_mul(d.as_u64()?))?;
        *counts.entry(dtype.to_owned()).or_insert(0) += elements;
    }
    Some(counts)
}
