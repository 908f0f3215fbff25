#!/usr/bin/env bash
# bench.sh — the one command for mcpscope's benchmarks; writes docs/benchmarks.md.
#
#   scripts/bench.sh            full run (< 10 minutes on 2 cores)
#   scripts/bench.sh --quick    smaller counts, for trying the harness (does not overwrite
#                               docs/benchmarks.md; writes bench-out/BENCHMARKS.quick.md)
#
# Installs what it needs: socat (apt, if missing) and mitmproxy (pip, into bench-out/venv).
# Uses the official Python SDK server from .venv when present (scripts/setup-peers.sh makes it).
# Everything runs on 127.0.0.1; every loop is bounded in count and time. Figures compare paths
# measured side by side in one run (interleaved), so read the ratios, not the absolute times.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
OUT="$ROOT/bench-out"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
QUICK=""
REPORT="$ROOT/docs/benchmarks.md"
if [ "${1:-}" = "--quick" ]; then
    QUICK="--quick"
    REPORT="$OUT/BENCHMARKS.quick.md"
fi
mkdir -p "$OUT"
START=$(date +%s)
say() { echo "bench: [$(( $(date +%s) - START )) s] $*" >&2; }

ulimit -n 8192 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

# --- tools ------------------------------------------------------------------------------------
if ! command -v socat >/dev/null; then
    say "installing socat"
    if ! apt-get install -y -qq socat >/dev/null 2>&1; then
        apt-get update -qq >/dev/null && apt-get install -y -qq socat >/dev/null
    fi
fi
SOCAT="$(command -v socat || true)"
if [ ! -x "$OUT/venv/bin/mitmdump" ]; then
    say "installing mitmproxy into bench-out/venv"
    python3 -m venv "$OUT/venv"
    "$OUT/venv/bin/pip" install -q --disable-pip-version-check mitmproxy
fi
MITM_VERSION="$("$OUT/venv/bin/mitmdump" --version 2>/dev/null | head -1 || echo '?')"
PY_ARGS=()
if [ -x "$ROOT/.venv/bin/python" ]; then
    PY_ARGS=(--py-python "$ROOT/.venv/bin/python" --py-server "$ROOT/tests/peers/py_server.py")
fi

# --- build ------------------------------------------------------------------------------------
say "building (profile dist: whole-program optimised, as shipped)"
cargo build --profile dist --quiet --bin mcpscope --example bench_e2e --example bench_scale \
    --example bench_record_size --example bench_memory --example bench_replay_open
cargo bench --quiet --bench wire --no-run >/dev/null 2>&1 || cargo bench --bench wire --no-run

# --- run (one at a time: the machine is small) ------------------------------------------------
say "end to end: round trips, throughput, per-event latency, deaths, held streams"
"$TARGET/dist/examples/bench_e2e" --mcpscope "$TARGET/dist/mcpscope" \
    ${SOCAT:+--socat "$SOCAT"} --mitmdump "$OUT/venv/bin/mitmdump" "${PY_ARGS[@]}" \
    --addon "$ROOT/bench/mitm_stream.py" --work "$OUT" --out "$OUT/e2e.md" $QUICK
say "scale: model fold, TUI frame, replay open + seek"
if [ -n "$QUICK" ]; then
    "$TARGET/dist/examples/bench_scale" --events 200000 --work "$OUT" --out "$OUT/scale.md"
else
    "$TARGET/dist/examples/bench_scale" --work "$OUT" --out "$OUT/scale.md"
fi
say "recording size: bytes per byte on the wire (SSE flood, small calls)"
if [ -n "$QUICK" ]; then
    "$TARGET/dist/examples/bench_record_size" --events 10000 --calls 300 --work "$OUT" --out "$OUT/size.md"
else
    "$TARGET/dist/examples/bench_record_size" --work "$OUT" --out "$OUT/size.md"
fi
say "memory: the live proxy's RSS through an SSE flood, many calls and an idle pause"
if [ -n "$QUICK" ]; then
    "$TARGET/dist/examples/bench_memory" --mcpscope "$TARGET/dist/mcpscope" \
        --events 100000 --calls 10000 --work "$OUT" --out "$OUT/memory.md"
else
    "$TARGET/dist/examples/bench_memory" --mcpscope "$TARGET/dist/mcpscope" \
        --events 1000000,10000000 --calls 100000 --work "$OUT" --out "$OUT/memory.md"
fi
say "replay: first screen, seek to the end and peak RSS of a 1 M and a 10 M-event recording"
if command -v tmux >/dev/null; then
    if [ -n "$QUICK" ]; then
        "$TARGET/dist/examples/bench_replay_open" --mcpscope "$TARGET/dist/mcpscope" \
            --events 200000 --work "$OUT" --out "$OUT/replay.md"
    else
        "$TARGET/dist/examples/bench_replay_open" --mcpscope "$TARGET/dist/mcpscope" \
            --events 1000000,10000000 --work "$OUT" --out "$OUT/replay.md"
    fi
else
    say "tmux missing: replay benchmark skipped"
fi
say "criterion: SSE parsing, JSON-RPC, model fold"
rm -rf "$TARGET/criterion/sse_parse" "$TARGET/criterion/jsonrpc" "$TARGET/criterion/model"
cargo bench --quiet --bench wire -- --noplot > "$OUT/criterion.txt" 2>&1

# --- report -----------------------------------------------------------------------------------
python3 "$ROOT/bench/report.py" --out "$REPORT" --e2e "$OUT/e2e.md" --scale "$OUT/scale.md" --size "$OUT/size.md" --memory "$OUT/memory.md" \
    --replay "$OUT/replay.md" \
    --criterion "$TARGET/criterion" --seconds "$(( $(date +%s) - START ))" \
    --mitm "$MITM_VERSION" --socat "$( ($SOCAT -V 2>/dev/null || true) | grep -m1 'socat version' || echo '?')" \
    --command "scripts/bench.sh${QUICK:+ --quick} (cargo profile dist; criterion: profile bench, the same settings)"
say "wrote $REPORT"
# Each target, met or missed, as measured in this run.
grep -E '^\| .* \| \*\*(met|MISSED)\*\* \|$' "$REPORT" | sed -e 's/\*\*//g' -e 's/^| /bench: /' -e 's/ |$//' >&2 || true
