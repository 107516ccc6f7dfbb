use super::{Builder, Gating, Heads, StateInputs};
use crate::engines::llama_cpp::ggml::{Graph, Id, Type};
use crate::memory::GraphShape;

/// llama.cpp's Qwen3.5 graph (`src/models/qwen35.cpp`, and `qwen35moe.cpp` with experts):
/// gated DeltaNet layers over the recurrent state between gated attention layers (Q and K
/// normed per head, Q, V, K expanded in that order), each with a post-attention norm before
/// a dense SwiGLU or the MoE with its sigmoid-gated shared expert. Nothing is cut to the
/// outputs inside the layers (`embeddings_nextn_masked` is off, llama-context.cpp:120): the
/// final norm is `t_h_nextn`, a graph output, and the output rows are taken from it.
pub(super) fn graph(s: &GraphShape) -> Graph {
    let (mut b, mut layer_in) = Builder::new(s);
    // M-RoPE: four positions a token (`n_pos_per_embd`, llama-hparams.cpp:285-288).
    b.positions = b.g.input(Type::I32, [s.tokens.saturating_mul(4), 1, 1, 1]);
    let states = b.state_inputs();
    let cache = b.cache_inputs(s.full_cells);
    let out_ids = b.g.input(Type::I32, [s.outputs, 1, 1, 1]);
    let heads = Heads {
        qk_norm: true,
        gate: true,
        ..Heads::PLAIN
    };
    for kind in &s.layer_caches {
        let recurrent = kind.is_some_and(|k| k.is_state());
        let x = b.norm(layer_in);
        b.g.expand(x);
        let mixed = match recurrent {
            true => delta_net(&mut b, x, states),
            false => b.attention(x, cache, heads),
        };
        let ffn_in = b.g.like(mixed, &[mixed, layer_in], true);
        let x = b.norm(ffn_in);
        let out = match s.experts {
            0 => b.ffn(x, s.tokens),
            _ => moe(&mut b, x),
        };
        layer_in = b.g.like(out, &[out, ffn_in], true);
    }
    b.output_rows_after_norm(layer_in, out_ids)
}

/// `build_layer_attn_linear` (qwen35.cpp:335-468) with `build_conv_state` and
/// `build_recurrent_attn` (delta-net-base.cpp:449-561): the convolution over the cached
/// window and the micro-batch, q and k L2-normed, and the fused gated delta rule
/// (`ggml_gated_delta_net`, its output and new state in one tensor, ggml.c:6414; always fused
/// in this tree, llama-context.cpp:233-235, so q and k are not repeated to the value heads),
/// then the gated output norm.
fn delta_net(b: &mut Builder, x: Id, states: StateInputs) -> Id {
    let s = b.s;
    let (t, seqs) = (s.tokens, s.sequences.max(1));
    let per_seq = t / seqs;
    let (kernel, channels) = (s.conv_kernel, s.conv_channels);
    let (hk, sk, hv, sv) = (s.key_heads, s.key_dim, s.value_heads, s.value_dim);
    let window = kernel.saturating_sub(1);
    let cache = b.cache;
    // build_conv_state: the cached window, then the micro-batch's projected q, k and v.
    let conv_states = b.state_rows(states, window.saturating_mul(channels));
    let conv_states = b.g.reshape(conv_states, [window, channels, seqs, 1]);
    let qkv = b.linear(x, channels, t, false);
    let g = &mut b.g;
    let qkv = g.reshape(qkv, [channels, per_seq, seqs, 1]);
    let nb = g.strides(qkv);
    let qkv_t = g.view(qkv, [per_seq, channels, seqs, 1], [nb[1], nb[0], nb[2], nb[3]]);
    // `ggml_concat` along the tokens; its last `window` columns are written back.
    let conv_input = g.op(
        Type::F32,
        [window.saturating_add(per_seq), channels, seqs, 1],
        &[conv_states, qkv_t],
        false,
    );
    let nb = g.strides(conv_input);
    let last = g.view(conv_input, [window, channels, seqs, 1], nb);
    let written = g.write_into(cache, &[last, cache]);
    g.expand(written);
    // `n_embd_s`: `ssm_d_state × ssm_d_inner` floats a sequence (llama-hparams.cpp:256-257).
    let state = b.state_rows(states, sk.saturating_mul(hv).saturating_mul(sv));
    let weight = b.weight;
    let g = &mut b.g;
    let state = g.reshape(state, [sv, sv, hv, seqs]);
    // `ggml_ssm_conv`, then SiLU in place; q, k and v are views of it.
    let conv = g.op(Type::F32, [channels, per_seq, seqs, 1], &[conv_input, weight], false);
    let conv = g.like(conv, &[conv], true);
    let nb = g.strides(conv);
    let (row, seq) = (nb[1], nb[1].saturating_mul(per_seq));
    // `build_gdn_l2_norm` (models.h:14-18): rms_norm, then a scale.
    let l2_norm = |g: &mut Graph| {
        let view = g.view(conv, [sk, hk, per_seq, seqs], [4, sk.saturating_mul(4), row, seq]);
        let normed = g.like(view, &[view], true);
        g.like(normed, &[normed], true)
    };
    let q = l2_norm(g);
    let k = l2_norm(g);
    let v = g.view(conv, [sv, hv, per_seq, seqs], [4, sv.saturating_mul(4), row, seq]);
    // The decay gate, softplus(alpha + dt) × A, and beta's sigmoid: one per value head.
    let alpha = b.linear(x, hv, t, false);
    let g = &mut b.g;
    let alpha = g.reshape(alpha, [hv, per_seq, seqs, 1]);
    let biased = g.like(alpha, &[alpha, weight], true);
    let softplus = g.like(biased, &[biased], true);
    let decay = g.like(softplus, &[softplus, weight], true);
    let decay = g.reshape(decay, [1, hv, per_seq, seqs]);
    let beta = b.linear(x, hv, t, false);
    let g = &mut b.g;
    let beta = g.reshape(beta, [1, hv, per_seq, seqs]);
    let beta = g.like(beta, &[beta], true);
    let out_rows = t.saturating_add(sv.saturating_mul(seqs));
    let fused = g.op(
        Type::F32,
        [sv.saturating_mul(hv), out_rows, 1, 1],
        &[q, k, v, decay, beta, state],
        false,
    );
    // The new state and the output: contiguous views of it (their offsets do not place them).
    let new_state = g.reshape(fused, [sv, sv, hv, seqs]);
    let written = g.write_into(cache, &[new_state, cache]);
    g.expand(written);
    let output = g.reshape(fused, [sv, hv, per_seq, seqs]);
    // build_norm_gated: the norm of the output times SiLU of the z projection.
    let normed = b.norm(output);
    let z = b.linear(x, sv.saturating_mul(hv), t, false);
    let g = &mut b.g;
    let z = g.reshape(z, [sv, hv, per_seq, seqs]);
    let z = g.like(z, &[z], true);
    let gated = g.like(normed, &[normed, z], true);
    let gated = g.reshape(gated, [sv.saturating_mul(hv), per_seq, seqs, 1]);
    let out = b.linear(gated, s.hidden, t, false);
    b.g.reshape(out, [s.hidden, t, 1, 1])
}

/// `build_layer_ffn` (qwen35moe.cpp:494-548): the routed experts, then the shared expert's
/// SwiGLU scaled by the sigmoid of its one-logit gate, added.
fn moe(b: &mut Builder, x: Id) -> Id {
    let (t, width) = (b.s.tokens, b.s.shared_expert_width);
    let routed = b.moe(x, t, Gating::SoftmaxNormalised, false);
    if width == 0 {
        return routed;
    }
    let up = b.linear(x, width, t, false);
    let gate = b.linear(x, width, t, false);
    let act = b.g.op(Type::F32, [width, t, 1, 1], &[gate, up], false);
    let shared = b.linear(act, b.s.hidden, t, false);
    let logit = b.linear(x, 1, t, false);
    let g = &mut b.g;
    let sigmoid = g.like(logit, &[logit], true);
    let shared = g.like(shared, &[shared, sigmoid], true);
    g.like(routed, &[routed, shared], true)
}
