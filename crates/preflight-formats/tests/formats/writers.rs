//! Tiny writers for building headers byte by byte in tests: valid ones to round-trip, broken
//! ones to attack the readers with. No binary fixtures needed.

/// A safetensors file: the length prefix, `json`, then `data_len` zero bytes of data.
pub fn safetensors(json: &str, data_len: usize) -> Vec<u8> {
    let mut file = (json.len() as u64).to_le_bytes().to_vec();
    file.extend_from_slice(json.as_bytes());
    file.resize(file.len() + data_len, 0);
    file
}

/// A GGUF byte stream, little-endian, written call by call; nothing is validated, so a test
/// can write any lie it likes.
#[derive(Default)]
pub struct Gguf(pub Vec<u8>);

impl Gguf {
    /// Magic, version, tensor count and key/value count.
    pub fn header(version: u32, tensors: u64, kvs: u64) -> Self {
        Gguf(b"GGUF".to_vec()).u32(version).u64(tensors).u64(kvs)
    }

    pub fn raw(mut self, bytes: &[u8]) -> Self {
        self.0.extend_from_slice(bytes);
        self
    }

    pub fn u32(self, v: u32) -> Self {
        self.raw(&v.to_le_bytes())
    }

    pub fn u64(self, v: u64) -> Self {
        self.raw(&v.to_le_bytes())
    }

    /// A GGUF string: u64 length, then the bytes.
    pub fn str(self, s: &str) -> Self {
        self.u64(s.len() as u64).raw(s.as_bytes())
    }

    /// A tensor info: name, n_dims, dims (innermost first), ggml type, offset.
    pub fn tensor(self, name: &str, dims: &[u64], ggml_type: u32, offset: u64) -> Self {
        let w = self.str(name).u32(dims.len() as u32);
        dims.iter().fold(w, |w, &d| w.u64(d)).u32(ggml_type).u64(offset)
    }
}
