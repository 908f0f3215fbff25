#!/usr/bin/env bash
# Checks the dependency graph against deny.toml with cargo-deny (installed if missing):
# licenses, bans and sources always; RustSec advisories when the advisory database can be
# fetched from github.com. Without it the advisories check is skipped with a warning, or fails
# when MCPSCOPE_REQUIRE_ADVISORIES=1.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if ! command -v cargo-deny >/dev/null; then
    echo "deny: installing cargo-deny" >&2
    cargo install --locked cargo-deny
fi

if timeout 300 cargo deny --locked fetch db; then
    exec cargo deny --locked check --hide-inclusion-graph advisories bans licenses sources
fi
if [ "${MCPSCOPE_REQUIRE_ADVISORIES:-0}" = 1 ]; then
    echo "deny: the RustSec advisory database could not be fetched from github.com" >&2
    exit 1
fi
echo "deny: WARNING: the RustSec advisory database could not be fetched from github.com;" \
    "advisories are NOT checked (licenses, bans and sources are)" >&2
exec cargo deny --locked check --hide-inclusion-graph bans licenses sources
