#!/usr/bin/env python3
"""What `cargo package` would publish of each crate of the workspace.

Fails when a package lists a recording, an index, a cache, a build artefact or a peer's
node_modules, or when its files weigh more than 2 MiB: the crates are source; recordings, the
tests' peers and the book stay in the repository. Prints one line per crate.
"""
import json
import os
import re
import subprocess
import sys

LIMIT = 2 << 20
NOT_SOURCE = re.compile(
    r"\.jsonl$|\.idx$|(^|/)recordings/|__pycache__|\.pyc$|node_modules|(^|/)target/|\.venv"
)
GENERATED = {"Cargo.toml", "Cargo.lock", ".cargo_vcs_info.json", "Cargo.toml.orig"}


def main() -> int:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    meta = json.loads(
        subprocess.run(
            ["cargo", "metadata", "--no-deps", "--format-version", "1"],
            cwd=root, check=True, capture_output=True, text=True,
        ).stdout
    )
    status = 0
    for package in meta["packages"]:
        if package.get("publish") == []:
            continue
        name = package["name"]
        here = os.path.dirname(package["manifest_path"])
        listed = subprocess.run(
            ["cargo", "package", "--list", "--allow-dirty", "-p", name],
            cwd=root, check=True, capture_output=True, text=True,
        ).stdout.split()
        bad = [f for f in listed if NOT_SOURCE.search(f)]
        size = sum(
            os.path.getsize(os.path.join(here, f))
            for f in listed
            if f not in GENERATED and os.path.isfile(os.path.join(here, f))
        )
        verdict = "ok"
        if bad:
            verdict = "NOT SOURCE: " + ", ".join(bad[:5])
            status = 1
        elif size > LIMIT:
            verdict = f"larger than {LIMIT >> 20} MiB"
            status = 1
        print(f"check-package: {name}: {len(listed)} files, {size / 1024:.0f} KiB: {verdict}")
    return status


if __name__ == "__main__":
    sys.exit(main())
