#!/usr/bin/env python3
"""py_stdio_server.py — an MCP server over stdio built with the official Python SDK (mcp 2.x).

Tools:
  echo(text)   -> text (and writes `echo: <text>` to stderr)
  slow(steps)  -> `steps` progress notifications ~50 ms apart, then "done"
  hang()       -> writes `HANG` to stderr, then never answers (for killing the process mid-call)

Part of mcpscope's stdio tests; run scripts/setup-peers.sh first to create .venv.
"""

from __future__ import annotations

import sys

import anyio
from mcp.server.mcpserver import Context, MCPServer


def build() -> MCPServer:
    server = MCPServer("mcpscope-py-stdio-peer", version="1.0.0", log_level="WARNING")

    @server.tool(description="Returns its argument.")
    def echo(text: str) -> str:
        print(f"echo: {text}", file=sys.stderr, flush=True)
        return text

    @server.tool(description="Sends `steps` progress notifications, then returns done.")
    async def slow(steps: int, ctx: Context) -> str:
        for i in range(steps):
            await ctx.report_progress(i + 1, steps, f"step {i + 1}")
            await anyio.sleep(0.05)
        return "done"

    @server.tool(description="Never answers.")
    async def hang() -> str:
        print("HANG", file=sys.stderr, flush=True)
        await anyio.sleep(3600)
        return "woke"

    return server


if __name__ == "__main__":
    build().run("stdio")
