//! Recommendations: a workload on device types without counts plans every deployment of 1,
//! 2, 4 or 8 of each and ranks them — meeting the targets first, fewest GPUs, then the most
//! tokens a second per GPU — each rejected one with its reason.

use crate::support::plan_with;

#[test]
fn deployments_are_ranked_meeting_first_and_fewest_gpus_first() {
    let v = plan_with(
        &["Qwen/Qwen3-8B"],
        r#"{"devices": "l4,h100-80gb", "workload": "isl=1024,osl=256,concurrency=8", "slo": "tpot=1s", "gpu_price": "l4=0.8,h100-80gb=2.5"}"#,
    );
    let r = &v.recommendations;
    // Qwen3-8B splits over 1, 2, 4 and 8 GPUs (8 KV heads); a dense model has no EP choice.
    assert_eq!(r.len(), 8, "{r:#?}");
    assert!(r.iter().all(|c| !c.expert_parallel && c.replicas == 1));
    let meeting: Vec<_> = r.iter().take_while(|c| c.meets).collect();
    assert!(!meeting.is_empty(), "{r:#?}");
    assert!(
        r[meeting.len()..].iter().all(|c| !c.meets && c.rejected.is_some()),
        "{r:#?}"
    );
    assert!(
        meeting.windows(2).all(|w| w[0].total_gpus <= w[1].total_gpus),
        "{meeting:#?}"
    );
    // The verdict shown is the first's, on its devices.
    assert_eq!(
        v.memory.as_ref().map(|m| m.tensor_parallel),
        Some(meeting[0].tensor_parallel)
    );
    // Priced: dollars an hour × GPUs over a million tokens' seconds.
    let first = meeting[0];
    let hourly = if first.devices.starts_with("l4") { 0.8 } else { 2.5 };
    let want = hourly * first.gpus as f64 / (first.output_tokens_per_s.expect("estimate") * 3600.0) * 1e6;
    assert!((first.cost_per_million_output_tokens.expect("priced") - want).abs() < 1e-9);
}

/// Each type is planned up to eight times: a list past eight types is refused, not ground through.
#[test]
fn too_many_device_types_are_refused_before_any_plan() {
    let options: preflight_plan::PlanOptions = serde_json::from_str(
        r#"{"devices": "h100-80gb,h100-pcie,h200,b200,a100-80gb,l40s,l4,mi300x,rtx-4090", "workload": "isl=1k,osl=1k,rate=1"}"#,
    )
    .expect("parses");
    let err = options.validate().expect_err("nine types");
    assert_eq!(err.option, "devices");
    assert!(err.message.contains("at most 8"), "{err}");
}

#[test]
fn a_target_no_deployment_meets_leaves_each_with_its_reason() {
    let v = plan_with(
        &["Qwen/Qwen3-8B"],
        r#"{"devices": "h100-80gb", "workload": "isl=1024,osl=256,concurrency=8", "slo": "ttft=1us"}"#,
    );
    assert_eq!(v.recommendations.len(), 4);
    for r in &v.recommendations {
        assert!(!r.meets);
        let why = r.rejected.as_deref().unwrap_or_default();
        assert!(why.starts_with("misses ttft=0.001ms (estimate"), "{why}");
    }
}

#[test]
fn an_open_loop_past_one_copy_is_spread_over_copies() {
    let v = plan_with(
        &["Qwen/Qwen3-8B"],
        r#"{"devices": "l4", "workload": "isl=1024,osl=256,rate=200"}"#,
    );
    let best = v.recommendations.first().expect("a deployment");
    assert!(best.meets && best.replicas > 1, "{best:#?}");
    assert_eq!(best.total_gpus, best.gpus * best.replicas);
    // Every copy together serves the rate, 200 requests × 256 tokens a second (each copy's
    // share rounded up to a thousandth of a request).
    let served = best.output_tokens_per_s.expect("estimate");
    assert!((200.0 * 256.0..200.0 * 256.0 * 1.001).contains(&served), "{best:#?}");
}

/// docs/performance.md's worked recommendation: DeepSeek-V3 at isl 4,000, osl 1,000, 10
/// requests a second, TTFT ≤ 2 s and TPOT ≤ 50 ms, on H100, H200 or B200.
#[test]
fn the_deepseek_v3_recommendation_is_documented() {
    let v = plan_with(
        &["deepseek-ai/DeepSeek-V3"],
        r#"{"devices": "h100-80gb,h200,b200", "workload": "isl=4000,osl=1000,rate=10", "slo": "ttft=2s,tpot=50ms"}"#,
    );
    let mut out = String::from(
        "| deployment | copies | GPUs | meets | output tok/s | a GPU | TTFT ms | TPOT ms | why not |\n|---|---|---|---|---|---|---|---|---|\n",
    );
    // A MoE on several GPUs is tried with and without expert parallelism; on one GPU there
    // is nothing to spread, so no EP twin.
    let ep = |gpus: u64| {
        v.recommendations
            .iter()
            .filter(|r| r.gpus == gpus && r.expert_parallel)
            .count()
    };
    assert_eq!((ep(1), ep(8)), (0, 3), "{:#?}", v.recommendations);
    let f = |x: Option<f64>| x.map_or("–".into(), |x| format!("{x:.0}"));
    for r in &v.recommendations {
        out.push_str(&format!(
            "| {} · TP {}{} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            r.devices,
            r.tensor_parallel,
            if r.expert_parallel { " · EP" } else { "" },
            r.replicas,
            r.total_gpus,
            if r.meets { "yes" } else { "no" },
            f(r.output_tokens_per_s),
            f(r.output_tokens_per_s_per_gpu),
            f(r.ttft_ms),
            r.tpot_ms.map_or("–".into(), |t| format!("{t:.1}")),
            r.rejected.as_deref().unwrap_or(""),
        ));
    }
    assert!(v.recommendations.first().is_some_and(|r| r.meets), "{out}");
    crate::support::doc_section_in("performance.md", "deepseek-v3-recommendation", &out, "recommend");
}

/// docs/performance.md's worked example: Llama-3.1-70B in FP8 on one node of H100, H200 or
/// B200 (TP 8), isl 1,024 and osl 1,024, 1 to 256 clients — throughput a GPU against each
/// user's decode speed, as a table and an SVG plot (`docs/performance-llama-70b.svg`).
#[test]
fn the_llama_70b_example_is_documented() {
    const DEVICES: &[(&str, &str)] = &[("h100-80gb", "#1f77b4"), ("h200", "#ff7f0e"), ("b200", "#2ca02c")];
    const CLIENTS: &[u64] = &[1, 2, 4, 8, 16, 32, 64, 128, 256];
    let mut table = String::from(
        "| GPU | clients | output tok/s a GPU | tok/s a user (1000 ÷ TPOT) | TTFT ms | TPOT ms | limited by |\n|---|---|---|---|---|---|---|\n",
    );
    // Each device's name, colour and (tokens/s a user, tokens/s a GPU) points.
    type Series<'a> = (&'a str, &'a str, Vec<(f64, f64)>);
    let mut series: Vec<Series> = Vec::new();
    for &(device, colour) in DEVICES {
        let mut points = Vec::new();
        for &clients in CLIENTS {
            let json = format!(
                r#"{{"devices": "{device}:8", "weights_dtype": "fp8", "context": 2048, "workload": "isl=1024,osl=1024,concurrency={clients}"}}"#
            );
            let v = plan_with(&["meta-llama/Llama-3.1-70B"], &json);
            let p = v.performance.expect("an estimate");
            let per_user = 1000.0 / p.tpot_ms;
            points.push((per_user, p.output_tokens_per_s_per_gpu));
            table.push_str(&format!(
                "| {device} | {clients} | {:.0} | {per_user:.1} | {:.0} | {:.1} | {} |\n",
                p.output_tokens_per_s_per_gpu,
                p.ttft_ms.unwrap_or(f64::NAN),
                p.tpot_ms,
                serde_json::to_value(p.limited_by)
                    .expect("json")
                    .as_str()
                    .unwrap_or_default(),
            ));
        }
        series.push((device, colour, points));
    }
    crate::support::doc_section_in("performance.md", "llama-70b-example", &table, "recommend");
    // The plot: x the user's tokens a second, y the GPU's, one line a device.
    let (w, h, m) = (640.0, 400.0, 60.0);
    let x_max = series.iter().flat_map(|s| &s.2).map(|p| p.0).fold(0.0, f64::max) * 1.05;
    let y_max = series.iter().flat_map(|s| &s.2).map(|p| p.1).fold(0.0, f64::max) * 1.05;
    let at = |(x, y): (f64, f64)| (m + x / x_max * (w - 1.5 * m), h - m - y / y_max * (h - 1.5 * m));
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"12\">\n\
         <rect width=\"{w}\" height=\"{h}\" fill=\"white\"/>\n\
         <text x=\"{}\" y=\"20\" text-anchor=\"middle\">Llama-3.1-70B FP8, TP 8, isl 1k / osl 1k, 1-256 clients (preflight estimate)</text>\n\
         <line x1=\"{m}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/>\n<line x1=\"{m}\" y1=\"{}\" x2=\"{m}\" y2=\"{}\" stroke=\"black\"/>\n\
         <text x=\"{}\" y=\"{}\" text-anchor=\"middle\">output tokens/s a user (1000 / TPOT ms)</text>\n\
         <text x=\"15\" y=\"{}\" transform=\"rotate(-90 15 {})\" text-anchor=\"middle\">output tokens/s a GPU</text>\n",
        w / 2.0,
        h - m,
        w - m / 2.0,
        h - m,
        h - m,
        m / 2.0,
        w / 2.0,
        h - m / 3.0,
        h / 2.0,
        h / 2.0,
    );
    for i in 0..=4 {
        let (x, y) = (x_max * i as f64 / 4.0, y_max * i as f64 / 4.0);
        let (px, _) = at((x, 0.0));
        let (_, py) = at((0.0, y));
        svg.push_str(&format!(
            "<text x=\"{px:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{x:.0}</text>\n<text x=\"{:.1}\" y=\"{py:.1}\" text-anchor=\"end\">{y:.0}</text>\n",
            h - m + 16.0,
            m - 6.0
        ));
    }
    for (i, (device, colour, points)) in series.iter().enumerate() {
        let path: Vec<String> = points
            .iter()
            .map(|&p| {
                let (x, y) = at(p);
                format!("{x:.1},{y:.1}")
            })
            .collect();
        svg.push_str(&format!(
            "<polyline fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\" points=\"{}\"/>\n<text x=\"{:.1}\" y=\"{:.1}\" fill=\"{colour}\">{device}</text>\n",
            path.join(" "),
            w - 1.4 * m,
            m + 16.0 * i as f64,
        ));
    }
    svg.push_str("</svg>\n");
    let path = crate::support::fixtures().join("../docs/performance-llama-70b.svg");
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    if std::env::var_os("UPDATE_DOCS").is_some() && have != svg {
        std::fs::write(&path, &svg).expect("write the plot");
        return;
    }
    assert!(
        have == svg,
        "docs/performance-llama-70b.svg is stale: run UPDATE_DOCS=1 cargo test -p preflight-plan --test plan recommend"
    );
}
