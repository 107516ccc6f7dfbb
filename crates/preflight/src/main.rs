//! `preflight`: what is this checkpoint, is it fully understood, and what will it take to
//! serve it. Thin: parses flags and calls the libraries.

mod render;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use preflight_plan::PlanOptions;
use preflight_source::spec::{self, SourceSpec};
use preflight_source::{ErrorKind, SourceError};

/// Exit codes, as documented in `--help`.
const EXIT_ADMISSIBLE: u8 = 0;
const EXIT_INADMISSIBLE: u8 = 1;
const EXIT_BAD_INPUT: u8 = 2;
const EXIT_UNREADABLE: u8 = 3;

#[derive(Parser)]
#[command(name = "preflight", version, about = "Plan a model checkpoint from its metadata alone: what it is, whether it is fully understood, what it takes to serve.")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Plan one or more sources as one system and print the verdict.
    ///
    /// Exit status: 0 admissible, 1 planned but inadmissible (blocking findings),
    /// 2 bad usage or malformed input, 3 a source could not be read.
    Plan {
        /// Checkpoint directories (config.json + safetensors), .safetensors or .gguf files.
        #[arg(required = true, value_name = "SOURCE")]
        sources: Vec<String>,
        /// Print the verdict as JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Plan { sources, json } => plan(&sources, json),
    }
}

fn plan(sources: &[String], json: bool) -> ExitCode {
    let mut facts = Vec::with_capacity(sources.len());
    for source in sources {
        match stage(source) {
            Ok(f) => facts.push(f),
            Err(e) => {
                eprintln!("preflight: {e}");
                return ExitCode::from(match e.kind() {
                    ErrorKind::BadInput => EXIT_BAD_INPUT,
                    ErrorKind::Unreadable => EXIT_UNREADABLE,
                });
            }
        }
    }
    let verdict = preflight_plan::plan(&facts, &PlanOptions::default());
    if json {
        match serde_json::to_string_pretty(&verdict) {
            Ok(text) => println!("{text}"),
            Err(e) => {
                eprintln!("preflight: cannot render the verdict: {e}");
                return ExitCode::FAILURE;
            }
        }
    } else {
        print!("{}", render::verdict(&verdict));
    }
    ExitCode::from(if verdict.admissible { EXIT_ADMISSIBLE } else { EXIT_INADMISSIBLE })
}

fn stage(source: &str) -> Result<preflight_source::ArtifactFacts, SourceError> {
    match spec::parse(source)? {
        SourceSpec::Local(path) => preflight_source::local::stage(&path),
        SourceSpec::Hub(hub) => Err(SourceError::Spec(spec::SpecError {
            spec: hub.to_string(),
            reason: "Hub sources are not supported by this build yet".into(),
        })),
    }
}
