#!/usr/bin/env python3
"""via_mcpscope.py MCPSCOPE NOTICES_DIR CLIENT_COMMAND... URL — runs an MCP client through a
mcpscope proxy started for this one run (the conformance suite's `client` mode appends the
scenario server's URL to the command it is given).

It starts `MCPSCOPE --listen 127.0.0.1:0 --upstream URL --json --no-record [--pass-host when
MCPSCOPE_PASS_HOST=1]`, reads the bound address from its stderr, runs the client against the same
path on the proxy's address, then stops the proxy (SIGTERM) and writes its JSON notices to
NOTICES_DIR/<scenario>.jsonl (the scenario from MCP_CONFORMANCE_SCENARIO, `/` written as `_`) and
its stderr to NOTICES_DIR/<scenario>.stderr. Exits with the client's exit code; 3 when the proxy
did not start.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from urllib.parse import urlsplit, urlunsplit

START_TIMEOUT = 20.0
STOP_TIMEOUT = 10.0


def main() -> int:
    if len(sys.argv) < 5:
        print(__doc__, file=sys.stderr)
        return 2
    mcpscope, notices_dir = sys.argv[1], sys.argv[2]
    client, url = sys.argv[3:-1], sys.argv[-1]
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "run").replace("/", "_")
    os.makedirs(notices_dir, exist_ok=True)
    out = open(os.path.join(notices_dir, f"{scenario}.jsonl"), "wb")
    err_path = os.path.join(notices_dir, f"{scenario}.stderr")
    args = [mcpscope, "--listen", "127.0.0.1:0", "--upstream", url, "--json", "--no-record"]
    if os.environ.get("MCPSCOPE_PASS_HOST") == "1":
        args.append("--pass-host")
    proxy = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.PIPE)
    assert proxy.stderr is not None
    lines: list[str] = []
    bound = threading.Event()
    address: list[str] = []

    def read_stderr() -> None:
        assert proxy.stderr is not None
        for raw in proxy.stderr:
            line = raw.decode("utf-8", "replace")
            lines.append(line)
            m = re.search(r"listening on http://(\S+)", line)
            if m and not address:
                address.append(m.group(1))
                bound.set()

    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    code = 3
    try:
        if not bound.wait(START_TIMEOUT):
            print(f"via_mcpscope: mcpscope did not start: {''.join(lines)}", file=sys.stderr)
            return 3
        parts = urlsplit(url)
        proxied = urlunsplit(("http", address[0], parts.path, parts.query, parts.fragment))
        code = subprocess.call(client + [proxied])
    finally:
        proxy.send_signal(signal.SIGTERM)
        try:
            proxy.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            proxy.kill()
            proxy.wait()
        reader.join(2.0)
        out.close()
        with open(err_path, "w") as f:
            f.write("".join(lines))
    return code


if __name__ == "__main__":
    status = main()
    sys.exit(status)
