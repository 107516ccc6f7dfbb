//! `preflight-testhub`: the fixture Hub as a process, for demos and for clients in other
//! languages (the conformance script drives `huggingface_hub` against it).
//!
//! Prints the Hub endpoint on stdout (one line, once both origins listen) and serves
//! until interrupted.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use preflight_testhub::TestHub;

/// A fixture Hugging Face Hub on loopback: serves a `fixtures/hub` tree with the Hub's
/// protocol (resolve/raw, LFS redirects to a second "CDN" origin, gating, model info, tree),
/// plus fault switches and a request log under `/_testhub/`.
#[derive(Parser)]
#[command(version)]
struct Args {
    /// Fixture tree in the `fixtures/hub` layout (`ORG/NAME/refs.json`, `ORG/NAME/COMMIT/…`).
    #[arg(long, env = "PREFLIGHT_TESTHUB_ROOT", default_value_os_t = preflight_testhub::fixtures_hub())]
    root: PathBuf,

    /// Address of the Hub origin (the HF_ENDPOINT); port 0 picks a free port. Loopback only.
    #[arg(long, env = "PREFLIGHT_TESTHUB_LISTEN", default_value = "127.0.0.1:0")]
    listen: SocketAddr,

    /// Address of the CDN origin large files are redirected to; port 0 picks a free port.
    #[arg(long, env = "PREFLIGHT_TESTHUB_CDN_LISTEN", default_value = "127.0.0.1:0")]
    cdn_listen: SocketAddr,

    /// A token granted access to every gated and private repo (repeatable; comma-separated
    /// in the environment variable). Other tokens get the Hub's "not in the authorized list".
    #[arg(
        long = "token",
        env = "PREFLIGHT_TESTHUB_TOKENS",
        value_delimiter = ',',
        hide_env_values = true
    )]
    tokens: Vec<String>,
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    let mut builder = TestHub::builder()
        .root(args.root)
        .listen(args.listen)
        .cdn_listen(args.cdn_listen);
    for token in args.tokens {
        builder = builder.token(token);
    }
    let hub = match builder.start().await {
        Ok(hub) => hub,
        Err(e) => {
            eprintln!("preflight-testhub: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!("{}", hub.url());
    let _ = std::io::stdout().flush();
    eprintln!(
        "preflight-testhub: hub {} cdn {} (Ctrl-C to stop)",
        hub.url(),
        hub.cdn_url()
    );
    if let Err(e) = tokio::signal::ctrl_c().await {
        eprintln!("preflight-testhub: cannot wait for Ctrl-C: {e}");
    }
    hub.shutdown().await;
    ExitCode::SUCCESS
}
