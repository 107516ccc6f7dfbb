//! Module buffers every rank keeps whole beside its weights: the RoPE tables.

use crate::model::{Rope, RopeScaling};

/// Bytes of the RoPE cos/sin tables, which every rank keeps whole beside its weights and
/// "Model loading took" counts with them: `get_rope` (`rotary_embedding/__init__.py:29-330`)
/// builds one table per distinct rope, `positions × width` in the model's dtype unless the
/// model pins one (`base.py:58-63`, `cache.to(dtype)`). Rows: `max_position` by default;
/// × `factor` for linear and dynamic scaling (`linear_scaling_rope.py:90`,
/// `dynamic_ntk_scaling_rope.py:56`); the original context × `factor` for YaRN
/// (`yarn_scaling_rope.py:77-78`, `deepseek_scaling_rope.py:104-106`); the original and the
/// long context for longrope (`phi3_long_rope_scaled_rope.py:82-90`); four times the
/// positions for multimodal rope (`mrope.py:238`). Width: the rotated channels, the whole
/// head for Gemma 4's proportional rope (`gemma4_rope.py:48-55`). SGLang's
/// `rotary_embedding.py` is adapted from vLLM's and keeps the same tables.
pub fn rope_table_bytes(ropes: &[Rope], model_element_bytes: u64) -> u64 {
    // `torch.arange(n × factor)` has ⌈n × factor⌉ rows.
    let stretch = |n: u64, factor: f64| (n as f64 * factor).ceil() as u64;
    ropes.iter().fold(0u64, |acc, rope| {
        let (rows, width) = match rope.scaling {
            RopeScaling::Plain => (rope.max_position, rope.rotary_dim),
            RopeScaling::Stretched { factor } => (stretch(rope.max_position, factor), rope.rotary_dim),
            RopeScaling::Yarn { factor, original } => (stretch(original, factor), rope.rotary_dim),
            RopeScaling::LongRope { original } => (original.saturating_add(rope.max_position), rope.rotary_dim),
            RopeScaling::Proportional => (rope.max_position, rope.head_size),
            RopeScaling::Multimodal { yarn } => match yarn {
                Some((factor, original)) => (stretch(original.saturating_mul(4), factor), rope.rotary_dim),
                None => (rope.max_position.saturating_mul(4), rope.rotary_dim),
            },
        };
        let element = if rope.f32 { 4 } else { model_element_bytes };
        acc.saturating_add(rows.saturating_mul(width).saturating_mul(element))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rope(scaling: RopeScaling) -> Rope {
        Rope {
            head_size: 128,
            rotary_dim: 64,
            max_position: 1000,
            scaling,
            f32: false,
        }
    }

    #[test]
    fn rope_rows_follow_each_types_constructor() {
        let bytes = |scaling| rope_table_bytes(&[rope(scaling)], 2);
        let row = 64 * 2;
        assert_eq!(bytes(RopeScaling::Plain), 1000 * row);
        // `torch.arange(1000 × 2.5)` has 2,500 rows; a fractional product rounds up.
        assert_eq!(bytes(RopeScaling::Stretched { factor: 2.5 }), 2500 * row);
        assert_eq!(bytes(RopeScaling::Stretched { factor: 1.0005 }), 1001 * row);
        assert_eq!(
            bytes(RopeScaling::Yarn {
                factor: 4.0,
                original: 100
            }),
            400 * row
        );
        assert_eq!(bytes(RopeScaling::LongRope { original: 100 }), 1100 * row);
        assert_eq!(bytes(RopeScaling::Proportional), 1000 * 128 * 2);
        assert_eq!(bytes(RopeScaling::Multimodal { yarn: None }), 4000 * row);
        assert_eq!(bytes(RopeScaling::Multimodal { yarn: Some((2.0, 100)) }), 800 * row);
        // A pinned f32 table, and tables adding up.
        let pinned = Rope {
            f32: true,
            ..rope(RopeScaling::Plain)
        };
        assert_eq!(
            rope_table_bytes(&[pinned.clone(), rope(RopeScaling::Plain)], 2),
            1000 * 64 * 6
        );
        // A hostile factor saturates instead of wrapping.
        assert_eq!(bytes(RopeScaling::Stretched { factor: f64::MAX }), u64::MAX);
    }
}
