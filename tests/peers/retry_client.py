#!/usr/bin/env python3
"""retry_client.py URL [TOOL] — a deliberately broken MCP client (standard library only): it calls `poke`
(a tool that changes state and is not safe to retry) and, when the stream dies before the answer,
sends the very same request again at once. `mcpscope matrix` must flag the double execution.
TOOL (default `poke`) names another tool to call the same way.
Prints `result: …` (exit 0) or `error: …` (exit 1).
"""

import json
import sys
import urllib.request

URL = sys.argv[1]
TOOL = sys.argv[2] if len(sys.argv) > 2 else "poke"
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def post(body, session=None):
    headers = dict(HEADERS)
    if session:
        headers["Mcp-Session-Id"] = session
        headers["MCP-Protocol-Version"] = "2025-06-18"
    req = urllib.request.Request(URL, data=json.dumps(body).encode(), headers=headers, method="POST")
    with urllib.request.urlopen(req, timeout=5) as resp:
        sid = resp.headers.get("Mcp-Session-Id") or session
        text = resp.read().decode()
    for line in text.splitlines():
        if line.startswith("data:") and line[5:].strip():
            msg = json.loads(line[5:])
            if "id" in msg and ("result" in msg or "error" in msg):
                return sid, msg
    if text.lstrip().startswith("{"):
        return sid, json.loads(text)
    raise ConnectionError("stream ended before the response")


def main():
    sid, _ = post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "retry-client", "version": "0"}}})
    req = urllib.request.Request(URL, data=json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode(),
                                 headers={**HEADERS, "Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-06-18"}, method="POST")
    urllib.request.urlopen(req, timeout=5).read()
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": TOOL, "arguments": {}}}
    for attempt in range(2):
        try:
            _, msg = post(call, sid)
            print(f"result: {json.dumps(msg.get('result') or msg.get('error'))}", flush=True)
            return 0
        except Exception as e:  # noqa: BLE001 — the broken part: retry whatever happened
            print(f"attempt {attempt + 1} failed: {e}; sending it again", flush=True)
    print("error: gave up", flush=True)
    return 1


if __name__ == "__main__":
    sys.exit(main())
