#!/usr/bin/env python3
"""soak.py — the driver behind scripts/soak.sh (see there). Standard library only."""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

FAULTS = [
    "reset after 1 events when tool=poke always",
    "eof after 1 events when tool=slow nth=5",
    "503 when tool=echo nth=7",
]


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def wait_line(proc: subprocess.Popen, pattern: str, seconds: float) -> re.Match:
    deadline = time.monotonic() + seconds
    seen = []
    while time.monotonic() < deadline:
        line = proc.stdout.readline() if proc.stdout else ""
        if not line:
            if proc.poll() is not None:
                break
            continue
        seen.append(line)
        m = re.search(pattern, line)
        if m:
            return m
    raise SystemExit(f"soak: no {pattern!r} within {seconds} s: {''.join(seen)}")


class TmuxProxy:
    """mcpscope with the TUI as its view, in a detached tmux session 200×50 (its stderr to a
    file): what soak.py needs of a Popen (pid, send_signal, communicate)."""

    stderr = None

    def __init__(self, cmd: list[str], stderr_path: Path, env: dict[str, str]):
        self.session = f"mcpscope-soak-{os.getpid()}"
        self.stderr_path = stderr_path
        line = "exec " + " ".join(shlex.quote(c) for c in cmd)
        line += f" 2> {shlex.quote(str(stderr_path))}"
        subprocess.run(["tmux", "new-session", "-d", "-s", self.session, "-x", "200", "-y", "50",
                        line], check=True, env=env)
        out = subprocess.run(["tmux", "display", "-p", "-t", self.session, "#{pane_pid}"],
                             capture_output=True, text=True, check=True)
        self.pid = int(out.stdout.strip())

    def send_signal(self, sig: int) -> None:
        os.kill(self.pid, sig)

    def communicate(self, timeout: float) -> tuple[str, str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and os.path.exists(f"/proc/{self.pid}"):
            time.sleep(0.1)
        subprocess.run(["tmux", "kill-session", "-t", self.session], capture_output=True)
        return "", self.stderr_path.read_text()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mcpscope", required=True)
    ap.add_argument("--python", required=True)
    ap.add_argument("--server", required=True)
    ap.add_argument("--client", required=True)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--minutes", type=float, default=10)
    ap.add_argument("--out", required=True)
    ap.add_argument("--tui", action="store_true",
                    help="the TUI as the view (in tmux, 200x50) instead of --json")
    ap.add_argument("--no-record", action="store_true",
                    help="run the proxy with --no-record (memory of the proxy and view alone)")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    recording = out / "soak.jsonl"
    if recording.exists():
        recording.unlink()
    seconds = args.minutes * 60

    server = subprocess.Popen(
        [args.python, args.server, "0"], stdout=subprocess.PIPE, text=True
    )
    port = int(wait_line(server, r"READY (\d+)", 30).group(1))
    tui_port = free_port() if args.tui else 0
    cmd = [args.mcpscope, "--listen", f"127.0.0.1:{tui_port}", "--upstream",
           f"http://127.0.0.1:{port}/mcp"]
    cmd += [] if args.tui else ["--json"]
    cmd += ["--no-record"] if args.no_record else ["--record", str(recording)]
    for fault in FAULTS:
        cmd += ["--fault", fault]
    env = {**os.environ, "MCPSCOPE_LOG": str(out / "mcpscope.log")}
    listen = None
    deadline = time.monotonic() + 30
    if args.tui:
        log = open(out / "mcpscope.tui.log", "w+")
        proxy = TmuxProxy(cmd, out / "mcpscope.stderr", env)
        while time.monotonic() < deadline and listen is None:
            try:
                socket.create_connection(("127.0.0.1", tui_port), timeout=1).close()
                listen = f"http://127.0.0.1:{tui_port}"
            except OSError:
                time.sleep(0.2)
    else:
        log = open(out / "mcpscope.stderr", "w+")
        notices = open(out / "notices.jsonl", "w")
        proxy = subprocess.Popen(cmd, stdout=notices, stderr=subprocess.PIPE, text=True, env=env)
    while time.monotonic() < deadline and listen is None:
        line = proxy.stderr.readline() if proxy.stderr else ""
        log.write(line)
        m = re.search(r"listening on (http://\S+)", line)
        if m:
            listen = m.group(1)
    if listen is None:
        raise SystemExit("soak: mcpscope did not start")
    url = f"{listen}/mcp"
    print(f"soak: {args.clients} clients × {args.minutes:g} min through {url} "
          f"(faults: {'; '.join(FAULTS)})", flush=True)

    clients = [
        subprocess.Popen([args.python, args.client, url, "--seconds", str(seconds),
                          "--seed", str(i + 1)], stdout=subprocess.PIPE, text=True)
        for i in range(args.clients)
    ]
    samples = []
    start = time.monotonic()
    print(f"{'t (s)':>6} {'RSS (MiB)':>10} {'fds':>5}", flush=True)
    while time.monotonic() - start < seconds + 5:
        sample = (time.monotonic() - start, rss_kib(proxy.pid) / 1024, fds(proxy.pid))
        samples.append(sample)
        print(f"{sample[0]:6.0f} {sample[1]:10.1f} {sample[2]:5d}", flush=True)
        if all(c.poll() is not None for c in clients):
            break
        time.sleep(10)
    stats = {"rounds": 0, "calls": 0, "ok": 0, "failed": 0, "timeouts": 0}
    for c in clients:
        try:
            text, _ = c.communicate(timeout=60)
            for k, v in json.loads(text.strip().splitlines()[-1]).items():
                stats[k] = stats.get(k, 0) + v
        except Exception as e:  # a client that could not report is itself a finding
            print(f"soak: a client did not report: {e}", flush=True)
            c.kill()
    # Idle, then stop the proxy the way a user does.
    time.sleep(10)
    idle = (time.monotonic() - start, rss_kib(proxy.pid) / 1024, fds(proxy.pid))
    proxy.send_signal(signal.SIGTERM)
    _, rest = proxy.communicate(timeout=30)
    log.write(rest)
    log.close()
    server.terminate()
    server.wait(timeout=10)

    lines = recording.read_text().splitlines() if not args.no_record else []
    recorded_lines = len(lines) - 1
    m = re.search(r"recorded (\d+) of (\d+) events", rest)
    written, seen = (int(m.group(1)), int(m.group(2))) if m else (None, None)
    kinds = {}
    opened, ended = set(), set()
    for line in lines[1:]:
        e = json.loads(line)
        kinds[e["kind"]] = kinds.get(e["kind"], 0) + 1
        if e["kind"] == "stream_opened":
            opened.add(e["stream"])
        if e["kind"] == "stream_ended" and e.get("dir") == "server_to_client":
            ended.add(e["stream"])
    steady = samples[len(samples) // 4:] or samples
    rss_first, rss_last = steady[0][1], steady[-1][1]
    fds_first, fds_last = steady[0][2], steady[-1][2]
    print(f"soak: clients: {json.dumps(stats, sort_keys=True)}")
    print(f"soak: RSS {samples[0][1]:.1f} MiB at start, {rss_first:.1f} after warm-up, "
          f"{rss_last:.1f} at the end, {max(s[1] for s in samples):.1f} peak, {idle[1]:.1f} after 10 s idle")
    print(f"soak: fds {samples[0][2]} at start, {fds_first} after warm-up, {fds_last} at the end, "
          f"{idle[2]} after 10 s idle")
    if args.no_record:
        print("soak: recording: off (--no-record)")
    else:
        print(f"soak: recording: {recorded_lines} events in the file; mcpscope says {written} "
              f"recorded of {seen} seen; {len(opened)} exchanges opened, "
              f"{len(ended & opened)} ended")
        print(f"soak: events by kind: {json.dumps(kinds, sort_keys=True)}")
    failures = []
    if not args.no_record and (written is None or written != seen or written != recorded_lines):
        failures.append("the recording does not hold every event seen")
    if opened - ended:
        failures.append(f"{len(opened - ended)} exchanges have no recorded end")
    if rss_last > rss_first * 1.5 + 8:
        failures.append("RSS kept growing")
    if idle[2] > fds_first + 8:
        failures.append("file descriptors kept growing")
    if stats["calls"] == 0:
        failures.append("no call was made")
    for f in failures:
        print(f"soak: FAILED: {f}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
