//! ggml-alloc's graph reservation, replayed: the compute buffer llama.cpp logs is the peak
//! offset `ggml_gallocr_reserve` reaches placing a graph's tensors, node by node, in one
//! buffer (vendored tree 0c1e570, `ggml/src/ggml-alloc.c`). Where the logits land depends on
//! which tensors are still alive and where the earlier ones were put, so only a replay of the
//! same graph under the same rules gives the figure. [`Graph`] is that graph: tensors made as
//! llama.cpp's builders make them, ordered as `ggml_build_forward_expand` orders them
//! ([`Graph::expand`], a depth-first walk, sources in order: `ggml.c` `ggml_visit_parents_graph`),
//! and [`Graph::reserve`] the allocator.

/// A tensor's element type, as far as layouts and sizes go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Type {
    F32,
    F16,
    I32,
    I64,
}

impl Type {
    fn bytes(self) -> u64 {
        match self {
            Type::F32 | Type::I32 => 4,
            Type::F16 => 2,
            Type::I64 => 8,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Id(usize);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Weights and the KV cache: allocated in buffers of their own.
    External,
    /// A graph input (`ggml_set_input`): allocated before any node.
    Input,
    /// A computed node; `inplace` is `ggml_op_can_inplace` of its op.
    Op { inplace: bool },
}

#[derive(Debug, Clone)]
struct Tensor {
    ty: Type,
    ne: [u64; 4],
    nb: [u64; 4],
    kind: Kind,
    src: Vec<Id>,
    /// The tensor a view's data belongs to (the root of a chain of views). Where in it the
    /// view starts does not change placement: the replay never reuses a view in place.
    view_src: Option<Id>,
    output: bool,
}

/// A ggml compute graph: its tensors, the nodes in execution order and the inputs in leaf
/// order (ggml-alloc allocates inputs first, in that order), both as [`Graph::expand`] met them.
#[derive(Debug, Clone, Default)]
pub struct Graph {
    tensors: Vec<Tensor>,
    nodes: Vec<Id>,
    inputs: Vec<Id>,
    visited: Vec<bool>,
}

fn contiguous(ty: Type, ne: [u64; 4]) -> [u64; 4] {
    let mut nb = [ty.bytes(), 0, 0, 0];
    for i in 1..4 {
        nb[i] = nb[i - 1].saturating_mul(ne[i - 1]);
    }
    nb
}

impl Graph {
    fn push(&mut self, tensor: Tensor) -> Id {
        self.tensors.push(tensor);
        Id(self.tensors.len() - 1)
    }

    fn new_tensor(&mut self, ty: Type, ne: [u64; 4], kind: Kind, src: &[Id]) -> Id {
        self.push(Tensor {
            ty,
            ne,
            nb: contiguous(ty, ne),
            kind,
            src: src.to_vec(),
            view_src: None,
            output: false,
        })
    }

    /// A tensor another buffer holds (a weight, a KV cache).
    pub fn external(&mut self, ty: Type, ne: [u64; 4]) -> Id {
        self.new_tensor(ty, ne, Kind::External, &[])
    }

    pub fn input(&mut self, ty: Type, ne: [u64; 4]) -> Id {
        self.new_tensor(ty, ne, Kind::Input, &[])
    }

    /// A node computing a new contiguous tensor from `src`.
    pub fn op(&mut self, ty: Type, ne: [u64; 4], src: &[Id], inplace: bool) -> Id {
        self.new_tensor(ty, ne, Kind::Op { inplace }, src)
    }

    /// A node of the same type and shape as `like` (element-wise ops, norms, rope).
    pub fn like(&mut self, like: Id, src: &[Id], inplace: bool) -> Id {
        let Tensor { ty, ne, .. } = self.tensors[like.0];
        self.op(ty, ne, src, inplace)
    }

    pub fn strides(&self, id: Id) -> [u64; 4] {
        self.tensors[id.0].nb
    }

    /// A view node of `src` (`ggml_view_*`, `ggml_reshape_*`, `ggml_permute`): no memory of
    /// its own. `src` is its one parent; the data stays the root's.
    pub fn view(&mut self, src: Id, ne: [u64; 4], nb: [u64; 4]) -> Id {
        let parent = &self.tensors[src.0];
        let root = parent.view_src.unwrap_or(src);
        let ty = parent.ty;
        self.push(Tensor {
            ty,
            ne,
            nb,
            kind: Kind::Op { inplace: false },
            src: vec![src],
            view_src: Some(root),
            output: false,
        })
    }

    pub fn reshape(&mut self, src: Id, ne: [u64; 4]) -> Id {
        let ty = self.tensors[src.0].ty;
        self.view(src, ne, contiguous(ty, ne))
    }

    /// `ggml_permute(a, 0, 2, 1, 3)`: swaps the second and third axes.
    pub fn permute_0213(&mut self, src: Id) -> Id {
        let Tensor { ne, nb, .. } = self.tensors[src.0];
        self.view(src, [ne[0], ne[2], ne[1], ne[3]], [nb[0], nb[2], nb[1], nb[3]])
    }

    /// A node that writes into `target`'s data (`ggml_set_rows`): a view of it, with `src`
    /// as its parents.
    pub fn write_into(&mut self, target: Id, src: &[Id]) -> Id {
        let Tensor { ty, ne, nb, .. } = self.tensors[target.0];
        let root = self.tensors[target.0].view_src.unwrap_or(target);
        self.push(Tensor {
            ty,
            ne,
            nb,
            kind: Kind::Op { inplace: false },
            src: src.to_vec(),
            view_src: Some(root),
            output: false,
        })
    }

    /// `ggml_build_forward_expand`: every tensor `root` depends on not yet in the graph,
    /// sources before the tensors reading them, in source order; inputs join the leaves.
    /// Iterative, so a deep stack of layers cannot exhaust the call stack.
    pub fn expand(&mut self, root: Id) {
        self.visited.resize(self.tensors.len(), false);
        let mut stack = vec![(root, 0usize)];
        while let Some((id, next)) = stack.pop() {
            if next == 0 {
                if self.visited[id.0] {
                    continue;
                }
                self.visited[id.0] = true;
            }
            if let Some(&src) = self.tensors[id.0].src.get(next) {
                stack.push((id, next + 1));
                if !self.visited[src.0] {
                    stack.push((src, 0));
                }
                continue;
            }
            match self.tensors[id.0].kind {
                Kind::Input => self.inputs.push(id),
                Kind::External => {}
                Kind::Op { .. } => self.nodes.push(id),
            }
        }
    }

    /// `ggml_set_output`: never freed, never reused in place.
    pub fn set_output(&mut self, id: Id) {
        self.tensors[id.0].output = true;
    }

    fn bytes(&self, id: Id) -> u64 {
        let t = &self.tensors[id.0];
        // ggml_nbytes: an empty tensor has none (ggml.c:1299-1303), else the last element's end.
        if t.ne.contains(&0) {
            return 0;
        }
        (0..4).fold(t.ty.bytes(), |acc, i| {
            acc.saturating_add(t.ne[i].saturating_sub(1).saturating_mul(t.nb[i]))
        })
    }

    /// The buffer `ggml_gallocr_reserve` sizes for this graph: `ggml_gallocr_alloc_graph_impl`
    /// (ggml-alloc.c:718-823) over a single-chunk dynamic allocator with `alignment`.
    pub fn reserve(&self, alignment: u64) -> u64 {
        REPLAYS.with(|n| n.set(n.get() + 1));
        Replay::new(self, alignment).run()
    }
}

thread_local! {
    /// Graphs replayed on this thread: the work a plan did, counted beside it, so tests can
    /// prove a plan replayed once per distinct shape (the planner runs on its caller's thread).
    static REPLAYS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// How many ggml graphs this thread has replayed so far.
pub fn replays_on_this_thread() -> u64 {
    REPLAYS.with(std::cell::Cell::get)
}

#[derive(Debug, Clone, Copy, Default)]
struct Node {
    n_children: u64,
    n_views: u64,
    allocated: bool,
    offset: u64,
}

/// One buffer's free list: blocks sorted by offset, the last one open-ended
/// (`ggml_dyn_tallocr`, ggml-alloc.c:110-352).
struct FreeList {
    blocks: Vec<(u64, u64)>,
    alignment: u64,
    max_size: u64,
}

impl FreeList {
    fn align(&self, size: u64) -> u64 {
        size.div_ceil(self.alignment).saturating_mul(self.alignment)
    }

    /// `ggml_dyn_tallocr_alloc`: the best-fitting block besides the last (the latest of equal
    /// fits), else the last one.
    fn alloc(&mut self, size: u64) -> u64 {
        let size = self.align(size);
        let last = self.blocks.len() - 1;
        let mut best: Option<(usize, u64)> = None;
        for (i, &(_, block)) in self.blocks[..last].iter().enumerate() {
            if block >= size && best.is_none_or(|(_, fit)| block <= fit) {
                best = Some((i, block));
            }
        }
        let index = best.map_or(last, |(i, _)| i);
        let (offset, block) = self.blocks[index];
        self.blocks[index] = (offset.saturating_add(size), block.saturating_sub(size));
        if self.blocks[index].1 == 0 && index != last {
            self.blocks.remove(index);
        }
        self.max_size = self.max_size.max(offset.saturating_add(size));
        offset
    }

    /// `ggml_dyn_tallocr_free_bytes`: merged into the first block it touches, else inserted.
    fn free(&mut self, offset: u64, size: u64) {
        let size = self.align(size);
        for i in 0..self.blocks.len() {
            let (start, length) = self.blocks[i];
            if start.saturating_add(length) == offset {
                self.blocks[i].1 = length.saturating_add(size);
                if let Some(&(next, next_length)) = self.blocks.get(i + 1)
                    && self.blocks[i].0.saturating_add(self.blocks[i].1) == next
                {
                    self.blocks[i].1 = self.blocks[i].1.saturating_add(next_length);
                    self.blocks.remove(i + 1);
                }
                return;
            }
            if offset.saturating_add(size) == start {
                self.blocks[i] = (offset, length.saturating_add(size));
                if i > 0 {
                    let (previous, previous_length) = self.blocks[i - 1];
                    if previous.saturating_add(previous_length) == offset {
                        self.blocks[i - 1].1 = previous_length.saturating_add(self.blocks[i].1);
                        self.blocks.remove(i);
                    }
                }
                return;
            }
        }
        let at = self
            .blocks
            .iter()
            .position(|&(start, _)| start >= offset)
            .unwrap_or(self.blocks.len());
        self.blocks.insert(at, (offset, size));
    }
}

struct Replay<'g> {
    graph: &'g Graph,
    state: Vec<Node>,
    free: FreeList,
}

impl<'g> Replay<'g> {
    fn new(graph: &'g Graph, alignment: u64) -> Self {
        Replay {
            graph,
            state: vec![Node::default(); graph.tensors.len()],
            free: FreeList {
                blocks: vec![(0, u64::MAX / 2)],
                alignment: alignment.max(1),
                max_size: 0,
            },
        }
    }

    fn tensor(&self, id: Id) -> &'g Tensor {
        &self.graph.tensors[id.0]
    }

    /// `ggml_gallocr_is_allocated`: data set elsewhere, or placed by this replay.
    fn is_allocated(&self, id: Id) -> bool {
        self.tensor(id).kind == Kind::External || self.state[id.0].allocated
    }

    fn same_layout(&self, a: Id, b: Id) -> bool {
        let (a, b) = (self.tensor(a), self.tensor(b));
        a.ty == b.ty && a.ne == b.ne && a.nb == b.nb
    }

    /// `ggml_gallocr_allocate_node` (ggml-alloc.c:623-689): in place over a parent this node
    /// is the last reader of, where the op allows it; else from the free list.
    fn allocate(&mut self, id: Id) {
        let tensor = self.tensor(id);
        if self.is_allocated(id) || tensor.view_src.is_some() {
            return;
        }
        self.state[id.0].allocated = true;
        if tensor.kind == (Kind::Op { inplace: true }) {
            for &parent in &tensor.src {
                let p = self.tensor(parent);
                // Only tensors this replay placed, not outputs, of the same layout.
                let output = p.output || p.view_src.is_some_and(|root| self.tensor(root).output);
                if !self.state[parent.0].allocated || output || !self.same_layout(id, parent) {
                    continue;
                }
                let ps = self.state[parent.0];
                if ps.n_children != 1 || ps.n_views != 0 {
                    continue;
                }
                // (A view parent is never `allocated` here, so the view branch of the C code
                // does not arise.)
                self.state[id.0].offset = ps.offset;
                self.state[parent.0].allocated = false;
                let (own, theirs) = (
                    self.free.align(self.graph.bytes(id)),
                    self.free.align(self.graph.bytes(parent)),
                );
                if theirs > own {
                    self.free.free(ps.offset.saturating_add(own), theirs - own);
                }
                return;
            }
        }
        self.state[id.0].offset = self.free.alloc(self.graph.bytes(id));
    }

    fn release(&mut self, id: Id) {
        if self.tensor(id).output {
            return;
        }
        let offset = self.state[id.0].offset;
        self.free.free(offset, self.graph.bytes(id));
        self.state[id.0].allocated = false;
    }

    fn run(mut self) -> u64 {
        let graph = self.graph;
        for &input in &graph.inputs {
            self.allocate(input);
        }
        for &node in &graph.nodes {
            if let Some(root) = self.tensor(node).view_src {
                self.state[root.0].n_views += 1;
            }
            for &src in &self.tensor(node).src {
                self.state[src.0].n_children += 1;
            }
        }
        for &node in &graph.nodes {
            for &parent in &self.tensor(node).src {
                self.allocate(parent);
            }
            self.allocate(node);
            for &parent in &self.tensor(node).src {
                let state = &mut self.state[parent.0];
                state.n_children = state.n_children.saturating_sub(1);
                if state.n_children != 0 || state.n_views != 0 {
                    continue;
                }
                match self.tensor(parent).view_src {
                    Some(root) => {
                        let root_state = &mut self.state[root.0];
                        root_state.n_views = root_state.n_views.saturating_sub(1);
                        if root_state.n_views == 0 && root_state.n_children == 0 && root_state.allocated {
                            self.release(root);
                        }
                    }
                    None if self.state[parent.0].allocated => self.release(parent),
                    None => {}
                }
            }
        }
        self.free.max_size
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn free_list() -> FreeList {
        FreeList {
            blocks: vec![(0, u64::MAX / 2)],
            alignment: 32,
            max_size: 0,
        }
    }

    #[test]
    fn the_best_fitting_free_block_is_taken_before_the_end() {
        let mut list = free_list();
        let offsets: Vec<u64> = [64, 32, 96, 32].iter().map(|&n| list.alloc(n)).collect();
        assert_eq!(offsets, [0, 64, 96, 192]);
        list.free(0, 64);
        list.free(96, 96);
        // 60 bytes round up to 64: the freed 64 fits best, before the 96.
        assert_eq!(list.alloc(60), 0);
        assert_eq!(list.alloc(96), 96);
        // Nothing free fits: the end of the buffer grows.
        assert_eq!(list.alloc(32), 224);
        assert_eq!(list.max_size, 256);
    }

    #[test]
    fn freed_neighbours_merge_into_one_block() {
        let mut list = free_list();
        for n in [32, 32, 32, 32] {
            list.alloc(n);
        }
        list.free(32, 32);
        list.free(64, 32);
        list.free(0, 32);
        assert_eq!(list.blocks[0], (0, 96));
        // Freeing the last tensor merges everything into the open end.
        list.free(96, 32);
        assert_eq!(list.blocks, [(0, u64::MAX / 2)]);
    }

    #[test]
    fn ops_run_in_place_over_a_parent_they_read_last_unless_it_is_an_output() {
        let chain = |output: bool| {
            let mut g = Graph::default();
            // 1 KiB each; `x` is read again at the end, so it stays.
            let x = g.input(Type::F32, [256, 1, 1, 1]);
            let a = g.like(x, &[x], false);
            let b = g.like(a, &[a], true);
            if output {
                g.set_output(b);
            }
            let c = g.like(b, &[b], true);
            let last = g.like(c, &[c, x], true);
            g.expand(last);
            g.reserve(32)
        };
        // The input, and one buffer the in-place ops share.
        assert_eq!(chain(false), 2 * 1024);
        // An output is never reused or freed: the op after it needs its own buffer.
        assert_eq!(chain(true), 3 * 1024);
    }

    #[test]
    fn expanding_orders_sources_first_and_meets_inputs_as_leaves() {
        let mut g = Graph::default();
        let (x, y) = (g.input(Type::F32, [1, 1, 1, 1]), g.input(Type::F32, [1, 1, 1, 1]));
        let a = g.like(x, &[y], false);
        let b = g.like(x, &[x], false);
        let c = g.like(x, &[a, b], false);
        g.expand(b);
        g.expand(c);
        assert_eq!(g.nodes, [b, a, c]);
        // `x` was met first, through `b`.
        assert_eq!(g.inputs, [x, y]);
    }

    #[test]
    fn views_hold_their_root_until_their_last_reader() {
        let mut g = Graph::default();
        let x = g.input(Type::F32, [256, 1, 1, 1]);
        let a = g.like(x, &[x], false);
        let view = g.reshape(a, [16, 16, 1, 1]);
        // Not in place over a view (not a tensor this replay placed): a buffer of its own,
        // while `a` is still held by its view.
        let b = g.op(Type::F32, [16, 16, 1, 1], &[view], true);
        // `a` is freed once `b` has read the view, and the next op takes its place.
        let last = g.op(Type::F32, [256, 1, 1, 1], &[b, x], false);
        g.expand(last);
        assert_eq!(g.reserve(32), 3 * 1024);
    }
}
