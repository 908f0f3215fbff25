#!/usr/bin/env python3
"""py1_client.py URL [--timeout SECONDS] — the healthy scenario of py_client.py with the official
Python SDK 1.x (`streamable_http_client` + `ClientSession`, the `initialize` handshake with a
session), run from .venv-mcp1.

tools/list, echo, slow (counting progress notifications), ask (the elicitation is answered with the
fixed value "42"). Prints one JSON object, the same shape as py_client.py's:
  {"tools": [...], "echo": ..., "slow": ..., "progress": N, "ask": ..., "protocol": "..."}
The whole run is bounded by --timeout seconds (default 20). Exit code 0 when it worked; non-zero
(with a traceback on stderr) when it could not run.
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from typing import Any

import anyio
import mcp.types as types
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

ELICIT_ANSWER = "42"


def text_of(result: types.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def on_elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"value": ELICIT_ANSWER})


async def healthy(url: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    async with streamable_http_client(url) as (read, write, _):
        async with ClientSession(read, write, elicitation_callback=on_elicit) as session:
            init = await session.initialize()
            out["protocol"] = str(init.protocolVersion)
            tools = await session.list_tools()
            out["tools"] = sorted(t.name for t in tools.tools)

            r = await session.call_tool("echo", {"text": "hello mcpscope"})
            out["echo"] = text_of(r)

            count = 0

            async def on_progress(progress: float, total: float | None, message: str | None) -> None:
                nonlocal count
                count += 1

            r = await session.call_tool("slow", {"steps": 5}, progress_callback=on_progress)
            out["slow"] = text_of(r)
            out["progress"] = count

            r = await session.call_tool("ask", {})
            out["ask"] = text_of(r)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("url")
    ap.add_argument("--timeout", type=float, default=20.0)
    args = ap.parse_args()

    async def bounded() -> dict[str, Any]:
        with anyio.fail_after(args.timeout):
            return await healthy(args.url)

    try:
        out = anyio.run(bounded)
    except BaseException:
        traceback.print_exc()
        return 2
    print(json.dumps(out, sort_keys=True), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
