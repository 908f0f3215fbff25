#!/usr/bin/env python3
"""py_sse_server.py PORT [--mode healthy|dies] [--absolute-endpoint] — an MCP server on the
legacy HTTP+SSE transport (revision 2024-11-05) built with the official Python SDK (mcp 2.x,
`mcp.server.sse`).

Serves the SSE stream at http://127.0.0.1:PORT/sse (its first event, `endpoint`, names
`/messages/?session_id=…`, where the client posts) and prints `READY <port>` on stdout once it
accepts connections. The tools are those of py_server.py (echo, slow, ask, peek, poke; `--mode
dies` kills the process in the middle of the first poke).

--absolute-endpoint: the `endpoint` event names an absolute URL on this server's own origin
(`http://127.0.0.1:PORT/messages/?session_id=…`), as some deployed servers do; a client that
connected through a proxy refuses it unless the proxy rewrites it.

Part of mcpscope's interop tests; run scripts/setup-peers.sh first to create .venv.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
from urllib.parse import quote

import anyio
import uvicorn
from mcp.server import sse as sse_transport

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from py_server import build  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("port", type=int)
    ap.add_argument("--mode", choices=["healthy", "dies"], default="healthy")
    ap.add_argument("--absolute-endpoint", action="store_true")
    args = ap.parse_args()

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", args.port))
    sock.listen(128)
    port = sock.getsockname()[1]

    if args.absolute_endpoint:
        # The SDK builds the endpoint's data as quote(path) + "?session_id=…"; prefixing the
        # quoted path with this server's origin makes it absolute.
        origin = f"http://127.0.0.1:{port}"
        sse_transport.quote = lambda path: origin + quote(path)

    server = build(args.mode)
    app = server.sse_app(sse_path="/sse", message_path="/messages/", host="127.0.0.1")

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


if __name__ == "__main__":
    main()
