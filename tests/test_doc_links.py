"""Citations of the repository's documents cannot rot.

Code comments cite facts as ``docs/<page>.md#<anchor>``; markdown pages link
each other as ``[text](page.md#anchor)``. Every such citation must name a file
that exists and, when it has an anchor, a heading of that file whose GitHub
slug is the anchor. And no text may cite documents a maintainer of this
repository cannot open (the notes the code was first written from).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: Where citations live: the package, tests, benchmarks, examples and the docs.
SCANNED = ("managoat_sandbox", "tests", "bench", "examples", "docs")
SUFFIXES = {".py", ".md", ".txt", ".toml", ".cfg", ".ini", ".sh"}

#: ``docs/...md`` with an optional ``#anchor``, as cited from anywhere.
CITATION = re.compile(r"(?<![\w/.-])(docs/[\w-]+(?:/[\w-]+)*\.md)(?:#([\w-]+))?")
#: A markdown link target: ``page.md#anchor``, ``page.md`` or ``#anchor``.
MD_LINK = re.compile(r"\]\((?!https?:|mailto:)([^)\s#]*)(?:#([^)\s]+))?\)")
HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$")
FENCE = re.compile(r"^[ \t]*(```|~~~)")
#: How outside documents used to be cited: a section sign, or their names.
OUTSIDE = re.compile(
    r"§|\bSPEC\.md\b|\bDESIGN\.md\b|\berrata\b|shared/reference|"
    r"\breference(?:'s)? (?:errata|§)",
    re.IGNORECASE,
)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower-cased, punctuation but ``-``/``_`` dropped,
    spaces turned into hyphens (inline markup such as backticks is punctuation)."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip()).lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


@cache
def anchors(path: Path) -> frozenset[str]:
    """Every heading anchor of a markdown file (repeated headings get ``-1``, ``-2``…)."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    fenced = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        match = None if fenced else HEADING.match(line)
        if match is None:
            continue
        base = slug(match[1])
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return frozenset(found)


def scanned_files() -> Iterator[Path]:
    for top in SCANNED:
        for path in sorted((ROOT / top).rglob("*")):
            if path.is_file() and path.suffix in SUFFIXES and "__pycache__" not in path.parts:
                yield path


def citations() -> Iterator[tuple[Path, int, Path, str | None]]:
    """(citing file, line, cited file, anchor) for every citation in the scanned files."""
    for path in scanned_files():
        text = path.read_text(encoding="utf-8", errors="replace")
        for number, line in enumerate(text.splitlines(), 1):
            for match in CITATION.finditer(line):
                yield path, number, ROOT / match[1], match[2]
            if path.suffix == ".md":
                for match in MD_LINK.finditer(line):
                    target = path if not match[1] else path.parent / match[1]
                    if target.suffix == ".md" or not match[1]:
                        yield path, number, target, match[2]


def shown(path: Path) -> str:
    """``path`` relative to the repository when it is inside it."""
    return os.path.relpath(path, ROOT)


def broken(cited: Path, anchor: str | None) -> str | None:
    if not cited.resolve().is_file():
        return "no such file"
    if anchor is not None and anchor not in anchors(cited.resolve()):
        return f"no heading with anchor #{anchor}"
    return None


def test_slug_follows_github() -> None:
    assert slug("Exit frame is one byte") == "exit-frame-is-one-byte"
    assert slug("`create_new`") == "create_new"
    assert slug("Sandbox answers and the envd access token") == (
        "sandbox-answers-and-the-envd-access-token"
    )
    assert slug("Retry-After") == "retry-after"
    assert slug("Listing (v2), metadata & paging") == "listing-v2-metadata--paging"


def test_repeated_headings_get_numbered_anchors(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Top\n## Errors\n```\n## Not a heading\n```\n## Errors\n")
    assert anchors(page) == {"top", "errors", "errors-1"}


def test_the_protocol_pages_are_cited_from_the_code() -> None:
    cited = {(c.resolve(), a) for p, _, c, a in citations() if p.suffix == ".py" and a}
    pages = {path.resolve() for path, _ in cited}
    assert {
        ROOT / "docs" / "protocols" / f"{name}.md"
        for name in ("contract", "sprites", "e2b", "daytona")
    } <= pages


def test_every_cited_document_and_anchor_exists() -> None:
    problems = [
        f"{shown(path)}:{line}: {shown(cited)}{'#' + anchor if anchor else ''}: {why}"
        for path, line, cited, anchor in citations()
        if (why := broken(cited, anchor)) is not None
    ]
    assert problems == []


@pytest.mark.parametrize("top", SCANNED)
def test_no_citation_of_documents_outside_the_repository(top: str) -> None:
    here = Path(__file__).resolve()
    hits = [
        f"{shown(path)}:{number}: {line.strip()}"
        for path in scanned_files()
        if path.is_relative_to(ROOT / top) and path != here
        for number, line in enumerate(
            path.read_text(encoding="utf-8", errors="replace").splitlines(), 1
        )
        if OUTSIDE.search(line)
    ]
    assert hits == []
