//! vLLM (the release `data/engines.json` was read from: 0.19.0): the model registry
//! (`registry.py`), each quantization config's `get_min_capability()`, the kernel paths for
//! FP8 / NVFP4 / MXFP4 and the sparse-MLA attention backends' capability gates. Its GGUF
//! loader is built in, but which GGUF architectures and tensor types it maps is not read.

use crate::findings::Code;
use crate::options::DeviceGroup;
use crate::runtimes::data::{Engines, KernelPath, Vllm};
use crate::runtimes::{Judgement, Outcome, Subject, Weights, cc_text, no_class, per_device, refused, sides};
use crate::verdict::{Format, Support};

/// vLLM's name for the checkpoint's quantization method: ModelOpt's NVFP4 is its own method,
/// and the data's overrides rename a method for one `model_type`.
fn method(data: &Vllm, subject: &Subject, planner: &str, weights: Weights) -> String {
    if (planner, weights) == ("modelopt", Weights::Nvfp4) {
        return "modelopt_fp4".into();
    }
    data.method_overrides
        .iter()
        .find(|o| o.declared == planner && subject.model_type == Some(o.model_type.as_str()))
        .map_or_else(|| planner.into(), |o| o.resolves_to.clone())
}

/// vLLM on Apple silicon's GPU: not read from the wheel's data but from its platform plugins
/// (`vllm/platforms/__init__.py`: `builtin_platform_plugins` are TPU, CUDA, ROCm, XPU and CPU;
/// `cpu_platform_plugin` takes macOS). The vllm-metal plugin is a separate package, not modelled.
pub(crate) const ON_METAL: &str = "vLLM has no Metal backend: its platforms are CUDA, ROCm, TPU, XPU and CPU (vllm/platforms/__init__.py, builtin_platform_plugins), and on macOS it runs on the CPU platform, not the GPU";

pub fn judge(engines: &Engines, subject: &Subject, devices: &[DeviceGroup]) -> Outcome {
    let data = &engines.vllm;
    let mut general = Judgement::default();
    if subject.format == Format::Gguf {
        if data.gguf.loadable {
            general.set(
                Support::Unknown,
                Code::RuntimeUnknown,
                "format",
                format!(
                    "vLLM {} loads GGUF ({}), but which GGUF architectures and tensor types its loader maps is not read from its source",
                    data.version, data.gguf.source
                ),
            );
        } else {
            let plugin = data.gguf.plugin.as_deref().map_or_else(
                || "its METADATA names no plugin".to_owned(),
                |p| format!("the out-of-tree {p} adds one"),
            );
            general.set(
                Support::No,
                Code::RuntimeFormatUnsupported,
                "format",
                format!(
                    "vLLM {} has no GGUF loader built in (`gguf` is neither a quantization method nor a load format, {}); {plugin}",
                    data.version, data.gguf.source
                ),
            );
        }
        return Outcome::settled(general);
    }
    if subject.model.is_none() {
        refused(&mut general, "vLLM");
        return Outcome::settled(general);
    }
    let Some(class) = subject.class else {
        no_class(&mut general, "vLLM");
        return Outcome::settled(general);
    };
    let registered = data.architectures.get(class);
    match registered {
        Some(arch) if arch.has("transformers_backend") => general.set(
            Support::Fallback,
            Code::RuntimeTransformersBackend,
            "architecture",
            format!(
                "`{class}` is served through vLLM's Transformers backend ({})",
                arch.source
            ),
        ),
        Some(_) => {}
        None => {
            if let Some(removed) = data.previously_supported.get(class) {
                general.set(
                    Support::No,
                    Code::RuntimeArchitectureUnregistered,
                    "architecture",
                    format!(
                        "`{class}` was removed from vLLM after {} ({})",
                        removed.until, removed.source
                    ),
                );
            } else if let Some(plugin) = data.out_of_tree.get(class) {
                general.set(
                    Support::No,
                    Code::RuntimeArchitectureUnregistered,
                    "architecture",
                    format!(
                        "`{class}` is served only by the plugin {} ({})",
                        plugin.plugin, plugin.source
                    ),
                );
            } else if let Some((model_type, _)) = engines.transformers.class_owner(class) {
                general.set(
                    Support::Fallback,
                    Code::RuntimeTransformersBackend,
                    "architecture",
                    format!(
                        "`{class}` is not in vLLM's registry, but transformers {} implements it (`{model_type}`): vLLM falls back to its Transformers backend",
                        engines.transformers.version
                    ),
                );
            } else {
                general.set(
                    Support::No,
                    Code::RuntimeArchitectureUnregistered,
                    "architecture",
                    format!(
                        "`{class}` is not in vLLM {}'s model registry, and transformers does not implement it for a Transformers-backend fallback",
                        data.version
                    ),
                );
            }
        }
    }
    let quant = subject.quant();
    let vllm_method = quant.map(|q| method(data, subject, q.method, q.weights));
    let min_capability = match (&quant, &vllm_method) {
        (Some(_), Some(name)) => match data.quantization.get(name) {
            Some(m) => m.min_capability.map(|cc| (cc, name.clone(), m.source.clone())),
            None => {
                general.set(
                    Support::No,
                    Code::RuntimeQuantizationUnsupported,
                    "quantization",
                    format!("vLLM {} has no `{name}` quantization method", data.version),
                );
                None
            }
        },
        _ => None,
    };
    let hybrid = registered.map(|a| a.has("hybrid"));
    // Sparse always, or (`deepseek_v2.py`: `is_sparse=self.is_v32`) when the config has
    // `index_topk`, which the planner reads as an MLA indexer.
    let always_sparse = registered.is_some_and(|a| a.has("sparse_mla"));
    let sparse_mla =
        always_sparse || registered.is_some_and(|a| a.has("sparse_mla_if_index_topk") && subject.sparse_mla());
    let why_sparse = if always_sparse {
        "builds its MLA with use_sparse=True"
    } else {
        "builds its MLA sparse when the config has `index_topk`, as this one does"
    };
    let devices = per_device(devices, |device, cc, j| {
        if let Some((min, name, source)) = &min_capability
            && cc < *min
        {
            let finding = j.gate(
                Support::No,
                Code::RuntimeCapabilityTooLow,
                device,
                format!(
                    "vLLM's `{name}` needs compute capability ≥ {} ({source}); {device} has {}",
                    cc_text(*min),
                    cc_text(cc)
                ),
            );
            sides(finding, *min, cc);
            return;
        }
        if let Some((path, q)) = quant.and_then(|q| {
            let key = q.weights.key()?;
            Some((data.kernel_paths.iter().find(|p| p.format == key)?, q))
        }) {
            kernel_path(path, q.weights.name(), device, cc, j);
        }
        if sparse_mla && !data.sparse_mla.capability_majors.contains(&(cc / 10)) {
            let majors: Vec<String> = data
                .sparse_mla
                .capability_majors
                .iter()
                .map(|m| format!("{m}.x"))
                .collect();
            let finding = j.gate(
                Support::No,
                Code::RuntimeAttentionUnsupported,
                device,
                format!(
                    "`{class}` {why_sparse}, and vLLM's sparse-MLA backends accept only compute capability {} ({device} has {}): startup fails with \"No valid attention backend found\" ({})",
                    majors.join(", "),
                    cc_text(cc),
                    data.sparse_mla.source
                ),
            );
            finding.declared = Some(majors.join(", ").into());
            finding.observed = Some(cc_text(cc).into());
        }
    });
    Outcome {
        general,
        hybrid,
        devices,
    }
}

/// The first native kernel whose gate passes on `cc` (vLLM's order), else the fallback.
/// Kernels needing a package the default install lacks are skipped, and named.
fn kernel_path(path: &KernelPath, weights: &str, device: &str, cc: u32, j: &mut Judgement) {
    let mut skipped = Vec::new();
    for kernel in path.native.iter().filter(|k| (k.from..k.below).contains(&cc)) {
        if let Some(needs) = &kernel.needs {
            skipped.push((kernel, needs));
            continue;
        }
        let optional = |j: &mut Judgement, chosen: &str| {
            for (k, needs) in &skipped {
                j.note(
                    Code::RuntimeOptionalPackage,
                    device,
                    format!(
                        "with {needs} installed vLLM tries {} first; the default install takes {chosen}",
                        k.kernel
                    ),
                );
            }
        };
        if let Some(op) = &kernel.compiled {
            j.set(
                Support::Unknown,
                Code::RuntimeUnknown,
                device,
                format!(
                    "on {device} (compute capability {}) vLLM's next {weights} candidate is {}, gated by {op}; if it refuses, {} ({})",
                    cc_text(cc),
                    kernel.kernel,
                    path.fallback,
                    path.source
                ),
            );
            optional(j, &kernel.kernel);
            return;
        }
        optional(j, &kernel.kernel);
        return;
    }
    if cc >= path.fallback_from {
        let finding = j.gate(
            Support::Fallback,
            Code::RuntimeFallbackKernel,
            device,
            format!(
                "no native {weights} kernel for compute capability {} in vLLM's default install: {} ({})",
                cc_text(cc),
                path.fallback,
                path.source
            ),
        );
        // The lowest capability a default-install native kernel accepts.
        let native = path.native.iter().filter(|k| k.needs.is_none() && k.compiled.is_none());
        if let Some(from) = native.map(|k| k.from).min() {
            sides(finding, from, cc);
        }
        for (k, needs) in &skipped {
            j.note(
                Code::RuntimeOptionalPackage,
                device,
                format!("installing {needs} gives the native {}", k.kernel),
            );
        }
    } else {
        let finding = j.gate(
            Support::No,
            Code::RuntimeCapabilityTooLow,
            device,
            format!(
                "{weights} needs compute capability ≥ {} even for vLLM's fallback ({})",
                cc_text(path.fallback_from),
                path.source
            ),
        );
        sides(finding, path.fallback_from, cc);
    }
}
