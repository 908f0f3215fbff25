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
import sys
from urllib.parse import quote

from mcp.server import sse as sse_transport

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from py_server import build, listen, serve  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("port", type=int)
    ap.add_argument("--mode", choices=["healthy", "dies"], default="healthy")
    ap.add_argument("--absolute-endpoint", action="store_true")
    args = ap.parse_args()

    sock, port = listen(args.port)

    if args.absolute_endpoint:
        # The SDK builds the endpoint's data as quote(path) + "?session_id=…"; prefixing the
        # quoted path with this server's origin makes it absolute.
        origin = f"http://127.0.0.1:{port}"
        sse_transport.quote = lambda path: origin + quote(path)

    server = build(args.mode)
    app = server.sse_app(sse_path="/sse", message_path="/messages/", host="127.0.0.1")

    serve(app, sock, port)


if __name__ == "__main__":
    main()
