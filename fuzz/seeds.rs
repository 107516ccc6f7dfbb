//! What every target shares: the seeds (a real 2-layer Llama, compiled in) and the lookup of
//! the target's function by name in `preflight_plan::fuzz::TARGETS`.

use std::sync::OnceLock;

use preflight_plan::fuzz::{Seeds, TARGETS};

fn seeds() -> &'static Seeds {
    static SEEDS: OnceLock<Seeds> = OnceLock::new();
    SEEDS.get_or_init(|| {
        Seeds::new(
            include_bytes!("../fixtures/local/tiny-llama/config.json"),
            include_bytes!("../fixtures/local/tiny-llama/model.safetensors"),
        )
    })
}

pub fn run(name: &str, data: &[u8]) {
    let (_, target) = TARGETS.iter().find(|(n, _)| *n == name).expect("a target of that name");
    target(data, seeds());
}
