"""What the Python SDK clients (py_client.py, py_stdio_client.py) share: a tool result's text, and
the healthy scenario's tools/list, echo and slow (counting progress notifications)."""

from __future__ import annotations

from typing import Any

import mcp_types as types
from mcp import Client


def text_of(result: types.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def healthy(client: Client) -> dict[str, Any]:
    out: dict[str, Any] = {"protocol": client.protocol_version}
    tools = await client.list_tools()
    out["tools"] = sorted(t.name for t in tools.tools)
    r = await client.call_tool("echo", {"text": "hello mcpscope"})
    out["echo"] = text_of(r)
    count = 0

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        nonlocal count
        count += 1

    r = await client.call_tool("slow", {"steps": 5}, progress_callback=on_progress)
    out["slow"] = text_of(r)
    out["progress"] = count
    return out
