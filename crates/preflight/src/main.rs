//! `preflight`: what is this checkpoint, is it fully understood, and what will it take to
//! serve it. Thin: parses flags and calls the libraries.

mod gate;
mod plan_args;
mod render;
mod serve;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use preflight_source::hub::{self, Counters, HubClient, HubConfig};
use preflight_source::spec::{self, SourceSpec};
use preflight_source::{ErrorCode, ErrorKind, SourceError};

/// Exit codes, as documented in `--help`. When several apply, 2 and 3 (nothing was planned)
/// come first, then 1 (inadmissible), then 4 (admissible, but does not fit).
const EXIT_ADMISSIBLE: u8 = 0;
const EXIT_INADMISSIBLE: u8 = 1;
const EXIT_BAD_INPUT: u8 = 2;
const EXIT_UNREADABLE: u8 = 3;
const EXIT_DOES_NOT_FIT: u8 = 4;

#[derive(Parser)]
#[command(
    name = "preflight",
    version,
    about = "Plan a model checkpoint from its metadata alone: what it is, whether it is fully understood, what it takes to serve."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Plan one or more sources as one system and print the verdict.
    ///
    /// Exit status: 0 admissible (and fits, when devices are named), 1 planned but
    /// inadmissible (blocking findings), 2 bad usage or malformed input, 3 a source could not
    /// be read, 4 admissible but does not fit the named devices.
    Plan {
        /// `hf://ORG/NAME[@REV][/file.gguf]`, checkpoint directories (config.json +
        /// safetensors, or an HF cache snapshot), .safetensors or .gguf files.
        ///
        /// Hub access reads HF_ENDPOINT, HF_TOKEN (else $HF_HOME/token) and HF_HUB_OFFLINE=1
        /// (plan from the local HF cache only).
        #[arg(required = true, value_name = "SOURCE")]
        sources: Vec<String>,
        /// Print the verdict as JSON instead of a table; a failure is then a JSON error
        /// document on stdout (`{"error": {"code", "message"}}`, the service's codes).
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        memory: plan_args::MemoryArgs,
    },
    /// Run the plan service: POST /v1/plan with a verdict cache, bounds and metrics.
    ///
    /// Every setting is a flag with an environment fallback (shown below). Hub access reads
    /// HF_ENDPOINT and HF_HUB_OFFLINE; callers bring their own token (Authorization: Bearer).
    Serve(Box<preflight_server::ServeArgs>),
    /// Check a running deployment: capabilities, a plan, a cached repeat and the cost of a
    /// hit over the health floor, and that a public profile refuses local paths.
    ///
    /// Exit status: 0 every check passed, 1 a check failed, 3 the server could not be reached.
    Gate(gate::GateArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Plan { sources, json, memory } => plan(&sources, json, &memory),
        Command::Serve(args) => serve::run(*args),
        Command::Gate(args) => gate::run(&args),
    }
}

fn plan(sources: &[String], json: bool, memory: &plan_args::MemoryArgs) -> ExitCode {
    // Options are checked before any source is read: a bad value costs no network.
    let options = match memory.options() {
        Ok(options) => options,
        Err(e) => {
            let message = format!("invalid --{}: {}", e.option.replace('_', "-"), e.message);
            return fail(json, ErrorCode::InvalidOptions, &message, EXIT_BAD_INPUT);
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            let message = format!("cannot start the async runtime: {e}");
            return fail(json, ErrorCode::Internal, &message, EXIT_UNREADABLE);
        }
    };
    let mut hub = None;
    let mut facts = Vec::with_capacity(sources.len());
    for source in sources {
        match runtime.block_on(stage(source, &mut hub)) {
            Ok(f) => facts.push(f),
            Err(e) => {
                let exit = match e.kind() {
                    ErrorKind::BadInput => EXIT_BAD_INPUT,
                    ErrorKind::Unreadable => EXIT_UNREADABLE,
                };
                return fail(json, e.code(), &e.to_string(), exit);
            }
        }
    }
    let verdict = preflight_plan::plan(&facts, &options);
    if json {
        match serde_json::to_string_pretty(&verdict) {
            Ok(text) => println!("{text}"),
            Err(e) => {
                let message = format!("cannot render the verdict: {e}");
                return fail(json, ErrorCode::Internal, &message, EXIT_UNREADABLE);
            }
        }
    } else {
        print!("{}", render::verdict(&verdict));
    }
    let fits = verdict.memory.as_ref().and_then(|m| m.fits);
    ExitCode::from(match (verdict.admissible, fits) {
        (false, _) => EXIT_INADMISSIBLE,
        (true, Some(false)) => EXIT_DOES_NOT_FIT,
        (true, _) => EXIT_ADMISSIBLE,
    })
}

/// A failure before any verdict: one line on stderr, or with `--json` the service's error
/// document on stdout (so a script reading stdout always gets JSON).
fn fail(json: bool, code: ErrorCode, message: &str, exit: u8) -> ExitCode {
    if json {
        println!(
            "{}",
            serde_json::json!({ "error": { "code": code.as_str(), "message": message } })
        );
    } else {
        eprintln!("preflight: {message}");
    }
    ExitCode::from(exit)
}

/// Stage one source. The Hub client, and the plan's budget every Hub source draws from, are
/// made on first use, from the environment.
async fn stage(
    source: &str,
    hub: &mut Option<(HubClient, hub::stage::PlanBudget)>,
) -> Result<preflight_source::ArtifactFacts, SourceError> {
    match spec::parse(source)? {
        SourceSpec::Local(path) => preflight_source::local::stage(&path),
        SourceSpec::Hub(spec) => {
            let (client, budget) = match hub {
                Some(hub) => hub,
                None => {
                    let client = HubClient::new(HubConfig::from_env())?;
                    let budget = hub::stage::PlanBudget::new(client.config());
                    hub.insert((client, budget))
                }
            };
            let resolve = Counters::default();
            let (commit, listing) = hub::stage::resolve_with_listing(client, &spec, &resolve).await?;
            let mut facts = hub::stage::stage(client, &spec, &commit, listing, budget).await?;
            // The CLI's resolution is part of what this plan cost.
            facts.staging.requests += resolve.requests.load(std::sync::atomic::Ordering::Relaxed);
            facts.staging.bytes_fetched += resolve.bytes.load(std::sync::atomic::Ordering::Relaxed);
            Ok(facts)
        }
    }
}
