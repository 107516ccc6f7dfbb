//! Kimi-K2.5 (`kimi_k25`, `KimiK25ForConditionalGeneration`): a multimodal wrapper around the
//! DeepSeek-V3 text model (`text_config.model_type` `kimi_k2` or `deepseek_v3`, read by the
//! DeepSeek family, which carries this wrapper) with the MoonViT vision tower and its
//! patch-merger projector. The tower and projector are counted from their stored tensors
//! (`vision_tower.*`, `mm_projector.*`); they cache nothing per token.
//!
//! Keys from the published config (the remote code's `vt_*` names) and transformers 5.24
//! `configuration_kimi_k25.py` (its own names).

use super::*;

/// The wrapper's own keys (`Kimi_K25Config` and the remote code's).
const KEYS: &[(&str, Grade)] = &[
    ("media_placeholder_token_id", Grade::Metadata),
    ("image_token_id", Grade::Metadata),
    ("video_token_id", Grade::Metadata),
    ("vision_start_token_id", Grade::Metadata),
    ("vision_end_token_id", Grade::Metadata),
    ("video_placeholder", Grade::Metadata),
    // The loss's ignored label.
    ("ignore_index", Grade::TrainingOnly),
    // How the processor chunks video frames into the tower: what the tower is fed, not its
    // weights or the language model's cache.
    ("use_unified_vision_chunk", Grade::Generation),
    ("projection_hidden_size", Grade::Consumed),
    ("projection_layer_norm_eps", Grade::Numerics),
];

/// MoonViT's config, by the remote code's names and transformers' (`Kimi_K25VisionConfig`).
/// Every shape key sizes a stored tensor, which is counted as stored.
const VISION_KEYS: &[(&str, Grade)] = &[
    ("vt_hidden_size", Grade::Consumed),
    ("vt_intermediate_size", Grade::Consumed),
    ("vt_num_attention_heads", Grade::Consumed),
    ("vt_num_hidden_layers", Grade::Consumed),
    ("hidden_size", Grade::Consumed),
    ("intermediate_size", Grade::Consumed),
    ("num_attention_heads", Grade::Consumed),
    ("num_hidden_layers", Grade::Consumed),
    ("patch_size", Grade::Consumed),
    ("init_pos_emb_height", Grade::Consumed),
    ("init_pos_emb_width", Grade::Consumed),
    ("init_pos_emb_time", Grade::Consumed),
    ("pos_emb_height", Grade::Consumed),
    ("pos_emb_width", Grade::Consumed),
    ("pos_emb_time", Grade::Consumed),
    ("pos_emb_type", Grade::Consumed),
    ("merge_kernel_size", Grade::Consumed),
    ("merge_type", Grade::Consumed),
    ("mm_hidden_size", Grade::Consumed),
    ("mm_projector_type", Grade::Consumed),
    ("text_hidden_size", Grade::Consumed),
    ("projector_hidden_act", Grade::Numerics),
    ("projector_ln_eps", Grade::Numerics),
    ("video_attn_type", Grade::Numerics),
    ("_attn_implementation", Grade::Generation),
];

pub(super) const WRAPPER: Wrapper = Wrapper {
    model_type: "kimi_k25",
    keys: KEYS,
    encoders: &[Encoder {
        config_key: "vision_config",
        keys: VISION_KEYS,
        tensors: &[
            ("vision_tower.", Vision),
            ("model.vision_tower.", Vision),
            ("mm_projector.", Projector),
            ("model.mm_projector.", Projector),
        ],
    }],
};
