//! The human-readable verdict: what a person checks first, first.

use std::fmt::Write;

use crate::term::Paint;
use crate::units::{bytes, thousands};
use preflight_plan::{
    ArtifactMemory, ArtifactVerdict, Attention, Code, DeviceMemory, Engine, Gated, Memory, PerformanceLimit, Releases,
    RemoteCode, Runtimes, Severity, Source, Support, Verdict,
};

/// `8190735360` → `8.19B`.
fn short(n: u64) -> String {
    match n {
        n if n >= 1_000_000_000 => format!("{:.2}B", n as f64 / 1e9),
        n if n >= 1_000_000 => format!("{:.2}M", n as f64 / 1e6),
        n if n >= 1_000 => format!("{:.1}K", n as f64 / 1e3),
        n => n.to_string(),
    }
}

/// The verdict as text; `paint` colours the words that decide (plain unless a terminal).
pub fn verdict(v: &Verdict, paint: Paint) -> String {
    let mut out = String::new();
    let fits = v.memory.as_ref().and_then(|m| m.fits);
    // What a person checks first, first: a plan that cannot be served says so before
    // anything else (the exit status is 4).
    let unmet = v.require_engine.as_ref().filter(|r| !r.met);
    let refused = v
        .memory
        .as_ref()
        .and_then(|m| m.does_not_run.as_ref().map(|_| m.engine));
    let state = match (v.admissible, fits, unmet) {
        (true, Some(false), _) if let Some(engine) = refused => {
            paint.yellow(&format!("{} DOES NOT RUN IT (admissible)", release(&v.engines, engine)))
        }
        (true, Some(false), _) => paint.yellow("DOES NOT FIT (admissible)"),
        (true, _, Some(r)) => paint.yellow(&format!("{} DOES NOT RUN IT (admissible)", r.engine.label())),
        (true, _, None) => paint.green("ADMISSIBLE"),
        (false, _, _) => paint.red("NOT ADMISSIBLE"),
    };
    let _ = writeln!(
        out,
        "{state}: {} blocking, {} warnings, {} info  (planner {}, semantics {})",
        v.summary.blocking, v.summary.warnings, v.summary.info, v.planner.version, v.planner.semantics_version
    );
    for (artifact, staging) in v.artifacts.iter().zip(&v.staging) {
        out.push('\n');
        artifact_block(&mut out, artifact, &v.engines, paint);
        let _ = writeln!(
            out,
            "  {:<14}{} files, {} requests, {} fetched ({} of headers)",
            "staging",
            staging.files,
            staging.requests,
            bytes(staging.bytes_fetched),
            bytes(staging.header_bytes)
        );
    }
    if let Some(memory) = &v.memory {
        out.push('\n');
        let hybrid = v.artifacts.iter().filter_map(|a| a.memory.as_ref()).any(|m| {
            m.kv_cache
                .iter()
                .any(|g| (g.kind, g.window) != (m.kv_cache[0].kind, m.kv_cache[0].window))
        });
        system_memory(&mut out, memory, hybrid, &v.engines, paint);
    } else if v
        .artifacts
        .iter()
        .flat_map(|a| &a.findings)
        .any(|f| f.code == Code::MemoryUnavailable)
    {
        out.push_str("\nMEMORY  unknown for the system: see the memory.unavailable finding(s)\n");
    }
    if !v.recommendations.is_empty() {
        out.push('\n');
        recommendations(&mut out, &v.recommendations, paint);
    }
    if let Some(p) = &v.performance {
        out.push('\n');
        performance(&mut out, p, paint);
    } else if v
        .artifacts
        .iter()
        .flat_map(|a| &a.findings)
        .any(|f| f.code == Code::PerformanceUnavailable)
    {
        out.push_str("\nPERFORMANCE  no estimate: see the performance.unavailable finding\n");
    }
    out
}

/// Every deployment a recommendation tried, best first; the verdict above is the first's.
fn recommendations(out: &mut String, all: &[preflight_plan::Recommendation], paint: Paint) {
    let meeting = all.iter().filter(|r| r.meets).count();
    let _ = writeln!(
        out,
        "RECOMMENDATIONS (estimates)  {meeting} of {} deployments meet the targets; the plan above is the first",
        all.len()
    );
    for r in all {
        let layout = format!(
            "{}{}{}{}",
            r.devices,
            if r.replicas > 1 {
                format!(" × {} copies", r.replicas)
            } else {
                String::new()
            },
            format_args!(" · TP {}", r.tensor_parallel),
            if r.expert_parallel { " · EP" } else { "" }
        );
        let figures = match (r.output_tokens_per_s, r.tpot_ms) {
            (Some(tokens), Some(tpot)) => format!(
                "{} tok/s ({} a GPU) · TTFT {} · TPOT {tpot:.1} ms{}",
                thousands(tokens.round() as u64),
                thousands(r.output_tokens_per_s_per_gpu.unwrap_or(0.0).round() as u64),
                r.ttft_ms.map_or("unbounded".to_owned(), |t| format!(
                    "{} ms",
                    thousands(t.round() as u64)
                )),
                r.cost_per_million_output_tokens
                    .map_or(String::new(), |c| format!(" · ${c:.2} a million tokens"))
            ),
            _ => String::new(),
        };
        let mark = if r.meets { paint.green("meets") } else { paint.red("no") };
        let why = r.rejected.as_deref().map_or(String::new(), |w| format!(" — {w}"));
        let _ = writeln!(out, "  {mark:<5}  {layout:<34} {figures}{why}");
    }
}

/// The performance block: every figure an estimate, with its range.
fn performance(out: &mut String, p: &preflight_plan::Performance, paint: Paint) {
    let ms = |x: f64| {
        if x >= 10_000.0 {
            format!("{} s", thousands((x / 1000.0).round() as u64))
        } else if x >= 100.0 {
            format!("{} ms", thousands(x.round() as u64))
        } else {
            format!("{x:.1} ms")
        }
    };
    let range = |r: preflight_plan::Range| format!("×{:.2}–{:.2}", r.low, r.high);
    let _ = writeln!(
        out,
        "PERFORMANCE (estimate) {}  ·  calibrated on {} ({} rows{})",
        p.workload,
        p.calibrated_on,
        thousands(p.calibration_rows),
        if p.calibration_matches {
            ""
        } else {
            "; not this deployment's: see performance.uncalibrated"
        }
    );
    let _ = writeln!(
        out,
        "  throughput    {} output tokens/s ({} a GPU), {}",
        thousands(p.output_tokens_per_s.round() as u64),
        thousands(p.output_tokens_per_s_per_gpu.round() as u64),
        range(p.range)
    );
    let ttft = p.ttft_ms.map_or_else(
        || "unbounded: more requests arrive than the deployment completes".to_owned(),
        |t| format!("{}, {}", ms(t), range(p.ttft_range)),
    );
    let _ = writeln!(out, "  TTFT          {ttft}");
    let _ = writeln!(out, "  TPOT          {}, {}", ms(p.tpot_ms), range(p.tpot_range));
    if let Some(e2e) = p.e2e_ms {
        let _ = writeln!(out, "  end to end    {}", ms(e2e));
    }
    let limit = match p.limited_by {
        PerformanceLimit::MemoryBandwidth => "memory bandwidth (each step reads weights and KV cache)",
        PerformanceLimit::Compute => "compute",
        PerformanceLimit::Communication => "communication (tensor/expert-parallel collectives)",
        PerformanceLimit::KvCapacity => "KV capacity (the pool holds no more requests: the rest queue)",
        PerformanceLimit::Scheduling => "the scheduler's request limit (the rest queue)",
    };
    let _ = writeln!(
        out,
        "  batch         {:.0} requests running a replica · limited by {limit}{}",
        p.batch,
        if p.overloaded {
            paint.red(" · OVERLOADED")
        } else {
            String::new()
        }
    );
    for check in &p.slo {
        let estimate = check.estimate_ms.map_or_else(|| "none".to_owned(), ms);
        let verdict = if check.met {
            paint.green("met")
        } else {
            paint.red("missed")
        };
        let _ = writeln!(out, "  target        {}: {verdict} (estimate {estimate})", check.target);
    }
}

fn artifact_block(out: &mut String, a: &ArtifactVerdict, releases: &Releases, paint: Paint) {
    let format = match a.format {
        preflight_plan::Format::Safetensors => "safetensors",
        preflight_plan::Format::Gguf => "gguf",
    };
    let commit = a
        .source
        .reference
        .commit
        .as_deref()
        .map(|c| format!(" @ {}", &c[..c.len().min(12)]))
        .unwrap_or_default();
    let _ = writeln!(out, "{}{commit}  [{format}]", a.name);
    let row = |out: &mut String, label: &str, value: String| {
        let line = format!("  {label:<14}{value}");
        let _ = writeln!(out, "{}", line.trim_end());
    };
    // What is asked before a download: licence, gating, the repo's own code, the size.
    row(out, "source", source_summary(&a.source));
    if a.source.remote_code.required {
        row(out, "remote code", remote_code(&a.source.remote_code));
    }
    if let Some(arch) = &a.architecture {
        // A width is shown as declared, never as 0: MLA's beside its head_dim.
        let head_dim = match (arch.head_dim, &arch.mla) {
            (0, None) => String::new(),
            (d, None) => format!(" · head_dim {d}"),
            (d, Some(mla)) => {
                let qk = mla.qk_nope_head_dim.saturating_add(mla.qk_rope_head_dim);
                // A head_dim the config declares apart from the MLA widths (GLM-5's) is shown
                // as declared, the width a query/key head has beside it.
                let parts = match d == qk {
                    true => format!("{d} (qk nope {} + rope {}", mla.qk_nope_head_dim, mla.qk_rope_head_dim),
                    false => format!(
                        "{d} as declared (qk {qk} = nope {} + rope {}",
                        mla.qk_nope_head_dim, mla.qk_rope_head_dim
                    ),
                };
                let q_latent = mla.q_lora_rank.map(|q| format!(", q latent {q}")).unwrap_or_default();
                format!(
                    " · head_dim {parts}, v {}, kv latent {}{q_latent})",
                    mla.v_head_dim, mla.kv_lora_rank
                )
            }
        };
        row(
            out,
            "architecture",
            format!(
                "{} ({} family) · {} layers · hidden {} · {} heads / {} kv{head_dim} · vocab {} · context {}",
                arch.model_type,
                arch.family,
                arch.layers,
                arch.hidden_size,
                arch.heads,
                arch.kv_heads,
                thousands(arch.vocab_size),
                thousands(arch.context)
            ),
        );
        row(out, "attention", attention_summary(&arch.attention));
        if let Some(moe) = &arch.moe {
            row(
                out,
                "moe",
                format!(
                    "{} experts, top-{}, {} shared, {} dense layers",
                    moe.experts,
                    moe.active,
                    moe.shared,
                    moe.dense_layers.len()
                ),
            );
        }
        if let Some(q) = &arch.quantization {
            row(out, "quantization", format!("{}: {}", q.method, q.layout));
        }
        if arch.mtp_layers > 0 {
            row(
                out,
                "mtp",
                format!("{} multi-token-prediction layer(s)", arch.mtp_layers),
            );
        }
    }
    let p = &a.parameters;
    let active = p
        .active_per_token
        .filter(|n| *n != p.total)
        .map(|n| format!(" · {} active per token ({})", thousands(n), short(n)))
        .unwrap_or_default();
    row(
        out,
        "parameters",
        format!("{} ({}){active}", thousands(p.total), short(p.total)),
    );
    let width = p.by_component.keys().map(|c| c.as_str().len()).max().unwrap_or(0);
    for (component, n) in &p.by_component {
        let component = component.as_str();
        let share = if p.total > 0 {
            *n as f64 * 100.0 / p.total as f64
        } else {
            0.0
        };
        let _ = writeln!(out, "    {component:<width$}  {:>17}  {share:5.1}%", thousands(*n));
    }
    let dtypes = p
        .by_dtype
        .iter()
        .map(|(d, n)| format!("{d} {}", thousands(*n)))
        .collect::<Vec<_>>()
        .join(" · ");
    row(out, "by dtype", dtypes);
    row(
        out,
        "weights",
        format!(
            "{} as stored ({} bytes)",
            bytes(a.weights_bytes),
            thousands(a.weights_bytes)
        ),
    );
    if let Some(memory) = &a.memory {
        artifact_memory(out, memory);
    }
    runtimes(out, &a.runtimes, releases);
    if a.findings.is_empty() {
        row(out, "findings", "none".into());
        return;
    }
    row(out, "findings", String::new());
    for severity in [Severity::Blocking, Severity::Warning, Severity::Info] {
        for f in a.findings.iter().filter(|f| f.severity == severity) {
            // Padded before it is painted: escape codes take no columns.
            let label = match severity {
                Severity::Blocking => paint.red(&format!("{:<9}", "BLOCKING")),
                Severity::Warning => paint.yellow(&format!("{:<9}", "warning")),
                Severity::Info => format!("{:<9}", "info"),
            };
            let sides = match (&f.declared, &f.observed) {
                (Some(d), Some(o)) => format!(" (declared {d}, observed {o})"),
                (None, Some(o)) => format!(" (observed {o})"),
                _ => String::new(),
            };
            let _ = writeln!(out, "    {label}{:<31}{}: {}{sides}", f.code, f.subject, f.detail);
        }
    }
}

/// `licence apache-2.0 · not gated · no remote code · 16.39 GiB to download`: the questions
/// asked before a download, unknowns said as such.
fn source_summary(s: &Source) -> String {
    let licence = match (&s.license, &s.license_name) {
        (Some(l), Some(name)) if l != name => format!("licence {l} ({name})"),
        (Some(l), _) => format!("licence {l}"),
        (None, _) => "licence unknown".to_owned(),
    };
    let gated = match s.gated {
        Some(Gated::No) => "not gated",
        Some(Gated::Auto) => "gated (access granted on request)",
        Some(Gated::Manual) => "gated (each request reviewed by the owners)",
        None => "gating unknown",
    };
    let code = match s.remote_code.required {
        true => "runs remote code",
        false => "no remote code",
    };
    // A Hub source is downloaded; a local one is already here, and loaded.
    let verb = match s.reference.spec.starts_with("hf://") {
        true => "to download",
        false => "to load",
    };
    let size = s
        .download_bytes
        .map_or_else(|| "size unknown".to_owned(), |n| format!("{} {verb}", bytes(n)));
    format!("{licence} · {gated} · {code} · {size}")
}

/// `trust_remote_code imports modeling_x.py (AutoModel), …; not in the repo: …`.
fn remote_code(code: &RemoteCode) -> String {
    let modules = code.named_modules();
    let missing = code.missing_files();
    let missing = match missing.as_slice() {
        [] => String::new(),
        files => format!("; not among its files: {}", files.join(", ")),
    };
    format!("trust_remote_code imports {}{missing}", modules.join(", "))
}

/// One artifact's memory: what it takes at the planned context, with the KV working shown.
fn artifact_memory(out: &mut String, m: &ArtifactMemory) {
    let plural = if m.sequences == 1 { "" } else { "s" };
    let weights_as = match m.weights_dtype.as_str() {
        "as_stored" => "as stored".to_owned(),
        dtype => format!("as {dtype}"),
    };
    let _ = writeln!(
        out,
        "  {:<14}context {} × {} sequence{plural} · KV cache {} · weights {weights_as}",
        "memory",
        thousands(m.context),
        thousands(m.sequences),
        m.kv_dtype
    );
    let line = |out: &mut String, label: &str, n: u64, note: String| {
        let text = format!("    {label:<13}{:>11}  {note}", bytes(n));
        let _ = writeln!(out, "{}", text.trim_end());
    };
    line(out, "weights", m.weights_bytes, String::new());
    if m.buffers_bytes > 0 {
        line(
            out,
            "RoPE tables",
            m.buffers_bytes,
            "cos/sin the engine keeps beside the weights, whole on every rank".into(),
        );
    }
    let ranks = match m.per_rank.as_ref().map_or(1, |r| r.tensor_parallel) {
        1 => String::new(),
        n => format!(" on {n} ranks"),
    };
    let working = m
        .kv_cache
        .iter()
        .map(|g| {
            let kind = match g.window {
                Some(w) => format!("{} {}({w})", g.layers, g.kind.as_str()),
                None => format!("{} {}", g.layers, g.kind.as_str()),
            };
            // A speculative drafter's layers cache beside the target's, in the same group.
            let kind = match g.draft_layers {
                0 => kind,
                n => format!("{kind} ({n} draft)"),
            };
            let (working, product) = match (g.bytes_per_token_per_layer, g.bytes_per_sequence_per_layer) {
                (Some(per_token), _) => {
                    let tokens = g.tokens_per_sequence.unwrap_or(0);
                    (
                        format!("{kind} × {} × {} tokens", bytes(per_token), thousands(tokens)),
                        per_token.saturating_mul(tokens),
                    )
                }
                (None, per_sequence) => {
                    let per_sequence = per_sequence.unwrap_or(0);
                    let dtypes = match &g.state_dtypes {
                        Some(d) if d.conv == d.recurrent => format!(" ({})", d.conv),
                        Some(d) => format!(" (conv {}, state {})", d.conv, d.recurrent),
                        None => String::new(),
                    };
                    (format!("{kind} × {} state{dtypes}", bytes(per_sequence)), per_sequence)
                }
            };
            // Pages padded to a common size, caches every rank keeps whole: say what is held.
            let naive = product.saturating_mul(g.layers).saturating_mul(m.sequences);
            match g.bytes == naive {
                true => working,
                false => format!("{working} ({} as the engine holds it{ranks})", bytes(g.bytes)),
            }
        })
        .collect::<Vec<_>>()
        .join(" + ");
    let per_sequence = if m.sequences > 1 {
        format!(" (× {} sequences)", thousands(m.sequences))
    } else {
        String::new()
    };
    line(
        out,
        "KV cache",
        m.kv_cache_bytes,
        format!(
            "{}/token{} · {working}{per_sequence}",
            bytes(m.kv_cache_bytes_per_token),
            if m.kv_cache.iter().any(|g| g.window.is_some()) {
                " past every window"
            } else {
                ""
            }
        ),
    );
    // llama.cpp (the one engine holding host RAM) replays its compute graph where it can.
    let activations = match (m.host_bytes.is_some(), m.estimated.is_empty()) {
        (true, true) => "llama.cpp's compute and output buffers, its graph replayed (docs/memory.md § llama.cpp)",
        (true, false) => "estimate: llama.cpp's graph is not replayed here (docs/memory.md § llama.cpp)",
        (false, _) => "estimate (docs/memory.md)",
    };
    line(out, "activations", m.activation_bytes, activations.into());
    if m.non_torch_bytes > 0 {
        line(
            out,
            "non-torch",
            m.non_torch_bytes,
            "outside PyTorch: CUDA workspaces, NCCL buffers (docs/memory.md)".into(),
        );
    }
    if let Some(s) = &m.speculative {
        speculative(out, s);
    }
    line(out, "total", m.total_bytes, String::new());
    if let Some(host) = m.host_bytes {
        line(
            out,
            "host RAM",
            host,
            "llama.cpp: what stays off the devices (docs/memory.md § llama.cpp)".into(),
        );
    }
    match &m.per_rank {
        Some(rank) if rank.tensor_parallel > 1 => line(
            out,
            "per rank",
            rank.total_bytes,
            // Every term the total sums, so the line adds up.
            format!(
                "TP {}: weights {} · RoPE tables {} · KV {} · activations {} · non-torch {}",
                rank.tensor_parallel,
                bytes(rank.weights_bytes),
                bytes(rank.buffers_bytes),
                bytes(rank.kv_cache_bytes),
                bytes(rank.activation_bytes),
                bytes(rank.non_torch_bytes)
            ),
        ),
        Some(_) => {}
        None => {
            let _ = writeln!(out, "    {:<13}{:>11}  see findings", "per rank", "—");
        }
    }
}

/// What speculative decoding adds, term by term: every figure is already in the lines above
/// (weights, RoPE tables, KV cache, activations), so this line is working, not another term.
fn speculative(out: &mut String, s: &preflight_plan::SpeculativeMemory) {
    let added = [
        s.draft_weights_bytes,
        s.draft_buffers_bytes,
        s.draft_kv_cache_bytes,
        s.lookahead_kv_cache_bytes,
        s.activation_bytes,
    ]
    .into_iter()
    .fold(0u64, u64::saturating_add);
    let plural = |n: u64, one: &str| {
        if n == 1 {
            format!("{n} {one}")
        } else {
            format!("{n} {one}s")
        }
    };
    let text = format!(
        "    {:<13}{:>11}  {} × {} a step, drafted by {}: weights {} · RoPE {} · KV {} × {}/token = {} · lookahead {} a sequence = {} · activations +{} (in the lines above)",
        "speculative",
        bytes(added),
        s.method,
        plural(s.num_speculative_tokens, "token"),
        s.draft,
        bytes(s.draft_weights_bytes),
        bytes(s.draft_buffers_bytes),
        plural(s.draft_kv_layers, "layer"),
        bytes(s.draft_kv_cache_bytes_per_token),
        bytes(s.draft_kv_cache_bytes),
        plural(s.lookahead_tokens, "token"),
        bytes(s.lookahead_kv_cache_bytes),
        bytes(s.activation_bytes)
    );
    let _ = writeln!(out, "{}", text.trim_end());
}

/// One line per engine: the verdict, and the first reason (the JSON has them all).
/// An engine as the verdict names it: label and its one release (`vLLM 0.19.0`).
fn release(releases: &Releases, engine: Engine) -> String {
    format!("{} {}", engine.label(), releases.get(engine).version)
}

fn runtimes(out: &mut String, r: &Runtimes, releases: &Releases) {
    // A device given by size is named by its byte count: shown as a size, as the bars show it.
    let devices = r
        .vllm
        .per_device
        .iter()
        .map(|d| {
            d.device
                .parse::<u64>()
                .map_or_else(|_| d.device.clone(), |b| format!("a {} device", bytes(b)))
        })
        .collect::<Vec<_>>();
    let on = match devices.is_empty() {
        true => "architecture and quantization only; name --devices to judge kernels".to_owned(),
        false => format!("on {}", devices.join(", ")),
    };
    let _ = writeln!(out, "  {:<14}{on}", "engines");
    for engine in Engine::ALL {
        let runtime = r.get(engine);
        let mark = match runtime.supported {
            Support::Yes => "✓ yes",
            Support::Fallback => "~ fallback",
            Support::Unknown => "? unknown",
            Support::No => "✗ no",
        };
        let hybrid = match runtime.hybrid {
            Some(true) => " · hybrid",
            _ => "",
        };
        // The finding that decides a `no` first, the rest after it.
        let deciding = runtime.deciding();
        let mut reasons = deciding
            .into_iter()
            .chain(runtime.findings.iter().filter(|f| Some(*f) != deciding));
        let reason = reasons.next().map_or_else(String::new, |f| {
            let more = match reasons.count() {
                0 => String::new(),
                n => format!(" (+{n} more)"),
            };
            format!("  {} {}: {}{more}", f.code, f.subject, f.detail)
        });
        let name = release(releases, engine);
        let line = format!("    {name:<20}{mark:<11}{hybrid}{reason}");
        let _ = writeln!(out, "{}", line.trim_end());
    }
}

/// Width of the per-device bar, in characters.
const BAR_WIDTH: usize = 40;

/// The system on its devices: one bar per run of alike devices, then the verdict on fit.
/// `hybrid`: some artifact caches more than one kind of layer, where the engine's pool
/// figure in tokens is not what one request can hold.
fn system_memory(out: &mut String, m: &Memory, hybrid: bool, releases: &Releases, paint: Paint) {
    let engine = release(releases, m.engine);
    let _ = writeln!(
        out,
        "MEMORY  {engine} · total {} · weights {} · KV cache {} · activations {}{}",
        bytes(m.total_bytes),
        bytes(m.weights_bytes),
        bytes(m.kv_cache_bytes),
        bytes(m.activation_bytes),
        match m.non_torch_bytes {
            0 => String::new(),
            n => format!(" · non-torch {}", bytes(n)),
        }
    );
    if m.per_device.is_empty() {
        let _ = writeln!(
            out,
            "  no per-device figures: name --devices, or see the memory findings"
        );
        return;
    }
    let parallel = [
        (m.data_parallel > 1).then(|| format!(" · DP {}", m.data_parallel)),
        m.expert_parallel.map(|ep| format!(" · EP {ep} (whole experts a rank)")),
    ]
    .into_iter()
    .flatten()
    .collect::<String>();
    // Engines budget from what CUDA sees of a device, not its nominal size, and llama.cpp
    // from the working set macOS gives Metal on Apple silicon: say which.
    let mut seen: Vec<String> = Vec::new();
    let mut metal: Vec<String> = Vec::new();
    for d in &m.per_device {
        if let Some(visible) = d.cuda_visible_bytes.filter(|v| *v != d.capacity_bytes) {
            let note = format!("{} {} of {}", d.device, bytes(visible), bytes(d.capacity_bytes));
            if !seen.contains(&note) {
                seen.push(note);
            }
        }
        if let Some(working_set) = d.working_set_bytes {
            let note = format!(
                "{} {} of {} unified",
                d.device,
                bytes(working_set),
                bytes(d.capacity_bytes)
            );
            if !metal.contains(&note) {
                metal.push(note);
            }
        }
    }
    let of = match (seen.is_empty(), metal.is_empty()) {
        (true, true) => "of each device".to_owned(),
        (false, _) => format!("of what CUDA sees ({})", seen.join(", ")),
        (true, false) => format!(
            "of the working set macOS gives Metal ({}; --working-set)",
            metal.join(", ")
        ),
    };
    let _ = writeln!(
        out,
        "  TP {}{parallel} · usable: {:.0}% {of} · bar: █ weights ▓ KV cache ▒ activations ░ free",
        m.tensor_parallel,
        m.gpu_utilization * 100.0
    );
    let mut start = 0;
    while start < m.per_device.len() {
        let first = &m.per_device[start];
        let end = m.per_device[start..]
            .iter()
            .position(|d| d != first)
            .map_or(m.per_device.len(), |n| start + n);
        let which = if end - start == 1 {
            format!("device {start}")
        } else {
            format!("devices {start}–{}", end - 1)
        };
        let verdict = if first.fits {
            "fits".to_owned()
        } else {
            format!(
                "DOES NOT FIT: {} over",
                bytes(first.total_bytes.saturating_sub(first.usable_bytes))
            )
        };
        // A device given by size is named by its capacity in bytes: shown as a size.
        let name = first.device.parse::<u64>().map_or_else(|_| first.device.clone(), bytes);
        // llama.cpp: each device's layers and terms as it assigns them, estimates said.
        let terms = match first.layers {
            Some(layers) => format!(
                "  ({layers} layer{} · weights {} · KV {} · compute {}{})",
                if layers == 1 { "" } else { "s" },
                bytes(first.weights_bytes),
                bytes(first.kv_cache_bytes),
                bytes(first.activation_bytes),
                if first.estimated.is_empty() { "" } else { ", estimate" }
            ),
            None => String::new(),
        };
        let _ = writeln!(
            out,
            "  {which:<13}{name:<11}[{}] {} / {} usable  {verdict}{terms}",
            bar(first),
            bytes(first.total_bytes),
            bytes(first.usable_bytes)
        );
        start = end;
    }
    if let Some(h) = &m.host {
        // On Apple silicon host RAM is what the GPU's buffers leave of the one memory.
        let what = match h.unified_memory_bytes {
            Some(_) => "unified memory left",
            None => "host memory",
        };
        let held = match (h.capacity_bytes, h.fits) {
            (Some(capacity), Some(true)) => format!("{} / {} {what}  fits", bytes(h.total_bytes), bytes(capacity)),
            (Some(capacity), _) => format!(
                "{} / {} {what}  DOES NOT FIT: {} over",
                bytes(h.total_bytes),
                bytes(capacity),
                bytes(h.total_bytes.saturating_sub(capacity))
            ),
            (None, _) => format!("{} (not checked: give --host-memory)", bytes(h.total_bytes)),
        };
        let _ = writeln!(
            out,
            "  {:<24}{held}  ({} layer{} · weights {} · KV {} · compute {}{} · output {})",
            "host RAM",
            h.layers,
            if h.layers == 1 { "" } else { "s" },
            bytes(h.weights_bytes),
            bytes(h.kv_cache_bytes),
            bytes(h.compute_bytes),
            if h.estimated.is_empty() { "" } else { ", estimate" },
            bytes(h.output_bytes)
        );
    }
    if let Some(o) = &m.offload {
        let experts = match o.expert_layers_on_host {
            0 => String::new(),
            n => format!(", experts of {n} in host RAM"),
        };
        let _ = writeln!(
            out,
            "  {:<24}{} of {} layers on the devices{experts} · fit {} · llama.cpp flags: {}",
            "offload", o.gpu_layers, o.layers, o.fit, o.command
        );
    }
    if let Some(refused) = &m.does_not_run {
        // Memory that would fit is beside the point when the engine cannot load it.
        let _ = writeln!(
            out,
            "  {} · {} cannot load {}: {} {}",
            paint.red("DOES NOT RUN"),
            engine,
            refused.artifact,
            refused.finding.code,
            refused.finding.detail
        );
        return;
    }
    let fits = match m.fits {
        Some(true) => paint.green("FITS"),
        _ => paint.red("DOES NOT FIT"),
    };
    let limit = match m.max_context_limited_by {
        Some(preflight_plan::LimitedBy::Model) => " (the model's own maximum)",
        Some(preflight_plan::LimitedBy::Memory) => " (memory runs out)",
        None => "",
    };
    let longest = match m.max_context_that_fits {
        // Many sequences can leave no room for one token each with a large pool.
        Some(0) if m.sequences > 1 => format!("{} sequences do not fit even at one token each", thousands(m.sequences)),
        Some(0) => "not even one token fits beside the weights".to_owned(),
        Some(n) => format!(
            "max context that fits: {} tokens × {} sequence{}{limit}",
            thousands(n),
            thousands(m.sequences),
            if m.sequences == 1 { "" } else { "s" }
        ),
        None => String::new(),
    };
    let _ = writeln!(out, "  {fits} · {longest}");
    if let Some(pool) = m.kv_pool_bytes {
        let mut line = format!("  KV pool {} a rank", bytes(pool));
        if let Some(tokens) = m.kv_pool_tokens {
            line.push_str(&format!(" · {} tokens as the engine reports it", thousands(tokens)));
            if hybrid {
                // vLLM's figure for a hybrid counts blocks per cache group, not tokens a request holds.
                line.push_str(" (a hybrid's: blocks per cache group × block size)");
            }
        }
        if let Some(concurrency) = m.max_concurrency {
            line.push_str(&format!(" · {concurrency:.2} requests at this context at once"));
        }
        let _ = writeln!(out, "{line}");
    }
    if let Some(b) = &m.throughput_bounds {
        let rate = |r: Option<f64>, withheld: Option<&String>| match (r, withheld) {
            (Some(r), _) => format!("≤ {} tokens/s", thousands(r.round() as u64)),
            (None, Some(why)) => format!("not bounded ({why})"),
            (None, None) => "unknown (no vendor figure)".to_owned(),
        };
        let _ = writeln!(
            out,
            "  BOUNDS (upper bounds, not predictions): decode {} per sequence ({} read a step on each rank) · prefill {} at {} peak",
            rate(b.decode_tokens_per_s, b.decode_withheld.as_ref()),
            bytes(b.decode_bytes_per_rank),
            rate(b.prefill_tokens_per_s, None),
            b.compute_dtype
        );
    }
}

/// `████▓▓▒░░░`: the device's usable bytes (or its load, when over) in [`BAR_WIDTH`] cells.
fn bar(d: &DeviceMemory) -> String {
    let scale = d.usable_bytes.max(d.total_bytes).max(1) as f64;
    let cells = |n: u64| ((n as f64 / scale) * BAR_WIDTH as f64).round() as usize;
    // The RoPE tables are drawn with the weights, as engines log them.
    let weights = cells(d.weights_bytes.saturating_add(d.buffers_bytes)).min(BAR_WIDTH);
    let kv = cells(d.kv_cache_bytes).min(BAR_WIDTH - weights);
    // Memory outside PyTorch is drawn with the activations it is measured beside.
    let activations = cells(d.activation_bytes.saturating_add(d.non_torch_bytes)).min(BAR_WIDTH - weights - kv);
    let free = BAR_WIDTH - weights - kv - activations;
    format!(
        "{}{}{}{}",
        "█".repeat(weights),
        "▓".repeat(kv),
        "▒".repeat(activations),
        "░".repeat(free)
    )
}

/// `24 layers: 12 full, 12 sliding(128)` — runs collapsed so a 61-layer model stays one line.
fn attention_summary(layers: &[Attention]) -> String {
    let mut kinds: Vec<(String, usize)> = Vec::new();
    for layer in layers {
        let name = match layer {
            Attention::Full => "full".to_owned(),
            Attention::Sliding { window } => format!("sliding({window})"),
            Attention::Mla {
                kv_lora_rank,
                qk_rope_head_dim,
            } => format!("mla(latent {kv_lora_rank} + rope {qk_rope_head_dim})"),
            Attention::Chunked { chunk } => format!("chunked({chunk})"),
            Attention::MlaIndexer {
                kv_lora_rank,
                qk_rope_head_dim,
                index_head_dim,
            } => format!("mla_indexer(latent {kv_lora_rank} + rope {qk_rope_head_dim} + key {index_head_dim})"),
            Attention::CsaIndexer {
                compress_ratio,
                window,
                index_head_dim,
                ..
            } => format!("csa_indexer(1/{compress_ratio} + window {window} + key {index_head_dim})"),
            Attention::Hca {
                compress_ratio, window, ..
            } => format!("hca(1/{compress_ratio} + window {window})"),
            Attention::FullIndexer { index_head_dim, .. } => format!("full_indexer(key {index_head_dim})"),
            Attention::LinearAttention { heads, .. } => format!("linear_attention({heads} heads)"),
            Attention::Mamba { heads, state_size, .. } => format!("mamba({heads} heads, state {state_size})"),
            Attention::None => "none".to_owned(),
        };
        match kinds.iter_mut().find(|(k, _)| *k == name) {
            Some((_, n)) => *n += 1,
            None => kinds.push((name, 1)),
        }
    }
    kinds
        .iter()
        .map(|(k, n)| format!("{n} {k}"))
        .collect::<Vec<_>>()
        .join(", ")
}
