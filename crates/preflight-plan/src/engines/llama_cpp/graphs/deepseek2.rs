use super::{Builder, CacheInputs, Routing};
use crate::engines::llama_cpp::ggml::{Graph, Id, Type};
use crate::memory::GraphShape;
use crate::model::Deepseek2Graph;

/// llama.cpp's DeepSeek-V2/V3 graph with MLA (`src/models/deepseek2.cpp:417-713`): queries
/// through the q LoRA, their nope part absorbed into the latent, attention over the cache of
/// latent + rope K alone (one head; V is a view of it), decompressed by `wv_b`; the first
/// `dense_lead` layers dense, the rest the routed experts plus the shared one; at the last
/// layer the attention output and the residual cut to the output rows.
pub(super) fn graph(s: &GraphShape, p: &Deepseek2Graph) -> Graph {
    let (mut b, mut layer_in) = Builder::new(s);
    let cache = b.cache_inputs(s.full_cells);
    let out_ids = b.g.input(Type::I32, [s.outputs, 1, 1, 1]);
    let layers = s.sliding.len();
    let routing = Routing {
        declared: p.routing,
        probs_bias: p.probs_bias,
    };
    for il in 0..layers {
        let x = b.norm(layer_in);
        let attention = attention(&mut b, x, cache, p);
        let ([attention, residual], tokens) = b.cut_to_outputs(il + 1 == layers, [attention, layer_in], out_ids);
        let ffn_in = b.g.like(attention, &[attention, residual], true);
        let x = b.norm(ffn_in);
        let out = b.dense_lead_or_routed(il, x, tokens, p.dense_lead, routing, p.shared_width);
        layer_in = b.g.like(out, &[out, ffn_in], true);
    }
    b.output(layer_in)
}

/// MLA with the absorption (deepseek2.cpp:496-592) and `build_attn` over the K-only cache
/// (llama-graph.cpp:2981-3037): Q, V (the normed latent), K (latent and roped `k_pe`
/// concatenated) expanded in that order, K written into the cache; `build_attn_mha`
/// (llama-graph.cpp:2616-2755) then reads K and V as views of one cache whose V is not
/// transposed (l.2627), so without flash attention V is made contiguous transposed (`v_cont`,
/// l.2726-2730), and the output is decompressed by `wv_b` before the output projection.
fn attention(b: &mut Builder, x: Id, cache: CacheInputs, p: &Deepseek2Graph) -> Id {
    let s = b.s;
    let (t, heads) = (s.tokens, s.heads);
    let (rank, rope, v_head) = (p.kv_lora_rank, p.qk_rope, p.v_head);
    let k_head = p.qk_nope.saturating_add(rope);
    let latent = rank.saturating_add(rope);
    let q = match p.q_lora_rank {
        0 => b.linear(x, heads.saturating_mul(k_head), t, false),
        q_rank => {
            let q = b.linear(x, q_rank, t, false);
            let q = b.norm(q);
            b.linear(q, heads.saturating_mul(k_head), t, false)
        }
    };
    let kv_pe = b.linear(x, latent, t, false);
    let (w, positions) = (b.weight, b.positions);
    let g = &mut b.g;
    let q = g.reshape(q, [k_head, heads, t, 1]);
    let kv_nb = g.strides(kv_pe);
    let compressed = g.view(kv_pe, [rank, t, 1, 1], [kv_nb[0], kv_nb[1], kv_nb[2], kv_nb[3]]);
    let k_pe = g.view(kv_pe, [rope, 1, t, 1], [kv_nb[0], kv_nb[1], kv_nb[1], kv_nb[2]]);
    let k_pe = g.like(k_pe, &[k_pe, positions], true);
    let compressed = b.norm(compressed);
    let g = &mut b.g;
    let q_nb = g.strides(q);
    let q_nope = g.view(q, [p.qk_nope, heads, t, 1], q_nb);
    let q_pe = g.view(q, [rope, heads, t, 1], q_nb);
    let q_pe = g.like(q_pe, &[q_pe, positions], true);
    let q_nope = g.permute_0213(q_nope);
    let absorbed = g.op(Type::F32, [rank, t, heads, 1], &[w, q_nope], false);
    let absorbed = g.permute_0213(absorbed);
    let q = g.op(Type::F32, [latent, heads, t, 1], &[absorbed, q_pe], false);
    let v = g.reshape(compressed, [rank, 1, t, 1]);
    let k = g.op(Type::F32, [latent, 1, t, 1], &[v, k_pe], false);
    for y in [q, v, k] {
        g.expand(y);
    }
    let k_rows = g.reshape(k, [latent, t, 1, 1]);
    let written = g.write_into(b.cache, &[k_rows, cache.k_idxs, b.cache]);
    g.expand(written);
    // `get_k` and the V view of it: one latent head a cell, each stream's cells in turn.
    let streams = s.streams.max(1);
    let row = latent.saturating_mul(2);
    let cache_nb = [2, row, row, row.saturating_mul(cache.cells)];
    let k_view = g.view(b.cache, [latent, 1, cache.cells, streams], cache_nb);
    let v_view = g.view(k_view, [rank, 1, cache.cells, streams], cache_nb);
    let per_stream = t / streams;
    let q_nb = g.strides(q);
    let q_view = g.view(
        q,
        [latent, heads, per_stream, streams],
        [q_nb[0], q_nb[1], q_nb[2], q_nb[2].saturating_mul(per_stream)],
    );
    let q = g.permute_0213(q_view);
    let out = match s.flash_attn {
        true => {
            let k = g.permute_0213(k_view);
            let v = g.permute_0213(v_view);
            let out = g.op(
                Type::F32,
                [rank, heads, per_stream, streams],
                &[q, k, v, cache.mask],
                false,
            );
            let out = g.permute_0213(out);
            let mla = g.op(Type::F32, [v_head, per_stream, heads, streams], &[w, out], false);
            let mla = g.permute_0213(mla);
            let out = g.op(Type::F32, [v_head, heads, per_stream, streams], &[mla], false);
            g.reshape(out, [v_head.saturating_mul(heads), t, 1, 1])
        }
        false => {
            let v = g.permute_0213(v_view);
            let v_nb = g.strides(v);
            let transposed = g.view(v, [cache.cells, rank, 1, streams], [v_nb[1], v_nb[0], v_nb[2], v_nb[3]]);
            let v = g.op(Type::F16, [cache.cells, rank, 1, streams], &[transposed], false);
            let k = g.permute_0213(k_view);
            let scores = g.op(Type::F32, [cache.cells, per_stream, heads, streams], &[k, q], false);
            let scores = g.like(scores, &[scores, cache.mask], true);
            let mixed = g.op(Type::F32, [rank, per_stream, heads, streams], &[v, scores], false);
            let mla = g.op(Type::F32, [v_head, per_stream, heads, streams], &[w, mixed], false);
            let permuted = g.permute_0213(mla);
            g.op(Type::F32, [v_head.saturating_mul(heads), t, 1, 1], &[permuted], false)
        }
    };
    g.expand(out);
    b.linear(out, s.hidden, t, false)
}
