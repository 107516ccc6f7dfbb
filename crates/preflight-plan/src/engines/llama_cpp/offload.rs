//! llama.cpp's offload, followed from the tree llama-cpp-python 0.3.36 vendors: which backend
//! holds each tensor (`llama_model_base::load_tensors`, llama-model.cpp l.1551–1614, and the
//! loader's `create_tensor`, llama-model-loader.cpp l.1155–1275), each layer's KV cache
//! (llama-kv-cache.cpp l.213–220) and a compute buffer, and the layers and experts llama.cpp's
//! own fit picks (`common_params_fit_impl`, common/fit.cpp l.179–877). Only ever asked with
//! devices named; the CPU backend alone is `memory.rs`'s.

use super::memory::Context;
use crate::memory::{Backend, BackendTerms, Backends, Sizing};
use crate::options::{GpuBackend, OverrideTarget, PlanOptions, SplitMode};

/// Free memory llama.cpp's fit leaves on each device: `fit_params_target`, 1024 MiB
/// (common/common.h l.483).
pub const FIT_MARGIN: i64 = 1 << 30;

/// `fit_params_min_ctx` (common/common.h l.480): the least context a sequence the fit lowers
/// an unset one to.
pub const FIT_MIN_CONTEXT: u64 = 4096;

/// The part of a layer llama.cpp's fit leaves to the next backend (`common_layer_fraction_t`,
/// common/fit.cpp l.17–23), as the pattern `get_overflow_pattern` writes for it (l.493–530).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fraction {
    /// `ffn_(gate|up|gate_up|down).*`: all but the attention.
    Attn,
    /// `ffn_(gate|gate_up|down).*`: attention and up stay.
    Up,
    /// `ffn_down.*`: attention, up and gate stay.
    Gate,
    /// `ffn_(up|down|gate_up|gate)_(ch|)exps`: the routed experts (`--n-cpu-moe`'s pattern).
    Moe,
}

impl Fraction {
    /// Whether `suffix` (a tensor name after `blk.N.`) matches the pattern: `regex_search`
    /// anchored by the `blk\.N\.` before it, so a prefix test.
    fn matches(self, suffix: &str) -> bool {
        let starts = |prefixes: &[&str]| prefixes.iter().any(|p| suffix.starts_with(p));
        match self {
            Fraction::Attn => starts(&["ffn_gate", "ffn_up", "ffn_down"]),
            Fraction::Up => starts(&["ffn_gate", "ffn_down"]),
            Fraction::Gate => starts(&["ffn_down"]),
            Fraction::Moe => starts(&[
                "ffn_up_exps",
                "ffn_up_chexps",
                "ffn_down_exps",
                "ffn_down_chexps",
                "ffn_gate_up_exps",
                "ffn_gate_up_chexps",
                "ffn_gate_exps",
                "ffn_gate_chexps",
            ]),
        }
    }

    fn pattern(self, layer: u64) -> String {
        let tail = match self {
            Fraction::Attn => "ffn_(gate|up|gate_up|down).*",
            Fraction::Up => "ffn_(gate|gate_up|down).*",
            Fraction::Gate => "ffn_down.*",
            Fraction::Moe => "ffn_(up|down|gate_up|gate)_(ch|)exps",
        };
        format!("blk\\.{layer}\\.{tail}")
    }
}

/// One buffer type override, in the order llama.cpp tries them (the first match wins).
#[derive(Debug, Clone)]
enum Rule {
    /// `options.override_tensor[i]`, a regex.
    Pattern(usize, Backend),
    /// A layer's fraction: `--n-cpu-moe`'s patterns and the fit's.
    Layer {
        layer: u64,
        fraction: Fraction,
        to: Backend,
    },
}

/// What `load_tensors` is given: `n_gpu_layers`, the split proportions and the overrides.
#[derive(Debug, Clone)]
pub struct Layout {
    /// Layers offloaded, the output layer counted (`llama_model::n_gpu_layers`).
    pub gpu_layers: u64,
    /// `tensor_split` as given (all zero: by device memory).
    split: Vec<f32>,
    rules: Vec<Rule>,
    /// Of `rules`, the last ones are `--n-cpu-moe N`'s: shown as `-ncmoe N`.
    n_cpu_moe: u64,
    /// The fit wrote the split (`set_ngl_tensor_split_tbo`): shown as `-ts`.
    split_written: bool,
}

/// How llama.cpp's fit went (common/fit.cpp).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fit {
    /// `--fit off`.
    Off,
    /// Every device keeps its margin as asked: no change (step 1, l.261–371).
    Unchanged,
    /// The fit lowered the context nobody set, and that alone fits the device (step 2,
    /// l.373–440): the layers load as asked.
    ContextLowered,
    /// The fit chose the layout.
    Fitted,
    /// A change is needed but the caller set what the fit would change: llama.cpp warns and
    /// loads as asked (l.460–486).
    NotRun(&'static str),
}

/// A tensor as llama.cpp classes it (`llm_tensor_info`, llama-arch.cpp l.728–): input layer,
/// a repeating layer's, or the output layer's.
#[derive(Debug, Clone, Copy)]
enum Class {
    Input,
    Output,
    Layer(u64),
}

fn class_of(name: &str) -> (Class, &str) {
    if let Some(rest) = name.strip_prefix("blk.")
        && let Some((index, suffix)) = rest.split_once('.')
        && let Ok(layer) = index.parse::<u64>()
    {
        return (Class::Layer(layer), suffix);
    }
    let base = name.split('.').next().unwrap_or(name);
    match base {
        // LLM_TENSOR_OUTPUT, OUTPUT_NORM, CLS*, DENSE_2/3_OUT: LLM_TENSOR_LAYER_OUTPUT.
        "output" | "output_norm" | "cls" | "dense_2" | "dense_3" => (Class::Output, name),
        // ROPE_FREQS is a repeating tensor, created with layer 0's (and duplicated for others).
        "rope_freqs" => (Class::Layer(0), name),
        // TOKEN_EMBD, POS_EMBD, TOKEN_TYPES, and anything else: the input layer, on the CPU.
        _ => (Class::Input, name),
    }
}

/// One artifact's placement machinery for one context.
pub struct Placer<'a> {
    sizing: &'a Sizing,
    options: &'a PlanOptions,
    ctx: Context,
    /// Each device's usable bytes, in `devices` order (all of them, used or not).
    usable: Vec<u64>,
    /// Devices llama.cpp uses: one under `--split-mode none`.
    used: usize,
    /// The user's patterns, compiled once.
    patterns: Vec<regex::Regex>,
    /// ggml-alloc's reservation for the whole graph (replayed or estimated), and what the
    /// host keeps when every layer is offloaded (the token embedding's rows).
    compute: u64,
    input_rows: u64,
    output: u64,
    layers: u64,
}

impl<'a> Placer<'a> {
    pub fn new(
        sizing: &'a Sizing,
        options: &'a PlanOptions,
        ctx: Context,
        compute: u64,
        output: u64,
        usable: Vec<u64>,
    ) -> Self {
        let used = match options.split_mode {
            Some(SplitMode::None) => usable.len().min(1),
            _ => usable.len(),
        };
        let patterns = options.override_tensor.iter().filter_map(|o| o.regex().ok()).collect();
        let input_rows = ctx.tokens.saturating_mul(sizing.shape.hidden).saturating_mul(4);
        Placer {
            sizing,
            options,
            ctx,
            usable,
            used,
            patterns,
            compute,
            input_rows,
            output,
            layers: sizing.layer_groups.len() as u64,
        }
    }

    /// The layout the options ask for, before any fit.
    pub fn asked(&self) -> Layout {
        let mut rules: Vec<Rule> = self
            .options
            .override_tensor
            .iter()
            .enumerate()
            .map(|(i, o)| {
                let to = match o.target {
                    OverrideTarget::Cpu => Backend::Host,
                    OverrideTarget::Device(_, d) => Backend::Device(d as usize),
                };
                Rule::Pattern(i, to)
            })
            .collect();
        // `llm_add_n_cpu_ffn_overrides` (common/common.h l.1210): `blk\.i\.ffn_…_exps`, i < N.
        let n_cpu_moe = self.options.n_cpu_moe.unwrap_or(0).min(self.layers);
        rules.extend((0..n_cpu_moe).map(|layer| Rule::Layer {
            layer,
            fraction: Fraction::Moe,
            to: Backend::Host,
        }));
        Layout {
            gpu_layers: self
                .options
                .gpu_layers
                .map_or(self.layers.saturating_add(1), |g| g.resolve(self.layers)),
            split: self
                .options
                .tensor_split
                .as_ref()
                .map_or_else(Vec::new, |s| s.0.clone()),
            rules,
            n_cpu_moe,
            split_written: false,
        }
    }

    /// Why llama.cpp's fit would not change what the caller set (common/fit.cpp),
    /// or `None` when it may (l.460–486).
    fn fit_blocked(&self) -> Option<&'static str> {
        if self.options.gpu_layers.is_some() {
            return Some("gpu_layers is set");
        }
        if self.used > 1 && self.options.tensor_split.is_some() {
            return Some("tensor_split is set");
        }
        if !self.options.override_tensor.is_empty() || self.options.n_cpu_moe.unwrap_or(0) > 0 {
            return Some("tensor overrides are set (override_tensor, n_cpu_moe)");
        }
        None
    }

    /// The layout llama.cpp loads, and how its fit went. `full`: a placement search asks
    /// whether every layer fits the devices (no fit).
    pub fn resolve(&self, full: bool) -> (Layout, Fit) {
        let asked = self.asked();
        if full || self.options.fit == Some(false) || self.used == 0 {
            return (asked, Fit::Off);
        }
        // Step 2 lowered the context (`lowered_context`, at placement): alone enough on one
        // device, or on to the layers with no second look at step 1.
        match self.options.fitted_context {
            Some(lowered) if lowered.settled => return (asked, Fit::ContextLowered),
            Some(_) => {}
            // Step 1 (l.261–371): the layout as asked, and whether every device keeps its margin.
            None if self.keeps_margins(&self.projected().0) => return (asked, Fit::Unchanged),
            None => {}
        }
        if let Some(why) = self.fit_blocked() {
            return (asked, Fit::NotRun(why));
        }
        (self.fit(), Fit::Fitted)
    }

    /// Step 1's test (l.261–371): every device keeps its margin at these totals.
    fn keeps_margins(&self, totals: &[i64]) -> bool {
        totals
            .iter()
            .enumerate()
            .all(|(id, used)| self.free(id) - used >= FIT_MARGIN)
    }

    /// Step 1's projection: each used device's total with the layout as asked, and the
    /// weights they hold between them.
    fn projected(&self) -> (Vec<i64>, i64) {
        let placed = self.place(&self.asked());
        let used = &placed.devices[..self.used.min(placed.devices.len())];
        let weights = used.iter().fold(0i64, |acc, d| {
            acc.saturating_add(i64::try_from(d.weights).unwrap_or(i64::MAX))
        });
        (used.iter().map(total).collect(), weights)
    }

    /// `common_params_fit_impl` step 2 (common/fit.cpp l.373–456) for a context nobody set,
    /// this placer being at the trained one (`n_ctx_max`, all streams'): when the layout as
    /// asked leaves a device under its margin and the devices together over their targets,
    /// the context is interpolated between `n_ctx_min` and `n_ctx_max` to the devices' total
    /// target (less, over several devices, half a layer's weights a device more — a sixth for
    /// a MoE) and rounded down to 256 a stream. `at(n_ctx)` is this placer at another context.
    /// `None`: no change. Else the new `n_ctx`, and whether that settles the fit (one device).
    pub fn lowered_context<'p>(
        &self,
        n_ctx_max: u64,
        n_ctx_min: u64,
        at: impl Fn(u64) -> Placer<'p>,
    ) -> Option<(u64, bool)> {
        let (used_max, weights) = self.projected();
        let nd = used_max.len() as i64;
        if self.keeps_margins(&used_max) {
            return None;
        }
        let sum_free = (0..used_max.len()).fold(0i64, |acc, id| acc.saturating_add(self.free(id)));
        let sum_used = used_max.iter().fold(0i64, |acc, u| acc.saturating_add(*u));
        let margins = FIT_MARGIN.saturating_mul(nd);
        if sum_free.saturating_sub(sum_used).saturating_sub(margins) >= 0 || n_ctx_max <= n_ctx_min {
            return None;
        }
        let mut target = sum_free.saturating_sub(margins);
        if nd > 1 {
            // `min(n_gpu_layers, hp_ngl)`: the repeating layers unless fewer were asked for.
            let layers = self
                .options
                .gpu_layers
                .map_or(self.layers, |g| g.resolve(self.layers).min(self.layers));
            let per_layer = weights / i64::try_from(layers.max(1)).unwrap_or(i64::MAX);
            let moe = self.sizing.shape.moe.is_some_and(|m| m.experts > 0);
            target = target.saturating_sub((nd + 1).saturating_mul(per_layer) / if moe { 6 } else { 2 });
        }
        let used_min = at(n_ctx_min)
            .projected()
            .0
            .iter()
            .fold(0i64, |acc, u| acc.saturating_add(*u));
        if target <= used_min {
            return Some((n_ctx_min, false));
        }
        // Integer arithmetic as llama.cpp's (int64; widened here so it cannot overflow).
        let grown = i128::from(n_ctx_max - n_ctx_min) * i128::from(target - used_min)
            / i128::from(sum_used.saturating_sub(used_min)).max(1);
        let n_ctx = n_ctx_min.saturating_add(u64::try_from(grown).unwrap_or(0));
        let align = 256 * self.ctx.streams.max(1);
        Some(((n_ctx - n_ctx % align).max(n_ctx_min), nd <= 1))
    }

    fn free(&self, id: usize) -> i64 {
        i64::try_from(self.usable.get(id).copied().unwrap_or(0)).unwrap_or(i64::MAX)
    }

    /// `llama_model::dev_layer` for layer `il` (the output layer is `il == layers`): host, or
    /// the device whose split point is the first past `(il − i_gpu_start) / act_gpu_layers`,
    /// in f32 as llama.cpp computes it (llama-model.cpp l.1561–1599).
    fn layer_backends(&self, layout: &Layout) -> Vec<Backend> {
        let n = self.layers;
        let ngl = layout.gpu_layers.min(n.saturating_add(1));
        let start = n.saturating_add(1).saturating_sub(ngl);
        let act = if self.used == 0 { 0 } else { ngl };
        let given: Vec<f32> = (0..self.used)
            .map(|i| layout.split.get(i).copied().unwrap_or(0.0))
            .collect();
        let shares: Vec<f32> = match given.iter().all(|s| *s == 0.0) {
            // Default: by free memory (`ggml_backend_dev_memory`), as a float.
            true => (0..self.used).map(|i| self.usable[i] as f32).collect(),
            false => given,
        };
        let mut points = Vec::with_capacity(shares.len());
        let mut sum = 0.0f32;
        for s in &shares {
            sum += s;
            points.push(sum);
        }
        for p in &mut points {
            *p /= sum;
        }
        (0..=n)
            .map(|il| {
                if il < start || il - start >= act {
                    return Backend::Host;
                }
                let at = (il - start) as f32 / act as f32;
                let device = points.partition_point(|p| *p <= at);
                Backend::Device(device.min(self.used.saturating_sub(1)))
            })
            .collect()
    }

    /// The first rule matching a tensor. The user's patterns come before every layer rule
    /// (`asked` puts them first; the fit's layouts have none), so layer rules are looked up
    /// by layer, in order.
    fn rule_for(
        &self,
        layout: &Layout,
        by_layer: &[Vec<(Fraction, Backend)>],
        name: &str,
        class: Class,
        suffix: &str,
    ) -> Option<Backend> {
        let pattern = layout.rules.iter().find_map(|rule| match rule {
            Rule::Pattern(i, to) => self.patterns.get(*i).filter(|r| r.is_match(name)).map(|_| *to),
            Rule::Layer { .. } => None,
        });
        pattern.or_else(|| match class {
            Class::Layer(l) => by_layer
                .get(usize::try_from(l).ok()?)?
                .iter()
                .find(|(fraction, _)| fraction.matches(suffix))
                .map(|(_, to)| *to),
            _ => None,
        })
    }

    /// Every buffer on its backend under `layout`.
    pub fn place(&self, layout: &Layout) -> Backends {
        let sizing = self.sizing;
        let n = self.layers;
        let layer_dev = self.layer_backends(layout);
        let mut by_layer: Vec<Vec<(Fraction, Backend)>> = vec![Vec::new(); n as usize + 1];
        for rule in &layout.rules {
            if let Rule::Layer { layer, fraction, to } = rule
                && let Some(rules) = by_layer.get_mut(*layer as usize)
            {
                rules.push((*fraction, *to));
            }
        }
        // The host first, then each device.
        let mut terms = vec![BackendTerms::default(); self.usable.len() + 1];
        let devices_named = self.usable.len();
        let slot = |backend: Backend| match backend {
            Backend::Device(d) if d < devices_named => d + 1,
            _ => 0,
        };
        // The GGUF's tensors; the stored total scaled onto them when a what-if dtype changed it.
        let stored = sizing.named.iter().fold(0u64, |acc, t| acc.saturating_add(t.bytes));
        let scale = |bytes: u64| match stored {
            0 => bytes,
            s if s == sizing.weights => bytes,
            s => u64::try_from(u128::from(bytes) * u128::from(sizing.weights) / u128::from(s)).unwrap_or(u64::MAX),
        };
        let mut output_stored = false;
        let mut weight_on_host_layer = false;
        let mut place_tensor = |name: &str, bytes: u64, dup_output: bool| {
            let (class, suffix) = match dup_output {
                true => (Class::Output, name),
                false => class_of(name),
            };
            let home = match class {
                Class::Input => Backend::Host,
                Class::Output => layer_dev[n as usize],
                Class::Layer(l) => layer_dev[l.min(n) as usize],
            };
            let backend = self.rule_for(layout, &by_layer, name, class, suffix).unwrap_or(home);
            // A duplicated embedding on the CPU maps the same file bytes as the input's.
            if dup_output && backend == Backend::Host {
                return;
            }
            if backend == Backend::Host && !matches!(class, Class::Input) {
                weight_on_host_layer = true;
            }
            let held = &mut terms[slot(backend)];
            held.weights = held.weights.saturating_add(scale(bytes));
        };
        if sizing.named.is_empty() {
            // No names (not a GGUF): the token embedding, each layer, and the output layer.
            let layers: u64 = sizing.layer_weights.iter().fold(0u64, |a, b| a.saturating_add(*b));
            place_tensor("token_embd.weight", sizing.embedding_weights, false);
            for (l, bytes) in sizing.layer_weights.iter().enumerate() {
                place_tensor(&format!("blk.{l}.weight"), *bytes, false);
            }
            let rest = sizing
                .weights
                .saturating_sub(sizing.embedding_weights)
                .saturating_sub(layers);
            place_tensor("output.weight", rest, false);
            output_stored = !sizing.tied_output;
        } else {
            for t in sizing.named.iter() {
                output_stored |= &*t.name == "output.weight";
                place_tensor(&t.name, t.bytes, false);
            }
        }
        if !output_stored && sizing.tied_output {
            // `TENSOR_DUPLICATED` (models/llama.cpp l.45): the embedding again as the output.
            place_tensor("token_embd.weight", sizing.embedding_weights, true);
        }
        // Each layer's cells on its layer's device, or all on the CPU without KV offload.
        for (il, group) in sizing.layer_groups.iter().enumerate() {
            let Some(cache) = group.and_then(|g| sizing.caches.get(g)) else {
                continue;
            };
            let backend = match self.options.no_kv_offload {
                true => Backend::Host,
                false => layer_dev[il],
            };
            let held = &mut terms[slot(backend)];
            held.kv = held.kv.saturating_add(self.ctx.layer_bytes(cache));
        }
        // Layers as llama.cpp counts them, the output layer one of them.
        for backend in &layer_dev {
            terms[slot(*backend)].layers += 1;
        }
        let mut host = terms[0];
        let mut devices = terms.split_off(1);
        // Compute buffers (an estimate): a backend running any layer's weights or cache
        // reserves the whole graph's peak; the host otherwise keeps the embedding's rows.
        for d in devices.iter_mut() {
            if d.weights > 0 || d.kv > 0 {
                d.compute = self.compute;
            }
        }
        host.compute = match weight_on_host_layer || self.options.no_kv_offload {
            true => self.compute,
            false => self.input_rows,
        };
        host.output = self.output;
        // Offloaded layers whose routed experts a layer rule keeps in host RAM.
        let expert_layers_on_host = (0..n)
            .filter(|l| {
                layer_dev[*l as usize] != Backend::Host
                    && layout.rules.iter().any(|r| {
                        matches!(r, Rule::Layer { layer, to: Backend::Host, fraction } if layer == l && *fraction != Fraction::Gate)
                    })
            })
            .count() as u64;
        Backends {
            devices,
            host,
            estimated: true,
            gpu_layers: layout.gpu_layers.min(n.saturating_add(1)),
            expert_layers_on_host,
            command: self.command(layout),
            fit: None,
            fit_left_devices_empty: false,
        }
    }

    /// The llama.cpp flags that load `layout`.
    fn command(&self, layout: &Layout) -> String {
        let mut flags = vec![format!("-ngl {}", layout.gpu_layers.min(self.layers.saturating_add(1)))];
        if layout.split_written || self.options.tensor_split.is_some() {
            let shares: Vec<String> = layout.split.iter().map(|s| format!("{s}")).collect();
            flags.push(format!("-ts {}", shares.join(",")));
        }
        let mut overrides: Vec<String> = Vec::new();
        let patterns = layout
            .rules
            .len()
            .saturating_sub(usize::try_from(layout.n_cpu_moe).unwrap_or(0));
        // Each device's buffer type as its backend names it.
        let backend = self
            .options
            .devices
            .as_ref()
            .map_or(GpuBackend::Cuda, |d| d.gpu_backend());
        for rule in &layout.rules[..patterns] {
            let (pattern, to) = match rule {
                Rule::Pattern(i, to) => (self.options.override_tensor[*i].pattern.clone(), *to),
                Rule::Layer { layer, fraction, to } => (fraction.pattern(*layer), *to),
            };
            let to = match to {
                Backend::Host => OverrideTarget::Cpu,
                Backend::Device(d) => OverrideTarget::Device(backend, u32::try_from(d).unwrap_or(u32::MAX)),
            };
            overrides.push(format!("{pattern}={to}"));
        }
        if !overrides.is_empty() {
            flags.push(format!("-ot \"{}\"", overrides.join(",")));
        }
        if layout.n_cpu_moe > 0 {
            flags.push(format!("-ncmoe {}", layout.n_cpu_moe));
        }
        if self.options.no_kv_offload {
            flags.push("-nkvo".into());
        }
        flags.join(" ")
    }

    /// `set_ngl_tensor_split_tbo` (common/fit.cpp l.548–590): each device's layers, the
    /// partial ones last in its block, the first of them overflowing as `overflow_type` to
    /// `overflow[id]` and the rest with their experts on the CPU.
    fn fit_layout(&self, per_device: &[Ngl], overflow: &[Backend]) -> Layout {
        let nd = per_device.len();
        let ngl: u64 = per_device.iter().map(|n| u64::from(n.n_layer)).sum();
        let mut il0 = self.layers.saturating_add(1).saturating_sub(ngl);
        let mut rules = Vec::new();
        for (id, n) in per_device.iter().enumerate() {
            il0 += u64::from(n.n_full());
            for il in il0..il0 + u64::from(n.n_part) {
                let first = il == il0;
                rules.push(Rule::Layer {
                    layer: il,
                    fraction: if first { n.overflow } else { Fraction::Moe },
                    to: if first { overflow[id] } else { Backend::Host },
                });
            }
            il0 += u64::from(n.n_part);
        }
        Layout {
            gpu_layers: ngl,
            split: match nd > 1 {
                true => per_device.iter().map(|n| n.n_layer as f32).collect(),
                false => Vec::new(),
            },
            rules,
            n_cpu_moe: 0,
            split_written: nd > 1,
        }
    }

    fn memory(&self, per_device: &[Ngl], overflow: &[Backend]) -> Vec<i64> {
        let placed = self.place(&self.fit_layout(per_device, overflow));
        (0..self.used).map(|id| total(&placed.devices[id])).collect()
    }

    /// `common_params_fit_impl` steps 3 and 4 (common/fit.cpp l.488–877): dense layers filled
    /// back to front by false position, then for a MoE model whose dense weights fit, whole
    /// layers front to back with the rest's experts on the CPU, and part of one more layer.
    /// (Step 2, shrinking a context the caller did not set, is not taken: preflight plans the
    /// context asked for, the model's maximum by default.)
    fn fit(&self) -> Layout {
        let nd = self.used;
        let hp_ngl = u32::try_from(self.layers).unwrap_or(u32::MAX - 1);
        let moe = self.sizing.shape.moe.is_some_and(|m| m.experts > 0);
        let targets: Vec<i64> = (0..nd).map(|id| self.free(id) - FIT_MARGIN).collect();
        // With every routed expert on the CPU, is there a surplus at all? (l.616–650)
        let surplus_cpu_moe = match moe {
            false => 0,
            true => {
                let all = Layout {
                    rules: (0..self.layers)
                        .map(|layer| Rule::Layer {
                            layer,
                            fraction: Fraction::Moe,
                            to: Backend::Host,
                        })
                        .collect(),
                    ..self.asked()
                };
                let placed = self.place(&all);
                (0..nd).fold(0i64, |acc, id| {
                    acc + self.free(id) - total(&placed.devices[id]) - FIT_MARGIN
                })
            }
        };
        let mut overflow = vec![Backend::Host; nd];
        let mut ngl = vec![Ngl::default(); nd];
        let mut mem = self.memory(&ngl, &overflow);
        let step = |delta: u32, target: i64, low: i64, high: i64| -> u32 {
            let span = high - low;
            let raw = match span {
                0 => i64::from(delta),
                _ => i64::from(delta) * (target - low) / span,
            };
            // `uint32_t step_size = int64_t(…)`: a negative guess wraps, then is clamped.
            (raw as u32).max(1).min(delta - 1)
        };
        for id in (0..nd).rev() {
            let assigned: u32 = ngl[id + 1..].iter().map(|n| n.n_layer).sum();
            let unassigned = (hp_ngl + 1).saturating_sub(assigned);
            let mut high = ngl.clone();
            high[id].n_layer = unassigned;
            if moe {
                high[id].n_part = match id < nd - 1 {
                    true => high[id].n_layer,
                    false => high[id].n_layer.saturating_sub(1),
                };
            }
            if high[id].n_layer == 0 {
                continue;
            }
            let mut mem_high = self.memory(&high, &overflow);
            if mem_high[id] > targets[id] {
                let mut delta = high[id].n_layer - ngl[id].n_layer;
                while delta > 1 {
                    let s = step(delta, targets[id], mem[id], mem_high[id]);
                    let mut test = ngl.clone();
                    test[id].n_layer += s;
                    if moe {
                        test[id].n_part += match id == nd - 1 && test[id].n_part == 0 {
                            true => s - 1,
                            false => s,
                        };
                    }
                    let mem_test = self.memory(&test, &overflow);
                    if mem_test[id] <= targets[id] {
                        ngl = test;
                        mem = mem_test;
                    } else {
                        high = test;
                        mem_high = mem_test;
                    }
                    delta = high[id].n_layer - ngl[id].n_layer;
                }
            } else {
                ngl = high;
                mem = mem_high;
            }
        }
        if !moe || surplus_cpu_moe <= 0 {
            return self.fit_layout(&ngl, &overflow);
        }
        // Step 4 (l.735–877): dense-only layers become full layers, front to back.
        let mut dense_start = nd;
        for id in (0..nd).rev() {
            if ngl[id].n_layer > 0 {
                dense_start = id;
                continue;
            }
            break;
        }
        let mut id = 0;
        while id <= dense_start && dense_start < nd {
            let mut high = ngl.clone();
            for jd in dense_start..nd {
                let moved = match jd < nd - 1 {
                    true => high[jd].n_layer,
                    false => high[jd].n_layer.saturating_sub(1),
                };
                high[id].n_layer += moved;
                high[jd].n_layer -= moved;
                high[jd].n_part = 0;
            }
            let dense_start_high = nd - 1;
            let mut mem_high = self.memory(&high, &overflow);
            if mem_high[id] > targets[id] {
                let mut delta = high[id].n_full().saturating_sub(ngl[id].n_full());
                while delta > 1 {
                    let s = step(delta, targets[id], mem[id], mem_high[id]);
                    let mut test = ngl.clone();
                    let mut start_test = dense_start;
                    let mut converted = 0;
                    while start_test < nd {
                        let convert = (s - converted).min(test[start_test].n_part);
                        test[start_test].n_layer -= convert;
                        test[start_test].n_part -= convert;
                        test[id].n_layer += convert;
                        converted += convert;
                        if test[start_test].n_part > 0 {
                            break;
                        }
                        start_test += 1;
                    }
                    let mem_test = self.memory(&test, &overflow);
                    if mem_test[id] <= targets[id] {
                        ngl = test;
                        mem = mem_test;
                        dense_start = start_test;
                    } else {
                        // (`id_dense_start_high` is set here too, and never read again.)
                        high = test;
                        mem_high = mem_test;
                    }
                    delta = high[id].n_full().saturating_sub(ngl[id].n_full());
                }
            } else {
                ngl = high;
                mem = mem_high;
                dense_start = dense_start_high;
            }
            // Part of one more layer: up (and gate) or only attention (l.810–862).
            let fits = |m: &[i64]| m[id] < targets[id] && (id + 1 == nd || m[id + 1] < targets[id + 1]);
            if dense_start < nd && ngl[dense_start].n_layer > u32::from(id == nd - 1) && ngl[dense_start].n_part > 0 {
                let mut test = ngl.clone();
                let mut start_test = dense_start;
                test[start_test].n_layer -= 1;
                test[start_test].n_part -= 1;
                test[id].n_layer += 1;
                test[id].n_part += 1;
                if test[start_test].n_part == 0 {
                    start_test += 1;
                }
                test[id].overflow = Fraction::Up;
                let mut overflow_test = overflow.clone();
                if id < nd - 1 {
                    overflow_test[id] = Backend::Device(id + 1);
                }
                let mem_test = self.memory(&test, &overflow_test);
                if fits(&mem_test) {
                    ngl = test.clone();
                    overflow = overflow_test.clone();
                    mem = mem_test;
                    dense_start = start_test;
                    test[id].overflow = Fraction::Gate;
                    let mem_test = self.memory(&test, &overflow_test);
                    if fits(&mem_test) {
                        ngl = test;
                        mem = mem_test;
                    }
                } else {
                    test[id].overflow = Fraction::Attn;
                    let mem_test = self.memory(&test, &overflow_test);
                    if fits(&mem_test) {
                        ngl = test;
                        overflow = overflow_test;
                        mem = mem_test;
                        dense_start = start_test;
                    }
                }
            }
            id += 1;
        }
        let _ = mem;
        self.fit_layout(&ngl, &overflow)
    }
}

/// `ngl_t` (common/fit.cpp l.532–544): a device's layers, the partial ones among them.
#[derive(Debug, Clone, Copy)]
struct Ngl {
    n_layer: u32,
    n_part: u32,
    overflow: Fraction,
}

impl Default for Ngl {
    fn default() -> Self {
        Ngl {
            n_layer: 0,
            n_part: 0,
            overflow: Fraction::Moe,
        }
    }
}

impl Ngl {
    fn n_full(&self) -> u32 {
        self.n_layer.saturating_sub(self.n_part)
    }
}

/// What a device holds as llama.cpp's memory breakdown totals it: model + context + compute.
fn total(t: &BackendTerms) -> i64 {
    i64::try_from(t.weights.saturating_add(t.kv).saturating_add(t.compute)).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fractions_match_the_patterns_llama_cpp_writes() {
        assert!(Fraction::Moe.matches("ffn_up_exps.weight"));
        assert!(Fraction::Moe.matches("ffn_gate_up_exps.bias"));
        assert!(!Fraction::Moe.matches("ffn_gate_inp.weight"));
        assert!(!Fraction::Moe.matches("ffn_up_shexp.weight"));
        // `ffn_(gate|up|gate_up|down).*` takes the router too: it begins `ffn_gate`.
        assert!(Fraction::Attn.matches("ffn_gate_inp.weight"));
        assert!(!Fraction::Attn.matches("attn_q.weight"));
        assert!(!Fraction::Up.matches("ffn_up_exps.weight"));
        assert!(Fraction::Gate.matches("ffn_down_exps.weight"));
        assert_eq!(
            Fraction::Moe.pattern(3),
            "blk\\.3\\.ffn_(up|down|gate_up|gate)_(ch|)exps"
        );
    }

    #[test]
    fn tensors_are_classed_as_llama_cpp_classes_them() {
        assert!(matches!(
            class_of("blk.12.attn_q.weight"),
            (Class::Layer(12), "attn_q.weight")
        ));
        assert!(matches!(class_of("token_embd.weight").0, Class::Input));
        assert!(matches!(class_of("output.weight").0, Class::Output));
        assert!(matches!(class_of("output_norm.weight").0, Class::Output));
        assert!(matches!(class_of("rope_freqs.weight").0, Class::Layer(0)));
    }
}
