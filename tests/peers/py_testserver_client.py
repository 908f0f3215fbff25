#!/usr/bin/env python3
"""py_testserver_client.py URL --style default|legacy — the official Python SDK client (mcp 2.x)
driving every tool, prompt and resource of `mcpscope serve-test` (directly or through mcpscope).

--style default: `mode="auto"` (server/discover at 2026-07-28, no session, input-required rounds,
                 a subscriptions/listen stream told of the counter resource changing).
--style legacy:  `mode="legacy"` (initialize at 2025-11-25, a session, server-to-client requests).

Prints one JSON object with what each call gave back (the text of tool results, names of lists,
the resource update heard): the same server must give the same object directly and through a
proxy. Exit code 0 when the script ran; non-zero with a traceback when a call failed.
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from typing import Any

import anyio
import mcp_types as types
from mcp import Client

COUNTER = "mcpscope://counter"


def text_of(result: Any) -> str:
    parts = []
    for c in result.content:
        if isinstance(c, types.TextContent):
            parts.append(c.text)
        else:
            parts.append(f"<{c.type}>")
    return "|".join(parts)


async def on_sampling(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
    return types.CreateMessageResult(
        role="assistant",
        content=types.TextContent(type="text", text="sampled"),
        model="test-model",
        stop_reason="endTurn",
    )


async def on_elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"response": "Ada"})


async def every_tool(client: Client, out: dict[str, Any]) -> None:
    tools = await client.list_tools()
    out["tools"] = sorted(t.name for t in tools.tools)
    calls: dict[str, Any] = {}
    progress = 0

    async def on_progress(p: float, total: float | None, message: str | None) -> None:
        nonlocal progress
        progress += 1

    args: dict[str, dict[str, Any]] = {
        "echo": {"text": "hello serve-test"},
        "slow": {"steps": 3, "interval_ms": 20},
        "test_sampling": {"prompt": "say something"},
        "test_elicitation": {"message": "your name?"},
        "json_schema_2020_12_tool": {"name": "n", "address": {"city": "c"}},
        "measure": {"value": 1},
    }
    for name in out["tools"]:
        if name in ("peek", "poke", "test_reconnection"):
            continue  # stateful or transport-specific: called below / by the conformance suite
        r = await client.call_tool(name, args.get(name, {}), progress_callback=on_progress)
        text = text_of(r)
        if name == "test_tool_with_progress":
            text = "<token>" if text else ""  # the echoed progress token is the request id
        calls[name] = {"text": text, "is_error": bool(r.is_error)}
    out["progress"] = progress
    before = await client.call_tool("peek", {})
    poked = await client.call_tool("poke", {})
    calls["poke_moves_the_counter"] = int(text_of(poked)) == int(text_of(before)) + 1
    out["calls"] = calls


async def prompts_and_resources(client: Client, out: dict[str, Any]) -> None:
    prompts = await client.list_prompts()
    out["prompts"] = sorted(p.name for p in prompts.prompts)
    got = await client.get_prompt("test_prompt_with_arguments", {"arg1": "a", "arg2": "b"})
    out["prompt_text"] = got.messages[0].content.text
    resources = await client.list_resources()
    out["resources"] = sorted(str(r.uri) for r in resources.resources)
    read = await client.read_resource("test://static-text")
    out["static_text"] = read.contents[0].text
    templ = await client.read_resource("test://template/7/data")
    out["template"] = json.loads(templ.contents[0].text)


async def listen_for_poke(client: Client, out: dict[str, Any]) -> None:
    """2026-07-28: a listen stream on the counter hears of a poke."""
    async with client.listen(resource_subscriptions=[COUNTER]) as sub:
        out["listen_honored"] = list(sub.honored.resource_subscriptions or [])

        async def poke() -> None:
            await client.call_tool("poke", {})

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(poke)
                async for event in sub:
                    out["listen_event"] = f"{type(event).__name__} {getattr(event, 'uri', '')}"
                    break


async def run(args: argparse.Namespace) -> dict[str, Any]:
    mode = "auto" if args.style == "default" else "legacy"
    client = Client(
        args.url,
        mode=mode,
        sampling_callback=on_sampling,
        elicitation_callback=on_elicit,
        cache=None,
    )
    out: dict[str, Any] = {}
    async with client:
        out["protocol"] = client.protocol_version
        await every_tool(client, out)
        await prompts_and_resources(client, out)
        if args.style == "default":
            await listen_for_poke(client, out)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("url")
    ap.add_argument("--style", choices=["default", "legacy"], default="default")
    args = ap.parse_args()
    try:

        async def bounded() -> dict[str, Any]:
            with anyio.fail_after(40):
                return await run(args)

        out = anyio.run(bounded)
    except BaseException:
        traceback.print_exc()
        return 2
    print(json.dumps(out, sort_keys=True), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
