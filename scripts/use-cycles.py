#!/usr/bin/env python3
"""Lists `use` cycles between the source files of each crate of the workspace.

A file uses another when it names an item of the other's module through `crate::`, `super::`
or `self::` (in a `use` or inline in code; comments and string literals are ignored). Files
that reach each other through such uses form a cycle; each cycle (a strongly connected
component of more than one file) is printed with the edges that close it. Exit code 1 when
there is any.

    scripts/use-cycles.py            # every crate under crates/ and the root src/
    scripts/use-cycles.py crates/tui # one crate
"""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def strip(text):
    """The code without comments, string and char literals (kept as blanks)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        elif c == "r" and re.match(r'r#*"', text[i:]) and (i == 0 or not text[i - 1].isalnum()):
            m = re.match(r'r(#*)"', text[i:])
            end = text.find('"' + m.group(1), i + len(m.group(0)))
            i = n if end < 0 else end + 1 + len(m.group(1))
            out.append('""')
        elif c == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            i += 1
            out.append('""')
        elif c == "'" and re.match(r"'(\\.|[^\\'])'", text[i:]):
            i += len(re.match(r"'(\\.|[^\\'])'", text[i:]).group(0))
        else:
            out.append(c)
            i += 1
    return "".join(out)


def modules(src):
    """Module path (tuple) -> file, for every .rs file under `src`."""
    mods = {}
    for f in sorted(src.rglob("*.rs")):
        rel = f.relative_to(src).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] in ("lib", "main") and len(parts) == 1:
            parts = []
        elif parts[-1] == "mod":
            parts = parts[:-1]
        if len(parts) == 1 and parts[0] in ("main",):
            continue
        if parts and parts[0] == "bin":
            continue
        mods[tuple(parts)] = f
    return mods


PATH = re.compile(r"\b(crate|super|self)((?:\s*::\s*(?:\w+|\{))+)")


def expand(code, start):
    """Paths named from `start` (just past `crate`/`super`/`self`), braces expanded."""
    paths = []

    def parse(i, prefix):
        # at "::"
        while True:
            m = re.match(r"\s*::\s*", code[i:])
            if not m:
                paths.append(prefix)
                return i
            i += m.end()
            if code[i : i + 1] == "{":
                i += 1
                while True:
                    m = re.match(r"\s*(\w+)", code[i:])
                    if not m:
                        k = code.find("}", i)
                        return (len(code) if k < 0 else k + 1)
                    name = m.group(1)
                    i += m.end()
                    i = parse(i, prefix + [name])
                    m = re.match(r"\s*(as\s+\w+\s*)?,?\s*", code[i:])
                    i += m.end()
                    if code[i : i + 1] == "}":
                        return i + 1
            m = re.match(r"(\w+)", code[i:])
            if not m:
                paths.append(prefix)
                return i
            prefix = prefix + [m.group(1)]
            i += m.end()

    parse(start, [])
    return paths


def edges_of(mods):
    by_file = {f: m for m, f in mods.items()}
    edges = {}
    for f, here in by_file.items():
        code = strip(f.read_text(encoding="utf-8", errors="replace"))
        is_dir_mod = f.name in ("mod.rs", "lib.rs", "main.rs")
        targets = set()
        for m in PATH.finditer(code):
            head = m.group(1)
            for path in expand(code, m.start(2)):
                if head == "crate":
                    base = ()
                elif head == "self":
                    base = here
                else:
                    base = here[:-1]
                    while path and path[0] == "super":
                        base, path = base[:-1], path[1:]
                full = tuple(base) + tuple(path)
                # The longest prefix that is a module file.
                while full and full not in mods:
                    full = full[:-1]
                target = mods.get(full)
                if target is not None and target != f:
                    targets.add(target)
        _ = is_dir_mod
        edges[f] = targets
    return edges


def cycles(edges):
    """Strongly connected components of more than one file (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def main():
    args = sys.argv[1:]
    if args:
        crates = [ROOT / a for a in args]
    else:
        crates = sorted(p.parent for p in (ROOT / "crates").glob("*/Cargo.toml")) + [ROOT]
    found = 0
    for crate in crates:
        src = crate / "src"
        if not src.is_dir():
            continue
        mods = modules(src)
        edges = edges_of(mods)
        for comp in cycles(edges):
            found += 1
            members = set(comp)
            names = [str(f.relative_to(ROOT)) for f in comp]
            print(f"cycle {found}: " + ", ".join(names))
            for f in comp:
                for t in sorted(edges[f] & members):
                    print(f"    {f.relative_to(ROOT)} -> {t.relative_to(ROOT)}")
    if not found:
        print("no use cycles between files")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
