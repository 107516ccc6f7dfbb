//! Apple silicon (docs/memory.md § Apple silicon): a Mac's chip from the catalogue, its unified
//! memory the caller's, and llama.cpp's Metal backend sizing the GPU by macOS's working set.
//! Device and host are one memory: each buffer is counted once, where llama.cpp puts it, and
//! host RAM is what the device leaves. vLLM and SGLang have no Metal backend: refused there.

use preflight_plan::devices::{self, default_working_set};
use preflight_plan::{Code, Engine, Memory, PlanOptions, Support, Verdict, plan};
use serde_json::Value;

use crate::llamacpp_offload::gpt_oss_120b;
use crate::support::{GIB, options, plan_with};

/// Options `json` refuses: the error names `option` and says `says`.
fn refused(json: &str, option: &str, says: &str) {
    let err = serde_json::from_str::<PlanOptions>(json)
        .map_err(|e| e.to_string())
        .and_then(|o| o.validate().map_err(|e| e.to_string()))
        .expect_err(json);
    assert!(err.contains(option) && err.contains(says), "{json}: {err}");
}

fn verdict_120b(json: &str) -> Verdict {
    plan(&[gpt_oss_120b()], &options(json)).expect("valid options")
}

fn memory_120b(json: &str) -> Memory {
    verdict_120b(json).memory.expect("memory")
}

/// Every Apple chip in the data: a bandwidth is Apple's (an apple.com page, its quote printing
/// the figure) or null; the memory never catalogued; the working-set rule carries its logs.
#[test]
fn apple_chips_resolve_with_their_sources() {
    let data: Value = serde_json::from_str(include_str!("../../data/devices.json")).expect("devices.json");
    let apple: Vec<&Value> = data["devices"]
        .as_array()
        .expect("devices")
        .iter()
        .filter(|d| d["vendor"] == "Apple")
        .collect();
    assert!(apple.len() >= 7, "{}", apple.len());
    for d in &apple {
        let name = d["name"].as_str().expect("name");
        assert_eq!(d["unified_memory"], true, "{name}");
        assert!(d["memory_bytes"].is_null(), "{name}: the memory is the Mac's");
        let found = devices::find(name).expect(name);
        let bandwidth = &d["memory_bandwidth_tb_s"];
        match bandwidth.is_null() {
            true => assert_eq!(found.memory_bandwidth_bytes_per_s, None, "{name}"),
            false => {
                let source = bandwidth["source"].as_str().expect("source");
                assert!(source.contains("apple.com/"), "{name}: {source}");
                let gb_s = bandwidth["value"].as_f64().expect("value") * 1000.0;
                let printed = format!("{}GB/s", gb_s.round());
                let quote = bandwidth["quote"].as_str().expect("quote");
                assert!(quote.contains(&printed), "{name}: {quote} lacks {printed}");
                assert_eq!(found.memory_bandwidth_bytes_per_s, Some(gb_s.round() * 1e9), "{name}");
            }
        }
    }
    let rule = &data["metal_working_set"];
    assert!(
        rule["rule"]
            .as_str()
            .expect("rule")
            .starts_with("preflight's rule, not Apple's")
    );
    assert!(
        rule["reported_by"]
            .as_str()
            .expect("reported_by")
            .contains("ggml-metal-device.m")
    );
    for record in rule["evidence"].as_array().expect("evidence") {
        for field in ["mac", "logged", "reads", "source"] {
            assert!(
                record[field].as_str().is_some_and(|s| !s.is_empty()),
                "{record}: {field}"
            );
        }
    }
}

/// gpt-oss-120b (59 GiB of tensors) does not fit a 24 GB card whole; on a 512 GB M3 Ultra
/// every layer goes to the GPU, inside macOS's default working set (3/4: 384 GiB), and host
/// RAM is what the GPU's buffers leave of the same memory.
#[test]
fn an_m3_ultra_holds_what_a_24gb_card_cannot() {
    let card = memory_120b(r#"{"context": 32768, "devices": "rtx-4090:1", "gpu_layers": "all"}"#);
    assert_eq!(card.fits, Some(false));
    let mac = memory_120b(r#"{"context": 32768, "devices": "m3-ultra=512GB"}"#);
    assert_eq!(mac.fits, Some(true), "{:?}", mac.per_device);
    let [gpu] = mac.per_device.as_slice() else {
        panic!("one GPU: {:?}", mac.per_device)
    };
    assert_eq!(gpu.capacity_bytes, 512 * GIB);
    assert_eq!(gpu.working_set_bytes, Some(default_working_set(512 * GIB)));
    assert_eq!(gpu.usable_bytes, 384 * GIB, "llama.cpp sizes Metal by the working set");
    assert_eq!(gpu.cuda_visible_bytes, None);
    let offload = mac.offload.clone().expect("offload");
    assert_eq!(offload.gpu_layers, offload.layers, "every layer on the GPU");
    // One memory, each buffer once: the GPU's (the mapped weights, KV, compute) and the
    // host's (the token embedding, its compute rows, the output buffer) sum to the whole.
    let host = mac.host.clone().expect("host");
    assert_eq!(gpu.total_bytes + host.total_bytes, mac.total_bytes);
    assert_eq!(gpu.weights_bytes + host.weights_bytes, mac.weights_bytes);
    assert_eq!(host.unified_memory_bytes, Some(512 * GIB));
    assert_eq!(host.capacity_bytes, Some(512 * GIB - gpu.total_bytes));
    assert_eq!(host.fits, Some(true));
    // The decode bound reads the whole model at Apple's 819 GB/s.
    let bounds = mac.throughput_bounds.expect("bounds");
    assert!(bounds.decode_tokens_per_s.is_some(), "{bounds:?}");
    // Planned context is what fits: the model's own limit, not memory, stops it here.
    assert_eq!(mac.max_context_limited_by, Some(preflight_plan::LimitedBy::Model));
}

/// Past the working set the GPU does not fit, and the verdict names the limit: `usable_bytes`
/// is the working set, stated beside the unified memory. A Mac's own (raised) working set
/// given as `working_set` moves the line; the unified memory still bounds the whole.
#[test]
fn beyond_the_working_set_is_refused_with_the_limit_named() {
    // 64 GB: a 48 GiB working set; every layer asked for (no fit) is ~60 GiB on the GPU.
    let asked = r#"{"context": 8192, "devices": "m3-max-40c=64GB", "gpu_layers": "all"}"#;
    let over = memory_120b(asked);
    let gpu = &over.per_device[0];
    assert_eq!(gpu.working_set_bytes, Some(48 * GIB));
    assert_eq!(gpu.usable_bytes, 48 * GIB);
    assert!(gpu.total_bytes > gpu.usable_bytes && !gpu.fits, "{gpu:?}");
    assert_eq!(over.fits, Some(false));
    // Raised to 62 GiB (`sudo sysctl iogpu.wired_limit_mb=63488`), it fits the GPU, and the
    // host keeps what is left of the 64 GiB.
    let raised =
        memory_120b(r#"{"context": 8192, "devices": "m3-max-40c=64GB", "gpu_layers": "all", "working_set": "62GiB"}"#);
    let gpu = &raised.per_device[0];
    assert_eq!((gpu.working_set_bytes, gpu.usable_bytes), (Some(62 * GIB), 62 * GIB));
    assert!(gpu.fits, "{gpu:?}");
    let host = raised.host.clone().expect("host");
    assert_eq!(host.capacity_bytes, Some(64 * GIB - gpu.total_bytes));
    assert_eq!(raised.fits, host.fits, "the host's share decides now");
    // Asked nothing, llama.cpp's fit keeps the GPU 1 GiB inside the working set and leaves
    // the rest of the layers' experts on the CPU: in the same memory, held to what is left.
    let fitted = memory_120b(r#"{"context": 8192, "devices": "m3-max-40c=64GB"}"#);
    let gpu = &fitted.per_device[0];
    assert!(gpu.total_bytes <= 47 * GIB, "{gpu:?}");
    let host = fitted.host.clone().expect("host");
    assert_eq!(host.capacity_bytes, Some(64 * GIB - gpu.total_bytes));
    assert_eq!(fitted.fits, Some(gpu.total_bytes + host.total_bytes <= 64 * GIB));
    // On a 32 GB M2 Max (a 2/3 working set: 21.33 GiB) the model does not fit the Mac at all:
    // what the GPU cannot hold overflows the memory the CPU has left.
    let small = memory_120b(r#"{"context": 8192, "devices": "m2-max=32GB"}"#);
    assert_eq!(small.per_device[0].usable_bytes, default_working_set(32 * GIB));
    let host = small.host.clone().expect("host");
    assert_eq!(host.fits, Some(false), "{host:?}");
    assert_eq!(small.fits, Some(false));
}

/// vLLM and SGLang have no Metal backend: on an Apple device they are refused with
/// `runtime.device_unsupported`, and the memory figures say the engine does not run; llama.cpp
/// is judged as on any device.
#[test]
fn vllm_and_sglang_are_refused_on_apple_silicon() {
    let verdict = plan_with(&["Qwen/Qwen3-8B"], r#"{"context": 4096, "devices": "m3-ultra=192GB"}"#);
    for engine in [Engine::Vllm, Engine::Sglang] {
        let r = verdict.artifacts[0].runtimes.get(engine);
        assert_eq!(r.supported, Support::No, "{engine:?}");
        let finding = r.deciding().expect("a refusal");
        assert_eq!(finding.code, Code::RuntimeDeviceUnsupported, "{engine:?}");
        assert!(finding.detail.contains("Metal"), "{}", finding.detail);
        assert!(finding.detail.contains("llama.cpp"), "{}", finding.detail);
    }
    // transformers (PyTorch's MPS) is not judged: unknown, never yes.
    assert_eq!(
        verdict.artifacts[0].runtimes.get(Engine::Transformers).supported,
        Support::Unknown
    );
    // Safetensors plans under vLLM by default: its memory says it does not run there.
    let memory = verdict.memory.expect("memory");
    let refused = memory.does_not_run.expect("does not run");
    assert_eq!(refused.finding.code, Code::RuntimeDeviceUnsupported);
    assert_eq!(memory.fits, Some(false));
    // The GGUF under llama.cpp runs on Metal; vLLM is refused the device before its GGUF
    // loader's open question (`runtime.unknown` on other devices) is asked.
    let gguf = plan_with(
        &["Qwen/Qwen3-8B-GGUF"],
        r#"{"context": 4096, "devices": "m3-ultra=192GB"}"#,
    );
    let vllm = gguf.artifacts[0].runtimes.get(Engine::Vllm);
    assert_eq!(vllm.supported, Support::No);
    assert_eq!(vllm.deciding().map(|f| f.code), Some(Code::RuntimeDeviceUnsupported));
    assert_eq!(gguf.artifacts[0].runtimes.get(Engine::LlamaCpp).supported, Support::Yes);
    let memory = gguf.memory.expect("memory");
    assert!(memory.does_not_run.is_none());
    assert_eq!(memory.fits, Some(true));
}

/// A Mac has one GPU and one memory: Apple devices plan alone, once, with their size; a
/// working set belongs to one, at most its memory; host RAM is the unified memory.
#[test]
fn apple_devices_are_one_gpu_sized_by_the_caller() {
    refused(r#"{"devices": "m3-ultra"}"#, "devices", "m3-ultra=SIZE");
    refused(r#"{"devices": "m3-ultra=512GB:2"}"#, "devices", "one Apple silicon GPU");
    refused(r#"{"devices": "m3-ultra=512GB,rtx-4090"}"#, "devices", "plans alone");
    refused(r#"{"devices": "m3-max=64GB"}"#, "devices", "m3-max-30c or m3-max-40c");
    refused(
        r#"{"devices": "rtx-4090", "working_set": "20GiB"}"#,
        "working_set",
        "Apple",
    );
    refused(
        r#"{"devices": "m4-max-40c=128GB", "working_set": "200GiB"}"#,
        "working_set",
        "at most the memory",
    );
    refused(
        r#"{"devices": "m4-max-40c=128GB", "host_memory": "128GiB"}"#,
        "host_memory",
        "unified memory",
    );
    // Named without a count, a Mac is one GPU: no count is searched.
    let given = options(r#"{"devices": "m4-max-40c=128GB"}"#);
    let devices = given.devices.expect("devices");
    assert_eq!((devices.count(), devices.open_count().is_none()), (1, true));
    assert_eq!(devices.unified_memory_bytes(), Some(128 * GIB));
}

/// The llama.cpp flags name Metal's buffer type, `MTL0`, as ggml-metal names it; an
/// `--override-tensor` takes it, and refuses the other backend's name.
#[test]
fn the_llama_cpp_command_names_metal() {
    let m = memory_120b(
        r#"{"context": 8192, "devices": "m4-max-40c=128GB", "override_tensor": ["output=MTL0", "blk\\.1\\.ffn_.*_exps=CPU"]}"#,
    );
    let offload = m.offload.expect("offload");
    let command = &offload.command;
    assert!(command.contains("output=MTL0"), "{command}");
    assert!(!command.contains("CUDA"), "{command}");
    // `MTL0` places as the device it names: the same plan as leaving the output where it goes.
    let without = memory_120b(
        r#"{"context": 8192, "devices": "m4-max-40c=128GB", "override_tensor": ["blk\\.1\\.ffn_.*_exps=CPU"]}"#,
    );
    assert_eq!(m.per_device, without.per_device);
    refused(
        r#"{"devices": "m4-max-40c=128GB", "override_tensor": ["output=CUDA0"]}"#,
        "override_tensor",
        "MTL<i>",
    );
    refused(
        r#"{"devices": "rtx-4090:2", "override_tensor": ["output=MTL0"]}"#,
        "override_tensor",
        "CUDA<i>",
    );
    // No Apple bandwidth was reachable for the M4 Max: no decode bound, never a guess.
    assert_eq!(m.throughput_bounds.and_then(|b| b.decode_tokens_per_s), None);
}
