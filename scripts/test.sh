#!/usr/bin/env bash
# Runs every test: installs the real MCP peers (official Python and TypeScript SDKs) if needed,
# then the whole cargo test suite (unit, real-socket, SDK interop, TUI snapshots and tmux).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/setup-peers.sh
exec cargo test --workspace --all-targets "$@"
