#!/usr/bin/env python3
"""py_soak_client.py URL --seconds S [--seed N] — one official-SDK client (PyPI `mcp`) calling
random tools in a loop until S seconds have passed, for scripts/soak.sh.

Each round opens a client (alternating the SDK's default mode and the legacy `initialize`
handshake), makes a few calls of echo / slow / peek / poke, each bounded by a short timeout, and
closes it. Faults armed in the proxy make some of them fail: every failure is counted, never
fatal. Prints one JSON object at the end: {"rounds", "calls", "ok", "failed", "timeouts"}.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time

import anyio
from mcp import Client

CALL_TIMEOUT = 4.0


async def one_round(url: str, mode: str, rng: random.Random, stats: dict[str, int]) -> None:
    client = Client(url, mode=mode, cache=None)
    async with client:
        for _ in range(rng.randint(1, 6)):
            tool, args = rng.choice(
                [("echo", {"text": "soak"}), ("slow", {"steps": 3}), ("peek", {}), ("poke", {})]
            )
            stats["calls"] += 1
            try:
                with anyio.fail_after(CALL_TIMEOUT):
                    result = await client.call_tool(tool, args)
                stats["failed" if result.is_error else "ok"] += 1
            except TimeoutError:
                stats["timeouts"] += 1
                return  # a hung call: start over with a new client
            except Exception:
                stats["failed"] += 1
                return


async def soak(url: str, seconds: float, seed: int) -> dict[str, int]:
    rng = random.Random(seed)
    stats = {"rounds": 0, "calls": 0, "ok": 0, "failed": 0, "timeouts": 0}
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        stats["rounds"] += 1
        mode = "auto" if stats["rounds"] % 2 else "legacy"
        try:
            with anyio.fail_after(CALL_TIMEOUT * 8):
                await one_round(url, mode, rng, stats)
        except Exception:  # closing after a fault may raise; the round still counts
            pass
    return stats


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("url")
    ap.add_argument("--seconds", type=float, required=True)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    stats = anyio.run(soak, args.url, args.seconds, args.seed)
    print(json.dumps(stats, sort_keys=True), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
