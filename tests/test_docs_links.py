"""Every relative link in the Markdown files resolves: to a file that exists, and to a heading there.

External (http, https, mailto) links are not fetched: the suite runs without a network.
Anchors follow GitHub's heading slugs: lowercase, punctuation other than `-` and `_` removed,
spaces turned into `-`, and a repeated heading numbered `-1`, `-2`, ...
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Folders holding installed or generated files, never the project's own documentation.
NOT_OURS = {".git", ".venv", "venv", "node_modules", "build", "mutants", ".pytest_cache"}
EXTERNAL = ("http://", "https://", "mailto:")

FENCE = re.compile(r"^ {0,3}(```|~~~).*?^ {0,3}\1", re.MULTILINE | re.DOTALL)
INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[[^\]\n]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^ {0,3}#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)


def markdown_files(root: Path = ROOT) -> list[Path]:
    """The project's Markdown files, outside installed and generated folders."""
    return sorted(
        path
        for path in root.rglob("*.md")
        if not NOT_OURS.intersection(path.relative_to(root).parts[:-1])
    )


def without_code(text: str) -> str:
    """The text with fenced blocks and inline code removed: links there are examples, not links."""
    return INLINE_CODE.sub("", FENCE.sub("", text))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading keeps its text
    text = re.sub(r"[^\w\- ]", "", text.lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every anchor GitHub gives the headings of `path`, duplicates numbered as it numbers them."""
    seen: dict[str, int] = {}
    found: set[str] = set()
    for heading in HEADING.findall(FENCE.sub("", path.read_text(encoding="utf-8"))):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def broken_links(path: Path) -> Iterator[str]:
    """Each relative link in `path` whose file or heading does not exist, as `target: reason`."""
    for target in LINK.findall(without_code(path.read_text(encoding="utf-8"))):
        if target.startswith(EXTERNAL):
            continue
        file_part, _, anchor = target.partition("#")
        linked = (path.parent / file_part).resolve() if file_part else path
        if not linked.exists():
            yield f"{target}: no such file"
        elif anchor and linked.suffix != ".md":
            yield f"{target}: an anchor into a file that has no headings"
        elif anchor and anchor not in anchors(linked):
            yield f"{target}: {linked.name} has no heading with that anchor"


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(path: Path) -> None:
    """Each relative link in the file names an existing file and, with an anchor, a heading in it."""
    assert list(broken_links(path)) == []


def test_the_docs_index_lists_every_page() -> None:
    """docs/README.md links to every other page in docs/."""
    index = (ROOT / "docs" / "README.md").read_text(encoding="utf-8")
    listed = {target.partition("#")[0] for target in LINK.findall(index)}
    pages = {page.name for page in (ROOT / "docs").glob("*.md") if page.name != "README.md"}
    assert pages - listed == set()


def test_a_missing_file_and_a_missing_heading_are_reported(tmp_path: Path) -> None:
    """A link to a missing file or a missing heading is reported; code and external links are not."""
    (tmp_path / "other.md").write_text("# A heading: with `code`\n\n## Twice\n\n## Twice\n")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](other.md#a-heading-with-code) [dup](other.md#twice-1) [self](#top)\n"
        "# Top\n[gone](missing.md) [no heading](other.md#nowhere) [web](https://example.com/x)\n"
        "`[code](missing.md)`\n```\n[fenced](missing.md)\n```\n"
    )
    assert list(broken_links(page)) == [
        "missing.md: no such file",
        "other.md#nowhere: other.md has no heading with that anchor",
    ]


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        (
            "What `make demo` shows: the scenarios and the crash matrix",
            "what-make-demo-shows-the-scenarios-and-the-crash-matrix",
        ),
        ("Key-less database (Microsoft Entra)", "key-less-database-microsoft-entra"),
        ("After deploy: `safetynet audit`", "after-deploy-safetynet-audit"),
        ("snake_case stays", "snake_case-stays"),
    ],
)
def test_slugs_follow_github(heading: str, anchor: str) -> None:
    """A heading's anchor is GitHub's: lowercase, punctuation dropped, spaces as hyphens."""
    assert slug(heading) == anchor
