//! `preflight`: what is this checkpoint, is it fully understood, and what will it take to
//! serve it. Thin: parses flags and calls the libraries.
//!
//! The command line is a library so that more than one front door can open it: the binary
//! (`main.rs`) and the Python package's console script call [`run`], the Python module's
//! `preflight.plan()` calls [`plan_json`] — `plan --json` without a process, its document
//! returned rather than printed. Neither may ever behave differently from the binary.

mod compare;
mod gate;
mod plan_args;
mod render;
mod serve;
mod term;
mod units;

use std::ffi::OsString;
use std::io::Write;

use clap::{CommandFactory, Parser, Subcommand};
use preflight_source::facts_cache::{self, FactsCache, FactsKey};
use preflight_source::hub::{self, Counters, HubClient, HubConfig};
use preflight_source::spec::{self, SourceSpec};
use preflight_source::{ErrorCode, ErrorKind, SourceError};

/// Exit codes, as documented in `--help`. When several apply, 2 and 3 (nothing was planned)
/// come first, then 1 (inadmissible), then 4 (admissible, but does not fit, or
/// `--require-engine` does not run it).
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

// Parsed once per run: the plan variant's size costs nothing worth a box.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum Command {
    /// Plan one or more sources as one system and print the verdict.
    ///
    /// Exit status: 0 admissible (and fits, when devices are named), 1 planned but
    /// inadmissible (blocking findings), 2 bad usage or malformed input, 3 a source could not
    /// be read, 4 admissible but does not fit the named devices (or the engine
    /// --require-engine names does not run it).
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
        /// Neither read nor write the staged-facts cache: stage every Hub source afresh.
        ///
        /// By default the facts a Hub source stages (headers, config, index: immutable for a
        /// commit) are kept in $PREFLIGHT_CACHE, else $XDG_CACHE_HOME/preflight, else
        /// ~/.cache/preflight, so planning the same commit again — with any options — costs
        /// one probe (none when pinned to a commit). See `preflight cache`.
        #[arg(long)]
        no_cache: bool,
        #[command(flatten)]
        memory: plan_args::MemoryArgs,
    },
    /// See and bound the staged-facts cache (`ls`, `rm`, `prune --max-bytes N`).
    Cache {
        #[command(subcommand)]
        action: CacheAction,
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

#[derive(Subcommand)]
enum CacheAction {
    /// List the cached facts: source, size and age, newest first.
    Ls,
    /// Remove every cached entry.
    Rm,
    /// Remove the oldest entries until the rest fit in `--max-bytes`.
    Prune {
        /// The most the cache may hold after pruning: bytes, or a size with a unit (`500MiB`,
        /// `2GB`; binary units under either name, as device sizes are read). 0 empties it.
        #[arg(long, value_name = "SIZE", value_parser = parse_cache_size)]
        max_bytes: u64,
    },
}

fn parse_cache_size(text: &str) -> Result<u64, String> {
    preflight_plan::devices::bytes(text).ok_or_else(|| {
        format!("`{text}` is not a size: whole bytes, optionally with a unit (KiB MiB GiB TiB, or KB MB GB TB read the same), below 2^64")
    })
}

/// Where the CLI keeps staged facts: `$PREFLIGHT_CACHE`, else the platform cache directory.
fn facts_cache_dir() -> Option<std::path::PathBuf> {
    let non_empty = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(std::path::PathBuf::from)
    };
    non_empty("PREFLIGHT_CACHE")
        .or_else(|| non_empty("XDG_CACHE_HOME").map(|d| d.join("preflight")))
        .or_else(|| non_empty("HOME").map(|d| d.join(".cache").join("preflight")))
}

/// The whole command line, `args` as a process receives them (the program's name first).
/// Returns the exit status; everything it has to say is written to stdout and stderr, flushed
/// before it returns (a caller such as the Python console script exits right after).
pub fn run<I, T>(args: I) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<OsString>,
{
    let args: Vec<OsString> = args.into_iter().map(Into::into).collect();
    let exit = match Cli::try_parse_from(&args) {
        Ok(cli) => dispatch(cli),
        Err(e) => usage_error(e, wants_json(&args), &mut std::io::stdout()),
    };
    let _ = std::io::stdout().flush();
    exit
}

fn dispatch(cli: Cli) -> u8 {
    match cli.command {
        Command::Plan {
            sources,
            json,
            no_cache,
            memory,
        } => {
            let cache = (!no_cache).then(facts_cache_dir).flatten().map(FactsCache::new);
            let ends = AfterPlan::ProcessEnds;
            plan(&sources, json, &memory, cache.as_ref(), ends, &mut std::io::stdout())
        }
        Command::Cache { action } => cache_command(&action),
        Command::Serve(args) => serve::run(*args),
        Command::Gate(args) => gate::run(&args),
    }
}

/// What `preflight plan --json ARGS…` prints, and its exit status, without a process and
/// without printing: `args` are the plan's own (sources and flags, no `--json`). The same
/// parsing, staging, cache and planning as the command line, so a caller's options mean
/// exactly what the flags mean.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanJson {
    /// 0, 1 or 4 with a verdict (or `--compare`'s document); 2 or 3 with an error document.
    pub exit: u8,
    /// The document `--json` prints: the verdict, or `{"error": {"code", "message"}}`.
    pub json: String,
}

impl PlanJson {
    /// Nothing was planned (bad usage or input, exit 2; an unreadable source, exit 3): the
    /// document is the error document. A verdict that does not fit or is inadmissible is
    /// not a failure: it is the answer.
    pub fn failed(&self) -> bool {
        matches!(self.exit, EXIT_BAD_INPUT | EXIT_UNREADABLE)
    }
}

/// `preflight plan --json ARGS…`, returned (see [`PlanJson`]). Staged facts are freed when it
/// returns: the caller's process goes on.
pub fn plan_json<I, T>(args: I) -> PlanJson
where
    I: IntoIterator<Item = T>,
    T: Into<OsString>,
{
    let argv = ["preflight", "plan", "--json"]
        .into_iter()
        .map(OsString::from)
        .chain(args.into_iter().map(Into::into));
    let mut out = Vec::new();
    let exit = match Cli::try_parse_from(argv) {
        Ok(Cli {
            command:
                Command::Plan {
                    sources,
                    no_cache,
                    memory,
                    ..
                },
        }) => {
            let cache = (!no_cache).then(facts_cache_dir).flatten().map(FactsCache::new);
            let goes_on = AfterPlan::CallerGoesOn;
            plan(&sources, true, &memory, cache.as_ref(), goes_on, &mut out)
        }
        Ok(_) => fail(true, ErrorCode::Internal, "not a plan", EXIT_UNREADABLE, &mut out),
        Err(e) => usage_error(e, true, &mut out),
    };
    PlanJson {
        exit,
        json: String::from_utf8_lossy(&out).into_owned(),
    }
}

/// `plan`'s flags a caller of [`plan_json`] may give, by long name (`context`, `no-cache`),
/// and whether each takes a value (`--context 32k`) or is a switch (`--include-mtp`). Read
/// from the command line's own definition, so a new flag is offered without a change here.
pub fn plan_flags() -> Vec<(String, bool)> {
    let command = Cli::command();
    let Some(plan) = command.find_subcommand("plan") else {
        return Vec::new();
    };
    plan.get_arguments()
        .filter_map(|arg| {
            let long = arg.get_long()?;
            // `--json` is what plan_json always is; `--help` prints rather than plans.
            let offered = !matches!(long, "json" | "help");
            let takes_value = !matches!(
                arg.get_action(),
                clap::ArgAction::SetTrue | clap::ArgAction::SetFalse | clap::ArgAction::Count
            );
            offered.then(|| (long.to_owned(), takes_value))
        })
        .collect()
}

/// `preflight plan --help`, as the command line prints it.
pub fn plan_help() -> String {
    let mut command = Cli::command();
    command.build();
    command
        .find_subcommand_mut("plan")
        .map(|plan| plan.render_long_help().to_string())
        .unwrap_or_default()
}

fn cache_command(action: &CacheAction) -> u8 {
    let Some(dir) = facts_cache_dir() else {
        eprintln!("preflight: no cache directory: set PREFLIGHT_CACHE, XDG_CACHE_HOME or HOME");
        return EXIT_BAD_INPUT;
    };
    let cache = FactsCache::new(dir);
    let done = match action {
        CacheAction::Ls => cache.entries().map(|entries| {
            let total: u64 = entries.iter().map(|e| e.bytes).sum();
            for e in &entries {
                let age = e
                    .modified
                    .and_then(|m| m.elapsed().ok())
                    .map_or_else(|| "?".to_owned(), |d| format!("{}s ago", d.as_secs()));
                let source = e.source.as_deref().unwrap_or("(unreadable: removed on next use)");
                // One commit read with and without a token is two entries: say which is which.
                let token = if e.read_with_token { "  read with a token" } else { "" };
                println!("{source}  {} bytes  {age}{token}", units::thousands(e.bytes));
            }
            println!(
                "{} entr{} · {} bytes in {}",
                entries.len(),
                if entries.len() == 1 { "y" } else { "ies" },
                units::thousands(total),
                cache.dir().display()
            );
        }),
        CacheAction::Rm => cache
            .clear()
            .map(|n| println!("removed {n} entries from {}", cache.dir().display())),
        CacheAction::Prune { max_bytes } => cache
            .prune(*max_bytes)
            .map(|n| println!("removed {n} entries from {}", cache.dir().display())),
    };
    match done {
        Ok(()) => EXIT_ADMISSIBLE,
        Err(e) => {
            eprintln!("preflight: cache at {}: {e}", cache.dir().display());
            EXIT_UNREADABLE
        }
    }
}

/// What becomes of a plan's staged facts once its answer is out.
#[derive(Debug, Clone, Copy)]
enum AfterPlan {
    /// The process ends: freeing a large checkpoint's facts one string at a time
    /// (DeepSeek-V3: ~10% of a local plan's CPU) is work the OS does for free.
    ProcessEnds,
    /// The caller plans again in the same process (Python): they are freed.
    CallerGoesOn,
}

/// Plan `sources` and write the answer (text, or with `json` the verdict or error document)
/// to `out`; returns the exit status.
fn plan(
    sources: &[String],
    json: bool,
    memory: &plan_args::MemoryArgs,
    cache: Option<&FactsCache>,
    after: AfterPlan,
    out: &mut dyn Write,
) -> u8 {
    // Options are checked before any source is read: a bad value costs no network.
    let options = match memory
        .options()
        .and_then(|o| preflight_plan::speculative::check_sources(&o, sources.len()).map(|()| o))
    {
        Ok(options) => options,
        Err(e) => return invalid_options(json, &e, out),
    };
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            let message = format!("cannot start the async runtime: {e}");
            return fail(json, ErrorCode::Internal, &message, EXIT_UNREADABLE, out);
        }
    };
    let mut hub = None;
    let mut facts = Vec::with_capacity(sources.len());
    let progress = term::progress_wanted(json);
    for source in sources {
        match runtime.block_on(stage(source, &mut hub, cache, progress)) {
            Ok(f) => facts.push(f),
            Err(e) => {
                let exit = match e.kind() {
                    ErrorKind::BadInput => EXIT_BAD_INPUT,
                    ErrorKind::Unreadable => EXIT_UNREADABLE,
                };
                return fail(json, e.code(), &e.to_string(), exit, out);
            }
        }
    }
    if let Some(compare) = &memory.compare {
        return compared(compare, &facts, &options, json, out);
    }
    let verdict = match preflight_plan::plan(&facts, &options) {
        Ok(verdict) => verdict,
        Err(e) => return invalid_options(json, &e, out),
    };
    match after {
        AfterPlan::ProcessEnds => std::mem::forget(facts),
        AfterPlan::CallerGoesOn => drop(facts),
    }
    if json {
        match serde_json::to_string_pretty(&verdict) {
            Ok(text) => emit(&format!("{text}\n"), out),
            Err(e) => {
                let message = format!("cannot render the verdict: {e}");
                return fail(json, ErrorCode::Internal, &message, EXIT_UNREADABLE, out);
            }
        }
    } else {
        emit(&render::verdict(&verdict, term::Paint::for_stdout()), out);
    }
    verdict_exit(&verdict)
}

/// A verdict's exit status: 1 inadmissible, 4 admissible but not fitting (or not on the
/// required engine), 0 otherwise.
fn verdict_exit(verdict: &preflight_plan::Verdict) -> u8 {
    let fits = verdict.memory.as_ref().and_then(|m| m.fits);
    let engine_met = verdict.require_engine.as_ref().is_none_or(|r| r.met);
    // Recommendations: the verdict is the best deployment's, and none meeting is not fitting.
    let fits = match verdict.recommendations.is_empty() {
        true => fits,
        false => Some(verdict.recommendations.iter().any(|r| r.meets)),
    };
    match (verdict.admissible, fits, engine_met) {
        (false, _, _) => EXIT_INADMISSIBLE,
        (true, Some(false), _) | (true, _, false) => EXIT_DOES_NOT_FIT,
        (true, _, true) => EXIT_ADMISSIBLE,
    }
}

/// `--compare`: one plan per value, a table (or its JSON). Exits as its worst row would: 1
/// when some value is inadmissible, else 4 when some value does not fit, else 0 — a script
/// gating on the status never passes a row that says NO.
fn compared(
    compare: &compare::Compare,
    facts: &[preflight_formats::facts::ArtifactFacts],
    options: &preflight_plan::PlanOptions,
    json: bool,
    out: &mut dyn Write,
) -> u8 {
    let variants = match compare.variants(options) {
        Ok(v) => v,
        Err(message) => return fail(json, ErrorCode::InvalidOptions, &message, EXIT_BAD_INPUT, out),
    };
    let verdicts = match compare::plan(facts, &variants) {
        Ok(verdicts) => verdicts,
        Err(e) => return invalid_options(json, &e, out),
    };
    if json {
        match compare::json(compare, &verdicts) {
            Ok(text) => emit(&format!("{text}\n"), out),
            Err(e) => {
                let message = format!("cannot render the comparison: {e}");
                return fail(json, ErrorCode::Internal, &message, EXIT_UNREADABLE, out);
            }
        }
    } else {
        emit(&compare::text(compare, &verdicts), out);
    }
    verdicts
        .iter()
        .map(verdict_exit)
        .fold(EXIT_ADMISSIBLE, |worst, exit| match (worst, exit) {
            (EXIT_INADMISSIBLE, _) | (_, EXIT_INADMISSIBLE) => EXIT_INADMISSIBLE,
            (EXIT_DOES_NOT_FIT, _) | (_, EXIT_DOES_NOT_FIT) => EXIT_DOES_NOT_FIT,
            _ => EXIT_ADMISSIBLE,
        })
}

/// Write the answer. A reader that stops early (`| head`) is not an error: the exit status
/// still says what the plan found.
fn emit(text: &str, out: &mut dyn Write) {
    let _ = out.write_all(text.as_bytes());
}

/// Whether a command line is a `plan --json`, whose every failure is a JSON document.
fn wants_json(args: &[OsString]) -> bool {
    args.get(1).is_some_and(|a| a == "plan") && args.iter().any(|a| a == "--json")
}

/// A command line clap refuses. `--help` and `--version` print as clap prints them; a usage
/// error of `plan --json` is the error document on `out`, as every other failure of a
/// `--json` plan is (a script reading stdout always gets JSON); otherwise clap's own message.
fn usage_error(e: clap::Error, json: bool, out: &mut dyn Write) -> u8 {
    use clap::error::ErrorKind;
    if json && !matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
        // clap's first line, without its `error: ` prefix and the usage hint below it.
        let rendered = e.render().to_string();
        let first = rendered.lines().next().unwrap_or_default();
        let message = first.strip_prefix("error: ").unwrap_or(first);
        return fail(true, ErrorCode::InvalidOptions, message, EXIT_BAD_INPUT, out);
    }
    let code = e.exit_code();
    let _ = e.print();
    u8::try_from(code).unwrap_or(EXIT_BAD_INPUT)
}

/// Options the planner cannot honour: bad usage (exit 2), named by the flag that sets them.
fn invalid_options(json: bool, e: &preflight_plan::OptionsError, out: &mut dyn Write) -> u8 {
    let message = format!("invalid --{}: {}", e.option.replace('_', "-"), e.message);
    fail(json, ErrorCode::InvalidOptions, &message, EXIT_BAD_INPUT, out)
}

/// A failure before any verdict: one line on stderr, or with `--json` the service's error
/// document on `out` (so a script reading stdout always gets JSON).
fn fail(json: bool, code: ErrorCode, message: &str, exit: u8, out: &mut dyn Write) -> u8 {
    if json {
        let document = serde_json::json!({ "error": { "code": code.as_str(), "message": message } });
        emit(&format!("{document}\n"), out);
    } else {
        eprintln!("preflight: {message}");
    }
    exit
}

/// Stage one source. The Hub client, and the plan's budget every Hub source draws from, are
/// made on first use, from the environment. `progress`: show what Hub staging has read so
/// far on stderr.
async fn stage(
    source: &str,
    hub: &mut Option<(HubClient, hub::stage::PlanBudget)>,
    cache: Option<&FactsCache>,
    progress: bool,
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
            let token = client.config().token.as_deref();
            let (commit, info) = match hub::stage::resolve_with_listing(client, &spec, &resolve).await {
                Ok(resolved) => resolved,
                // Offline, and the HF cache has no ref: the newest commit our own cache read.
                Err(e @ SourceError::Hub(hub::HubError::Offline { .. })) => {
                    match cache.and_then(|c| c.latest(&spec, token)) {
                        Some(commit) => (commit, None),
                        None => return Err(e),
                    }
                }
                Err(e) => return Err(e),
            };
            let key = FactsKey::hub(&spec, &commit, token);
            let cached = cache.and_then(|c| c.get(&key));
            let hit = cached.is_some();
            // The model info just read is the freshest word on the licence and the gating
            // (gating is a setting, not part of the commit a cache entry was staged at).
            let fresh = info.as_ref().map(|info| info.meta.clone());
            let mut facts = match cached {
                Some(facts) => facts_cache::as_served(facts, &spec, &commit),
                None => {
                    let staging = hub::stage::stage(client, &spec, &commit, info, budget);
                    match progress {
                        true => term::with_progress(source, budget, staging).await?,
                        false => staging.await?,
                    }
                }
            };
            if let Some(cache) = cache {
                // A cache that cannot be written costs the next run a restage, nothing more.
                if !hit {
                    let _ = cache.put(&key, &facts);
                }
                if !spec.is_pinned() {
                    let _ = cache.put_ref(&spec, token, &commit);
                }
            }
            if let Some(fresh) = fresh {
                facts.meta = fresh;
            }
            // The CLI's resolution is part of what this plan cost.
            facts.staging.requests += resolve.requests.load(std::sync::atomic::Ordering::Relaxed);
            facts.staging.bytes_fetched += resolve.bytes.load(std::sync::atomic::Ordering::Relaxed);
            Ok(facts)
        }
    }
}
