#!/usr/bin/env python3
"""py_client.py URL --style default|legacy --scenario healthy|poke — an MCP client built with the
official Python SDK (mcp 2.x), driving tests/peers/py_server.py (directly or through mcpscope).

--style default: the SDK's default `mode="auto"` (probes `server/discover` at 2026-07-28, no
                 session, `Mcp-Method`/`Mcp-Name` headers; falls back to `initialize` on a 400).
--style legacy:  `mode="legacy"`, the `initialize` handshake with a session at 2025-11-25.
--transport sse: the legacy HTTP+SSE transport (`mcp.client.sse`, revision 2024-11-05): URL is
                 the server's SSE endpoint (e.g. http://127.0.0.1:PORT/sse); implies --style legacy.

Scenario healthy: tools/list, echo, slow (counting progress notifications), ask (the elicitation is
answered with the fixed value "42"). Prints one JSON object:
  {"tools": [...], "echo": ..., "slow": ..., "progress": N, "ask": ..., "protocol": "..."}
Scenario poke: calls `poke` once (with a progress callback) and prints
  {"outcome": "error"|"result"|"timeout", "error": "...", "elapsed_ms": N, "protocol": "...",
   "progress": N, "result": "..."}
Scenario poke_slow: `slow` (200 steps, ~10 s) and, 0.3 s later, `poke`, both pending at once;
prints what poke prints plus {"slow_outcome": "error"|"result", "slow_error": "..."}.
The poke call is bounded by --timeout seconds (default 20). Exit code 0 whenever the script itself
worked, even if the tool call failed; non-zero (with a message on stderr) when it could not run.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from typing import Any

import anyio
import mcp_types as types
from mcp import Client
from mcp.client.sse import sse_client
from py_common import healthy, text_of

ELICIT_ANSWER = "42"


async def on_elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"value": ELICIT_ANSWER})


async def healthy_with_ask(client: Client) -> dict[str, Any]:
    out = await healthy(client)
    r = await client.call_tool("ask", {})
    out["ask"] = text_of(r)
    return out


async def poke(client: Client, timeout: float) -> dict[str, Any]:
    out: dict[str, Any] = {"protocol": client.protocol_version, "progress": 0}

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        out["progress"] += 1

    start = time.monotonic()
    try:
        with anyio.fail_after(timeout):
            r = await client.call_tool("poke", {}, progress_callback=on_progress)
        out["outcome"] = "error" if r.is_error else "result"
        out["result"] = text_of(r)
        out["error"] = text_of(r) if r.is_error else ""
    except TimeoutError:
        out["outcome"] = "timeout"
        out["error"] = f"no answer within {timeout} s"
    except Exception as e:  # the SDK's error for a dead stream, whatever its class
        out["outcome"] = "error"
        out["error"] = f"{type(e).__name__}: {e}"
    out["elapsed_ms"] = int((time.monotonic() - start) * 1000)
    return out


async def poke_slow(client: Client, timeout: float) -> dict[str, Any]:
    slow: dict[str, Any] = {}

    async def run_slow() -> None:
        try:
            r = await client.call_tool("slow", {"steps": 200})
            slow["slow_outcome"] = "error" if r.is_error else "result"
            slow["slow_error"] = text_of(r) if r.is_error else ""
        except Exception as e:  # the SDK's error for a dead stream, whatever its class
            slow["slow_outcome"] = "error"
            slow["slow_error"] = f"{type(e).__name__}: {e}"

    async with anyio.create_task_group() as tg:
        tg.start_soon(run_slow)
        await anyio.sleep(0.3)
        out = await poke(client, timeout)
    out.update(slow)
    return out


async def run(args: argparse.Namespace) -> dict[str, Any]:
    mode = "auto" if args.style == "default" and args.transport == "http" else "legacy"
    server: Any = sse_client(args.url) if args.transport == "sse" else args.url
    client = Client(server, mode=mode, elicitation_callback=on_elicit, cache=None)
    result: dict[str, Any] = {}
    try:
        async with client:
            if args.scenario == "healthy":
                result = await healthy_with_ask(client)
            elif args.scenario == "poke_slow":
                result = await poke_slow(client, args.timeout)
            else:
                result = await poke(client, args.timeout)
    except BaseException as e:
        # Closing the transport after a dead server may itself raise; the scenario's answer stands.
        if not result:
            raise
        if not isinstance(e, Exception):
            raise
        result["close_error"] = f"{type(e).__name__}: {e}"
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("url")
    ap.add_argument("--style", choices=["default", "legacy"], default="default")
    ap.add_argument("--scenario", choices=["healthy", "poke", "poke_slow"], default="healthy")
    ap.add_argument("--transport", choices=["http", "sse"], default="http")
    ap.add_argument("--timeout", type=float, default=20.0)
    args = ap.parse_args()
    try:
        with_deadline = args.timeout + 10.0

        async def bounded() -> dict[str, Any]:
            with anyio.fail_after(with_deadline):
                return await run(args)

        out = anyio.run(bounded)
    except BaseException:
        traceback.print_exc()
        return 2
    print(json.dumps(out, sort_keys=True), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
