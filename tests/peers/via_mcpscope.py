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

With --forward first, mcpscope runs as the client's HTTP proxy (`--forward`, its CA in a
throwaway data directory) and the client gets the scenario's own URL with HTTP_PROXY,
HTTPS_PROXY and NODE_USE_ENV_PROXY=1 set.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from urllib.parse import urlsplit, urlunsplit

START_TIMEOUT = 20.0
STOP_TIMEOUT = 10.0


def main() -> int:
    if len(sys.argv) < 5:
        print(__doc__, file=sys.stderr)
        return 2
    argv = sys.argv[1:]
    # --forward: mcpscope as the client's HTTP proxy (`mcpscope --forward`), the URL unchanged.
    forward = argv[0] == "--forward"
    if forward:
        argv = argv[1:]
    mcpscope, notices_dir = argv[0], argv[1]
    client, url = argv[2:-1], argv[-1]
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "run").replace("/", "_")
    os.makedirs(notices_dir, exist_ok=True)
    out = open(os.path.join(notices_dir, f"{scenario}.jsonl"), "wb")
    err_path = os.path.join(notices_dir, f"{scenario}.stderr")
    args = [mcpscope, "--listen", "127.0.0.1:0", "--upstream", url, "--json", "--no-record"]
    proxy_env = dict(os.environ)
    data_dir = None
    if forward:
        # The local CA is made in a throwaway data directory.
        data_dir = tempfile.mkdtemp(prefix="mcpscope-forward-")
        proxy_env["XDG_DATA_HOME"] = data_dir
        args = [mcpscope, "--forward", "--listen", "127.0.0.1:0", "--json", "--no-record"]
    if os.environ.get("MCPSCOPE_PASS_HOST") == "1":
        args.append("--pass-host")
    proxy = subprocess.Popen(
        args, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.PIPE, env=proxy_env
    )
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
        if forward:
            proxy_url = f"http://{address[0]}"
            client_env = dict(os.environ)
            for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
                client_env[name] = proxy_url
            for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
                client_env.pop(name, None)
            client_env["NO_PROXY"] = ""
            client_env["NODE_USE_ENV_PROXY"] = "1"
            code = subprocess.call(client + [url], env=client_env)
        else:
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
        if data_dir is not None:
            shutil.rmtree(data_dir, ignore_errors=True)
    return code


if __name__ == "__main__":
    status = main()
    sys.exit(status)
