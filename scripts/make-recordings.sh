#!/usr/bin/env bash
# Regenerates the sample recordings in recordings/ with mcpscope itself: the built-in test server,
# the proxy with its recorder, faults armed through a planner, and a raw client
# (examples/make_recordings.rs). Loopback only; each scenario takes about a second. The samples
# are written in the current format; their version 1 originals stay in tests/data/recordings-v1.
#
# Usage: scripts/make-recordings.sh [OUT_DIR] [SCENARIO...]
#   scenarios: healthy server-dies sse-eof json-reset status-503 resumed (default: all)
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-recordings}"
shift || true
timeout 300 cargo run --quiet --example make_recordings -- "$out" "$@"
# The recorder writes 0600 (recordings may hold secrets); these samples ship, so make them readable.
chmod 0644 "$out"/*.jsonl
ls -l "$out"/*.jsonl
