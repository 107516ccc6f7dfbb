//! Runtime support: each engine's verdict on the bundled checkpoints, on named devices, each
//! held to its reason code (docs/runtimes.md).

use preflight_plan::{Code, Engine, Runtime, Support, Verdict, plan};
use serde_json::json;

use crate::support::{hub, options, plan_with};

fn runtime(verdict: &Verdict, engine: Engine) -> &Runtime {
    verdict.artifacts[0].runtimes.get(engine)
}

fn codes(runtime: &Runtime) -> Vec<Code> {
    runtime.findings.iter().map(|f| f.code).collect()
}

/// `(supported, codes)` of one engine for one fixture on `devices` (none: `{}` options).
fn on(repo: &str, devices: Option<&str>, engine: Engine) -> (Support, Vec<Code>) {
    let options = devices.map_or_else(|| "{}".to_owned(), |d| format!(r#"{{"devices": "{d}"}}"#));
    let verdict = plan_with(&[repo], &options);
    let r = runtime(&verdict, engine);
    (r.supported, codes(r))
}

#[test]
fn deepseek_v3_2_needs_sparse_mla_which_vllm_has_on_hopper_but_not_on_an_a100() {
    let repo = "nvidia/DeepSeek-V3.2-NVFP4";
    let (a100, why) = on(repo, Some("a100-80gb"), Engine::Vllm);
    assert_eq!(a100, Support::No);
    assert!(why.contains(&Code::RuntimeAttentionUnsupported), "{why:?}");
    // On an H200 the sparse-MLA backends accept 9.x; NVFP4 runs through Marlin (no FP4 on Hopper).
    let (h200, why) = on(repo, Some("h200"), Engine::Vllm);
    assert_eq!(h200, Support::Fallback);
    assert!(why.contains(&Code::RuntimeFallbackKernel), "{why:?}");
    assert!(!why.contains(&Code::RuntimeAttentionUnsupported), "{why:?}");
    // On Blackwell NVFP4 is native.
    assert_eq!(on(repo, Some("b200"), Engine::Vllm).0, Support::Yes);
    // SGLang's DSA kernels on SM80 are compiled code: unknown, never yes.
    let (sglang, why) = on(repo, Some("a100-80gb"), Engine::Sglang);
    assert_eq!(sglang, Support::Unknown);
    assert!(why.contains(&Code::RuntimeUnknown), "{why:?}");
    // Runtime findings never touch admissibility.
    let verdict = plan_with(&[repo], r#"{"devices": "a100-80gb:8"}"#);
    let alone = plan_with(&[repo], "{}");
    assert_eq!(verdict.admissible, alone.admissible);
    assert_eq!(verdict.summary, plan_with(&[repo], r#"{"devices": "h200:8"}"#).summary);
}

#[test]
fn gpt_oss_mxfp4_runs_through_marlin_on_an_l4_and_dedicated_kernels_on_an_h100() {
    let (l4, why) = on("openai/gpt-oss-20b", Some("l4"), Engine::Vllm);
    assert_eq!(l4, Support::Fallback);
    assert!(why.contains(&Code::RuntimeFallbackKernel), "{why:?}");
    // vLLM 0.19 ships triton_kernels (vllm/third_party/triton_kernels): its OAI Triton MXFP4
    // MoE takes 9.0 <= cc < 11.0 in every install, nothing optional to name.
    let (h100, why) = on("openai/gpt-oss-20b", Some("h100-80gb"), Engine::Vllm);
    assert_eq!((h100, why), (Support::Yes, vec![]));
    // On Blackwell FlashInfer's TRT-LLM MoE; an RTX 5090 (12.0) is past every native gate of
    // 0.19 (TRT-LLM SM10x, Triton below 11.0, FlashInfer CUTLASS MXFP4xBF16 on 9.0): Marlin.
    assert_eq!(on("openai/gpt-oss-20b", Some("b200"), Engine::Vllm).0, Support::Yes);
    let (rtx, why) = on("openai/gpt-oss-20b", Some("rtx-5090=32GiB"), Engine::Vllm);
    assert_eq!((rtx, why), (Support::Fallback, vec![Code::RuntimeFallbackKernel]));
}

#[test]
fn fp8_is_a_weight_only_fallback_on_an_a100_and_native_on_an_h100() {
    let (a100, why) = on("deepseek-ai/DeepSeek-V3", Some("a100-80gb:8"), Engine::Vllm);
    assert_eq!(a100, Support::Fallback);
    assert!(why.contains(&Code::RuntimeFallbackKernel), "{why:?}");
    let (h100, why) = on("deepseek-ai/DeepSeek-V3", Some("h100-80gb:8"), Engine::Vllm);
    assert_eq!((h100, why), (Support::Yes, vec![]));
    // A mixed system is as good as its worst device, and says which one.
    let verdict = plan_with(
        &["deepseek-ai/DeepSeek-V3"],
        r#"{"devices": "h100-80gb:4,a100-80gb:4"}"#,
    );
    let vllm = runtime(&verdict, Engine::Vllm);
    assert_eq!(vllm.supported, Support::Fallback);
    let per: Vec<_> = vllm
        .per_device
        .iter()
        .map(|d| (d.device.as_str(), d.supported))
        .collect();
    assert_eq!(per, [("h100-80gb", Support::Yes), ("a100-80gb", Support::Fallback)]);
    assert!(vllm.findings.iter().all(|f| f.subject == "a100-80gb"));
    // Both sides of the gate, as data: FP8 is native from 8.9, an A100 is 8.0.
    let gate = &vllm.findings[0];
    assert_eq!(
        (gate.declared.as_ref(), gate.observed.as_ref()),
        (Some(&json!("8.9")), Some(&json!("8.0")))
    );
}

#[test]
fn a_gguf_is_llama_cpps_and_vllms_gguf_loader_is_not_judged() {
    // vLLM 0.19 has a GGUF loader (`gguf` is a quantization method and a load format); which
    // GGUF architectures it maps is not read: unknown, never yes.
    let (vllm, why) = on("Qwen/Qwen3-8B-GGUF", None, Engine::Vllm);
    assert_eq!((vllm, why), (Support::Unknown, vec![Code::RuntimeUnknown]));
    assert_eq!(on("Qwen/Qwen3-8B-GGUF", None, Engine::LlamaCpp), (Support::Yes, vec![]));
    let verdict = plan_with(&["Qwen/Qwen3-8B-GGUF"], r#"{"devices": "l4"}"#);
    let llama = runtime(&verdict, Engine::LlamaCpp);
    assert_eq!(llama.supported, Support::Yes);
    assert_eq!(llama.per_device.len(), 1, "answers for each named device");
    // And a safetensors checkpoint is llama.cpp's only after conversion.
    let (llama, why) = on("Qwen/Qwen3-8B", None, Engine::LlamaCpp);
    assert_eq!(llama, Support::No);
    assert_eq!(why, [Code::RuntimeFormatUnsupported, Code::RuntimeConvertible]);
}

#[test]
fn qwen3_5_is_hybrid_in_every_engine_that_classifies_it() {
    let verdict = plan_with(&["Qwen/Qwen3.5-35B-A3B"], r#"{"devices": "h100-80gb"}"#);
    let r = &verdict.artifacts[0].runtimes;
    assert_eq!((r.vllm.supported, r.vllm.hybrid), (Support::Yes, Some(true)));
    assert_eq!((r.sglang.supported, r.sglang.hybrid), (Support::Yes, Some(true)));
    // llama.cpp: convert first, to its hybrid `qwen35moe`.
    assert_eq!((r.llama_cpp.supported, r.llama_cpp.hybrid), (Support::No, Some(true)));
    assert!(codes(&r.llama_cpp).contains(&Code::RuntimeConvertible));
    assert_eq!(r.transformers.supported, Support::Yes);
    // A dense attention model is not hybrid anywhere.
    let dense = plan_with(&["Qwen/Qwen3-8B"], "{}");
    let r = &dense.artifacts[0].runtimes;
    assert_eq!(
        (r.vllm.hybrid, r.sglang.hybrid, r.llama_cpp.hybrid),
        (Some(false), Some(false), Some(false))
    );
}

fn made_up(model_type: &str, class: &str) -> Verdict {
    let config = json!({
        "architectures": [class], "model_type": model_type, "hidden_size": 64,
        "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 4,
        "num_hidden_layers": 1, "vocab_size": 32, "max_position_embeddings": 128,
        "rms_norm_eps": 1e-5, "torch_dtype": "bfloat16", "tie_word_embeddings": true,
    });
    let header = preflight_testhub::facts::header([("model.embed_tokens.weight".to_owned(), "BF16", vec![32, 64])]);
    let facts = preflight_testhub::facts::single_file(Some(&config), header, None);
    plan(&[facts], &options(r#"{"devices": "h100-80gb"}"#)).expect("valid options")
}

#[test]
fn a_made_up_architecture_is_never_supported() {
    // Refused by preflight: every engine's verdict is unknown, never yes.
    let verdict = made_up("frobnicator", "FrobnicatorForCausalLM");
    assert!(!verdict.admissible);
    for engine in [Engine::Vllm, Engine::Sglang, Engine::Transformers] {
        let r = runtime(&verdict, engine);
        assert_eq!(r.supported, Support::Unknown, "{engine:?}");
        assert!(codes(r).contains(&Code::RuntimeUnknown), "{engine:?}");
    }
    assert_eq!(
        runtime(&verdict, Engine::LlamaCpp).supported,
        Support::No,
        "safetensors"
    );
    // A made-up class on a known model_type: no engine registers it, and transformers has
    // no class to fall back on.
    let verdict = made_up("llama", "FrobnicatorForCausalLM");
    for engine in [Engine::Vllm, Engine::Sglang] {
        let r = runtime(&verdict, engine);
        assert_eq!(r.supported, Support::No, "{engine:?}");
        assert!(codes(r).contains(&Code::RuntimeArchitectureUnregistered), "{engine:?}");
    }
}

#[test]
fn without_devices_only_architecture_and_quantization_are_judged() {
    let verdict = plan_with(&["nvidia/DeepSeek-V3.2-NVFP4"], "{}");
    let vllm = runtime(&verdict, Engine::Vllm);
    assert_eq!((vllm.supported, vllm.per_device.len()), (Support::Yes, 0));
    assert_eq!(verdict.engines.vllm.version, "0.19.0");
    assert_eq!(verdict.engines.sglang.version, "0.5.23");
    assert_eq!(verdict.engines.transformers.version, "5.24.0");
    // ModelOpt NVFP4 is not a transformers quantizer.
    let t = runtime(&verdict, Engine::Transformers);
    assert_eq!(
        (t.supported, codes(t)),
        (Support::No, vec![Code::RuntimeQuantizationUnsupported])
    );
}

#[test]
fn devices_without_a_capability_are_unknown_and_require_engine_is_answered() {
    // An AMD part and a bare size: the CUDA gates cannot be read for them.
    let (mi300x, why) = on("meta-llama/Llama-3.1-8B", Some("mi300x"), Engine::Vllm);
    assert_eq!((mi300x, why), (Support::Unknown, vec![Code::RuntimeUnknown]));
    assert_eq!(
        on("meta-llama/Llama-3.1-8B", Some("80GiB"), Engine::Vllm).0,
        Support::Unknown
    );
    // A part without a memory figure, sized by the caller, keeps its capability.
    assert_eq!(
        on("meta-llama/Llama-3.1-8B", Some("rtx-4090=24GiB"), Engine::Vllm).0,
        Support::Yes
    );
    let required = |json: &str| plan_with(&["Qwen/Qwen3-8B-GGUF"], json).require_engine.map(|r| r.met);
    assert_eq!(required(r#"{"require_engine": "vllm"}"#), Some(false));
    assert_eq!(required(r#"{"require_engine": "llama.cpp"}"#), Some(true));
    assert_eq!(required("{}"), None);
    // Requiring an engine is not a memory option.
    assert!(
        plan(&[hub("Qwen/Qwen3-8B-GGUF")], &options(r#"{"require_engine": "vllm"}"#))
            .expect("valid options")
            .memory
            .is_none()
    );
}

/// Every bundled checkpoint, without devices: vLLM and SGLang register each safetensors one
/// (and its quantization), llama.cpp loads each GGUF and its converter takes each safetensors
/// one's class — one row per fixture, so a new fixture is covered without new code.
#[test]
fn every_bundled_checkpoint_is_judged_by_every_engine() {
    let expected: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(crate::support::fixtures().join("expected.json")).expect("expected.json"),
    )
    .expect("json");
    let mut judged = 0;
    for repo in expected.as_object().expect("object").keys() {
        if repo.starts_with("local/") || repo.ends_with(".gguf") {
            continue;
        }
        let verdict = plan_with(&[repo.as_str()], "{}");
        let r = &verdict.artifacts[0].runtimes;
        let table = [
            (Engine::Vllm, r.vllm.supported),
            (Engine::Sglang, r.sglang.supported),
            (Engine::LlamaCpp, r.llama_cpp.supported),
        ];
        assert_eq!(
            table.map(|(_, s)| s),
            [Support::Yes, Support::Yes, Support::No],
            "{repo}: {r:#?}"
        );
        assert!(
            codes(&r.llama_cpp).contains(&Code::RuntimeConvertible),
            "{repo}: converter takes it"
        );
        judged += 1;
    }
    assert!(judged >= 20, "{judged} fixtures");
}

#[test]
fn glm_5_shares_deepseek_v3_2s_sparse_mla_and_nemotron_h_is_hybrid_everywhere() {
    let (a100, why) = on("zai-org/GLM-5.2", Some("a100-80gb"), Engine::Vllm);
    assert_eq!((a100, why), (Support::No, vec![Code::RuntimeAttentionUnsupported]));
    assert_eq!(on("zai-org/GLM-5.2", Some("h100-80gb"), Engine::Vllm).0, Support::Yes);
    let verdict = plan_with(&["nvidia/Nemotron-H-56B-Base-8K"], "{}");
    let r = &verdict.artifacts[0].runtimes;
    assert_eq!(
        (r.vllm.hybrid, r.sglang.hybrid, r.llama_cpp.hybrid),
        (Some(true), Some(true), Some(true))
    );
}
