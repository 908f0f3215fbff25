#!/usr/bin/env bash
# hosts-sweep.sh — one agent host at several versions through the whole matrix, one column per
# version, to show in which version a row changed:
#
#   scripts/hosts-sweep.sh claude-code 2.1.200 2.1.250 2.1.304 2.1.332
#   scripts/hosts-sweep.sh codex 0.160.0 0.171.0 -- --cases healthy,reset-after-event --json
#
# Qwen Code needs Node.js 22 or later first on PATH.
#
# Each version is installed from npm (the network is used only here) into
# ${MCPSCOPE_SWEEP_CACHE:-~/.cache/mcpscope/hosts-sweep}/HOST/VERSION, kept for the next sweep,
# and run only inside the matrix's loopback-only network namespace. Arguments after `--` go to
# `mcpscope matrix`. MCPSCOPE names the binary (default: target/release/mcpscope, else on PATH).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
die() { echo "hosts-sweep: $*" >&2; exit 2; }
[ $# -ge 2 ] || die "usage: hosts-sweep.sh HOST VERSION... [-- MATRIX-ARGS]"
host=$1; shift
# The npm package and the program (in node_modules/.bin) of each preset.
case $host in
    claude-code|claude) host=claude-code; pkg=@anthropic-ai/claude-code; bin=claude ;;
    codex) pkg=@openai/codex; bin=codex ;;
    gemini-cli|gemini) host=gemini-cli; pkg=@google/gemini-cli; bin=gemini ;;
    qwen-code|qwen) host=qwen-code; pkg=@qwen-code/qwen-code; bin=qwen ;;
    opencode) pkg=opencode-ai; bin=opencode ;;
    cline) pkg=cline; bin=cline ;;
    *) die "no npm package known for the host $host (claude-code, codex, gemini-cli, qwen-code, opencode, cline)" ;;
esac
versions=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do versions+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
[ ${#versions[@]} -gt 0 ] || die "name at least one version"
BIN="${MCPSCOPE:-$ROOT/target/release/mcpscope}"
[ -x "$BIN" ] || BIN="$(command -v mcpscope)" || die "no mcpscope binary: cargo build --release, or set MCPSCOPE"
CACHE="${MCPSCOPE_SWEEP_CACHE:-$HOME/.cache/mcpscope/hosts-sweep}/$host"
args=()
for version in "${versions[@]}"; do
    [[ $version =~ ^[0-9A-Za-z.+-]+$ ]] || die "not a version: $version"
    dir="$CACHE/$version"
    if [ ! -x "$dir/node_modules/.bin/$bin" ]; then
        echo "hosts-sweep: installing $pkg@$version into $dir" >&2
        mkdir -p "$dir"
        log="$(mktemp)"
        if ! npm install --prefix "$dir" --no-save --no-audit --no-fund --loglevel=error \
            "$pkg@$version" >"$log" 2>&1; then
            cat "$log" >&2; rm -f "$log"; rm -rf "$dir"; die "npm install $pkg@$version failed"
        fi
        rm -f "$log"
    fi
    args+=(--host-bin "$dir/node_modules/.bin/$bin")
done
exec "$BIN" matrix --host "$host" "${args[@]}" "$@"
