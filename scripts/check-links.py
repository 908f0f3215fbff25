#!/usr/bin/env python3
"""check-links.py — checks the relative links of the README and of the book in docs/.

Reads README.md, docs/SUMMARY.md and every chapter SUMMARY.md lists. For each Markdown link or
image whose target is relative (not http(s)://, mailto: or any other scheme), checks that the
target file or directory exists, relative to the file that links to it; when the link has a
`#anchor`, that the target Markdown file (or the file itself, for `#anchor` alone) has a heading
whose id is the anchor (GitHub and mdBook style: lowercase, punctuation other than `-` and `_`
dropped, each space a `-`, a repeated heading `-1`, `-2`, …); and that a Markdown file inside
docs/ that a chapter links to is a chapter too (mdBook renders nothing else). Links inside fenced
code blocks and inline code are not links.

Prints each broken link as `FILE:LINE: LINK — why` and exits 1 if there is any; otherwise prints
one line of summary. Python 3 standard library only.

    python3 scripts/check-links.py [ROOT]
"""

import os
import re
import sys
import urllib.parse
from pathlib import Path

ROOT = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent).resolve()
BOOK = ROOT / "docs"
SUMMARY = BOOK / "SUMMARY.md"

SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
FENCE = re.compile(r"^( {0,3})(`{3,}|~{3,})(.*)$")
# [text](target "title") and ![alt](target); the text may hold one level of brackets.
INLINE = re.compile(
    r"(!?)\[((?:[^\[\]\\]|\\.|\[(?:[^\[\]\\]|\\.)*\])*)\]"
    r"\(\s*(<[^<>\n]*>|(?:[^\s()\\]|\\.|\((?:[^\s()\\]|\\.)*\))*)"
    r"(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^()]*\)))?\s*\)"
)
REFDEF = re.compile(r"^ {0,3}\[((?:[^\[\]\\]|\\.)+)\]:\s*(<[^<>\n]*>|\S+)", re.M)
REFUSE = re.compile(r"(!?)\[((?:[^\[\]\\]|\\.)+)\](?:\[((?:[^\[\]\\]|\\.)*)\])?(?![(:\[])")
HTMLREF = re.compile(r"<(?:a|img)\b[^>]*?\b(?:href|src)\s*=\s*(\"[^\"]*\"|'[^']*')", re.I)
HTMLID = re.compile(r"<[A-Za-z][^>]*?\b(?:id|name)\s*=\s*(\"[^\"]*\"|'[^']*')", re.I)
ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")


def mask_fences(text):
    """The text with fenced code blocks blanked (newlines kept), so that offsets and line
    numbers stay those of the file."""
    out = []
    lines = text.split("\n")
    fence = None
    for line in lines:
        m = FENCE.match(line)
        if fence is None:
            if m and not (m.group(2)[0] == "`" and "`" in m.group(3)):
                fence = m.group(2)
                out.append(" " * len(line))
            else:
                out.append(line)
        else:
            if m and m.group(2)[0] == fence[0] and len(m.group(2)) >= len(fence) and not m.group(3).strip():
                fence = None
            out.append(" " * len(line))
    return "\n".join(out)


def mask_code(text):
    """The text with fenced code blocks and inline code spans blanked (newlines kept)."""
    text = mask_fences(text)
    # Inline code: a run of N backticks up to the next run of exactly N backticks, within the
    # paragraph (never across a blank line).
    blank = re.compile(r"\n[ \t]*\n")
    res = []
    i = 0
    n = len(text)
    while i < n:
        if text[i] != "`" or (i > 0 and text[i - 1] == "\\"):
            res.append(text[i])
            i += 1
            continue
        j = i
        while j < n and text[j] == "`":
            j += 1
        para = blank.search(text, j)
        limit = para.start() if para else n
        end = -1
        for m in re.finditer(r"`+", text[j:limit]):
            if len(m.group(0)) == j - i:
                end = j + m.end()
                break
        if end < 0:
            res.append(text[i:j])
            i = j
        else:
            res.append("".join(c if c == "\n" else " " for c in text[i:end]))
            i = end
    return "".join(res)


def heading_text(raw):
    """The text a heading renders as: links reduced to their text, code and emphasis marks and
    HTML tags dropped."""
    s = re.sub(r"!?\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\([^)]*\)", r"\1", raw)
    s = re.sub(r"<[^>]+>", "", s)
    s = s.replace("`", "")
    s = re.sub(r"(\*+|(?<!\w)_+|_+(?!\w))", "", s)
    s = re.sub(r"\\(.)", r"\1", s)
    return s.strip()


def slug(text):
    out = []
    for ch in text:
        if ch.isalnum() or ch in "-_":
            out.append(ch.lower())
        elif ch.isspace():
            out.append("-")
    return "".join(out)


_anchors = {}


def anchors(path):
    """The ids of a Markdown file's headings (and of HTML elements with an id or name)."""
    if path in _anchors:
        return _anchors[path]
    text = mask_fences(path.read_text(encoding="utf-8"))
    ids = set()
    seen = {}
    lines = text.split("\n")

    def add(title):
        m = re.search(r"\{#([^}\s]+)[^}]*\}\s*$", title)
        if m:
            ids.add(m.group(1))
            return
        base = slug(heading_text(title))
        n = seen.get(base, 0)
        seen[base] = n + 1
        ids.add(base if n == 0 else f"{base}-{n}")

    for i, line in enumerate(lines):
        m = ATX.match(line)
        if m:
            add(m.group(2) or "")
            continue
        if i > 0 and SETEXT.match(line) and lines[i - 1].strip() and not ATX.match(lines[i - 1]) \
                and not lines[i - 1].lstrip().startswith(("-", "*", "+", "|", ">")) and not (i > 1 and lines[i - 2].strip()):
            add(lines[i - 1].strip())
    for m in HTMLID.finditer(mask_code(text)):
        ids.add(m.group(1)[1:-1])
    _anchors[path] = ids
    return ids


def chapters():
    """The Markdown files SUMMARY.md lists, as paths."""
    text = mask_code(SUMMARY.read_text(encoding="utf-8"))
    out = []
    for m in INLINE.finditer(text):
        target = m.group(3).strip("<>")
        if target and not SCHEME.match(target):
            p = (BOOK / urllib.parse.unquote(target.split("#", 1)[0])).resolve()
            if p.suffix == ".md" and p.is_file():
                out.append(p)
    return out


def line_of(text, offset):
    return text.count("\n", 0, offset) + 1


def main():
    if not SUMMARY.is_file():
        print(f"check-links: {SUMMARY.relative_to(ROOT)} not found", file=sys.stderr)
        return 1
    book_chapters = set(chapters())
    files = [ROOT / "README.md", SUMMARY] + sorted(book_chapters)
    broken = []
    links = 0
    for f in files:
        if not f.is_file():
            continue
        raw = f.read_text(encoding="utf-8")
        text = mask_code(raw)
        rel = f.relative_to(ROOT)
        found = []  # (offset, target)
        for m in INLINE.finditer(text):
            if m.start() > 0 and text[m.start() - 1] == "\\":
                continue
            found.append((m.start(), m.group(3)))
        refs = {}
        for m in REFDEF.finditer(text):
            refs.setdefault(m.group(1).strip().lower(), m.group(2))
            found.append((m.start(), m.group(2)))
        for m in HTMLREF.finditer(text):
            found.append((m.start(), m.group(1)[1:-1]))
        for m in REFUSE.finditer(text):
            label = (m.group(3) or m.group(2)).strip().lower()
            if m.group(3) is not None and label and label not in refs:
                broken.append((rel, line_of(text, m.start()), m.group(0), "no definition of this reference"))
        for offset, target in found:
            target = target.strip()
            if target.startswith("<") and target.endswith(">"):
                target = target[1:-1]
            if not target or SCHEME.match(target) or target.startswith("//"):
                continue
            links += 1
            line = line_of(text, offset)
            path_part, _, anchor = target.partition("#")
            path_part = urllib.parse.unquote(path_part.split("?", 1)[0])
            if path_part.startswith("/"):
                dest = (ROOT / path_part.lstrip("/")).resolve()
            elif path_part:
                dest = (f.parent / path_part).resolve()
            else:
                dest = f.resolve()
            if not dest.exists():
                broken.append((rel, line, target, f"{os.path.relpath(dest, ROOT)} does not exist"))
                continue
            if f != ROOT / "README.md" and dest.suffix == ".md" and dest.is_relative_to(BOOK) \
                    and dest not in book_chapters and dest != SUMMARY.resolve():
                broken.append((rel, line, target, f"{os.path.relpath(dest, ROOT)} is not a chapter of the book (SUMMARY.md)"))
                continue
            if anchor:
                if dest.is_dir():
                    broken.append((rel, line, target, "an anchor into a directory"))
                elif dest.suffix == ".md":
                    if urllib.parse.unquote(anchor) not in anchors(dest):
                        broken.append((rel, line, target, f"no heading #{anchor} in {os.path.relpath(dest, ROOT)}"))
    for rel, line, target, why in sorted(broken, key=lambda b: (str(b[0]), b[1])):
        print(f"{rel}:{line}: {target} — {why}")
    sys.stdout.flush()
    if broken:
        print(f"check-links: {len(broken)} broken link(s) in {len(files)} files", file=sys.stderr)
        return 1
    print(f"check-links: {links} relative links in {len(files)} files, all good")
    return 0


if __name__ == "__main__":
    sys.exit(main())
