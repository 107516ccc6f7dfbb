//! What a terminal gets that a pipe does not: colour on stdout, a progress line on stderr
//! while a slow source stages. Both are decided once, from whether a person is watching, so
//! redirected output and logs never carry an escape code.

use std::future::Future;
use std::io::{IsTerminal, Write};
use std::time::Duration;

use preflight_source::hub::stage::PlanBudget;

/// A stage shorter than this shows no progress at all: the line would only flicker.
const PROGRESS_AFTER: Duration = Duration::from_millis(300);
/// How often the progress line is redrawn.
const PROGRESS_EVERY: Duration = Duration::from_millis(100);

/// ANSI colour, or plain text.
#[derive(Debug, Clone, Copy)]
pub struct Paint {
    on: bool,
}

impl Paint {
    /// Colour when stdout is a terminal, `NO_COLOR` is unset or empty (no-color.org) and the
    /// terminal is not `dumb`.
    pub fn for_stdout() -> Paint {
        let set = |k: &str| std::env::var_os(k).is_some_and(|v| !v.is_empty());
        let dumb = std::env::var_os("TERM").is_some_and(|t| t == "dumb");
        Paint {
            on: std::io::stdout().is_terminal() && !set("NO_COLOR") && !dumb,
        }
    }

    pub fn red(self, text: &str) -> String {
        self.paint("1;31", text)
    }

    pub fn green(self, text: &str) -> String {
        self.paint("1;32", text)
    }

    pub fn yellow(self, text: &str) -> String {
        self.paint("1;33", text)
    }

    fn paint(self, code: &str, text: &str) -> String {
        match self.on {
            true => format!("\x1b[{code}m{text}\x1b[0m"),
            false => text.to_owned(),
        }
    }
}

/// Whether to draw progress: stderr is a terminal and the output is not `--json` (a script
/// reading JSON wants nothing else on the terminal either).
pub fn progress_wanted(json: bool) -> bool {
    !json && std::io::stderr().is_terminal()
}

/// Run `work` (staging `what`), redrawing one stderr line with the requests and header bytes
/// its budget has drawn so far once it has run for [`PROGRESS_AFTER`]; the line is erased
/// when the work ends.
pub async fn with_progress<T>(what: &str, budget: &PlanBudget, work: impl Future<Output = T>) -> T {
    let mut work = std::pin::pin!(work);
    let mut tick = tokio::time::interval(PROGRESS_EVERY);
    let started = tokio::time::Instant::now();
    let mut shown = false;
    loop {
        tokio::select! {
            out = &mut work => {
                if shown {
                    eprint!("\r\x1b[2K");
                    let _ = std::io::stderr().flush();
                }
                return out;
            }
            _ = tick.tick() => {
                if started.elapsed() >= PROGRESS_AFTER {
                    shown = true;
                    eprint!(
                        "\r\x1b[2Kstaging {what}: {} requests, {} of headers",
                        budget.requests(),
                        crate::units::bytes(budget.header_bytes())
                    );
                    let _ = std::io::stderr().flush();
                }
            }
        }
    }
}
