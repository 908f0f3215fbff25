#!/usr/bin/env python3
"""py_matrix_client.py URL [--tool slow] [--legacy] — one tool call with the official Python SDK, as
`mcpscope matrix` runs a client: works with mcp 2.x (`mcp.Client`) and with mcp 1.x
(`streamablehttp_client` + `ClientSession`), whichever the interpreter has.

Calls the tool once (`slow` with 3 progress steps 150 ms apart by default) and prints
`result: TEXT` with exit code 0, or `error: WHAT` with exit code 1. No timeout of its own: a call
whose answer never comes waits as long as the SDK lets it.
"""

from __future__ import annotations

import argparse
import sys
from importlib.metadata import version

import anyio

ARGS = {"slow": {"steps": 3, "interval_ms": 150}, "echo": {"text": "hello"}, "poke": {}, "peek": {}}


def text_of(result) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


async def call_v2(url: str, tool: str, legacy: bool) -> str:
    from mcp import Client

    async with Client(url, mode="legacy" if legacy else "auto", cache=None) as client:
        r = await client.call_tool(tool, ARGS.get(tool, {}), progress_callback=on_progress)
        return text_of(r)


async def call_v1(url: str, tool: str, legacy: bool) -> str:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamablehttp_client

    async with streamablehttp_client(url) as (read, write, _):
        async with ClientSession(read, write) as session:
            await session.initialize()
            r = await session.call_tool(tool, ARGS.get(tool, {}), progress_callback=on_progress)
            return text_of(r)


async def on_progress(progress: float, total: float | None, message: str | None) -> None:
    print(f"progress {progress}", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("url")
    ap.add_argument("--tool", default="slow")
    ap.add_argument("--legacy", action="store_true")
    args = ap.parse_args()
    call = call_v2 if version("mcp").startswith("2.") else call_v1
    try:
        text = anyio.run(call, args.url, args.tool, args.legacy)
    except BaseException as e:  # noqa: BLE001 — whatever the SDK raised is the answer
        while isinstance(e, BaseExceptionGroup) and e.exceptions:
            e = e.exceptions[0]
        print(f"error: {type(e).__name__}: {e}", flush=True)
        return 1
    print(f"result: {text}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
