//! Every artifact together on the devices: each device holds one rank of every artifact,
//! the smallest decides, and the longest context that fits is searched on the exact figures.

use super::{BackendTerms, Backends, Sizing};
use crate::options::{ContextFit, DeviceGroup, Devices, MemoryEngine, PlanOptions};
use crate::verdict::{ArtifactMemory, DeviceMemory, Format, HostMemory, LimitedBy, Memory, Offload, RankMemory};

/// What a plan is held against on one device: the engine, and the device it names.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    pub engine: MemoryEngine,
    pub options: &'a PlanOptions,
    pub device: Option<&'a DeviceGroup>,
}

impl Target<'_> {
    /// Usable bytes of a device: engines budget from what CUDA reports of it (an "80 GB"
    /// H100 shows 79.19 GiB), where that was measured, from Metal's working set on Apple
    /// silicon, else from its capacity — the share
    /// the engine lets the plan fill (vLLM's `gpu_memory_utilization`, SGLang's
    /// `mem_fraction_static`, all of it for llama.cpp).
    pub(crate) fn usable_of(&self, group: &DeviceGroup) -> u64 {
        let capacity = group.visible_bytes(self.options.working_set);
        self.engine.unit().usable(self.options, capacity)
    }
}

/// The engine the system is planned for: as the options say, else by the artifacts' formats.
pub fn engine_for(options: &PlanOptions, formats: &[Format]) -> MemoryEngine {
    options.engine_for(!formats.is_empty() && formats.iter().all(|f| *f == Format::Gguf))
}

/// What one device holds at `context` (each artifact's own when `None`): one rank of every
/// artifact, whichever replica it belongs to; `None` when some artifact cannot be split.
fn held_per_rank(sizings: &[&Sizing], context: Option<u64>, target: &Target) -> Option<RankMemory> {
    let mut held = RankMemory {
        tensor_parallel: target.options.tensor_parallel_degree(),
        weights_bytes: 0,
        buffers_bytes: 0,
        kv_cache_bytes: 0,
        activation_bytes: 0,
        non_torch_bytes: 0,
        total_bytes: 0,
    };
    for sizing in sizings {
        let rank = sizing.rank(context.unwrap_or(sizing.context), target)?;
        held.weights_bytes = held.weights_bytes.saturating_add(rank.weights_bytes);
        held.buffers_bytes = held.buffers_bytes.saturating_add(rank.buffers_bytes);
        held.kv_cache_bytes = held.kv_cache_bytes.saturating_add(rank.kv_cache_bytes);
        held.activation_bytes = held.activation_bytes.saturating_add(rank.activation_bytes);
        held.non_torch_bytes = held.non_torch_bytes.saturating_add(rank.non_torch_bytes);
        held.total_bytes = held.total_bytes.saturating_add(rank.total_bytes);
    }
    Some(held)
}

/// Every device named, in order, each as often as its group counts it.
fn each_device(devices: &Devices) -> Vec<&DeviceGroup> {
    devices
        .groups()
        .iter()
        .flat_map(|g| std::iter::repeat_n(g, usize::try_from(g.count).unwrap_or(0)))
        .collect()
}

/// Every artifact over the engine's own backends at `context` (each artifact's own when
/// `None`), summed per device and on the host; `None` when the engine holds one rank a
/// device (or some artifact's placement is not known).
fn placed_at(
    sizings: &[&Sizing],
    context: Option<u64>,
    target: &Target,
    usable: &[u64],
    full: bool,
) -> Option<(Vec<BackendTerms>, BackendTerms, Vec<Backends>)> {
    let unit = target.engine.unit();
    let mut devices = vec![BackendTerms::default(); usable.len()];
    let mut host = BackendTerms::default();
    let mut each = Vec::with_capacity(sizings.len());
    for sizing in sizings {
        let placed = unit.backends(sizing, context.unwrap_or(sizing.context), target, usable, full)?;
        for (sum, d) in devices.iter_mut().zip(&placed.devices) {
            sum.add(d);
        }
        host.add(&placed.host);
        each.push(placed);
    }
    Some((devices, host, each))
}

/// What host RAM may hold: `host_memory` when given; on Apple silicon, what the devices'
/// buffers leave of the unified memory (one memory, each buffer counted once where it sits).
fn host_capacity(options: &PlanOptions, devices: &[BackendTerms]) -> Option<u64> {
    let unified = options.devices.as_ref().and_then(|d| d.unified_memory_bytes());
    match (options.host_memory, unified) {
        (Some(given), _) => Some(given),
        (None, Some(memory)) => Some(devices.iter().fold(memory, |left, d| left.saturating_sub(d.total()))),
        (None, None) => None,
    }
}

/// Whether every device holds its backend's share within its usable bytes, and the host its
/// own within its capacity when it has one — and the engine's own fit found the devices some use.
fn backends_fit(
    placed: &(Vec<BackendTerms>, BackendTerms, Vec<Backends>),
    usable: &[u64],
    options: &PlanOptions,
) -> bool {
    let (devices, host, each) = placed;
    devices.iter().zip(usable).all(|(d, u)| d.total() <= *u)
        && host_capacity(options, devices).is_none_or(|h| host.total() <= h)
        && !each.iter().any(|b| b.fit_left_devices_empty)
}

/// Whether the system fits its devices at the planned context, as placement asks it of each
/// candidate count: one rank's memory against the smallest device, and nothing else — no
/// report, no longest-context search. `None` when some artifact cannot be split.
pub fn fits_as_planned(sizings: &[&Sizing], options: &PlanOptions, engine: MemoryEngine) -> Option<bool> {
    let smallest = options.devices.as_ref()?.smallest()?;
    let target = Target {
        engine,
        options,
        device: Some(smallest),
    };
    let all = options.devices.as_ref().map(each_device).unwrap_or_default();
    let usable: Vec<u64> = all.iter().map(|g| target.usable_of(g)).collect();
    // An engine placing tensors per device: does every layer fit the devices?
    let fits = match placed_at(sizings, None, &target, &usable, true) {
        Some(placed) => backends_fit(&placed, &usable, options),
        None => held_per_rank(sizings, None, &target)?.total_bytes <= target.usable_of(smallest),
    };
    // A refused architecture's weights are a lower bound: they prove a misfit, never a fit.
    match fits && sizings.iter().any(|s| s.lower_bound) {
        true => None,
        false => Some(fits),
    }
}

/// The context the engine's own fit lowers an unset one to on the named devices, if it does.
pub fn fit_context(sizing: &Sizing, options: &PlanOptions, engine: MemoryEngine) -> Option<ContextFit> {
    let target = Target {
        engine,
        options,
        device: options.devices.as_ref()?.smallest(),
    };
    let usable: Vec<u64> = options
        .devices
        .as_ref()
        .map(each_device)
        .unwrap_or_default()
        .iter()
        .map(|g| target.usable_of(g))
        .collect();
    engine.unit().fit_context(sizing, &target, &usable)
}

/// Share of usable bytes under which a plan that fits is called tight.
const TIGHT_FIT_PERCENT: u64 = 5;

/// The system's memory: every artifact on the same devices at the same tensor-parallel
/// degree, each device holding one rank of every artifact. Returns the block, and a
/// `memory.tight_fit` finding's detail when a plan fits with little to spare.
pub fn system(sizings: &[&Sizing], options: &PlanOptions, engine: MemoryEngine) -> (Memory, Option<String>) {
    // Figures that cannot prove a fit: a refused architecture's, or ones beside a blocking finding.
    let refused = sizings.iter().any(|s| s.lower_bound || s.untrusted);
    // A refused architecture's device rows are lower bounds: never marked as fitting. Rows
    // beside a blocking finding are the model's own figures and say what they say; only the
    // system's verdict withholds the fit they cannot prove.
    let lower_bound = sizings.iter().any(|s| s.lower_bound);
    let devices = options.devices.as_ref();
    // The smallest device decides (every device holds one rank of everything).
    let smallest: Option<&DeviceGroup> = devices.and_then(Devices::smallest);
    let target = Target {
        engine,
        options,
        device: smallest,
    };
    let reports: Vec<ArtifactMemory> = sizings.iter().map(|s| s.report(&target)).collect();
    let sum = |f: fn(&ArtifactMemory) -> u64| reports.iter().fold(0u64, |acc, r| acc.saturating_add(f(r)));
    let per_rank_at = |context: Option<u64>, target: &Target| held_per_rank(sizings, context, target);
    let per_rank = per_rank_at(None, &target);
    let mut per_device = Vec::new();
    let mut max_context_that_fits = None;
    let mut max_context_limited_by = None;
    let (mut kv_pool_bytes, mut kv_pool_tokens, mut max_concurrency) = (None, None, None);
    let mut host = None;
    let mut offload = None;
    let all = devices.map(each_device).unwrap_or_default();
    let usable: Vec<u64> = all.iter().map(|g| target.usable_of(g)).collect();
    let placed = match devices {
        Some(_) => placed_at(sizings, None, &target, &usable, false),
        None => None,
    };
    if let Some((placed_devices, placed_host, each)) = &placed {
        // The engine's own placement: each device's terms as it assigns them, host apart.
        for ((group, terms), usable_bytes) in all.iter().zip(placed_devices).zip(&usable) {
            let total = terms.total();
            per_device.push(DeviceMemory {
                device: group.name.clone(),
                capacity_bytes: group.capacity_bytes,
                cuda_visible_bytes: group.cuda_visible_bytes,
                working_set_bytes: group.working_set_bytes(options.working_set),
                usable_bytes: *usable_bytes,
                weights_bytes: terms.weights,
                buffers_bytes: 0,
                kv_cache_bytes: terms.kv,
                activation_bytes: terms.compute,
                non_torch_bytes: 0,
                total_bytes: total,
                headroom_bytes: i64::try_from(i128::from(*usable_bytes) - i128::from(total)).unwrap_or(i64::MIN),
                fits: !lower_bound && total <= *usable_bytes,
                layers: Some(terms.layers),
                estimated: match each.iter().any(|b| b.estimated) && terms.compute > 0 {
                    true => vec!["activation_bytes".to_owned()],
                    false => Vec::new(),
                },
            });
        }
        let total = placed_host.total();
        let capacity = host_capacity(options, placed_devices);
        host = Some(HostMemory {
            weights_bytes: placed_host.weights,
            buffers_bytes: 0,
            kv_cache_bytes: placed_host.kv,
            activation_bytes: placed_host.compute.saturating_add(placed_host.output),
            non_torch_bytes: 0,
            total_bytes: total,
            compute_bytes: placed_host.compute,
            output_bytes: placed_host.output,
            layers: placed_host.layers,
            capacity_bytes: capacity,
            headroom_bytes: capacity.map(|h| i64::try_from(i128::from(h) - i128::from(total)).unwrap_or(i64::MIN)),
            fits: capacity.map(|h| !lower_bound && total <= h),
            unified_memory_bytes: devices.and_then(Devices::unified_memory_bytes),
            estimated: match each.iter().any(|b| b.estimated) {
                true => vec!["activation_bytes".to_owned()],
                false => Vec::new(),
            },
        });
        if let [one] = each.as_slice() {
            offload = Some(Offload {
                gpu_layers: one.gpu_layers,
                layers: sizings[0].layer_groups.len() as u64 + 1,
                expert_layers_on_host: one.expert_layers_on_host,
                fit: one.fit.clone().unwrap_or_default(),
                command: one.command.clone(),
            });
        }
        if !refused {
            let (fitting, limited_by) = longest_that_fits(sizings, |context| {
                placed_at(sizings, Some(context), &target, &usable, false)
                    .is_some_and(|placed| backends_fit(&placed, &usable, options))
            });
            (max_context_that_fits, max_context_limited_by) = (Some(fitting), Some(limited_by));
        }
    } else if let (Some(devices), Some(held)) = (devices, &per_rank) {
        for group in devices.groups() {
            let target = Target {
                device: Some(group),
                ..target
            };
            let usable_bytes = target.usable_of(group);
            let device = DeviceMemory {
                device: group.name.clone(),
                capacity_bytes: group.capacity_bytes,
                cuda_visible_bytes: group.cuda_visible_bytes,
                working_set_bytes: group.working_set_bytes(options.working_set),
                usable_bytes,
                weights_bytes: held.weights_bytes,
                buffers_bytes: held.buffers_bytes,
                kv_cache_bytes: held.kv_cache_bytes,
                activation_bytes: held.activation_bytes,
                non_torch_bytes: held.non_torch_bytes,
                total_bytes: held.total_bytes,
                headroom_bytes: i64::try_from(i128::from(usable_bytes) - i128::from(held.total_bytes))
                    .unwrap_or(i64::MIN),
                fits: !lower_bound && held.total_bytes <= usable_bytes,
                layers: None,
                estimated: Vec::new(),
            };
            per_device.extend((0..group.count).map(|_| device.clone()));
        }
        let usable = smallest.map_or(0, |g| target.usable_of(g));
        // What the engine would give its KV pool: its budget less everything else it holds.
        let pool = usable.checked_sub(held.total_bytes.saturating_sub(held.kv_cache_bytes));
        if engine.unit().reports_pool() {
            kv_pool_bytes = Some(pool.unwrap_or(0));
        }
        if let ([sizing], Some(pool)) = (sizings, pool)
            && !refused
        {
            (kv_pool_tokens, max_concurrency) = engine.unit().capacity(sizing, pool, &target);
        }
        if !refused {
            let (fitting, limited_by) = longest_that_fits(sizings, |context| {
                per_rank_at(Some(context), &target).is_some_and(|r| r.total_bytes <= usable)
            });
            (max_context_that_fits, max_context_limited_by) = (Some(fitting), Some(limited_by));
        }
    }
    let all_fit = per_device.iter().all(|d| d.total_bytes <= d.usable_bytes)
        && host.as_ref().is_none_or(|h| h.fits != Some(false))
        && !placed
            .as_ref()
            .is_some_and(|(_, _, each)| each.iter().any(|b| b.fit_left_devices_empty));
    // A refused artifact's figures are lower bounds: they can prove a plan does not fit,
    // never that it does.
    let fits = match (per_device.is_empty(), refused, all_fit) {
        (true, _, _) => None,
        (false, true, true) => None,
        (false, _, all_fit) => Some(all_fit),
    };
    let tight = per_device
        .iter()
        .filter(|d| d.fits && i128::from(d.headroom_bytes) * 100 < i128::from(d.usable_bytes) * i128::from(TIGHT_FIT_PERCENT))
        .min_by_key(|d| d.headroom_bytes)
        .map(|d| {
            format!(
                "{} fits with {} to spare of its {} usable, under {TIGHT_FIT_PERCENT}%: a longer prompt, a larger batch or another engine version may not",
                d.device,
                crate::findings::size(u64::try_from(d.headroom_bytes).unwrap_or(0)),
                crate::findings::size(d.usable_bytes)
            )
        });
    let memory = Memory {
        engine: engine.runtime(),
        sequences: options.sequences.unwrap_or(1),
        tensor_parallel: options.tensor_parallel_degree(),
        data_parallel: options.data_parallel_degree(),
        expert_parallel: options.expert_parallel_degree(engine),
        gpu_utilization: engine
            .unit()
            .budget_share(options, smallest.map_or(0, |g| g.capacity_bytes)),
        weights_bytes: sum(|r| r.weights_bytes),
        buffers_bytes: sum(|r| r.buffers_bytes),
        kv_cache_bytes_per_token: sum(|r| r.kv_cache_bytes_per_token),
        kv_cache_bytes: sum(|r| r.kv_cache_bytes),
        activation_bytes: sum(|r| r.activation_bytes),
        non_torch_bytes: sum(|r| r.non_torch_bytes),
        total_bytes: sum(|r| r.total_bytes),
        per_rank,
        kv_pool_bytes,
        kv_pool_tokens,
        max_concurrency,
        per_device,
        fits,
        does_not_run: None,
        max_context_that_fits,
        max_context_limited_by,
        host,
        offload,
        throughput_bounds: None,
    };
    (memory, tight)
}

/// The longest context every model takes that `fits_at` holds, and whether the models' own
/// limit or memory stops it.
fn longest_that_fits(sizings: &[&Sizing], fits_at: impl Fn(u64) -> bool) -> (u64, LimitedBy) {
    let longest = sizings.iter().map(|s| s.max_context).min().unwrap_or(0);
    let fitting = largest_passing(longest, fits_at);
    let limited_by = match fitting == longest {
        true => LimitedBy::Model,
        false => LimitedBy::Memory,
    };
    (fitting, limited_by)
}

/// The largest `n` in `1..=upper` with `passes(n)`, or 0 when none does, for a `passes`
/// that holds up to some point and fails after it (memory only grows with context).
/// Binary search over the exact function, so sliding windows are honoured, not assumed away.
pub fn largest_passing(upper: u64, passes: impl Fn(u64) -> bool) -> u64 {
    // Nothing fits at all is common (a device too small) and costs one try, not a search.
    if upper == 0 || !passes(1) {
        return 0;
    }
    let (mut lo, mut hi) = (1u64, upper);
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if passes(mid) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    lo
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn largest_passing_finds_the_boundary() {
        for boundary in [0u64, 1, 2, 7, 1000, 4095, 4096] {
            assert_eq!(largest_passing(4096, |n| n <= boundary), boundary.min(4096));
        }
        assert_eq!(largest_passing(u64::MAX, |n| n < u64::MAX), u64::MAX - 1);
        assert_eq!(largest_passing(0, |_| true), 0);
    }
}
