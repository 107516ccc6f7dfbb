//! gpt-oss: alternating sliding/full attention with learned sinks, MoE whose experts are
//! stored fused per layer (`[experts, …]`), usually as MXFP4 `_blocks` + `_scales`.

use super::*;

pub static FAMILY: Family = Family {
    name: "gpt_oss",
    model_types: &["gpt_oss"],
    keys: &[
        ("attention_bias", Grade::Consumed),
        ("sliding_window", Grade::Consumed),
        ("layer_types", Grade::Consumed),
        ("num_local_experts", Grade::Consumed),
        ("num_experts_per_tok", Grade::Consumed),
        ("experts_per_token", Grade::Consumed),
        ("initial_context_length", Grade::Numerics),
        ("swiglu_limit", Grade::Numerics),
    ],
    tensors: &[
        EMBED_NORM_HEAD,
        QKVO,
        &[
            group("model.layers.N.self_attn.{q,k,v,o}_proj.bias", Attention),
            group("model.layers.N.self_attn.sinks", Attention),
            group("model.layers.N.mlp.router.{weight,bias}", Router),
            group(
                "model.layers.N.mlp.experts.{gate_up_proj,down_proj,gate_up_proj_bias,down_proj_bias}",
                Experts,
            ),
        ],
    ],
    architectures: &["GptOssForCausalLM"],
    normalize,
    gguf: Some(Gguf {
        architectures: &[("gpt-oss", "gpt_oss")],
        keys: &[],
        tensors: &[group("blk.N.attn_sinks{.weight,}", Attention)],
        normalize: |model_type, kv| {
            let mut normalized = llama_cpp::read_decoder(model_type, FAMILY.name, kv, 2)?;
            normalized.model.llama_cpp_graph = Some(LlamaCppGraph::OpenAiMoe);
            Some(normalized)
        },
    }),
    ..Family::BASE
};

fn normalize(model_type: &str, cfg: &mut ConfigReader) -> Option<Normalized> {
    let dims = read_dims(cfg, false)?;
    let window = cfg.opt_u64("sliding_window");
    // Without layer_types, transformers alternates sliding (even) and full (odd) layers.
    let spans_per_layer = match layer_types(cfg, dims.layers, window)? {
        Some(per_layer) => per_layer,
        None => match window {
            Some(window) => (0..dims.layers)
                .map(|i| if i % 2 == 0 { Span::Sliding(window) } else { Span::Full })
                .collect(),
            None => vec![Span::Full; dims.layers as usize],
        },
    };
    let experts = cfg.u64("num_local_experts")?;
    let active = cfg.u64("num_experts_per_tok")?;
    if let Some(other) = cfg.opt_u64("experts_per_token")
        && other != active
    {
        cfg.findings.mismatch(
            crate::findings::Code::ConfigInvalidValue,
            "config.experts_per_token",
            active,
            other,
            "experts_per_token disagrees with num_experts_per_tok",
        );
    }
    let moe = Moe {
        experts,
        active,
        shared: 0,
        dense_layers: vec![],
        // gpt-oss's experts are `intermediate_size` wide; it has no dense layers.
        expert_intermediate_size: dims.intermediate,
    };
    let mut shapes = dims.base_shapes();
    shapes.extend(dims.qkv_shapes());
    shapes.extend([
        ShapeRule {
            pattern: "model.layers.N.mlp.router.weight",
            dim: 0,
            value: experts,
            keys: "num_local_experts",
        },
        ShapeRule {
            pattern: "model.layers.N.mlp.experts.gate_up_proj",
            dim: 0,
            value: experts,
            keys: "num_local_experts",
        },
        ShapeRule {
            pattern: "model.layers.N.mlp.experts.down_proj",
            dim: 0,
            value: experts,
            keys: "num_local_experts",
        },
    ]);
    let mut model = dims.model(model_type, FAMILY.name, spans(&dims, spans_per_layer), Some(moe));
    model.intermediate = None;
    model.llama_cpp_graph = Some(LlamaCppGraph::OpenAiMoe);
    // SGLang's `SWA_SINK_ARCHS` (`GptOssForCausalLM`): a pool for the sliding layers apart.
    model.sglang_hybrid_swa = true;
    // vLLM 0.19 `gpt_oss.py:82-95` builds its YaRN rope in f32.
    for rope in &mut model.rope {
        rope.f32 = true;
    }
    Some(Normalized { model, shapes })
}
