#!/usr/bin/env python3
"""task_client.py URL [--reask] — a small task-aware MCP client (standard library only, 2025-11-25):
it calls `slow_task` (ms 800) as a task-augmented `tools/call`, polls `tasks/get` once, then waits
for the result with `tasks/result`. When that wait fails (its stream dies), with --reask it asks
`tasks/result` again, as a correct client does (the task lives on the server); without it, it gives
up at once: the defect `mcpscope matrix` must name.
Prints `result: …` (exit 0) or `error: …` (exit 1).
"""

import json
import sys
import urllib.request

URL = sys.argv[1]
REASK = "--reask" in sys.argv[2:]
VERSION = "2025-11-25"
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def post(body, session=None):
    headers = dict(HEADERS)
    if session:
        headers["Mcp-Session-Id"] = session
        headers["MCP-Protocol-Version"] = VERSION
    req = urllib.request.Request(URL, data=json.dumps(body).encode(), headers=headers, method="POST")
    with urllib.request.urlopen(req, timeout=10) as resp:
        sid = resp.headers.get("Mcp-Session-Id") or session
        text = resp.read().decode()
    for line in text.splitlines():
        if line.startswith("data:") and line[5:].strip():
            msg = json.loads(line[5:])
            if "id" in msg and ("result" in msg or "error" in msg):
                return sid, msg
    if text.lstrip().startswith("{"):
        return sid, json.loads(text)
    if not text and body.get("id") is None:
        return sid, None
    raise ConnectionError("stream ended before the response")


def main():
    sid, _ = post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": VERSION, "capabilities": {},
        "clientInfo": {"name": "task-client", "version": "0"}}})
    post({"jsonrpc": "2.0", "method": "notifications/initialized"}, sid)
    _, created = post({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "slow_task", "arguments": {"ms": 800}, "task": {"ttl": 60000}}}, sid)
    task_id = created["result"]["task"]["taskId"]
    post({"jsonrpc": "2.0", "id": 3, "method": "tasks/get", "params": {"taskId": task_id}}, sid)
    for attempt in range(3 if REASK else 1):
        try:
            _, msg = post({"jsonrpc": "2.0", "id": 4 + attempt, "method": "tasks/result",
                           "params": {"taskId": task_id}}, sid)
            print(f"result: {json.dumps(msg.get('result') or msg.get('error'))}", flush=True)
            return 0
        except Exception as e:  # noqa: BLE001 — a dead wait: ask again (with --reask)
            print(f"tasks/result attempt {attempt + 1} failed: {e}", flush=True)
    print("error: gave up on the task", flush=True)
    return 1


if __name__ == "__main__":
    sys.exit(main())
