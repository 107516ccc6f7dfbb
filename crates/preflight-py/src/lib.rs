//! `preflight._preflight`: the command line's library (`crates/preflight`) as a Python
//! extension module. It only carries arguments in and answers out: the options, their
//! parsing, staging and planning are the command line's own, so `preflight.plan(…)` and
//! `preflight plan --json …` cannot mean different things. `python/preflight/__init__.py`
//! turns keyword arguments into flags and the error document into `PreflightError`.

use std::ffi::OsString;

use pyo3::prelude::*;

/// `preflight plan --json ARGS…` without a process, the GIL released while it stages and
/// plans (other Python threads run meanwhile). Returns (exit status, whether the document is
/// the error document, the document's JSON text).
#[pyfunction]
fn plan_json(py: Python<'_>, args: Vec<OsString>) -> (u8, bool, String) {
    let answer = py.detach(move || preflight::plan_json(args));
    (answer.exit, answer.failed(), answer.json)
}

/// The whole command line (`preflight ARGS…`, the program's name first), writing to this
/// process's stdout and stderr as the binary does; returns the exit status. The GIL is
/// released for as long as it runs (`preflight serve` runs until stopped).
#[pyfunction]
fn run(py: Python<'_>, args: Vec<OsString>) -> u8 {
    py.detach(move || preflight::run(args))
}

/// `plan`'s flags by long name, each with whether it takes a value.
#[pyfunction]
fn plan_flags() -> Vec<(String, bool)> {
    preflight::plan_flags()
}

/// `preflight plan --help`.
#[pyfunction]
fn plan_help() -> String {
    preflight::plan_help()
}

#[pymodule(name = "_preflight")]
fn extension(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(plan_json, m)?)?;
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(plan_flags, m)?)?;
    m.add_function(wrap_pyfunction!(plan_help, m)?)?;
    Ok(())
}
