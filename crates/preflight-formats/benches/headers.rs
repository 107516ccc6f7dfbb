//! Header parsing throughput on the largest real layouts in the fixtures: all 161 DeepSeek-V3
//! shard headers (92k tensors, 11.5 MB of JSON) and the Qwen3-8B Q4_K_M GGUF header (7.3 MB,
//! mostly a 152k-entry token list the reader walks without keeping).

use std::fs;
use std::path::{Path, PathBuf};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use preflight_formats::{gguf, safetensors};

/// The commit directory `main` points at in a fixture Hub repo.
fn commit_dir(repo: &str) -> PathBuf {
    let repo_dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/hub")
        .join(repo);
    let refs: serde_json::Value =
        serde_json::from_slice(&fs::read(repo_dir.join("refs.json")).expect("refs.json")).expect("refs.json is JSON");
    repo_dir.join(refs["main"].as_str().expect("refs.json names main"))
}

fn deepseek_headers(c: &mut Criterion) {
    let dir = commit_dir("deepseek-ai/DeepSeek-V3");
    let mut shards: Vec<Vec<u8>> = fs::read_dir(&dir)
        .expect("DeepSeek-V3 fixture")
        .map(|entry| entry.expect("dir entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "safetensors"))
        .map(|path| fs::read(path).expect("shard"))
        .collect();
    shards.sort();
    assert_eq!(shards.len(), 161);
    let bytes: u64 = shards.iter().map(|s| s.len() as u64).sum();

    let mut group = c.benchmark_group("safetensors");
    group.throughput(Throughput::Bytes(bytes));
    group.sample_size(20);
    group.bench_function("deepseek_v3_161_headers", |b| {
        b.iter(|| {
            shards
                .iter()
                .map(|s| safetensors::parse(s, None).expect("parses").tensors.len())
                .sum::<usize>()
        })
    });
    group.finish();
}

fn gguf_header(c: &mut Criterion) {
    let file = fs::read(commit_dir("Qwen/Qwen3-8B-GGUF").join("Qwen3-8B-Q4_K_M.gguf")).expect("GGUF fixture");

    let mut group = c.benchmark_group("gguf");
    group.throughput(Throughput::Bytes(file.len() as u64));
    group.bench_function("qwen3_8b_q4_k_m_header", |b| {
        b.iter(|| gguf::parse(&file, None).expect("parses").tensors.len())
    });
    group.finish();
}

criterion_group!(benches, deepseek_headers, gguf_header);
criterion_main!(benches);
