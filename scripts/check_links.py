#!/usr/bin/python3
"""Checks the relative links of the repository's Markdown files.

  scripts/check_links.py [FILE.md ...]   (default: README.md and docs/**/*.md)

Every link or image that is not a URL must name a file or directory inside the
repository, and a '#fragment' must name a heading of its target (GitHub's
anchors: lower case, punctuation dropped, spaces as hyphens). Links inside
fenced code blocks and code spans are not links. Prints one line per broken
link (file:line: the link and why) and exits 1 if there is any.
"""
import os
import re
import sys
from urllib.parse import unquote

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FENCE = re.compile(r"^\s*(```|~~~)")
CODE_SPAN = re.compile(r"(`+).*?\1")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")
URL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def prose_lines(path, keep_code_spans=False):
    """(line number, text) of path's lines outside fenced code, code spans removed."""
    fenced = None
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            fence = FENCE.match(line)
            if fence:
                if fenced is None:
                    fenced = fence.group(1)
                elif fence.group(1) == fenced:
                    fenced = None
                continue
            if fenced is None:
                yield number, line if keep_code_spans else CODE_SPAN.sub("", line)


def anchor(heading):
    text = re.sub(r"[^\w\- ]", "", CODE_SPAN.sub(lambda m: m.group(0).strip("`"), heading))
    return text.strip().lower().replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        seen, found = {}, set()
        for _, line in prose_lines(path, keep_code_spans=True):
            heading = HEADING.match(line)
            if heading:
                base = anchor(heading.group(1))
                n = seen.get(base, 0)
                seen[base] = n + 1
                found.add(base if n == 0 else f"{base}-{n}")
        cache[path] = found
    return cache[path]


def broken_links(path):
    for number, line in prose_lines(path):
        for target in LINK.findall(line):
            if URL.match(target):
                continue
            file_part, _, fragment = target.partition("#")
            resolved = (os.path.normpath(os.path.join(os.path.dirname(path), unquote(file_part)))
                        if file_part else path)
            if os.path.relpath(resolved, ROOT).startswith(".."):
                yield number, target, "outside the repository"
            elif not os.path.exists(resolved):
                yield number, target, f"no such file: {os.path.relpath(resolved, ROOT)}"
            elif fragment and resolved.endswith(".md") and fragment not in anchors(resolved):
                yield number, target, f"no heading '#{fragment}' in {os.path.relpath(resolved, ROOT)}"


def main(argv):
    paths = argv[1:] or ["README.md"] + sorted(
        os.path.join(d, name) for d, _, names in os.walk(os.path.join(ROOT, "docs"))
        for name in names if name.endswith(".md"))
    paths = [os.path.abspath(os.path.join(ROOT, p)) for p in paths]
    broken = 0
    for path in paths:
        for number, target, why in broken_links(path):
            print(f"{os.path.relpath(path, ROOT)}:{number}: ({target}): {why}")
            broken += 1
    if broken:
        return 1
    print(f"links: {len(paths)} Markdown files, every relative link resolves")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
