#!/usr/bin/env bash
# Fit the performance constants (crates/preflight-plan/data/performance.json) on the training
# rows of fixtures/oracles/perf/serving-measurements.jsonl.gz, then regenerate the held-out
# error table in docs/performance.md with them. Deterministic: the split is a hash of each
# row's id, the fit a coordinate descent from fixed starting values.
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo test -p preflight-plan --release --test plan performance_oracle::calibrate -- --ignored --exact
UPDATE_DOCS=1 cargo test -p preflight-plan --release --test plan performance_oracle::held_out_rows_are_tabulated -- --exact
