//! IBM Granite 3.x (`granite`, `GraniteForCausalLM`): Llama's layout — GQA, gated MLP, every
//! layer full attention — with four µP multipliers (`embedding_multiplier`,
//! `attention_multiplier`, `residual_multiplier`, `logits_scaling`). They scale values, not
//! shapes or memory: vLLM 0.19 `models/granite.py` multiplies the embeddings (l.307) and each
//! residual branch (l.245, 250) by them, uses `attention_multiplier` as the softmax scale
//! (l.141) and divides the logits by `logits_scaling` (`LogitsProcessor(scale=…)`, l.426-430).
//! Keys this family does not list (a `sliding_window`, `layer_types`) are graded by what the
//! references read: a Granite with them is refused, not approximated.
//! Tied embeddings as the config says (transformers 5.24 `GraniteConfig` defaults them untied;
//! Granite 3.1's files tie them).

use super::*;

pub static FAMILY: Family = Family {
    name: "granite",
    model_types: &["granite"],
    keys: &[
        ("attention_bias", Grade::Consumed),
        ("mlp_bias", Grade::Consumed),
        ("embedding_multiplier", Grade::Numerics),
        ("attention_multiplier", Grade::Numerics),
        ("residual_multiplier", Grade::Numerics),
        ("logits_scaling", Grade::Numerics),
    ],
    tensors: &[EMBED_NORM_HEAD, QKVO, GATED_MLP, QKVO_MLP_BIAS],
    architectures: &["GraniteForCausalLM"],
    normalize,
    ..Family::BASE
};

fn normalize(model_type: &str, cfg: &mut ConfigReader) -> Option<Normalized> {
    // transformers 5.24 `GraniteConfig`: `tie_word_embeddings` defaults to false.
    let dims = read_dims(cfg, false)?;
    let mut shapes = dims.base_shapes();
    shapes.extend(dims.qkv_shapes());
    let model = dims.model(
        model_type,
        FAMILY.name,
        uniform(dims.layers, dims.attention(Span::Full)),
        None,
    );
    Some(Normalized { model, shapes })
}
