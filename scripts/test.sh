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
# What each crate would publish is source only (no recordings, caches or build artefacts).
python3 scripts/check-package.py
# Every target with the libtest harness, ignored tests included. Criterion's bench harness
# rejects `--include-ignored`, so the benches (built as tests: one quick pass each) run apart.
cargo test --workspace --lib --bins --tests --examples --no-fail-fast "$@" -- --include-ignored
cargo test --workspace --bench '*' "$@"
# The release archive of this machine (the quick profile: the whole-program one is the
# benchmarks' and the release workflow's) holds what it promises, made by the binary.
archive=$(scripts/release.sh --profile release --out "${CARGO_TARGET_DIR:-target}/release-check" | tail -1)
listing=$(tar -tJf "$archive")
for entry in mcpscope README.md LICENSE-MIT LICENSE-APACHE completions/mcpscope.bash \
    completions/_mcpscope completions/mcpscope.fish man/mcpscope.1; do
    grep -q "/$entry\$" <<<"$listing" || { echo "test: $archive lacks $entry" >&2; exit 1; }
done
