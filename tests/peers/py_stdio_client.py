#!/usr/bin/env python3
"""py_stdio_client.py --style default|legacy --scenario healthy|hang -- COMMAND ARGS… — an MCP
client built with the official Python SDK (mcp 2.x) that launches COMMAND as a stdio server
(`mcp.client.stdio`), directly or through `mcpscope stdio`.

Scenario healthy: tools/list, echo, slow (counting progress notifications). Prints one JSON
object: {"tools": [...], "echo": ..., "slow": ..., "progress": N, "protocol": "..."}
Scenario hang: calls `hang` (bounded by --timeout seconds) and prints
  {"outcome": "error"|"result"|"timeout", "error": "...", "elapsed_ms": N}
Exit code 0 whenever the script itself worked.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from py_common import healthy, text_of


async def hang(client: Client, timeout: float) -> dict[str, Any]:
    start = time.monotonic()
    out: dict[str, Any] = {}
    try:
        with anyio.fail_after(timeout):
            r = await client.call_tool("hang", {})
        out["outcome"] = "result"
        out["result"] = text_of(r)
    except TimeoutError:
        out["outcome"] = "timeout"
    except Exception as e:  # noqa: BLE001 — the test reads what the SDK raised
        out["outcome"] = "error"
        out["error"] = f"{type(e).__name__}: {e}"
    out["elapsed_ms"] = int((time.monotonic() - start) * 1000)
    return out


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--style", choices=["default", "legacy"], default="default")
    ap.add_argument("--scenario", choices=["healthy", "hang"], default="healthy")
    ap.add_argument("--timeout", type=float, default=20)
    ap.add_argument("command", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    params = StdioServerParameters(command=command[0], args=command[1:])
    mode = "legacy" if args.style == "legacy" else "auto"
    out: dict[str, Any]
    try:
        async with Client(params, mode=mode) as client:
            if args.scenario == "healthy":
                out = await healthy(client)
            else:
                out = await hang(client, args.timeout)
    except Exception as e:  # noqa: BLE001
        if args.scenario == "healthy":
            raise
        # The hang scenario's server is killed: leaving the client may fail too.
        out = locals().get("out") or {"outcome": "error", "error": f"{type(e).__name__}: {e}"}
    print(json.dumps(out, sort_keys=True), flush=True)


if __name__ == "__main__":
    anyio.run(main)
