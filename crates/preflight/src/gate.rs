//! `preflight gate`: the deploy gate of design §6 — a deployment signature (does the binary
//! serving traffic look the cache up before doing work?), not a performance budget.

use std::time::{Duration, Instant};

use clap::Args;
use serde_json::{Value, json};

#[derive(Debug, Args)]
pub struct GateArgs {
    /// Base URL of the deployment, with its scheme: e.g. http://127.0.0.1:8080.
    #[arg(long, env = "PREFLIGHT_GATE_URL", value_parser = base_url)]
    url: String,
    /// Source to plan (public, small and stable is best).
    #[arg(long, default_value = "hf://Qwen/Qwen3-0.6B")]
    source: String,
    /// Pin the source to this commit (then the hit needs no probe either).
    #[arg(long)]
    revision: Option<String>,
    /// Largest acceptable hit cost in seconds: hit round trip − the health floor.
    #[arg(long, default_value_t = 0.5)]
    ceiling: f64,
    /// /v1/health round trips whose fastest is the floor (at least 3).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(3..))]
    health_samples: u64,
    /// Cached repeats whose fastest is the hit round trip.
    #[arg(long, default_value_t = 3)]
    repeats: usize,
    /// Seconds to wait for any one response.
    #[arg(long, default_value_t = 120)]
    timeout: u64,
    /// Hugging Face token sent with each plan (`Authorization: Bearer`), for a gated or
    /// private --source.
    #[arg(long, env = "HF_TOKEN", hide_env_values = true)]
    token: Option<String>,
}

/// `--url` as a base URL the client can use: a scheme and a host, said plainly when missing
/// (reqwest's own word for a URL without a scheme is "builder error").
fn base_url(s: &str) -> Result<String, String> {
    match s.split_once("://") {
        Some(("http" | "https", rest)) if !rest.is_empty() && !rest.starts_with('/') => Ok(s.to_owned()),
        Some((scheme, _)) => Err(format!("`{s}`: the scheme must be http or https, not `{scheme}`")),
        None => Err(format!("`{s}` has no scheme: did you mean http://{s}?")),
    }
}

/// Exit when the server cannot be reached at all.
const EXIT_UNREACHABLE: u8 = 3;

struct Gate {
    client: reqwest::Client,
    base: String,
    token: Option<String>,
    failures: usize,
}

impl Gate {
    fn check(&mut self, ok: bool, name: &str, figure: String) {
        println!("{}  {name:<24}{figure}", if ok { "PASS" } else { "FAIL" });
        if !ok {
            self.failures += 1;
        }
    }

    async fn get(&self, path: &str) -> Result<(u16, Value, Duration), reqwest::Error> {
        let started = Instant::now();
        let response = self.client.get(format!("{}{path}", self.base)).send().await?;
        let status = response.status().as_u16();
        let body = response.json().await.unwrap_or(Value::Null);
        Ok((status, body, started.elapsed()))
    }

    async fn plan(&self, source: &str) -> Result<(u16, Value, Duration), reqwest::Error> {
        let started = Instant::now();
        let mut request = self
            .client
            .post(format!("{}/v1/plan", self.base))
            .json(&json!({ "sources": [source] }));
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await?;
        let status = response.status().as_u16();
        let body = response.json().await.unwrap_or(Value::Null);
        Ok((status, body, started.elapsed()))
    }
}

pub fn run(args: &GateArgs) -> u8 {
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("preflight gate: cannot start the runtime: {e}");
            return 1;
        }
    };
    match runtime.block_on(gate(args)) {
        Ok(0) => 0,
        Ok(failures) => {
            println!("gate: {failures} check(s) failed");
            1
        }
        Err(e) => {
            eprintln!("preflight gate: {} unreachable: {e}", args.url);
            EXIT_UNREACHABLE
        }
    }
}

async fn gate(args: &GateArgs) -> Result<usize, reqwest::Error> {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(args.timeout))
        .build()?;
    let mut g = Gate {
        client,
        base: args.url.trim_end_matches('/').to_owned(),
        token: args.token.clone().filter(|t| !t.is_empty()),
        failures: 0,
    };
    let source = match &args.revision {
        Some(rev) => format!("{}@{rev}", args.source.split('@').next().unwrap_or(&args.source)),
        None => args.source.clone(),
    };

    let (status, caps, _) = g.get("/v1/capabilities").await?;
    let profile = caps["profile"].as_str().unwrap_or("?").to_owned();
    let has = |path: &str| {
        caps["routes"]
            .as_array()
            .is_some_and(|r| r.iter().any(|x| x["path"] == path))
    };
    g.check(
        status == 200 && has("/v1/plan") && has("/v1/health"),
        "capabilities",
        format!(
            "profile={profile} version={} revision={}",
            caps["version"].as_str().unwrap_or("?"),
            caps["revision"].as_str().unwrap_or("?")
        ),
    );

    let (status, first, took) = g.plan(&source).await?;
    let admissible = first["admissible"].as_bool();
    g.check(
        status == 200 && admissible.is_some(),
        "plan",
        format!(
            "{source}: HTTP {status}, admissible={}, {}",
            admissible.map_or_else(|| "missing".to_owned(), |a| a.to_string()),
            duration(took)
        ),
    );
    let planned = status == 200 && admissible.is_some();

    let mut hit: Option<Duration> = None;
    let mut all_cached = true;
    for _ in 0..args.repeats.max(1) {
        let (status, repeat, took) = g.plan(&source).await?;
        all_cached &= status == 200 && repeat["serving"]["cached"] == true;
        hit = Some(hit.map_or(took, |h| h.min(took)));
    }
    let hit = hit.unwrap_or_default();
    g.check(
        all_cached,
        "repeat is cached",
        format!("serving.cached={all_cached}, fastest hit {}", duration(hit)),
    );

    let mut floor: Option<Duration> = None;
    for _ in 0..args.health_samples {
        let (status, _, took) = g.get("/v1/health").await?;
        if status == 200 {
            floor = Some(floor.map_or(took, |f| f.min(took)));
        }
    }
    let floor = floor.unwrap_or_default();
    let cost = hit.saturating_sub(floor);
    // Without an answered plan there is no hit to cost: say so, never a line that reads
    // like a pass with 0s figures.
    let detail = match planned && all_cached {
        true => format!(
            "{} over a {} floor (ceiling {:.2}s)",
            duration(cost),
            duration(floor),
            args.ceiling
        ),
        false => "not measured: the plan above was not answered and cached".to_owned(),
    };
    g.check(
        planned && all_cached && cost.as_secs_f64() <= args.ceiling,
        "hit cost",
        detail,
    );

    if profile == "public" {
        let (status, body, _) = g.plan("/etc").await?;
        g.check(
            status == 403,
            "local path refused",
            format!("HTTP {status} {}", body["error"]["code"].as_str().unwrap_or("")),
        );
    } else {
        println!("SKIP  local path refused    profile={profile} allows local paths");
    }
    Ok(g.failures)
}

/// A duration as a person reads it: milliseconds below a second (a cached hit is often well
/// under one; `0.000s` hides it), seconds above.
fn duration(d: Duration) -> String {
    match d.as_secs_f64() {
        s if s < 1.0 => format!("{:.2} ms", s * 1000.0),
        s => format!("{s:.3}s"),
    }
}
