#!/usr/bin/env python3
"""py_server.py PORT [--mode healthy|dies] — an MCP server built with the official Python SDK (mcp 2.x).

Serves Streamable HTTP at http://127.0.0.1:PORT/mcp (PORT 0 picks a free port) and prints
`READY <port>` on stdout once it accepts connections. It speaks every revision the SDK knows:
the `initialize` handshake (2024-11-05 … 2025-11-25, with `Mcp-Session-Id`) and the stateless
2026-07-28 envelope (`server/discover`, MRTR for elicitation).

Tools:
  echo(text)   -> text
  slow(steps)  -> `steps` progress notifications ~50 ms apart, then "done"
  ask()        -> one elicitation (a server-to-client request before 2026-07-28, an
                  InputRequiredResult round trip at 2026-07-28); returns "answer=<value>"
                  or "action=<decline|cancel>"
  peek()       -> "peeked" (annotated readOnlyHint)
  poke()       -> "poked" (no hints). In `--mode dies` the first poke sends one progress
                  notification (so the response has committed to text/event-stream), waits
                  ~300 ms and then the whole process dies (os._exit) before the result.

Part of mcpscope's interop tests; run scripts/setup-peers.sh first to create .venv.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
from typing import Annotated

import anyio
import uvicorn
from mcp.server.mcpserver import Context, Elicit, MCPServer, Resolve
from mcp_types import ToolAnnotations
from pydantic import BaseModel


class Answer(BaseModel):
    value: str


def ask_resolver() -> Elicit[Answer]:
    return Elicit("What value should ask() return?", Answer)


def build(mode: str) -> MCPServer:
    server = MCPServer("mcpscope-py-peer", version="1.0.0", log_level="WARNING")
    poked = {"n": 0}

    @server.tool(description="Returns its argument.")
    def echo(text: str) -> str:
        return text

    @server.tool(description="Sends `steps` progress notifications, then returns done.")
    async def slow(steps: int, ctx: Context) -> str:
        for i in range(steps):
            await ctx.report_progress(i + 1, steps, f"step {i + 1}")
            await anyio.sleep(0.05)
        return "done"

    @server.tool(description="Asks the client a question through elicitation.")
    async def ask(answer: Annotated[Answer, Resolve(ask_resolver)]) -> str:
        return f"answer={answer.value}"

    @server.tool(description="Reads state.", annotations=ToolAnnotations(read_only_hint=True))
    def peek() -> str:
        return "peeked"

    @server.tool(description="Changes state.")
    async def poke(ctx: Context) -> str:
        poked["n"] += 1
        if mode == "dies" and poked["n"] == 1:
            await ctx.report_progress(0, 1, "poking")
            await anyio.sleep(0.3)
            print("DYING", flush=True)
            os._exit(1)
        return "poked"

    return server


def listen(port: int) -> tuple[socket.socket, int]:
    """A listening socket on 127.0.0.1:`port` (0: any free port) and its port."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    return sock, sock.getsockname()[1]


def serve(app, sock: socket.socket, port: int) -> None:
    """Serves `app` on `sock` with uvicorn, says `READY PORT` once it listens, exits 0 when it ends."""
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    userver = uvicorn.Server(config)

    async def run() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: userver.serve(sockets=[sock]))
            while not userver.started:
                await anyio.sleep(0.01)
            print(f"READY {port}", flush=True)

    try:
        anyio.run(run)
    except KeyboardInterrupt:
        pass
    sys.exit(0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("port", type=int)
    ap.add_argument("--mode", choices=["healthy", "dies"], default="healthy")
    args = ap.parse_args()

    server = build(args.mode)
    app = server.streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1")
    sock, port = listen(args.port)
    serve(app, sock, port)


if __name__ == "__main__":
    main()
