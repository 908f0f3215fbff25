#!/usr/bin/env bash
# soak.sh — a long, bounded run of real SDK clients through mcpscope with faults armed, watching
# the proxy's memory and file descriptors, then checking that the recording holds every event.
#
#   scripts/soak.sh [--clients N] [--minutes M] [--out DIR] [--no-record] [--tui]
#                                                   (defaults: 4 clients, 10 minutes, recording on)
#
# Upstream: the official Python SDK server (tests/peers/py_server.py). Clients: N official Python
# SDK clients (tests/peers/py_soak_client.py) calling echo / slow / peek / poke at random, each
# call bounded by a timeout. Faults: every `poke` stream is reset after its first event, every
# fifth `slow` ends cleanly before its result, every seventh `echo` gets a 503. The view is
# headless `--json`, or with --tui the TUI in a detached tmux session (200×50); --no-record runs
# without a recording. Loopback only; it stops by itself after M minutes. Prints RSS and open
# fds every 10 s and a summary; exits 1 if the recording misses events or RSS / fds kept growing.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
CLIENTS=4 MINUTES=10 OUT="$ROOT/bench-out/soak" EXTRA=()
while [ $# -gt 0 ]; do
    case "$1" in
        --clients) CLIENTS=$2; shift 2 ;;
        --minutes) MINUTES=$2; shift 2 ;;
        --out) OUT=$2; shift 2 ;;
        --no-record) EXTRA+=(--no-record); shift ;;
        --tui) EXTRA+=(--tui); shift ;;
        *) echo "soak: unknown argument $1" >&2; exit 2 ;;
    esac
done
scripts/setup-peers.sh
cargo build --profile dist --quiet --bin mcpscope
mkdir -p "$OUT"
exec "$ROOT/.venv/bin/python" "$ROOT/bench/soak.py" --mcpscope "${CARGO_TARGET_DIR:-$ROOT/target}/dist/mcpscope" \
    --python "$ROOT/.venv/bin/python" --server "$ROOT/tests/peers/py_server.py" \
    --client "$ROOT/tests/peers/py_soak_client.py" --clients "$CLIENTS" --minutes "$MINUTES" --out "$OUT" "${EXTRA[@]}"
