#!/usr/bin/env bash
# release.sh — builds the release archive of mcpscope for one target:
#
#   scripts/release.sh [--target TRIPLE] [--profile dist|release] [--out DIR]
#
# dist/mcpscope-VERSION-TRIPLE.tar.xz (and its .sha256) holding the binary, README.md, the
# licences, the shell completions (bash, zsh, fish, elvish, powershell) and the manual page,
# all made by the binary itself. The default target is this machine's, the default profile
# `dist` (whole-program optimised, as benchmarked). Another target needs its Rust standard
# library (`rustup target add TRIPLE`) and a linker for it; the release workflow
# (.github/workflows/release.yml) runs this script on a runner of each platform.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
HOST="$(rustc -vV | sed -n 's/^host: //p')"
TARGET="$HOST"
PROFILE=dist
OUT="$ROOT/dist"
while [ $# -gt 0 ]; do
    case "$1" in
        --target) TARGET=$2; shift 2 ;;
        --profile) PROFILE=$2; shift 2 ;;
        --out) OUT=$2; shift 2 ;;
        *) echo "release: unknown argument $1" >&2; exit 2 ;;
    esac
done
VERSION="$(cargo metadata --no-deps --format-version 1 \
    | python3 -c 'import json,sys; print(next(p["version"] for p in json.load(sys.stdin)["packages"] if p["name"] == "mcpscope"))')"
NAME="mcpscope-$VERSION-$TARGET"
echo "release: building $NAME (profile $PROFILE)" >&2
if [ "$TARGET" = "$HOST" ]; then
    # This machine's: the same build directory as `cargo build --profile PROFILE`.
    cargo build --locked --profile "$PROFILE" --bin mcpscope
    BIN="${CARGO_TARGET_DIR:-$ROOT/target}/$PROFILE/mcpscope"
else
    cargo build --locked --profile "$PROFILE" --target "$TARGET" --bin mcpscope
    BIN="${CARGO_TARGET_DIR:-$ROOT/target}/$TARGET/$PROFILE/mcpscope"
fi
STAGE="$(mktemp -d)"
trap 'rm -rf "$STAGE"' EXIT
mkdir -p "$STAGE/$NAME/completions" "$STAGE/$NAME/man"
cp "$BIN" README.md LICENSE-MIT LICENSE-APACHE "$STAGE/$NAME/"
# The completions and the manual page come from the binary: only when it runs here.
if "$BIN" --version >/dev/null 2>&1; then
    "$BIN" completions bash > "$STAGE/$NAME/completions/mcpscope.bash"
    "$BIN" completions zsh > "$STAGE/$NAME/completions/_mcpscope"
    "$BIN" completions fish > "$STAGE/$NAME/completions/mcpscope.fish"
    "$BIN" completions elvish > "$STAGE/$NAME/completions/mcpscope.elv"
    "$BIN" completions powershell > "$STAGE/$NAME/completions/_mcpscope.ps1"
    "$BIN" man > "$STAGE/$NAME/man/mcpscope.1"
else
    echo "release: $TARGET binaries do not run here: no completions or manual page in the archive" >&2
fi
mkdir -p "$OUT"
tar -C "$STAGE" -cJf "$OUT/$NAME.tar.xz" "$NAME"
if command -v sha256sum >/dev/null; then
    (cd "$OUT" && sha256sum "$NAME.tar.xz" > "$NAME.tar.xz.sha256")
else
    (cd "$OUT" && shasum -a 256 "$NAME.tar.xz" > "$NAME.tar.xz.sha256")
fi
echo "$OUT/$NAME.tar.xz"
