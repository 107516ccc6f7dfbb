//! GGUF v2/v3 header reader: key/values and tensor infos, from a prefix of the file.
//!
//! Large arrays (a 150k-entry token list) are walked and skipped, keeping only their type and
//! length. When the prefix ends early the reader says how many bytes it needs
//! ([`GgufError::Truncated`]), so a caller can fetch a longer prefix and call again.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// GGUF magic, "GGUF" little-endian.
pub const MAGIC: [u8; 4] = *b"GGUF";
/// More tensors than any real checkpoint (DeepSeek-V3 GGUFs have ~1,100 per file).
pub const MAX_TENSORS: u64 = 1 << 20;
/// More key/values than any real file (~50 typical).
pub const MAX_KVS: u64 = 1 << 16;
/// A key or tensor name longer than this is hostile.
pub const MAX_NAME_BYTES: u64 = 1 << 16;
/// String values (chat templates are the largest, tens of KB).
pub const MAX_STRING_BYTES: u64 = 16 << 20;
/// Array length cap (token lists are ~260k).
pub const MAX_ARRAY_LEN: u64 = 1 << 26;
/// Arrays up to this length are kept with their values (per-layer arrays); longer ones are
/// skipped, keeping type and length.
pub const KEEP_ARRAY_LEN: u64 = 4096;
/// ggml's own limit on tensor rank.
pub const MAX_DIMS: u32 = 4;
/// An array of arrays is legal (and used, rarely); deeper nesting is not, and is refused so a
/// hostile file cannot recurse without bound.
pub const MAX_ARRAY_DEPTH: u32 = 2;
/// Total array elements kept as [`Value`]s across one header. Each kept element costs ~32
/// bytes of memory for as little as one byte of file, so a header of many short arrays could
/// otherwise amplify its size 32×; past this budget arrays are skipped like long ones.
pub const MAX_KEPT_ELEMENTS: u64 = 1 << 20;

/// The alignment key, and the alignment when it is absent (the GGUF spec's default).
const ALIGNMENT_KEY: &str = "general.alignment";
const DEFAULT_ALIGNMENT: u64 = 32;
/// Smallest possible tensor info: name length, n_dims, type and offset with no name, no dims.
const MIN_TENSOR_INFO_BYTES: u64 = 8 + 4 + 4 + 8;

// GGUF value type ids (`gguf_type` in ggml, `GGUFValueType` in gguf-py).
const T_U8: u32 = 0;
const T_I8: u32 = 1;
const T_U16: u32 = 2;
const T_I16: u32 = 3;
const T_U32: u32 = 4;
const T_I32: u32 = 5;
const T_F32: u32 = 6;
const T_BOOL: u32 = 7;
const T_STRING: u32 = 8;
const T_ARRAY: u32 = 9;
const T_U64: u32 = 10;
const T_I64: u32 = 11;
const T_F64: u32 = 12;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Value {
    Bool(bool),
    Int(i64),
    UInt(u64),
    Float(f64),
    String(String),
    Array(Vec<Value>),
    /// An array too long to keep (or past [`MAX_KEPT_ELEMENTS`]): its element type, named
    /// by [`value_type_name`], and its length.
    SkippedArray {
        element_type: String,
        len: u64,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TensorInfo {
    pub name: String,
    /// Dimensions as GGUF stores them (innermost first).
    pub dims: Vec<u64>,
    /// ggml type id.
    pub ggml_type: u32,
    /// Offset from the start of the data section.
    pub offset: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Header {
    pub version: u32,
    pub kv: BTreeMap<String, Value>,
    pub tensors: Vec<TensorInfo>,
    /// `general.alignment`, default 32.
    pub alignment: u64,
    /// Where the data section starts (end of tensor infos, padded to the alignment).
    pub data_offset: u64,
    /// Bytes of header actually parsed (magic through the last tensor info).
    pub header_bytes: u64,
    /// Problems in a header that parsed (unknown ggml type, overlapping data, data past the file).
    pub issues: Vec<HeaderIssue>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum HeaderIssue {
    UnknownType {
        tensor: String,
        ggml_type: u32,
    },
    /// A row (the innermost dim) not a whole number of the type's blocks, as ggml requires.
    BlockMismatch {
        tensor: String,
        detail: String,
    },
    OffsetsInvalid {
        tensor: String,
        detail: String,
    },
    DuplicateTensor {
        tensor: String,
    },
    /// The dims' element count, or the tensor's byte size or end, does not fit in a `u64`.
    ShapeOverflow {
        tensor: String,
    },
    /// `data_end` is an absolute file offset (data section start + furthest tensor end).
    BeyondFile {
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
    UnknownType,
    BlockMismatch,
    OffsetsInvalid,
    DuplicateTensor,
    ShapeOverflow,
    BeyondFile,
    Repeated,
}

impl crate::issues::Issue for HeaderIssue {
    type Kind = IssueKind;

    fn kind(&self) -> IssueKind {
        match self {
            HeaderIssue::UnknownType { .. } => IssueKind::UnknownType,
            HeaderIssue::BlockMismatch { .. } => IssueKind::BlockMismatch,
            HeaderIssue::OffsetsInvalid { .. } => IssueKind::OffsetsInvalid,
            HeaderIssue::DuplicateTensor { .. } => IssueKind::DuplicateTensor,
            HeaderIssue::ShapeOverflow { .. } => IssueKind::ShapeOverflow,
            HeaderIssue::BeyondFile { .. } => IssueKind::BeyondFile,
            HeaderIssue::Repeated { .. } => IssueKind::Repeated,
        }
    }

    fn repeated(of: IssueKind, count: u64) -> Self {
        HeaderIssue::Repeated { of, count }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GgufError {
    #[error("GGUF header truncated: need at least {need} bytes, have {have}")]
    Truncated { need: u64, have: u64 },
    #[error("not a GGUF file (magic {found:02x?})")]
    BadMagic { found: Vec<u8> },
    #[error("GGUF version {0} is not supported (v2 and v3 are)")]
    UnsupportedVersion(u32),
    #[error("GGUF {what} count {count} exceeds the cap of {max}")]
    CountTooLarge { what: &'static str, count: u64, max: u64 },
    #[error("GGUF {what} length {len} exceeds the cap of {max}")]
    LengthTooLarge { what: &'static str, len: u64, max: u64 },
    #[error("GGUF string is not valid UTF-8 ({what})")]
    NotUtf8 { what: &'static str },
    #[error("GGUF value type {0} is unknown")]
    UnknownValueType(u32),
    #[error("GGUF tensor {tensor:?} has {dims} dimensions (at most {max})")]
    TooManyDims { tensor: String, dims: u32, max: u32 },
    #[error("GGUF key {0:?} appears twice")]
    DuplicateKey(String),
    #[error("GGUF general.alignment {0} is not a power of two")]
    BadAlignment(u64),
    #[error("GGUF general.alignment is not an unsigned integer")]
    AlignmentNotUnsigned,
    #[error("GGUF arrays nest deeper than {max} levels")]
    ArrayTooDeep { max: u32 },
}

/// A ggml tensor type: its name, and how many elements a block holds in how many bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GgmlType {
    pub id: u32,
    pub name: &'static str,
    pub block_elements: u64,
    pub block_bytes: u64,
}

const fn ty(id: u32, name: &'static str, block_elements: u64, block_bytes: u64) -> GgmlType {
    GgmlType {
        id,
        name,
        block_elements,
        block_bytes,
    }
}

/// `GGMLQuantizationType` and `GGML_QUANT_SIZES` from gguf-py's `constants.py` (gguf 0.19.0).
/// Ids 4, 5 (removed Q4_2/Q4_3) and 31–33, 36–38 (removed IQ4 variants) are unassigned.
const GGML_TYPES: [GgmlType; 34] = [
    ty(0, "F32", 1, 4),
    ty(1, "F16", 1, 2),
    ty(2, "Q4_0", 32, 18),
    ty(3, "Q4_1", 32, 20),
    ty(6, "Q5_0", 32, 22),
    ty(7, "Q5_1", 32, 24),
    ty(8, "Q8_0", 32, 34),
    ty(9, "Q8_1", 32, 40),
    ty(10, "Q2_K", 256, 84),
    ty(11, "Q3_K", 256, 110),
    ty(12, "Q4_K", 256, 144),
    ty(13, "Q5_K", 256, 176),
    ty(14, "Q6_K", 256, 210),
    ty(15, "Q8_K", 256, 292),
    ty(16, "IQ2_XXS", 256, 66),
    ty(17, "IQ2_XS", 256, 74),
    ty(18, "IQ3_XXS", 256, 98),
    ty(19, "IQ1_S", 256, 50),
    ty(20, "IQ4_NL", 32, 18),
    ty(21, "IQ3_S", 256, 110),
    ty(22, "IQ2_S", 256, 82),
    ty(23, "IQ4_XS", 256, 136),
    ty(24, "I8", 1, 1),
    ty(25, "I16", 1, 2),
    ty(26, "I32", 1, 4),
    ty(27, "I64", 1, 8),
    ty(28, "F64", 1, 8),
    ty(29, "IQ1_M", 256, 56),
    ty(30, "BF16", 1, 2),
    ty(34, "TQ1_0", 256, 54),
    ty(35, "TQ2_0", 256, 66),
    ty(39, "MXFP4", 32, 17),
    ty(40, "NVFP4", 64, 36),
    ty(41, "Q1_0", 128, 18),
];

/// Every ggml type llama.cpp's gguf-py knows, or `None`.
pub fn ggml_type(id: u32) -> Option<GgmlType> {
    GGML_TYPES.iter().find(|t| t.id == id).copied()
}

impl TensorInfo {
    /// Product of the dims. Saturates at `u64::MAX` on overflow; [`parse`] reports such a
    /// tensor as [`HeaderIssue::ShapeOverflow`].
    pub fn elements(&self) -> u64 {
        checked_elements(&self.dims).unwrap_or(u64::MAX)
    }
}

fn checked_elements(dims: &[u64]) -> Option<u64> {
    dims.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d))
}

/// The name of a GGUF value type, as [`Value::SkippedArray`] reports an element type.
pub fn value_type_name(id: u32) -> Option<&'static str> {
    Some(match id {
        T_U8 => "uint8",
        T_I8 => "int8",
        T_U16 => "uint16",
        T_I16 => "int16",
        T_U32 => "uint32",
        T_I32 => "int32",
        T_F32 => "float32",
        T_BOOL => "bool",
        T_STRING => "string",
        T_ARRAY => "array",
        T_U64 => "uint64",
        T_I64 => "int64",
        T_F64 => "float64",
        _ => return None,
    })
}

/// Bytes per value of a fixed-width type; `None` for strings, arrays and unknown types.
fn fixed_width(id: u32) -> Option<u64> {
    match id {
        T_U8 | T_I8 | T_BOOL => Some(1),
        T_U16 | T_I16 => Some(2),
        T_U32 | T_I32 | T_F32 => Some(4),
        T_U64 | T_I64 | T_F64 => Some(8),
        _ => None,
    }
}

/// The fewest bytes one value of a known type can occupy: what bounds a pre-allocation.
fn min_width(id: u32) -> u64 {
    match id {
        T_STRING => 8,
        T_ARRAY => 4 + 8,
        _ => fixed_width(id).unwrap_or(1),
    }
}

/// Parse the header from a prefix of the file. `file_size`, when known, bounds the data.
pub fn parse(prefix: &[u8], file_size: Option<u64>) -> Result<Header, GgufError> {
    let magic = prefix.get(..4).unwrap_or(prefix);
    if !MAGIC.starts_with(magic) {
        return Err(GgufError::BadMagic { found: magic.to_vec() });
    }
    let mut r = Reader {
        buf: prefix,
        pos: 0,
        keep_budget: MAX_KEPT_ELEMENTS,
    };
    r.skip(MAGIC.len() as u64)?;
    let version = r.u32()?;
    if !(2..=3).contains(&version) {
        return Err(GgufError::UnsupportedVersion(version));
    }
    let tensor_count = r.u64()?;
    let kv_count = r.u64()?;
    if tensor_count > MAX_TENSORS {
        return Err(GgufError::CountTooLarge {
            what: "tensor",
            count: tensor_count,
            max: MAX_TENSORS,
        });
    }
    if kv_count > MAX_KVS {
        return Err(GgufError::CountTooLarge {
            what: "key/value",
            count: kv_count,
            max: MAX_KVS,
        });
    }

    let mut kv = BTreeMap::new();
    for _ in 0..kv_count {
        let key = r.string(MAX_NAME_BYTES, "key")?;
        if kv.contains_key(&key) {
            return Err(GgufError::DuplicateKey(key));
        }
        let vtype = r.u32()?;
        let value = r.value(vtype, 0)?;
        kv.insert(key, value);
    }

    let alignment = match kv.get(ALIGNMENT_KEY) {
        None => DEFAULT_ALIGNMENT,
        Some(Value::UInt(a)) if a.is_power_of_two() => *a,
        Some(Value::UInt(a)) => return Err(GgufError::BadAlignment(*a)),
        Some(_) => return Err(GgufError::AlignmentNotUnsigned),
    };

    // Never trust the count for a reservation beyond what the remaining bytes could hold.
    let mut tensors = Vec::with_capacity(r.bounded_capacity(tensor_count, MIN_TENSOR_INFO_BYTES));
    for _ in 0..tensor_count {
        tensors.push(r.tensor_info()?);
    }

    let header_bytes = r.pos as u64;
    let data_offset = header_bytes
        .checked_next_multiple_of(alignment)
        .ok_or(GgufError::BadAlignment(alignment))?;
    let issues = validate(&tensors, alignment, data_offset, file_size);
    Ok(Header {
        version,
        kv,
        tensors,
        alignment,
        data_offset,
        header_bytes,
        issues,
    })
}

/// A cursor over the prefix. **Invariant:** `pos <= buf.len()`. Every read that runs past the
/// end reports the end of the item being read as `need`.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    /// How many more array elements may be kept (see [`MAX_KEPT_ELEMENTS`]).
    keep_budget: u64,
}

impl<'a> Reader<'a> {
    fn remaining(&self) -> u64 {
        (self.buf.len() - self.pos) as u64
    }

    fn truncated(&self, n: u64) -> GgufError {
        GgufError::Truncated {
            need: (self.pos as u64).saturating_add(n),
            have: self.buf.len() as u64,
        }
    }

    /// Fail now, naming the item's end, if the next `n` bytes are not all there.
    fn ensure(&self, n: u64) -> Result<(), GgufError> {
        if n > self.remaining() {
            Err(self.truncated(n))
        } else {
            Ok(())
        }
    }

    fn take(&mut self, n: u64) -> Result<&'a [u8], GgufError> {
        self.ensure(n)?;
        // n <= remaining, so it fits in usize and the range is in bounds.
        let start = self.pos;
        self.pos += n as usize;
        Ok(self.buf.get(start..self.pos).unwrap_or_default())
    }

    fn skip(&mut self, n: u64) -> Result<(), GgufError> {
        self.take(n).map(drop)
    }

    fn fixed<const N: usize>(&mut self) -> Result<[u8; N], GgufError> {
        let rest = self.buf.get(self.pos..).unwrap_or_default();
        let bytes = *rest.first_chunk::<N>().ok_or_else(|| self.truncated(N as u64))?;
        self.pos += N;
        Ok(bytes)
    }

    fn u32(&mut self) -> Result<u32, GgufError> {
        self.fixed().map(u32::from_le_bytes)
    }

    fn u64(&mut self) -> Result<u64, GgufError> {
        self.fixed().map(u64::from_le_bytes)
    }

    /// A length-prefixed string's length, checked against its cap before anything else.
    fn string_len(&mut self, max: u64, what: &'static str) -> Result<u64, GgufError> {
        let len = self.u64()?;
        if len > max {
            return Err(GgufError::LengthTooLarge { what, len, max });
        }
        Ok(len)
    }

    fn string(&mut self, max: u64, what: &'static str) -> Result<String, GgufError> {
        let len = self.string_len(max, what)?;
        let bytes = self.take(len)?;
        std::str::from_utf8(bytes)
            .map(str::to_owned)
            .map_err(|_| GgufError::NotUtf8 { what })
    }

    /// `min(count, what the remaining bytes could hold)`: a capacity safe to reserve.
    fn bounded_capacity(&self, count: u64, min_item_bytes: u64) -> usize {
        let fits = self.remaining() / min_item_bytes.max(1);
        usize::try_from(count.min(fits)).unwrap_or(0)
    }

    /// One value of type `vtype`; `depth` is how many arrays enclose it.
    fn value(&mut self, vtype: u32, depth: u32) -> Result<Value, GgufError> {
        Ok(match vtype {
            T_U8 => Value::UInt(u8::from_le_bytes(self.fixed()?).into()),
            T_I8 => Value::Int(i8::from_le_bytes(self.fixed()?).into()),
            T_U16 => Value::UInt(u16::from_le_bytes(self.fixed()?).into()),
            T_I16 => Value::Int(i16::from_le_bytes(self.fixed()?).into()),
            T_U32 => Value::UInt(self.u32()?.into()),
            T_I32 => Value::Int(i32::from_le_bytes(self.fixed()?).into()),
            T_F32 => Value::Float(f32::from_le_bytes(self.fixed()?).into()),
            // ggml reads a bool as a byte and tests it against zero; so do we.
            T_BOOL => Value::Bool(self.fixed::<1>()? != [0]),
            T_STRING => Value::String(self.string(MAX_STRING_BYTES, "string")?),
            T_ARRAY => self.array(depth + 1)?,
            T_U64 => Value::UInt(self.u64()?),
            T_I64 => Value::Int(i64::from_le_bytes(self.fixed()?)),
            T_F64 => Value::Float(f64::from_le_bytes(self.fixed()?)),
            other => return Err(GgufError::UnknownValueType(other)),
        })
    }

    /// An array's element type and length, with depth, type and length checked.
    fn array_header(&mut self, depth: u32) -> Result<(u32, u64), GgufError> {
        if depth > MAX_ARRAY_DEPTH {
            return Err(GgufError::ArrayTooDeep { max: MAX_ARRAY_DEPTH });
        }
        let element_type = self.u32()?;
        let len = self.u64()?;
        if value_type_name(element_type).is_none() {
            return Err(GgufError::UnknownValueType(element_type));
        }
        if len > MAX_ARRAY_LEN {
            return Err(GgufError::LengthTooLarge {
                what: "array",
                len,
                max: MAX_ARRAY_LEN,
            });
        }
        Ok((element_type, len))
    }

    fn array(&mut self, depth: u32) -> Result<Value, GgufError> {
        let (element_type, len) = self.array_header(depth)?;
        if len > KEEP_ARRAY_LEN || len > self.keep_budget {
            self.skip_elements(element_type, len, depth)?;
            let element_type = value_type_name(element_type).unwrap_or_default().to_owned();
            return Ok(Value::SkippedArray { element_type, len });
        }
        self.keep_budget -= len;
        if let Some(width) = fixed_width(element_type) {
            // The whole array is in the prefix or the error names its end. len <= 2^26 and
            // width <= 8, so the product cannot overflow.
            self.ensure(len * width)?;
        }
        let mut items = Vec::with_capacity(self.bounded_capacity(len, min_width(element_type)));
        for _ in 0..len {
            items.push(self.value(element_type, depth)?);
        }
        Ok(Value::Array(items))
    }

    /// Walk `len` elements without materialising them: fixed-width runs are jumped, strings
    /// are hopped length by length, nested arrays are walked the same way.
    fn skip_elements(&mut self, element_type: u32, len: u64, depth: u32) -> Result<(), GgufError> {
        match element_type {
            T_STRING => {
                for _ in 0..len {
                    let n = self.string_len(MAX_STRING_BYTES, "string")?;
                    self.skip(n)?;
                }
            }
            T_ARRAY => {
                for _ in 0..len {
                    let (inner_type, inner_len) = self.array_header(depth + 1)?;
                    self.skip_elements(inner_type, inner_len, depth + 1)?;
                }
            }
            // array_header vetted the type, so every other type has a width.
            _ => self.skip(len * fixed_width(element_type).unwrap_or(1))?,
        }
        Ok(())
    }

    fn tensor_info(&mut self) -> Result<TensorInfo, GgufError> {
        let name = self.string(MAX_NAME_BYTES, "tensor name")?;
        let n_dims = self.u32()?;
        if n_dims > MAX_DIMS {
            return Err(GgufError::TooManyDims {
                tensor: name,
                dims: n_dims,
                max: MAX_DIMS,
            });
        }
        // The rest of the info is fixed-size now: dims, type, offset.
        self.ensure(u64::from(n_dims) * 8 + 4 + 8)?;
        let dims = (0..n_dims).map(|_| self.u64()).collect::<Result<_, _>>()?;
        let ggml_type = self.u32()?;
        let offset = self.u64()?;
        Ok(TensorInfo {
            name,
            dims,
            ggml_type,
            offset,
        })
    }
}

/// Issues with tensor infos that parsed: types, block shapes, alignment, overlap, file size.
/// Gaps between tensors are legal (writers pad each tensor to the alignment).
fn validate(tensors: &[TensorInfo], alignment: u64, data_offset: u64, file_size: Option<u64>) -> Vec<HeaderIssue> {
    let mut issues = crate::issues::IssueLog::default();

    let mut seen =
        std::collections::HashSet::with_capacity_and_hasher(tensors.len(), foldhash::fast::RandomState::default());
    for t in tensors {
        if !seen.insert(t.name.as_str()) {
            issues.push(HeaderIssue::DuplicateTensor { tensor: t.name.clone() });
        }
    }

    // (offset, end, tensor) for every tensor whose size is known.
    let mut spans = Vec::with_capacity(tensors.len());
    for t in tensors {
        if t.offset % alignment != 0 {
            issues.push(HeaderIssue::OffsetsInvalid {
                tensor: t.name.clone(),
                detail: format!("offset {} is not a multiple of the alignment {alignment}", t.offset),
            });
        }
        let Some(ty) = ggml_type(t.ggml_type) else {
            issues.push(HeaderIssue::UnknownType {
                tensor: t.name.clone(),
                ggml_type: t.ggml_type,
            });
            continue;
        };
        let Some(elements) = checked_elements(&t.dims) else {
            issues.push(HeaderIssue::ShapeOverflow { tensor: t.name.clone() });
            continue;
        };
        // ggml blocks run along a row, so the innermost dim must hold whole blocks (which
        // also makes the element count a whole number of blocks).
        let row = t.dims.first().copied().unwrap_or(1);
        if row % ty.block_elements != 0 {
            issues.push(HeaderIssue::BlockMismatch {
                tensor: t.name.clone(),
                detail: format!(
                    "row of {row} elements is not a multiple of {}'s block of {}",
                    ty.name, ty.block_elements
                ),
            });
            continue;
        }
        let Some(end) = (elements / ty.block_elements)
            .checked_mul(ty.block_bytes)
            .and_then(|bytes| t.offset.checked_add(bytes))
        else {
            issues.push(HeaderIssue::ShapeOverflow { tensor: t.name.clone() });
            continue;
        };
        spans.push((t.offset, end, t));
    }

    spans.sort_unstable_by_key(|&(offset, end, _)| (offset, end));
    let mut covered: Option<(u64, &TensorInfo)> = None;
    for &(offset, end, t) in &spans {
        if let Some((prev_end, prev)) = covered.filter(|&(prev_end, _)| offset < prev_end) {
            issues.push(HeaderIssue::OffsetsInvalid {
                tensor: t.name.clone(),
                detail: format!(
                    "data at {offset}..{end} overlaps tensor {:?}, which ends at {prev_end}",
                    prev.name
                ),
            });
        }
        if covered.is_none_or(|(prev_end, _)| end > prev_end) {
            covered = Some((end, t));
        }
    }

    if let (Some(file_size), Some((max_end, _))) = (file_size, covered) {
        // Saturating: an end past u64::MAX is past any file, which is what the issue says.
        let data_end = data_offset.saturating_add(max_end);
        if data_end > file_size {
            issues.push(HeaderIssue::BeyondFile { data_end, file_size });
        }
    }
    issues.finish()
}

/// Digits in each number of a split name: llama.cpp writes `%s-%05d-of-%05d.gguf`.
const SPLIT_DIGITS: usize = 5;

/// `(prefix, index, count)` of a split GGUF name.
fn split_fields(file_name: &str) -> Option<(&str, u32, u32)> {
    let stem = file_name.strip_suffix(".gguf")?;
    let (rest, count) = stem.rsplit_once("-of-")?;
    let (prefix, index) = rest.rsplit_once('-')?;
    let number = |s: &str| {
        (s.len() == SPLIT_DIGITS && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse().ok())
            .flatten()
    };
    let (index, count) = (number(index)?, number(count)?);
    (1..=count).contains(&index).then_some((prefix, index, count))
}

/// For `name-00001-of-00003.gguf`: `(index, count)` (1-based), else `None`.
pub fn split_part(file_name: &str) -> Option<(u32, u32)> {
    split_fields(file_name).map(|(_, index, count)| (index, count))
}

/// The file names of every part of a split GGUF, given any one part's name.
pub fn split_siblings(file_name: &str) -> Option<Vec<String>> {
    let (prefix, _, count) = split_fields(file_name)?;
    Some(
        (1..=count)
            .map(|i| format!("{prefix}-{i:05}-of-{count:05}.gguf"))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_names() {
        assert_eq!(split_part("Foo-00001-of-00003.gguf"), Some((1, 3)));
        assert_eq!(split_part("dir/Foo-Q4_K_M-00003-of-00003.gguf"), Some((3, 3)));
        assert_eq!(split_part("Foo.gguf"), None);
        assert_eq!(split_part("Foo-00004-of-00003.gguf"), None, "index past count");
        assert_eq!(split_part("Foo-00000-of-00003.gguf"), None, "parts are 1-based");
        assert_eq!(split_part("Foo-1-of-3.gguf"), None, "llama.cpp pads to 5 digits");
        assert_eq!(split_part("Foo-00001-of-00003.safetensors"), None);
        assert_eq!(
            split_siblings("dir/Foo-00002-of-00003.gguf").unwrap(),
            [
                "dir/Foo-00001-of-00003.gguf",
                "dir/Foo-00002-of-00003.gguf",
                "dir/Foo-00003-of-00003.gguf"
            ]
        );
        assert_eq!(split_siblings("Foo.gguf"), None);
    }

    #[test]
    fn ggml_types_are_unique_and_findable() {
        for (i, t) in GGML_TYPES.iter().enumerate() {
            assert_eq!(ggml_type(t.id), Some(*t));
            assert!(
                GGML_TYPES[..i].iter().all(|u| u.id != t.id && u.name != t.name),
                "{t:?}"
            );
        }
        assert_eq!(
            ggml_type(12).map(|t| (t.name, t.block_elements, t.block_bytes)),
            Some(("Q4_K", 256, 144))
        );
        assert_eq!(ggml_type(4), None, "Q4_2 was removed");
        assert_eq!(ggml_type(42), None);
    }
}
