//! The planner alone — staged facts to a verdict, no I/O — on the largest layouts in the
//! fixtures: DeepSeek-V3 (161 headers, 92k tensors) and GLM-5.2 (303 headers, 60k tensors).

use std::path::Path;

use criterion::{Criterion, criterion_group, criterion_main};
use preflight_plan::{PlanOptions, plan};

fn fixtures() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures"))
}

fn facts(repo: &str) -> preflight_formats::facts::ArtifactFacts {
    let plain = fixtures().join("hub").join(repo);
    let dir = if plain.exists() {
        plain
    } else {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/bench-fixtures");
        std::fs::create_dir_all(&root).expect("bench fixture dir");
        let packed = preflight_testhub::packed::unpack_all(fixtures(), &root).expect("unpack");
        packed[repo].clone()
    };
    preflight_testhub::facts::from_tree(&dir, repo)
}

fn planner(c: &mut Criterion) {
    let mut group = c.benchmark_group("plan");
    group.sample_size(20);
    for repo in ["deepseek-ai/DeepSeek-V3", "zai-org/GLM-5.2"] {
        let facts = [facts(repo)];
        let options = PlanOptions::default();
        group.bench_function(repo, |b| {
            b.iter(|| plan(&facts, &options).expect("valid options").artifacts.len())
        });
    }
    group.finish();
}

criterion_group!(benches, planner);
criterion_main!(benches);
