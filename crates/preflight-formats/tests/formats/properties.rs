//! Properties of every reader: arbitrary bytes never panic; mutated valid inputs (bit flips,
//! truncations, spliced bytes) never panic and either parse or return an error; a valid input
//! written from random parts parses back to the same parts with no issues.
//! Case counts follow proptest's default (256), overridable with `PROPTEST_CASES`.

use std::collections::BTreeMap;

use crate::writers::{Gguf, safetensors as st_file};
use preflight_formats::gguf::{self, Value};
use preflight_formats::{config, index, safetensors};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::{Index as At, select};

// ---------------------------------------------------------------- mutations

#[derive(Debug, Clone)]
enum Mutation {
    Flip(At, u8),
    Truncate(At),
    Splice(At, Vec<u8>),
    Overwrite(At, Vec<u8>),
}

fn mutations() -> impl Strategy<Value = Vec<Mutation>> {
    let one = prop_oneof![
        (any::<At>(), 0u8..8).prop_map(|(at, bit)| Mutation::Flip(at, bit)),
        any::<At>().prop_map(Mutation::Truncate),
        (any::<At>(), vec(any::<u8>(), 1..16)).prop_map(|(at, b)| Mutation::Splice(at, b)),
        (any::<At>(), vec(any::<u8>(), 1..16)).prop_map(|(at, b)| Mutation::Overwrite(at, b)),
    ];
    vec(one, 1..6)
}

fn mutate(mut bytes: Vec<u8>, mutations: &[Mutation]) -> Vec<u8> {
    for m in mutations {
        match m {
            Mutation::Flip(at, bit) if !bytes.is_empty() => {
                let i = at.index(bytes.len());
                bytes[i] ^= 1 << bit;
            }
            Mutation::Flip(..) => {}
            Mutation::Truncate(at) => bytes.truncate(at.index(bytes.len() + 1)),
            Mutation::Splice(at, new) => {
                let i = at.index(bytes.len() + 1);
                bytes.splice(i..i, new.iter().copied());
            }
            Mutation::Overwrite(at, new) => {
                let i = at.index(bytes.len() + 1);
                let end = (i + new.len()).min(bytes.len());
                bytes.splice(i..end, new.iter().copied());
            }
        }
    }
    bytes
}

/// Bytes that look enough like JSON to get past the first character now and then.
fn json_ish() -> impl Strategy<Value = String> {
    "[{}\\[\\]\":,0-9a-zA-Z_. \\-]{0,200}"
}

// ---------------------------------------------------------------- safetensors

const DTYPES: [&str; 8] = ["F32", "BF16", "F16", "F8_E4M3", "U8", "I64", "F4", "F6_E2M3"];

/// A valid header: tensors with random names, dtypes and shapes, laid out contiguously in a
/// random order (so data order differs from header order), and optional metadata.
#[derive(Debug, Clone)]
struct StCase {
    tensors: Vec<safetensors::TensorInfo>,
    metadata: Option<BTreeMap<String, String>>,
    /// Spaces after the JSON, as writers pad it.
    padding: usize,
}

fn st_case() -> impl Strategy<Value = StCase> {
    let tensor = ("\\PC{0,12}", select(&DTYPES[..]), vec(0u64..7, 0..4));
    let metadata = proptest::option::of(proptest::collection::btree_map("\\PC{0,8}", "\\PC{0,8}", 0..4));
    (vec(tensor, 0..24), metadata, 0usize..8)
        .prop_flat_map(|(tensors, metadata, padding)| {
            let order: Vec<usize> = (0..tensors.len()).collect();
            (Just(tensors), Just(order).prop_shuffle(), Just(metadata), Just(padding))
        })
        .prop_map(|(raw, order, metadata, padding)| {
            let mut tensors: Vec<safetensors::TensorInfo> = raw
                .into_iter()
                .enumerate()
                .map(|(i, (name, dtype, shape))| safetensors::TensorInfo {
                    // The index keeps names distinct (and never `__metadata__`).
                    name: format!("{i}.{name}"),
                    dtype: dtype.into(),
                    shape,
                    data_offsets: [0, 0],
                })
                .collect();
            let mut at = 0;
            for i in order {
                let t = &mut tensors[i];
                let elements: u64 = t.shape.iter().product();
                let bytes = (elements * safetensors::dtype_bits(&t.dtype).unwrap()).div_ceil(8);
                t.data_offsets = [at, at + bytes];
                at += bytes;
            }
            StCase {
                tensors,
                metadata,
                padding,
            }
        })
}

fn st_write(case: &StCase) -> Vec<u8> {
    let mut entries = Vec::new();
    if let Some(metadata) = &case.metadata {
        entries.push(format!(
            r#""__metadata__":{}"#,
            serde_json::to_string(metadata).unwrap()
        ));
    }
    for t in &case.tensors {
        entries.push(format!(
            r#"{}:{{"dtype":"{}","shape":{:?},"data_offsets":{:?}}}"#,
            serde_json::to_string(&t.name).unwrap(),
            t.dtype,
            t.shape,
            t.data_offsets
        ));
    }
    let json = format!("{{{}}}{}", entries.join(","), " ".repeat(case.padding));
    let data_len = case.tensors.iter().map(|t| t.data_offsets[1]).max().unwrap_or(0);
    st_file(&json, data_len as usize)
}

proptest! {
    #[test]
    fn st_arbitrary_bytes_never_panic(bytes in vec(any::<u8>(), 0..256), size in any::<Option<u64>>()) {
        let _ = safetensors::parse(&bytes, size);
        let _ = safetensors::required_prefix(&bytes);
    }

    #[test]
    fn st_arbitrary_json_never_panics(json in json_ish(), size in any::<Option<u64>>()) {
        let _ = safetensors::parse(&st_file(&json, 0), size);
    }

    #[test]
    fn st_mutated_headers_never_panic(case in st_case(), muts in mutations(), keep_size in any::<bool>()) {
        let file = st_write(&case);
        let size = keep_size.then_some(file.len() as u64);
        let _ = safetensors::parse(&mutate(file, &muts), size);
    }

    #[test]
    fn st_round_trip(case in st_case()) {
        let file = st_write(&case);
        let header = safetensors::parse(&file, Some(file.len() as u64)).unwrap();
        prop_assert_eq!(&header.issues, &[]);
        prop_assert_eq!(&header.tensors, &case.tensors);
        prop_assert_eq!(&header.metadata, &case.metadata);
        prop_assert_eq!(header.header_bytes() + header.data_bytes(), file.len() as u64);
    }
}

// ---------------------------------------------------------------- index

fn weight_map() -> impl Strategy<Value = BTreeMap<String, String>> {
    let shard = "[a-z0-9_-]{1,8}(/[a-z0-9_-]{1,8})?\\.safetensors";
    proptest::collection::btree_map("\\PC{0,16}", shard, 0..32)
}

fn index_json(weight_map: &BTreeMap<String, String>, total_size: Option<u64>) -> Vec<u8> {
    let metadata = total_size.map_or(serde_json::json!({}), |n| serde_json::json!({"total_size": n}));
    serde_json::to_vec(&serde_json::json!({"metadata": metadata, "weight_map": weight_map})).unwrap()
}

proptest! {
    #[test]
    fn index_arbitrary_bytes_never_panic(bytes in vec(any::<u8>(), 0..256)) {
        let _ = index::parse(&bytes);
    }

    #[test]
    fn index_arbitrary_json_never_panics(json in json_ish()) {
        let _ = index::parse(json.as_bytes());
    }

    #[test]
    fn index_mutated_never_panics(map in weight_map(), total in any::<Option<u64>>(), muts in mutations()) {
        let _ = index::parse(&mutate(index_json(&map, total), &muts));
    }

    #[test]
    fn index_round_trip(map in weight_map(), total in any::<Option<u64>>()) {
        let parsed = index::parse(&index_json(&map, total)).unwrap();
        prop_assert_eq!(parsed.total_size, total);
        let mut shards: Vec<&str> = map.values().map(String::as_str).collect();
        shards.sort();
        shards.dedup();
        prop_assert_eq!(parsed.shards(), shards);
        prop_assert_eq!(parsed.weight_map, map);
    }
}

// ---------------------------------------------------------------- config

fn json_value() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        (-1e9f64..1e9).prop_map(serde_json::Value::from),
        "\\PC{0,8}".prop_map(serde_json::Value::from),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..6).prop_map(serde_json::Value::Array),
            proptest::collection::btree_map("\\PC{0,8}", inner, 0..6)
                .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}

fn config_object() -> impl Strategy<Value = serde_json::Map<String, serde_json::Value>> {
    proptest::collection::btree_map("\\PC{0,12}", json_value(), 0..12).prop_map(|m| m.into_iter().collect())
}

proptest! {
    #[test]
    fn config_arbitrary_bytes_never_panic(bytes in vec(any::<u8>(), 0..256)) {
        let _ = config::parse(&bytes);
    }

    #[test]
    fn config_mutated_never_panics(object in config_object(), muts in mutations()) {
        let _ = config::parse(&mutate(serde_json::to_vec(&object).unwrap(), &muts));
    }

    #[test]
    fn config_round_trip(object in config_object()) {
        let parsed = config::parse(&serde_json::to_vec(&object).unwrap()).unwrap();
        prop_assert_eq!(parsed.raw, object);
    }
}

// ---------------------------------------------------------------- GGUF

const STRING: u32 = 8;
const ARRAY: u32 = 9;

/// One value of GGUF type `vtype` (not an array): its encoding and what the reader returns.
fn scalar(vtype: u32) -> BoxedStrategy<(Vec<u8>, Value)> {
    fn le<T: Copy + std::fmt::Debug + 'static>(
        s: impl Strategy<Value = T> + 'static,
        bytes: fn(T) -> Vec<u8>,
        value: fn(T) -> Value,
    ) -> BoxedStrategy<(Vec<u8>, Value)> {
        s.prop_map(move |v| (bytes(v), value(v))).boxed()
    }
    match vtype {
        0 => le(any::<u8>(), |v| v.to_le_bytes().into(), |v| Value::UInt(v.into())),
        1 => le(any::<i8>(), |v| v.to_le_bytes().into(), |v| Value::Int(v.into())),
        2 => le(any::<u16>(), |v| v.to_le_bytes().into(), |v| Value::UInt(v.into())),
        3 => le(any::<i16>(), |v| v.to_le_bytes().into(), |v| Value::Int(v.into())),
        4 => le(any::<u32>(), |v| v.to_le_bytes().into(), |v| Value::UInt(v.into())),
        5 => le(any::<i32>(), |v| v.to_le_bytes().into(), |v| Value::Int(v.into())),
        6 => le(-1e30f32..1e30, |v| v.to_le_bytes().into(), |v| Value::Float(v.into())),
        7 => le(any::<bool>(), |v| vec![u8::from(v)], Value::Bool),
        10 => le(any::<u64>(), |v| v.to_le_bytes().into(), Value::UInt),
        11 => le(any::<i64>(), |v| v.to_le_bytes().into(), Value::Int),
        12 => le(-1e300f64..1e300, |v| v.to_le_bytes().into(), Value::Float),
        _ => "\\PC{0,16}"
            .prop_map(|s| (Gguf::default().str(&s).0, Value::String(s)))
            .boxed(),
    }
}

const SCALAR_TYPES: [u32; 12] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 11, 12];

/// A short array, kept with its values; its elements may be short arrays themselves.
fn kept_array(nested: bool) -> BoxedStrategy<(Vec<u8>, Value)> {
    let element_type = if nested {
        select(&[0, 8, ARRAY][..]).boxed()
    } else {
        select(&SCALAR_TYPES[..]).boxed()
    };
    element_type
        .prop_flat_map(|etype| {
            let element = if etype == ARRAY {
                kept_array(false)
            } else {
                scalar(etype)
            };
            (Just(etype), vec(element, 0..6))
        })
        .prop_map(|(etype, items)| {
            let w = Gguf::default().u32(etype).u64(items.len() as u64);
            let w = items.iter().fold(w, |w, (bytes, _)| w.raw(bytes));
            (w.0, Value::Array(items.into_iter().map(|(_, v)| v).collect()))
        })
        .boxed()
}

/// A long array the reader walks and skips: fixed-width, or strings of random lengths.
fn skipped_array() -> impl Strategy<Value = (Vec<u8>, Value)> {
    let extra = 1..64u64;
    (select(&[0u32, 4, 12, STRING][..]), extra, vec(0usize..20, 1..8)).prop_map(|(etype, extra, lens)| {
        let len = gguf::KEEP_ARRAY_LEN + extra;
        let w = Gguf::default().u32(etype).u64(len);
        let w = match etype {
            STRING => (0..len as usize).fold(w, |w, i| w.str(&"x".repeat(lens[i % lens.len()]))),
            0 => w.raw(&vec![7; len as usize]),
            4 => w.raw(&vec![7; len as usize * 4]),
            _ => w.raw(&vec![7; len as usize * 8]),
        };
        let element_type = gguf::value_type_name(etype).unwrap().to_owned();
        (w.0, Value::SkippedArray { element_type, len })
    })
}

fn gguf_value() -> impl Strategy<Value = (u32, Vec<u8>, Value)> {
    prop_oneof![
        6 => select(&SCALAR_TYPES[..]).prop_flat_map(|t| (Just(t), scalar(t))).prop_map(|(t, (b, v))| (t, b, v)),
        2 => kept_array(true).prop_map(|(b, v)| (ARRAY, b, v)),
        1 => skipped_array().prop_map(|(b, v)| (ARRAY, b, v)),
    ]
}

/// ggml types to draw tensors from: plain, legacy-quant, k-quant and odd-block types.
const GGML_TYPES: [u32; 8] = [0, 1, 2, 8, 12, 14, 30, 39];

#[derive(Debug, Clone)]
struct GgufCase {
    alignment: Option<u64>,
    kv: Vec<(String, u32, Vec<u8>, Value)>,
    tensors: Vec<gguf::TensorInfo>,
}

impl GgufCase {
    fn alignment(&self) -> u64 {
        self.alignment.unwrap_or(32)
    }

    fn write(&self) -> Vec<u8> {
        let kvs = self.kv.len() as u64 + u64::from(self.alignment.is_some());
        let mut w = Gguf::header(3, self.tensors.len() as u64, kvs);
        if let Some(alignment) = self.alignment {
            w = w.str("general.alignment").u32(4).u32(alignment as u32);
        }
        for (key, vtype, bytes, _) in &self.kv {
            w = w.str(key).u32(*vtype).raw(bytes);
        }
        for t in &self.tensors {
            w = w.tensor(&t.name, &t.dims, t.ggml_type, t.offset);
        }
        w.0
    }

    /// The file size: data section start plus the last tensor's end.
    fn file_size(&self, header_bytes: u64) -> u64 {
        let end = self
            .tensors
            .iter()
            .map(|t| t.offset + tensor_bytes(t))
            .max()
            .unwrap_or(0);
        header_bytes.next_multiple_of(self.alignment()) + end
    }
}

fn tensor_bytes(t: &gguf::TensorInfo) -> u64 {
    let ty = gguf::ggml_type(t.ggml_type).unwrap();
    t.elements() / ty.block_elements * ty.block_bytes
}

fn gguf_case() -> impl Strategy<Value = GgufCase> {
    let alignment = proptest::option::of(select(&[1u64, 8, 32, 64, 4096][..]));
    let kv = vec(("[a-z.]{0,12}", gguf_value()), 0..12);
    // (name, type, blocks in a row, outer dims, padding in alignments after the tensor)
    let tensor = (
        "\\PC{0,10}",
        select(&GGML_TYPES[..]),
        0u64..4,
        vec(1u64..5, 0..3),
        0u64..3,
    );
    (alignment, kv, vec(tensor, 0..16)).prop_map(|(alignment, kv, raw)| {
        let kv = kv
            .into_iter()
            .enumerate()
            .map(|(i, (key, (vtype, bytes, value)))| (format!("k{i}.{key}"), vtype, bytes, value))
            .collect();
        let align = alignment.unwrap_or(32);
        let mut at = 0;
        let tensors = raw
            .into_iter()
            .enumerate()
            .map(|(i, (name, ggml_type, blocks, outer, pad))| {
                let row = blocks * gguf::ggml_type(ggml_type).unwrap().block_elements;
                let t = gguf::TensorInfo {
                    name: format!("{i}.{name}"),
                    dims: [vec![row], outer].concat(),
                    ggml_type,
                    offset: at,
                };
                at = (at + tensor_bytes(&t)).next_multiple_of(align) + pad * align;
                t
            })
            .collect();
        GgufCase { alignment, kv, tensors }
    })
}

fn gguf_ish() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        vec(any::<u8>(), 0..256),
        (select(&[2u32, 3][..]), 0u64..4, 0u64..4, vec(any::<u8>(), 0..256)).prop_map(|(v, t, k, tail)| Gguf::header(
            v, t, k
        )
        .raw(&tail)
        .0),
    ]
}

proptest! {
    #[test]
    fn gguf_arbitrary_bytes_never_panic(bytes in gguf_ish(), size in any::<Option<u64>>()) {
        let _ = gguf::parse(&bytes, size);
    }

    #[test]
    fn gguf_mutated_headers_never_panic(case in gguf_case(), muts in mutations(), size in any::<Option<u64>>()) {
        let _ = gguf::parse(&mutate(case.write(), &muts), size);
    }

    #[test]
    fn gguf_round_trip(case in gguf_case()) {
        let file = case.write();
        let file_size = case.file_size(file.len() as u64);
        let header = gguf::parse(&file, Some(file_size)).unwrap();
        prop_assert_eq!(&header.issues, &[]);
        prop_assert_eq!(header.header_bytes, file.len() as u64);
        prop_assert_eq!(header.alignment, case.alignment());
        prop_assert_eq!(&header.tensors, &case.tensors);
        let mut kv: BTreeMap<String, Value> =
            case.kv.iter().map(|(k, _, _, v)| (k.clone(), v.clone())).collect();
        if let Some(alignment) = case.alignment {
            kv.insert("general.alignment".into(), Value::UInt(alignment));
        }
        prop_assert_eq!(header.kv, kv);
    }

    #[test]
    fn gguf_truncated_prefix_asks_for_more(case in gguf_case(), at in any::<At>()) {
        let file = case.write();
        let cut = at.index(file.len());
        match gguf::parse(&file[..cut], None) {
            Err(gguf::GgufError::Truncated { need, have }) => {
                prop_assert_eq!(have, cut as u64);
                prop_assert!(need > have && need <= file.len() as u64);
            }
            other => prop_assert!(false, "cut {}: {:?}", cut, other),
        }
    }

    #[test]
    fn st_truncated_prefix_asks_for_more(case in st_case(), at in any::<At>()) {
        let file = st_write(&case);
        let header_end = safetensors::required_prefix(&file).unwrap() as usize;
        let cut = at.index(header_end);
        match safetensors::parse(&file[..cut], None) {
            Err(safetensors::HeaderError::Truncated { need, have }) => {
                prop_assert_eq!(have, cut as u64);
                prop_assert_eq!(need, if cut < 8 { 8 } else { header_end as u64 });
            }
            other => prop_assert!(false, "cut {}: {:?}", cut, other),
        }
    }
}
