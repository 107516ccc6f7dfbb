//! `preflight serve`: logging, a runtime, and the server library.

use std::io::IsTerminal;

use preflight_server::{LogFormat, ServeArgs};
use tracing_subscriber::EnvFilter;

/// Serve until stopped; the exit status is 0, or 1 when the server could not run.
pub fn run(args: ServeArgs) -> u8 {
    preflight_server::bound_allocator_arenas();
    let filter = EnvFilter::try_from_env("PREFLIGHT_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    // Colour codes only for a person at a terminal; a log file or collector gets plain text.
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    match args.log_format {
        LogFormat::Json => logs.json().init(),
        LogFormat::Text => logs.init(),
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("preflight serve: cannot start the runtime: {e}");
            return 1;
        }
    };
    match runtime.block_on(preflight_server::serve(args)) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("preflight serve: {e}");
            1
        }
    }
}
