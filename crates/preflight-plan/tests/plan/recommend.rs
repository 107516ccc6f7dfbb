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
