//! llama.cpp's offload plans (docs/memory.md § Offload): tensors, KV cache and compute
//! buffers per backend as `load_tensors` assigns them, host RAM apart, and the layers
//! llama.cpp's own fit picks. Every per-device figure and the host's sum to the block's whole;
//! `--gpu-layers 0` meets the CPU-only plan and `all` the full offload.

use preflight_plan::{Memory, PlanOptions, Verdict, plan};

use crate::llamacpp_oracle::facts;
use crate::support::{GIB, options};

const QWEN3_MOE: &str = "Qwen3-30B-A3B-Q4_K_M-like.gguf";
const GPT_OSS: &str = "gpt-oss-20b-MXFP4-like.gguf";
const LLAMA: &str = "Llama-3.1-8B-Q4_K_M-like.gguf";
const LLAMA_F16: &str = "Llama-3.1-8B-F16.gguf";

fn planned(file: &str, json: &str) -> Verdict {
    plan(&[facts(file)], &options(json)).expect("valid options")
}

fn memory(file: &str, json: &str) -> Memory {
    planned(file, json).memory.expect("memory")
}

/// Σ devices + host, term by term, against the block's whole.
fn assert_sums_to_the_whole(m: &Memory, what: &str) {
    let host = m.host.as_ref().expect("host");
    let sum = |device: fn(&preflight_plan::DeviceMemory) -> u64, on_host: u64| {
        m.per_device.iter().map(device).sum::<u64>() + on_host
    };
    assert_eq!(
        sum(|d| d.weights_bytes, host.weights_bytes),
        m.weights_bytes,
        "{what}: weights"
    );
    assert_eq!(
        sum(|d| d.kv_cache_bytes, host.kv_cache_bytes),
        m.kv_cache_bytes,
        "{what}: KV"
    );
    assert_eq!(
        sum(|d| d.activation_bytes, host.activation_bytes),
        m.activation_bytes,
        "{what}: compute and output"
    );
    assert_eq!(sum(|d| d.total_bytes, host.total_bytes), m.total_bytes, "{what}: total");
    assert_eq!(host.activation_bytes, host.compute_bytes + host.output_bytes, "{what}");
    // Layers as llama.cpp counts them (the output layer one of them) are all somewhere.
    let layers: u64 = m.per_device.iter().map(|d| d.layers.expect("layers")).sum::<u64>() + host.layers;
    assert_eq!(layers, m.offload.as_ref().expect("offload").layers, "{what}: layers");
}

#[test]
fn per_device_and_host_figures_sum_to_the_whole() {
    for (file, json) in [
        (
            QWEN3_MOE,
            r#"{"context": 32768, "devices": "rtx-4090:1", "n_cpu_moe": 20}"#,
        ),
        (
            QWEN3_MOE,
            r#"{"context": 40960, "sequences": 4, "devices": "rtx-4090:1"}"#,
        ),
        (
            GPT_OSS,
            r#"{"context": 32768, "devices": "rtx-4090:2", "tensor_split": "3,1"}"#,
        ),
        (
            GPT_OSS,
            r#"{"context": 8192, "devices": "rtx-4090:2", "override_tensor": ["blk\\.1[0-9]\\.ffn_.*_exps=CPU", "output=CUDA0"]}"#,
        ),
        (LLAMA, r#"{"context": 4096, "devices": "l4:2", "gpu_layers": 20}"#),
        (LLAMA, r#"{"context": 4096, "devices": "l4:1", "no_kv_offload": true}"#),
        (LLAMA, r#"{"context": 4096, "devices": "l4:3", "split_mode": "none"}"#),
        (
            "gemma-3-1b-it-Q4_K_M-like.gguf",
            r#"{"context": 4096, "devices": "l4:3", "gpu_layers": 10}"#,
        ),
    ] {
        let m = memory(file, json);
        assert_sums_to_the_whole(&m, &format!("{file} {json}"));
    }
}

#[test]
fn gpu_layers_0_meets_the_cpu_only_plan() {
    for file in [QWEN3_MOE, GPT_OSS, LLAMA] {
        let cpu = memory(file, r#"{"engine": "llama.cpp", "context": 8192}"#);
        let none = memory(file, r#"{"context": 8192, "devices": "rtx-4090:2", "gpu_layers": 0}"#);
        let host = none.host.clone().expect("host");
        assert_eq!(
            (
                host.weights_bytes,
                host.kv_cache_bytes,
                host.activation_bytes,
                host.total_bytes
            ),
            (
                cpu.weights_bytes,
                cpu.kv_cache_bytes,
                cpu.activation_bytes,
                cpu.total_bytes
            ),
            "{file}: the host holds what the CPU backend does"
        );
        assert_eq!(none.total_bytes, cpu.total_bytes, "{file}");
        for d in &none.per_device {
            assert_eq!(
                (d.weights_bytes, d.kv_cache_bytes, d.total_bytes, d.layers),
                (0, 0, 0, Some(0)),
                "{file}"
            );
        }
        assert_eq!(none.offload.expect("offload").gpu_layers, 0);
    }
}

#[test]
fn gpu_layers_all_meets_the_full_offload() {
    for file in [QWEN3_MOE, GPT_OSS, LLAMA] {
        let all = memory(
            file,
            r#"{"context": 8192, "devices": "rtx-4090:1", "gpu_layers": "all"}"#,
        );
        // Past the layer count is all of them, as llama.cpp clamps it.
        let more = memory(file, r#"{"context": 8192, "devices": "rtx-4090:1", "gpu_layers": 999}"#);
        // Without fit, llama.cpp's n_gpu_layers -1 is every layer too.
        let unfitted = memory(file, r#"{"context": 8192, "devices": "rtx-4090:1", "fit": false}"#);
        assert_eq!(all.per_device, more.per_device, "{file}");
        assert_eq!(all.per_device, unfitted.per_device, "{file}");
        let cpu = memory(file, r#"{"engine": "llama.cpp", "context": 8192}"#);
        let host = all.host.clone().expect("host");
        let device = &all.per_device[0];
        // Only the input layer (the token embedding, llama-model.cpp l.1605) stays on the host;
        // every layer's cells are on the device.
        assert_eq!(device.kv_cache_bytes, cpu.kv_cache_bytes, "{file}");
        assert_eq!(device.weights_bytes + host.weights_bytes, cpu.weights_bytes, "{file}");
        assert_eq!(host.kv_cache_bytes, 0, "{file}");
        assert_eq!(host.layers, 0, "{file}");
        let offload = all.offload.expect("offload");
        assert_eq!(offload.gpu_layers, offload.layers, "{file}");
        assert_eq!(device.layers, Some(offload.layers), "{file}");
    }
}

/// Qwen3-30B-A3B's stub: `token_embd` is 151,936 rows of 2,048 Q4_K elements (144 bytes a
/// 256-element block): 151,936 × 2,048 / 256 × 144 = 175,030,272 bytes. Layer 0's experts:
/// `ffn_gate_exps` and `ffn_up_exps` are 2,048 × 768 × 128 Q4_K elements, 113,246,208 bytes
/// each; `ffn_down_exps` 768 × 2,048 × 128 Q6_K (210 bytes a block), 165,150,720 bytes.
const QWEN3_TOKEN_EMBD: u64 = 151_936 * 2048 / 256 * 144;
const QWEN3_LAYER0_EXPERTS: u64 = 2 * (2048 * 768 * 128 / 256 * 144) + 768 * 2048 * 128 / 256 * 210;

#[test]
fn n_cpu_moe_keeps_the_first_layers_experts_in_host_ram() {
    assert_eq!(QWEN3_TOKEN_EMBD, 175_030_272);
    assert_eq!(QWEN3_LAYER0_EXPERTS, 391_643_136);
    let none = memory(
        QWEN3_MOE,
        r#"{"context": 4096, "devices": "rtx-4090:1", "gpu_layers": "all"}"#,
    );
    let one = memory(
        QWEN3_MOE,
        r#"{"context": 4096, "devices": "rtx-4090:1", "n_cpu_moe": 1}"#,
    );
    let host = one.host.clone().expect("host");
    assert_eq!(none.host.expect("host").weights_bytes, QWEN3_TOKEN_EMBD);
    assert_eq!(host.weights_bytes, QWEN3_TOKEN_EMBD + QWEN3_LAYER0_EXPERTS);
    assert_eq!(
        one.per_device[0].weights_bytes,
        none.per_device[0].weights_bytes - QWEN3_LAYER0_EXPERTS
    );
    // The layer stays on the device with its KV: only its experts moved.
    assert_eq!(one.per_device[0].kv_cache_bytes, none.per_device[0].kv_cache_bytes);
    let offload = one.offload.expect("offload");
    assert_eq!((offload.gpu_layers, offload.expert_layers_on_host), (49, 1));
    assert!(
        offload.fit.starts_with("not run") || offload.fit.starts_with("unchanged"),
        "{}",
        offload.fit
    );
    // All 48: every routed expert in host RAM, monotone in between.
    let mut last = 0;
    for n in [0, 1, 12, 24, 48] {
        let m = memory(
            QWEN3_MOE,
            &format!(r#"{{"context": 4096, "devices": "rtx-4090:1", "n_cpu_moe": {n}}}"#),
        );
        let on_host = m.host.expect("host").weights_bytes;
        assert!(on_host > last || n == 0, "{n}");
        last = on_host;
    }
}

#[test]
fn tensor_split_gives_each_device_its_share_of_the_layers() {
    // gpt-oss-20b: 24 layers + the output layer = 25. `-ts 3,1`: split points 0.75 and 1.0;
    // layer k goes to the first device whose point is past k / 25 (llama-model.cpp l.1597),
    // so k = 0…18 (18/25 = 0.72) on device 0 and k = 19…24 (19/25 = 0.76) on device 1.
    let m = memory(
        GPT_OSS,
        r#"{"context": 8192, "devices": "rtx-4090:2", "tensor_split": [3, 1]}"#,
    );
    let layers: Vec<u64> = m.per_device.iter().map(|d| d.layers.expect("layers")).collect();
    assert_eq!(layers, [19, 6]);
    assert!(m.offload.expect("offload").command.contains("-ts 3,1"));
    // The default splits by memory: equal devices, 13 and 12 (12/25 = 0.48, 13/25 = 0.52).
    let even = memory(
        GPT_OSS,
        r#"{"context": 8192, "devices": "rtx-4090:2", "gpu_layers": "all"}"#,
    );
    let layers: Vec<u64> = even.per_device.iter().map(|d| d.layers.expect("layers")).collect();
    assert_eq!(layers, [13, 12]);
    // `--split-mode none`: the first device only.
    let one = memory(
        GPT_OSS,
        r#"{"context": 8192, "devices": "rtx-4090:2", "split_mode": "none", "gpu_layers": "all"}"#,
    );
    assert_eq!(one.per_device[1].total_bytes, 0);
    assert_eq!(one.per_device[0].layers, Some(25));
}

#[test]
fn no_kv_offload_keeps_every_layers_cells_in_host_ram() {
    let m = memory(LLAMA, r#"{"context": 4096, "devices": "l4:1", "no_kv_offload": true}"#);
    assert_eq!(m.per_device[0].kv_cache_bytes, 0);
    assert_eq!(m.host.expect("host").kv_cache_bytes, m.kv_cache_bytes);
}

#[test]
fn override_tensor_moves_what_its_pattern_matches() {
    let base = memory(
        GPT_OSS,
        r#"{"context": 8192, "devices": "rtx-4090:1", "gpu_layers": "all"}"#,
    );
    // Layer 0's experts by regex are what `--n-cpu-moe 1` moves.
    let by_regex = memory(
        GPT_OSS,
        r#"{"context": 8192, "devices": "rtx-4090:1", "override_tensor": ["blk\\.0\\.ffn_(up|down|gate)_exps=CPU"]}"#,
    );
    let by_knob = memory(GPT_OSS, r#"{"context": 8192, "devices": "rtx-4090:1", "n_cpu_moe": 1}"#);
    assert_eq!(by_regex.per_device, by_knob.per_device);
    assert!(by_regex.per_device[0].weights_bytes < base.per_device[0].weights_bytes);
    // A pattern matching nothing changes nothing.
    let nothing = memory(
        GPT_OSS,
        r#"{"context": 8192, "devices": "rtx-4090:1", "override_tensor": ["no_such_tensor=CPU"]}"#,
    );
    assert_eq!(nothing.per_device[0].weights_bytes, base.per_device[0].weights_bytes);
}

/// AMD GPUs run llama.cpp's CUDA backend built with HIP, which names its buffer types
/// `ROCm<i>`: an override names them so, and the flags print them so.
#[test]
fn amd_devices_take_and_print_rocm_buffer_types() {
    let json =
        r#"{"context": 8192, "devices": "mi300x:2", "override_tensor": ["output=ROCm1", "blk\\.0\\.ffn_.*_exps=CPU"]}"#;
    let m = memory(GPT_OSS, json);
    let command = m.offload.as_ref().expect("offload").command.clone();
    assert!(
        command.contains("output=ROCm1") && !command.contains("CUDA"),
        "{command}"
    );
    let err = serde_json::from_str::<PlanOptions>(r#"{"devices": "mi300x:2", "override_tensor": ["output=CUDA1"]}"#)
        .expect("parses")
        .validate()
        .expect_err("CUDA1 on AMD");
    assert!(err.to_string().contains("ROCm<i>"), "{err}");
}

/// One device's usable bytes less llama.cpp's fit margin (1 GiB, common/common.h l.483).
fn fit_target(m: &Memory) -> u64 {
    m.per_device[0].usable_bytes - GIB
}

#[test]
fn fit_offloads_the_most_layers_that_leave_the_margin() {
    // Llama-3.1-8B F16 (14.96 GiB) at 131,072 tokens (16 GiB of KV) does not fit one L4.
    let json = r#"{"context": 131072, "devices": "l4:1"}"#;
    let m = memory(LLAMA_F16, json);
    let offload = m.offload.clone().expect("offload");
    assert!(offload.fit.starts_with("fitted"), "{}", offload.fit);
    assert!(offload.gpu_layers < offload.layers);
    assert!(m.per_device[0].total_bytes <= fit_target(&m));
    // One layer more would not leave the margin: the most that fit.
    let more = memory(
        LLAMA_F16,
        &format!(
            r#"{{"context": 131072, "devices": "l4:1", "gpu_layers": {}}}"#,
            offload.gpu_layers + 1
        ),
    );
    assert!(more.per_device[0].total_bytes > fit_target(&more));
    // What the fit picked is what its flags load.
    let again = memory(
        LLAMA_F16,
        &format!(
            r#"{{"context": 131072, "devices": "l4:1", "gpu_layers": {}}}"#,
            offload.gpu_layers
        ),
    );
    assert_eq!(again.per_device, m.per_device);
    assert_eq!(again.host, m.host);
}

#[test]
fn fit_keeps_moe_layers_on_the_device_and_their_experts_on_the_host() {
    // Qwen3-30B-A3B at 4 × 40,960 tokens (15 GiB of KV beside 17.3 GiB of weights) on one
    // 24 GiB card: every layer's attention stays, the fewest layers' experts go to the host.
    let json = r#"{"context": 40960, "sequences": 4, "devices": "rtx-4090:1"}"#;
    let m = memory(QWEN3_MOE, json);
    let offload = m.offload.clone().expect("offload");
    assert!(offload.fit.starts_with("fitted"), "{}", offload.fit);
    assert_eq!(offload.gpu_layers, 49);
    assert!(offload.expert_layers_on_host > 0 && offload.expert_layers_on_host < 48);
    assert!(m.per_device[0].total_bytes < fit_target(&m));
    assert_eq!(m.per_device[0].kv_cache_bytes, m.kv_cache_bytes);
    // One expert layer fewer on the host (every layer's whole experts kept one layer longer)
    // would not leave the margin.
    let fewer = memory(
        QWEN3_MOE,
        &format!(
            r#"{{"context": 40960, "sequences": 4, "devices": "rtx-4090:1", "n_cpu_moe": {}}}"#,
            offload.expert_layers_on_host - 1
        ),
    );
    assert!(fewer.per_device[0].total_bytes >= fit_target(&fewer));
    assert_eq!(m.fits, Some(true));
}

/// The context llama.cpp's fit lowers an unset one to (common/fit.cpp l.373–440), from the
/// device totals of the layout as asked at the trained context and at `fit_params_min_ctx`.
fn lowered_context(file: &str, devices: &str, trained: u64) -> u64 {
    let as_asked = |context: u64| {
        let m = memory(
            file,
            &format!(r#"{{"context": {context}, "devices": "{devices}", "fit": false}}"#),
        );
        m.per_device[0].total_bytes
    };
    let (max, min) = (as_asked(trained), as_asked(4096));
    let target = fit_target(&memory(file, &format!(r#"{{"devices": "{devices}", "fit": false}}"#)));
    let n_ctx = 4096 + (trained - 4096) * (target - min) / (max - min);
    n_ctx - n_ctx % 256
}

#[test]
fn fit_lowers_a_context_nobody_set_before_it_moves_a_layer() {
    // Llama-3.1-8B F16 at its 131,072 tokens does not fit one L4; llama.cpp loads it whole
    // at a context its fit interpolates, and moves no layer.
    let verdict = planned(LLAMA_F16, r#"{"devices": "l4:1"}"#);
    let m = verdict.memory.clone().expect("memory");
    let offload = m.offload.clone().expect("offload");
    assert!(offload.fit.starts_with("context lowered"), "{}", offload.fit);
    assert_eq!(offload.gpu_layers, offload.layers);
    let context = verdict.artifacts[0].memory.as_ref().expect("memory").context;
    assert_eq!(context, lowered_context(LLAMA_F16, "l4:1", 131_072));
    assert!(context > 4096 && context < 131_072, "{context}");
    let finding = verdict.artifacts[0]
        .findings
        .iter()
        .find(|f| f.code.as_str() == "memory.context_fitted")
        .expect("memory.context_fitted");
    assert!(
        finding.detail.contains("131,072") && finding.detail.contains("every layer as asked"),
        "{}",
        finding.detail
    );
    // The same plan as the context given outright, but that the fit did not run on it.
    let given = memory(
        LLAMA_F16,
        &format!(r#"{{"context": {context}, "devices": "l4:1", "gpu_layers": "all"}}"#),
    );
    assert_eq!(given.per_device, m.per_device);
    assert_sums_to_the_whole(&m, "context lowered");
}

#[test]
fn a_context_given_or_the_fit_turned_off_keeps_the_context() {
    for json in [
        r#"{"context": 131072, "devices": "l4:1"}"#,
        r#"{"devices": "l4:1", "fit": false}"#,
    ] {
        let verdict = planned(LLAMA_F16, json);
        assert_eq!(
            verdict.artifacts[0].memory.as_ref().expect("memory").context,
            131_072,
            "{json}"
        );
        assert!(
            !verdict.artifacts[0]
                .findings
                .iter()
                .any(|f| f.code.as_str() == "memory.context_fitted"),
            "{json}"
        );
    }
}

#[test]
fn when_the_least_context_does_not_fit_the_fit_goes_on_to_the_layers() {
    // 14.96 GiB of weights (14 of them offloaded) on a 15 GiB card: not even 4,096 tokens keep
    // the margin, so the context drops to 4,096 and the fit then moves layers to the host.
    let verdict = planned(LLAMA_F16, r#"{"devices": "15GiB:1"}"#);
    let m = verdict.memory.clone().expect("memory");
    let offload = m.offload.clone().expect("offload");
    assert_eq!(verdict.artifacts[0].memory.as_ref().expect("memory").context, 4096);
    assert!(offload.fit.starts_with("fitted"), "{}", offload.fit);
    assert!(offload.gpu_layers < offload.layers);
    assert!(m.per_device[0].total_bytes <= fit_target(&m));
    let detail = &verdict.artifacts[0]
        .findings
        .iter()
        .find(|f| f.code.as_str() == "memory.context_fitted")
        .expect("memory.context_fitted")
        .detail;
    assert!(detail.contains("then fits the layers"), "{detail}");
}

#[test]
fn fit_leaves_a_plan_that_keeps_the_margin_as_asked() {
    let m = memory(LLAMA, r#"{"context": 4096, "devices": "l4:1"}"#);
    let offload = m.offload.expect("offload");
    assert!(offload.fit.starts_with("unchanged"), "{}", offload.fit);
    assert_eq!(offload.gpu_layers, offload.layers);
}

#[test]
fn host_memory_is_held_like_a_device() {
    let json = r#"{"context": 4096, "devices": "rtx-4090:1", "gpu_layers": 0, "host_memory": "8GiB"}"#;
    let m = memory(QWEN3_MOE, json);
    let host = m.host.clone().expect("host");
    assert_eq!(host.capacity_bytes, Some(8 * GIB));
    assert_eq!(host.fits, Some(false));
    assert_eq!(m.fits, Some(false));
    let roomy = memory(QWEN3_MOE, &json.replace("8GiB", "64GiB"));
    assert_eq!(roomy.host.expect("host").fits, Some(true));
    assert_eq!(roomy.fits, Some(true));
    // Without host_memory, host RAM is not checked.
    let unchecked = memory(
        QWEN3_MOE,
        r#"{"context": 4096, "devices": "rtx-4090:1", "gpu_layers": 0}"#,
    );
    assert_eq!(unchecked.host.expect("host").fits, None);
}

#[test]
fn offload_knobs_are_llama_cpp_options_checked_before_any_work() {
    for (json, option) in [
        (r#"{"tensor_split": "3,1"}"#, "tensor_split"),
        (r#"{"devices": "l4:2", "tensor_split": "1,1,1"}"#, "tensor_split"),
        (r#"{"devices": "l4:2", "tensor_split": "0,0"}"#, "tensor_split"),
        (r#"{"devices": "l4:2", "tensor_split": "1,x"}"#, "tensor_split"),
        (
            r#"{"devices": "l4:2", "override_tensor": ["exps=CUDA2"]}"#,
            "override_tensor",
        ),
        (
            r#"{"devices": "l4:2", "override_tensor": ["(unclosed=CPU"]}"#,
            "override_tensor",
        ),
        (
            r#"{"devices": "l4:2", "override_tensor": ["exps=ROCm0"]}"#,
            "override_tensor",
        ),
        (
            r#"{"devices": "l4:2", "override_tensor": ["no-device"]}"#,
            "override_tensor",
        ),
        (r#"{"devices": "l4:2", "split_mode": "row"}"#, "split_mode"),
        (r#"{"gpu_layers": "auto"}"#, "gpu_layers"),
        (r#"{"host_memory": "lots"}"#, "host_memory"),
        (r#"{"engine": "vllm", "n_cpu_moe": 4}"#, "n_cpu_moe"),
        (r#"{"engine": "sglang", "host_memory": "64GiB"}"#, "host_memory"),
    ] {
        let err = match serde_json::from_str::<PlanOptions>(json) {
            Err(e) => e.to_string(),
            Ok(o) => o.validate().expect_err(json).to_string(),
        };
        assert!(err.contains(option), "{json}: {err}");
    }
}

/// gpt-oss-120b's header stub (`fixtures/tools/mkgguf_gpt_oss_120b.py`: the oracle's 20b stub
/// at 36 blocks and 128 experts, from the real config).
pub(crate) fn gpt_oss_120b() -> preflight_formats::facts::ArtifactFacts {
    let dir = crate::support::fixtures().join("llamacpp-offload");
    let size: u64 = std::fs::read_to_string(dir.join("gpt-oss-120b-MXFP4-like.gguf.size"))
        .expect("size")
        .trim()
        .parse()
        .expect("a size");
    preflight_testhub::facts::gguf_stub(&dir.join("gpt-oss-120b-MXFP4-like.gguf.stub.gz"), size)
}

fn memory_120b(json: &str) -> Memory {
    plan(&[gpt_oss_120b()], &options(json))
        .expect("valid options")
        .memory
        .expect("memory")
}

#[test]
fn gpt_oss_120b_over_two_cards_splits_as_asked_and_as_fitted() {
    // 36 layers + output = 37. `-ts 1,1` with `-ngl all`: points 0.5 and 1.0, so layers
    // k/37 < 0.5 (k = 0…18, 19 of them) on device 0 and 18 (the output among them) on device 1.
    let asked =
        memory_120b(r#"{"context": 32768, "devices": "rtx-4090:2", "tensor_split": "1,1", "gpu_layers": "all"}"#);
    let layers: Vec<u64> = asked.per_device.iter().map(|d| d.layers.expect("layers")).collect();
    assert_eq!(layers, [19, 18]);
    assert_sums_to_the_whole(&asked, "120b as asked");
    // 61 GB of weights do not fit 2 × 24 GiB: neither device fits.
    assert_eq!(asked.fits, Some(false));
    // Without a layout llama.cpp's fit keeps every layer's attention on the cards and the
    // fewest layers' experts in host RAM, leaving 1 GiB free on each.
    let fitted = memory_120b(r#"{"context": 32768, "devices": "rtx-4090:2"}"#);
    assert_sums_to_the_whole(&fitted, "120b fitted");
    let offload = fitted.offload.clone().expect("offload");
    assert!(offload.fit.starts_with("fitted"), "{}", offload.fit);
    assert_eq!(offload.gpu_layers, 37);
    assert!(offload.expert_layers_on_host > 0 && offload.expert_layers_on_host < 36);
    for d in &fitted.per_device {
        assert!(d.total_bytes <= d.usable_bytes - GIB, "{d:?}");
    }
    assert_eq!(fitted.fits, Some(true));
    // With 64 GiB of host RAM named, the host's share is held to it too.
    let host = memory_120b(r#"{"context": 32768, "devices": "rtx-4090:2", "host_memory": "64GiB"}"#)
        .host
        .expect("host");
    assert_eq!(host.fits, Some(host.total_bytes <= 64 * GIB));
}

/// The decode bound reads one rank's bytes at one device's bandwidth: true of a model whole on
/// one device, an overstatement of a layer split (its devices run one after another) or of
/// anything in host RAM. There it is withheld, with why, and the prefill bound stays.
#[test]
fn the_decode_bound_is_withheld_where_a_token_crosses_devices_or_the_host() {
    let bounds = |json: &str| memory(LLAMA, json).throughput_bounds.expect("bounds");
    let whole = bounds(r#"{"context": 8192, "devices": "rtx-4090:1", "gpu_layers": "all"}"#);
    assert!(
        whole.decode_tokens_per_s.is_some() && whole.decode_withheld.is_none(),
        "{whole:?}"
    );
    for json in [
        r#"{"context": 8192, "devices": "rtx-4090:2", "tensor_split": "1,1"}"#,
        r#"{"context": 8192, "devices": "rtx-4090:1", "gpu_layers": 10}"#,
        r#"{"context": 8192, "devices": "rtx-4090:1", "gpu_layers": "all", "no_kv_offload": true}"#,
    ] {
        let b = bounds(json);
        assert!(b.decode_tokens_per_s.is_none(), "{json}: {b:?}");
        assert!(b.decode_withheld.is_some(), "{json}: {b:?}");
        assert_eq!(b.prefill_tokens_per_s, whole.prefill_tokens_per_s, "{json}");
    }
}
