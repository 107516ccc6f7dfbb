//! Architecture families: one file each. A family says which `model_type`s it covers, which
//! config keys it grades, how its config normalises into an [`Architecture`], and where each
//! of its tensors belongs. **Adding a family touches one file here plus its entry in
//! [`FAMILIES`]; nothing else in the planner knows family names.**

mod deepseek;
mod gemma;
mod gpt_oss;
mod llama;
mod mixtral;
mod phi3;
mod qwen;

use crate::config::{ConfigReader, Grade};
use crate::verdict::{Architecture, Attention, Moe};

/// Where a tensor's parameters are counted (`parameters.by_component`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Component {
    Embedding,
    Attention,
    Mlp,
    Experts,
    SharedExperts,
    Router,
    Norm,
    LmHead,
    /// Multi-token-prediction layers; assigned by layer index, never by a pattern.
    Mtp,
    /// Stored but not a parameter (transformers registers it as a buffer).
    Buffer,
}

impl Component {
    /// Every rank holds these whole: vLLM replicates norms and MoE routers, and buffers are
    /// per-module state.
    pub fn is_replicated(self) -> bool {
        matches!(self, Component::Norm | Component::Router | Component::Buffer)
    }

    /// Linear layers, which a quantized what-if (`weights_dtype` fp8, int4, …) quantizes;
    /// embeddings, lm_head, norms and routers stay as stored, as vLLM leaves them.
    pub fn is_linear(self) -> bool {
        matches!(
            self,
            Component::Attention | Component::Mlp | Component::Experts | Component::SharedExperts | Component::Mtp
        )
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Component::Embedding => "embedding",
            Component::Attention => "attention",
            Component::Mlp => "mlp",
            Component::Experts => "experts",
            Component::SharedExperts => "shared_experts",
            Component::Router => "router",
            Component::Norm => "norm",
            Component::LmHead => "lm_head",
            Component::Mtp => "mtp",
            Component::Buffer => "buffer",
        }
    }
}

/// A tensor-name pattern and the component it belongs to. In a pattern, `N` stands for any
/// layer or expert index and `{a,b}` for alternatives; it is matched against the tensor's
/// name with every numeric segment replaced by `N`.
#[derive(Debug, Clone, Copy)]
pub struct TensorGroup {
    pub pattern: &'static str,
    pub component: Component,
}

pub const fn group(pattern: &'static str, component: Component) -> TensorGroup {
    TensorGroup { pattern, component }
}

/// A shape the config implies for a tensor group: `dim` of every tensor matching `pattern`
/// must equal `value`, which `keys` explains.
#[derive(Debug, Clone)]
pub struct ShapeRule {
    pub pattern: &'static str,
    pub dim: usize,
    pub value: u64,
    pub keys: &'static str,
}

/// What a family makes of a config.
pub struct Normalized {
    pub architecture: Architecture,
    pub shapes: Vec<ShapeRule>,
}

pub struct Family {
    pub name: &'static str,
    pub model_types: &'static [&'static str],
    /// Keys beyond [`crate::config::COMMON_KEYS`].
    pub keys: &'static [(&'static str, Grade)],
    pub tensors: &'static [&'static [TensorGroup]],
    /// Tensors that only multi-token-prediction layers carry.
    pub mtp_tensors: &'static [TensorGroup],
    /// Tensor patterns (as in [`TensorGroup`]) every tensor-parallel rank holds whole, beyond
    /// norms, routers and buffers (which always are): vLLM builds them as `ReplicatedLinear`.
    pub tp_replicated: &'static [&'static str],
    pub normalize: fn(model_type: &str, cfg: &mut ConfigReader) -> Option<Normalized>,
}

pub static FAMILIES: &[&Family] = &[
    &llama::FAMILY,
    &qwen::FAMILY,
    &qwen::MOE_FAMILY,
    &mixtral::FAMILY,
    &deepseek::FAMILY,
    &gpt_oss::FAMILY,
    &gemma::FAMILY,
    &phi3::FAMILY,
];

pub fn for_model_type(model_type: &str) -> Option<&'static Family> {
    FAMILIES.iter().copied().find(|f| f.model_types.contains(&model_type))
}

impl Family {
    /// The component for a normalised tensor name, if any of the family's groups match.
    pub fn classify(&self, normalized: &str, is_mtp_layer: bool) -> Option<Component> {
        let found = self
            .tensors
            .iter()
            .flat_map(|groups| groups.iter())
            .find(|g| pattern_matches(g.pattern, normalized));
        match found {
            Some(g) if is_mtp_layer => Some(if g.component == Component::Buffer {
                Component::Buffer
            } else {
                Component::Mtp
            }),
            Some(g) => Some(g.component),
            None if is_mtp_layer => self
                .mtp_tensors
                .iter()
                .any(|g| pattern_matches(g.pattern, normalized))
                .then_some(Component::Mtp),
            None => None,
        }
    }

    /// How a tensor of `component` spreads over tensor-parallel ranks.
    pub fn placement(&self, normalized: &str, component: Component) -> Placement {
        if component.is_replicated() || self.tp_replicated.iter().any(|p| pattern_matches(p, normalized)) {
            Placement::Replicated
        } else {
            Placement::Sharded
        }
    }
}

/// Under tensor parallelism a tensor is either split across ranks (projections, experts,
/// vocab-parallel embeddings) or held whole by each (norms, routers, small projections).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Placement {
    Sharded,
    Replicated,
}

/// Match `name` against a pattern with `{a,b,…}` alternatives (no nesting).
pub fn pattern_matches(pattern: &str, name: &str) -> bool {
    match pattern.find('{') {
        None => pattern == name,
        Some(open) => {
            let Some(close) = pattern[open..].find('}').map(|c| open + c) else {
                return false;
            };
            let (head, alternatives, tail) = (&pattern[..open], &pattern[open + 1..close], &pattern[close + 1..]);
            let Some(rest) = name.strip_prefix(head) else {
                return false;
            };
            alternatives
                .split(',')
                .any(|alt| rest.strip_prefix(alt).is_some_and(|after| pattern_matches(tail, after)))
        }
    }
}

// Building blocks most decoder-only checkpoints share (transformers' on-disk names).
use Component::*;

pub const EMBED_NORM_HEAD: &[TensorGroup] = &[
    group("model.embed_tokens.weight", Embedding),
    group("model.norm.weight", Norm),
    group("lm_head.weight", LmHead),
    group("model.layers.N.{input_layernorm,post_attention_layernorm}.weight", Norm),
];
pub const QKVO: &[TensorGroup] = &[group("model.layers.N.self_attn.{q,k,v,o}_proj.weight", Attention)];
pub const QKV_BIAS: &[TensorGroup] = &[group("model.layers.N.self_attn.{q,k,v}_proj.bias", Attention)];
pub const QK_NORM: &[TensorGroup] = &[group("model.layers.N.self_attn.{q,k}_norm.weight", Norm)];
pub const GATED_MLP: &[TensorGroup] = &[group("model.layers.N.mlp.{gate,up,down}_proj.weight", Mlp)];

/// The dimensions nearly every decoder config declares the same way.
pub struct Dims {
    pub layers: u64,
    pub hidden: u64,
    pub heads: u64,
    pub kv_heads: u64,
    pub head_dim: u64,
    pub vocab: u64,
    pub context: u64,
    pub tie: bool,
    pub dtype: Option<String>,
    /// `intermediate_size` when declared: the dense MLP width, or the expert width in
    /// families whose experts use it.
    pub intermediate: Option<u64>,
}

/// Read [`Dims`]. `head_dim` defaults to hidden/heads only where the family's code does so;
/// `tie_default` is the family's own default for `tie_word_embeddings`.
pub fn read_dims(cfg: &mut ConfigReader, tie_default: bool) -> Option<Dims> {
    let layers = cfg.layers("num_hidden_layers");
    let hidden = cfg.u64("hidden_size");
    let heads = cfg.u64("num_attention_heads");
    let vocab = cfg.u64("vocab_size");
    let context = cfg.u64("max_position_embeddings");
    let kv_heads = match cfg.value("num_key_value_heads") {
        Some(_) => cfg.u64("num_key_value_heads"),
        None => heads,
    };
    let head_dim = match cfg.value("head_dim") {
        Some(_) => cfg.u64("head_dim"),
        None => hidden.zip(heads).and_then(|(h, n)| (h % n == 0).then_some(h / n)),
    };
    let tie = cfg.opt_bool("tie_word_embeddings").unwrap_or(tie_default);
    let intermediate = cfg.opt_positive("intermediate_size");
    let dtype = cfg
        .opt_str("torch_dtype")
        .or_else(|| cfg.opt_str("dtype"))
        .map(str::to_owned);
    if let (Some(heads), Some(kv)) = (heads, kv_heads)
        && heads % kv != 0
    {
        cfg.findings.mismatch(
            crate::findings::Code::ConfigInvalidValue,
            "config.num_key_value_heads",
            kv,
            heads,
            "num_attention_heads is not a multiple of num_key_value_heads",
        );
        return None;
    }
    Some(Dims {
        layers: layers?,
        hidden: hidden?,
        heads: heads?,
        kv_heads: kv_heads?,
        head_dim: head_dim?,
        vocab: vocab?,
        context: context?,
        tie,
        dtype,
        intermediate,
    })
}

impl Dims {
    pub fn architecture(
        &self,
        model_type: &str,
        family: &str,
        attention: Vec<Attention>,
        moe: Option<Moe>,
    ) -> Architecture {
        Architecture {
            model_type: model_type.to_owned(),
            family: family.to_owned(),
            layers: self.layers,
            hidden_size: self.hidden,
            heads: self.heads,
            kv_heads: self.kv_heads,
            head_dim: self.head_dim,
            v_head_dim: None,
            kv_heads_per_layer: None,
            // The dense width; MoE families replace it (experts are not dense layers).
            intermediate_size: self.intermediate,
            vocab_size: self.vocab,
            context: self.context,
            attention,
            moe,
            quantization: None,
            mtp_layers: 0,
            tie_word_embeddings: self.tie,
            dtype: self.dtype.clone(),
        }
    }

    /// Shapes every family with embed_tokens/lm_head and q/k/v projections implies.
    pub fn base_shapes(&self) -> Vec<ShapeRule> {
        vec![
            ShapeRule {
                pattern: "model.embed_tokens.weight",
                dim: 0,
                value: self.vocab,
                keys: "vocab_size",
            },
            ShapeRule {
                pattern: "model.embed_tokens.weight",
                dim: 1,
                value: self.hidden,
                keys: "hidden_size",
            },
            ShapeRule {
                pattern: "lm_head.weight",
                dim: 0,
                value: self.vocab,
                keys: "vocab_size",
            },
            ShapeRule {
                pattern: "lm_head.weight",
                dim: 1,
                value: self.hidden,
                keys: "hidden_size",
            },
        ]
    }

    pub fn qkv_shapes(&self) -> Vec<ShapeRule> {
        vec![
            ShapeRule {
                pattern: "model.layers.N.self_attn.q_proj.weight",
                dim: 0,
                value: self.heads.saturating_mul(self.head_dim),
                keys: "num_attention_heads × head_dim",
            },
            ShapeRule {
                pattern: "model.layers.N.self_attn.k_proj.weight",
                dim: 0,
                value: self.kv_heads.saturating_mul(self.head_dim),
                keys: "num_key_value_heads × head_dim",
            },
            ShapeRule {
                pattern: "model.layers.N.self_attn.v_proj.weight",
                dim: 0,
                value: self.kv_heads.saturating_mul(self.head_dim),
                keys: "num_key_value_heads × head_dim",
            },
            ShapeRule {
                pattern: "model.layers.N.self_attn.o_proj.weight",
                dim: 1,
                value: self.heads.saturating_mul(self.head_dim),
                keys: "num_attention_heads × head_dim",
            },
        ]
    }
}

/// Per-layer attention from `layer_types` when the config has it; `None` when absent.
/// An unknown layer type is a finding (and `None`).
pub fn layer_types(cfg: &mut ConfigReader, layers: u64, window: Option<u64>) -> Option<Option<Vec<Attention>>> {
    let Some(types) = cfg.opt_str_list("layer_types") else {
        return Some(None);
    };
    if types.len() as u64 != layers {
        cfg.findings.mismatch(
            crate::findings::Code::ConfigInvalidValue,
            "config.layer_types",
            layers,
            types.len(),
            "layer_types must have one entry per layer (num_hidden_layers)",
        );
        return None;
    }
    let mut out = Vec::with_capacity(types.len());
    for t in types {
        match (t, window) {
            ("full_attention", _) => out.push(Attention::Full),
            ("sliding_attention", Some(window)) => out.push(Attention::Sliding { window }),
            ("sliding_attention", None) => {
                cfg.unsupported(
                    "sliding_window",
                    "layer_types names sliding layers but sliding_window is not set",
                );
                return None;
            }
            (other, _) => {
                cfg.unsupported(
                    "layer_types",
                    format!("layer type `{other}` is not one the planner models"),
                );
                return None;
            }
        }
    }
    Some(Some(out))
}

/// Uniform attention for every layer.
pub fn uniform(layers: u64, attention: Attention) -> Vec<Attention> {
    (0..layers).map(|_| attention).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_alternatives_and_literals() {
        assert!(pattern_matches(
            "model.layers.N.self_attn.{q,k,v,o}_proj.weight",
            "model.layers.N.self_attn.k_proj.weight"
        ));
        assert!(!pattern_matches(
            "model.layers.N.self_attn.{q,k,v,o}_proj.weight",
            "model.layers.N.self_attn.x_proj.weight"
        ));
        assert!(pattern_matches("a.{b,bc}.d", "a.bc.d"));
        assert!(!pattern_matches("a.{b", "a.b"));
    }

    #[test]
    fn every_model_type_belongs_to_one_family() {
        let mut seen = std::collections::HashSet::new();
        for family in FAMILIES {
            for t in family.model_types {
                assert!(seen.insert(*t), "{t} claimed twice");
            }
        }
    }
}
