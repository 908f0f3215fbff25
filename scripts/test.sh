#!/usr/bin/env bash
# Runs every test: installs the real MCP peers (official Python and TypeScript SDKs) if needed,
# then the whole cargo test suite (unit, real-socket, SDK interop, TUI snapshots and tmux),
# including the tests a plain `cargo test` ignores because they need those peers or tmux.
# Extra arguments are cargo options (e.g. `--release`).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/setup-peers.sh
# The book builds and every relative link of the README and the book resolves.
scripts/docs.sh
# Every target with the libtest harness, ignored tests included. Criterion's bench harness
# rejects `--include-ignored`, so the benches (built as tests: one quick pass each) run apart.
cargo test --workspace --lib --bins --tests --examples --no-fail-fast "$@" -- --include-ignored
cargo test --workspace --bench '*' "$@"
