//! Integration tests for the `preflight` binary and the stage → plan path it drives.
//! One test binary, a module per area (as ripgrep does).

mod exit_codes;
mod first_use;
mod fixtures;
mod gate;
mod hub;
mod library;
mod memory;
mod naming;
mod performance;
mod replicas;
mod snapshots;
mod source;
mod speculative;
mod support;
mod terminal;
