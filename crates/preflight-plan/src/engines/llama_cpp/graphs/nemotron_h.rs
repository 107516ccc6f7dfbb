use super::{Builder, Heads, StateInputs, normalise, sum_experts};
use crate::engines::llama_cpp::ggml::{Graph, Id, Type};
use crate::memory::GraphShape;
use crate::model::NemotronH;
use crate::verdict::CacheKind;

/// llama.cpp's Nemotron-H graph (`src/models/nemotron-h.cpp:188-263`, for `nemotron_h` and
/// `nemotron_h_moe` alike): each block one mixer after its norm — a Mamba2 layer over the
/// recurrent state, attention without rope over the KV cache, or a feed-forward (a dense
/// relu² MLP, or routed experts with a shared expert) — and the residual. No layer is cut to
/// the output rows (`embeddings_nextn_masked` is false, llama-context.cpp:120): the final norm
/// runs over every token, and the output rows are taken after it.
pub(super) fn graph(s: &GraphShape, dims: &NemotronH) -> Graph {
    let (mut b, mut layer_in) = Builder::new(s);
    // `build_inp_mem_hybrid` (llama-graph.cpp:3633-3642): the recurrent state's row copies,
    // then the KV cache's inputs.
    let copies = b.state_inputs();
    let cache = b.cache_inputs(s.full_cells);
    let out_ids = b.g.input(Type::I32, [s.outputs, 1, 1, 1]);
    let heads = Heads {
        rope: false,
        ..Heads::PLAIN
    };
    for kind in &s.layer_caches {
        let x = b.norm(layer_in);
        let out = match kind {
            Some(CacheKind::Mamba) => mamba2(&mut b, x, dims, copies),
            Some(_) => b.attention(x, cache, heads),
            None if s.experts > 0 => moe(&mut b, x, dims),
            None => relu_squared(&mut b, x, s.ffn_width),
        };
        layer_in = b.g.like(out, &[out, layer_in], true);
    }
    // nemotron-h.cpp:245-262.
    b.output_rows_after_norm(layer_in, out_ids)
}

/// `build_mamba2_layer` (mamba-base.cpp:153-304) with one state snapshot (`n_rs_seq` 0):
/// the input projection split into z, xBC and dt; the convolution over the cached columns
/// and xBC (its last columns written back); the scan over the cached state (its final state
/// written back); D skip, SwiGLU gate, grouped RMS norm and the output projection.
fn mamba2(b: &mut Builder, x: Id, dims: &NemotronH, copies: StateInputs) -> Id {
    let s = b.s;
    let &NemotronH {
        conv_kernel,
        inner,
        state,
        heads,
        groups,
        ..
    } = dims;
    let (t, n_seqs) = (s.tokens, s.sequences.max(1));
    let n_seq_tokens = t / n_seqs;
    let head_dim = inner / heads.max(1);
    let conv_dim = inner + 2 * groups * state;
    let columns = conv_kernel.saturating_sub(1);
    let w = b.weight;
    // The conv state's rows (l.184-185).
    let conv = b.state_rows(copies, columns * conv_dim);
    let conv = b.g.reshape(conv, [columns, conv_dim, n_seqs, 1]);
    // in_proj, and its z, xBC and dt views (l.192-202).
    let zx = b.linear(x, 2 * inner + 2 * groups * state + heads, t, false);
    let zx =
        b.g.reshape(zx, [2 * inner + 2 * groups * state + heads, n_seq_tokens, n_seqs, 1]);
    let g = &mut b.g;
    let nb = g.strides(zx);
    let f32 = 4;
    let z = g.view(
        zx,
        [head_dim, heads, n_seq_tokens, n_seqs],
        [f32, head_dim * f32, nb[1], nb[2]],
    );
    let xbc = g.view(zx, [conv_dim, n_seq_tokens, n_seqs, 1], nb);
    let dt = g.view(zx, [heads, n_seq_tokens, n_seqs, 1], nb);
    // The convolution's input, its last columns written to the state cache (l.207-221).
    let xbc_t = g.view(xbc, [n_seq_tokens, conv_dim, n_seqs, 1], [nb[1], nb[0], nb[2], nb[3]]);
    let conv_x = g.op(
        Type::F32,
        [columns + n_seq_tokens, conv_dim, n_seqs, 1],
        &[conv, xbc_t],
        false,
    );
    let last = g.view(conv_x, [columns, conv_dim, n_seqs, 1], g.strides(conv_x));
    let written = g.write_into(b.cache, &[last, b.cache]);
    g.expand(written);
    // ssm_conv, bias, silu (l.232-237).
    let xbc = g.op(Type::F32, [conv_dim, n_seq_tokens, n_seqs, 1], &[conv_x, w], false);
    let xbc = g.like(xbc, &[xbc, w], true);
    let xbc = g.like(xbc, &[xbc], true);
    let nb = g.strides(xbc);
    let xs = g.view(
        xbc,
        [head_dim, heads, n_seq_tokens, n_seqs],
        [f32, head_dim * f32, nb[1], nb[2]],
    );
    let bc = [state, groups, n_seq_tokens, n_seqs];
    let bc_strides = [f32, state * f32, nb[1], nb[2]];
    let (bs, cs) = (g.view(xbc, bc, bc_strides), g.view(xbc, bc, bc_strides));
    // dt made contiguous, plus its bias (l.251).
    let dt = g.op(Type::F32, [heads, n_seq_tokens, n_seqs, 1], &[dt], false);
    let dt = g.like(dt, &[dt, w], true);
    // The scan: y and the final states in one tensor (l.258-267; ggml.c:5748-5749).
    let y_len = head_dim * heads * n_seq_tokens * n_seqs;
    let scanned = y_len + state * inner * n_seqs;
    let y_ssm = b.build_rs(copies, state * inner, |g, cache| {
        g.op(
            Type::F32,
            [scanned, 1, 1, 1],
            &[cache, xs, dt, w, bs, cs, copies.main],
            false,
        )
    });
    let g = &mut b.g;
    // The final states written to the cache (l.274-279).
    let states = g.view(y_ssm, [state * inner, n_seqs, 1, 1], g.strides(y_ssm));
    let written = g.write_into(b.cache, &[states, b.cache]);
    g.expand(written);
    // y + x·D, gated by z (l.281-288).
    let shape = [head_dim, heads, n_seq_tokens, n_seqs];
    let y = g.reshape(y_ssm, shape);
    let xd = g.op(Type::F32, shape, &[xs, w], true);
    let y = g.op(Type::F32, shape, &[y, xd], true);
    let z = g.op(Type::F32, shape, &[z], false);
    let y = g.op(Type::F32, shape, &[z, y], false);
    // The grouped RMS norm and out_proj (l.291-299).
    let grouped = g.reshape(y, [inner / groups.max(1), groups, n_seq_tokens, n_seqs]);
    let y = b.norm(grouped);
    let y = b.g.reshape(y, [inner, t, 1, 1]);
    b.linear(y, s.hidden, t, false)
}

/// `build_ffn(LLM_FFN_RELU_SQR, LLM_FFN_PAR)` without a gate (nemotron-h.cpp:283-289, 324-329):
/// up, relu and its square in place, down.
fn relu_squared(b: &mut Builder, x: Id, width: u64) -> Id {
    let t = b.s.tokens;
    let up = b.linear(x, width, t, false);
    let relu = b.g.like(up, &[up], true);
    let squared = b.g.like(relu, &[relu], true);
    b.linear(squared, b.s.hidden, t, false)
}

/// The MoE block (nemotron-h.cpp:290-333): `build_moe_ffn` (llama-graph.cpp:2007-2373) with
/// sigmoid routing, the selection biased by `exp_probs_b`, the weights normalised and scaled
/// as the model says, relu² experts without a gate — over the latent projection when the model
/// has one — then the shared expert, and the two summed.
fn moe(b: &mut Builder, x: Id, dims: &NemotronH) -> Id {
    let s = b.s;
    let (t, used, width) = (s.tokens, s.experts_used, s.expert_width);
    let w = b.weight;
    let (input, n) = match dims.latent {
        0 => (x, s.hidden),
        latent => (b.linear(x, latent, t, false), latent),
    };
    let logits = b.linear(x, s.experts, t, false);
    let g = &mut b.g;
    let probs = g.like(logits, &[logits], true);
    let selection = g.like(probs, &[probs, w], true);
    let order = g.op(Type::I32, [s.experts, t, 1, 1], &[selection], false);
    let chosen = g.view(order, [used, t, 1, 1], g.strides(order));
    let probs_3d = g.reshape(probs, [1, s.experts, t, 1]);
    let mut weights = g.op(Type::F32, [1, used, t, 1], &[probs_3d, chosen], false);
    if dims.routing.norm_weights {
        weights = normalise(g, weights, used, t);
    }
    if dims.routing.scale_weights {
        weights = g.like(weights, &[weights], true);
    }
    g.expand(weights);
    let input = g.reshape(input, [n, 1, t, 1]);
    let up = g.op(Type::F32, [width, used, t, 1], &[w, input, chosen], false);
    let relu = g.like(up, &[up], true);
    let squared = g.like(relu, &[relu], true);
    let down = g.op(Type::F32, [n, used, t, 1], &[w, squared, chosen], false);
    let weighted = g.like(down, &[down, weights], true);
    let mut routed = sum_experts(g, weighted, [n, t], used).unwrap_or(input);
    if dims.latent > 0 {
        routed = b.linear(routed, s.hidden, t, false);
    }
    let shared = relu_squared(b, x, dims.shared_width);
    b.g.like(routed, &[routed, shared], true)
}
