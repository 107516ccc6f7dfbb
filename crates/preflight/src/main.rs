//! The `preflight` binary: the command line in `lib.rs`, run with this process's arguments.

fn main() -> std::process::ExitCode {
    std::process::ExitCode::from(preflight::run(std::env::args_os()))
}
