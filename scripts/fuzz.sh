#!/usr/bin/env bash
# fuzz.sh — runs the coverage-guided fuzz targets in fuzz/ (libFuzzer through cargo-fuzz).
#
#   scripts/fuzz.sh                 every target, 10,000,000 executions each
#   scripts/fuzz.sh --quick         every target, 15 seconds each (CI)
#   scripts/fuzz.sh TARGET [RUNS]   one target
#
# Targets: sse_parser (never panics; byte-exact whatever the chunking), jsonrpc (and a message's
# text taken only when it is the text it writes as), recording_reader
# (and the fold of what it reads), fault_rule, theme, redact (idempotent). Installs cargo-fuzz if
# missing. The machine's toolchain is stable: RUSTC_BOOTSTRAP=1 lets it take the instrumentation
# flags cargo-fuzz passes. No sanitizer (-s none): the targets are safe Rust, and a panic or an
# assertion is what they look for. A crash leaves its input in fuzz/artifacts/TARGET/ and exits 1.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT/fuzz"
export RUSTC_BOOTSTRAP=1
TARGETS=(sse_parser jsonrpc recording_reader fault_rule theme redact)
if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install --locked --quiet cargo-fuzz
fi
cargo fuzz build -O -s none >/dev/null 2>&1 || cargo fuzz build -O -s none
run() {
    local target=$1 limit=$2
    mkdir -p "corpus/$target"
    local start=$SECONDS
    local log
    log="$(mktemp)"
    if ! cargo fuzz run -O -s none "$target" "corpus/$target" -- $limit -print_final_stats=1 >"$log" 2>&1; then
        tail -40 "$log" >&2
        rm -f "$log"
        echo "fuzz: $target FAILED (input in fuzz/artifacts/$target/)" >&2
        exit 1
    fi
    local runs
    runs="$(grep -m1 'stat::number_of_executed_units' "$log" | awk '{print $2}')"
    rm -f "$log"
    echo "fuzz: $target: ${runs:-?} executions, no crash ($((SECONDS - start)) s)"
}
case "${1:-}" in
    --quick) for t in "${TARGETS[@]}"; do run "$t" "-max_total_time=15"; done ;;
    "") for t in "${TARGETS[@]}"; do run "$t" "-runs=10000000"; done ;;
    *) run "$1" "-runs=${2:-10000000}" ;;
esac
