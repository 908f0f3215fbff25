#!/usr/bin/env bash
# hosts-table.sh — remakes the tables of docs/hosts.md: `mcpscope matrix --json` once per client
# (Claude Code at three versions, Codex, Gemini CLI, opencode, Qwen Code, Cline and Kimi CLI as agent hosts
# in their loopback-only namespace; the Python SDK 2.x and 1.x and the TypeScript SDK as client
# commands), without and with --rescue (--quick: the slow calls have no death to rescue), one
# column each. Needs the peers of scripts/setup-peers.sh and a build of the dist profile (cargo build --profile dist).
# Prints the tables' Markdown on stdout; `scripts/hosts-table.sh > /tmp/t.md` and paste.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${MCPSCOPE:-$ROOT/target/dist/mcpscope}"
# MCPSCOPE_BOARD_DIR=DIR keeps each run's JSON lines there, and a column already there is not
# run again (remake one column: delete its files).
if [ -n "${MCPSCOPE_BOARD_DIR:-}" ]; then
    OUT="$MCPSCOPE_BOARD_DIR"; mkdir -p "$OUT"
else
    OUT="$(mktemp -d)"; trap 'rm -rf "$OUT"' EXIT
fi
HOSTS="$ROOT/tests/peers/hosts/node_modules"
declare -a NAMES=(claude-newest claude-older claude-report codex gemini opencode qwen cline kimi py2 py1 ts)
run() { # NAME RESCUE(0/1)
    local name=$1 rescue=() ; [ "$2" = 1 ] && rescue=(--rescue --quick)
    local args
    case $name in
        claude-newest) args=(--host claude-code --host-bin "$HOSTS/claude-code-newest/bin/claude.exe") ;;
        claude-older)  args=(--host claude-code --host-bin "$HOSTS/claude-code-older/bin/claude.exe") ;;
        claude-report) args=(--host claude-code --host-bin "$HOSTS/claude-code-report/bin/claude.exe") ;;
        opencode) args=(--host opencode --host-bin "$HOSTS/.bin/opencode") ;;
        cline) args=(--host cline --host-bin "$HOSTS/.bin/cline") ;;
        kimi) args=(--host kimi-cli --host-bin "$ROOT/.venv-kimi/bin/kimi") ;;
        codex) args=(--host codex --host-bin "$HOSTS/codex/bin/codex.js") ;;
        gemini) args=(--host gemini-cli --host-bin "$HOSTS/.bin/gemini") ;;
        qwen) args=(--host qwen-code --host-bin "$HOSTS/.mcpscope/qwen") ;;
        py2) args=(-- "$ROOT/.venv/bin/python" "$ROOT/tests/peers/py_matrix_client.py" '{url}') ;;
        py1) args=(-- "$ROOT/.venv-mcp1/bin/python" "$ROOT/tests/peers/py_matrix_client.py" '{url}') ;;
        ts)  args=(-- node "$ROOT/tests/peers/node/matrix_client.mjs" '{url}') ;;
    esac
    [ -s "$OUT/$name-$2.jsonl" ] && return 0
    # Exit status 1 only says that some cell found a defect.
    "$BIN" matrix --json "${rescue[@]}" "${args[@]}" > "$OUT/$name-$2.jsonl" 2> "$OUT/$name-$2.err" || true
}
for rescue in 0 1; do
    for name in "${NAMES[@]}"; do run "$name" "$rescue"; done
done
python3 - "$OUT" "$("$ROOT/.venv/bin/python" -c 'from importlib.metadata import version; print(version("mcp"))')" \
    "$("$ROOT/.venv-mcp1/bin/python" -c 'from importlib.metadata import version; print(version("mcp"))')" \
    "$(node -p "require('$ROOT/tests/peers/node/node_modules/@modelcontextprotocol/sdk/package.json').version")" <<'PY'
import json, sys
out, py2, py1, ts = sys.argv[1:5]
names = ["claude-newest", "claude-older", "claude-report", "codex", "gemini", "opencode", "qwen", "cline", "kimi", "py2", "py1", "ts"]
def load(name, rescue):
    with open(f"{out}/{name}-{rescue}.jsonl") as f:
        return [json.loads(line) for line in f if line.strip()]
for rescue, heading in ((0, "Without --rescue"), (1, "With --rescue")):
    runs = {n: load(n, rescue) for n in names}
    heads = []
    for n in names:
        cells = runs[n]
        if n.startswith("claude"):
            v = next((c.get("host_version") for c in cells if c.get("host_version")), "?")
            heads.append(f"Claude Code {v}")
        elif n in ("codex", "gemini", "qwen", "opencode", "cline", "kimi"):
            v = next((c.get("host_version") for c in cells if c.get("host_version")), "?")
            label = {'codex': 'Codex', 'gemini': 'Gemini CLI', 'qwen': 'Qwen Code', 'opencode': 'opencode', 'cline': 'Cline', 'kimi': 'Kimi CLI'}[n]
            heads.append(f"{label} {v}")
        else:
            heads.append({"py2": f"Python SDK {py2}", "py1": f"Python SDK {py1}", "ts": f"TypeScript SDK {ts}"}[n])
    print(f"## {heading}\n")
    print("| case | " + " | ".join(heads) + " |")
    print("|---|" + "---|" * len(heads))
    for i, cell in enumerate(runs[names[0]]):
        row = [cell["case"]]
        for n in names:
            c = next((c for c in runs[n] if c["case"] == cell["case"]), None)
            if c is None:
                row.append("-")
                continue
            text = c["verdict"] if c["verdict"].startswith(c["outcome"] + ":") else f"{c['outcome']}: {c['verdict']}"
            row.append(text if c.get("defect") is None else f"**{text}**")
        print("| " + " | ".join(row) + " |")
    print()
    print("Tool result at the model after the death (Claude Code, ms): " + ", ".join(
        f"{c['case']} {c['tool_result_ms'] if c['tool_result_ms'] is not None else 'never'}"
        for c in runs["claude-newest"]) + ".\n")
PY
