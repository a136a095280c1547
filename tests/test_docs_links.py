"""README.md and docs/*.md point only at files and sections that exist.

For every page:

* every Markdown link (or image) whose target is a relative path, such as
  ``[x](metrics.md)`` or ``[x](../examples/word_count.py#L3)``, names a file or folder
  of the repository, relative to the page;
* every ``#anchor`` of such a link (or of a link within the page) is the slug of a
  heading of the target page, by GitHub's rules: the heading's text, lowercased, with
  punctuation dropped (hyphens and underscores kept) and spaces turned into hyphens; a
  repeated slug gets ``-1``, ``-2``, ...;
* every repository path it cites, in prose, in a code span or in a code block
  (``examples/...py``, ``docs/...md``, ``squall/...py``, ``bench/...md``,
  ``tests/...py``), exists, relative to the repository's root, and so does every path
  of the package cited without its ``squall/`` (``runtime/collectors.py``); setup.py and
  pyproject.toml are held to the same;
* every ``.md`` file name mentioned anywhere outside code blocks (in prose or in a code
  span) is a file of the repository: a path, relative to the page or to the root, or a
  bare name that some Markdown file of the repository has.

Apart from repository paths, fenced code blocks are left out: their lines are code, not
prose (a ``#`` comment there is no heading). Links to other sites (``https:``,
``mailto:``) are not followed.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = [
    ROOT / "README.md",
    ROOT / "examples" / "storm_starter" / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
]

_FENCE = re.compile(r"^ {0,3}(```|~~~).*?^ {0,3}\1[^\n]*$", re.MULTILINE | re.DOTALL)
_CODE_SPAN = re.compile(r"`([^`]+)`")
_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
_LINK_TARGET = re.compile(r"\]\([^)]*\)")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$", re.MULTILINE)
_REPO_PATH = re.compile(r"(?<![\w./-])((?:examples|docs|squall|bench|tests)/[\w./-]*\.(?:py|md))\b")
#: The package's subpackages, as a page names them without ``squall/``.
_SUBPACKAGES = sorted(
    path.name for path in (ROOT / "squall").iterdir() if (path / "__init__.py").exists()
)
_PACKAGE_PATH = re.compile(
    rf"(?<![\w./-])((?:{'|'.join(_SUBPACKAGES)})/[\w./-]*\.py)\b" if _SUBPACKAGES else r"(?!)"
)
#: Files other than pages whose citations of repository paths are checked.
CITING_FILES = [ROOT / "setup.py", ROOT / "pyproject.toml"]
_MD_NAME = re.compile(r"(?<![\w./-])((?:\.{1,2}/)*[\w-][\w.-]*(?:/[\w.-]+)*\.md)\b")


@dataclass(frozen=True)
class Found:
    """Something a page refers to, with the line it is on."""

    line: int
    text: str


def _blank(match: re.Match[str]) -> str:
    """The match with every character but line breaks replaced by spaces."""
    return re.sub(r"[^\n]", " ", match[0])


def _line(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


@cache
def prose(path: Path) -> str:
    """``path``'s text with fenced code blocks blanked out (line numbers kept)."""
    return _FENCE.sub(_blank, path.read_text(encoding="utf-8"))


def code_spans(path: Path) -> Iterator[Found]:
    """The code spans of ``path``'s prose."""
    text = prose(path)
    for match in _CODE_SPAN.finditer(text):
        yield Found(_line(text, match.start()), match[1])


def links(path: Path) -> Iterator[Found]:
    """The targets of ``path``'s links and images (code spans are not links)."""
    text = _CODE_SPAN.sub(lambda match: "`" + "x" * (len(match[0]) - 2) + "`", prose(path))
    for match in _LINK.finditer(text):
        yield Found(_line(text, match.start()), match[1])


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's Markdown text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link counts as its text
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


@cache
def anchors(path: Path) -> frozenset[str]:
    """The anchors of ``path``'s headings (repeats numbered as GitHub numbers them)."""
    seen: dict[str, int] = {}
    result: set[str] = set()
    for match in _HEADING.finditer(prose(path)):
        base = slug(match[2])
        count = seen.get(base, 0)
        seen[base] = count + 1
        result.add(base if count == 0 else f"{base}-{count}")
    return frozenset(result)


@cache
def markdown_files() -> frozenset[Path]:
    """The repository's Markdown files (hidden folders such as .venv left out)."""
    return frozenset(
        path
        for path in ROOT.rglob("*.md")
        if not any(part.startswith(".") for part in path.relative_to(ROOT).parts)
    )


def _where(path: Path, found: Found) -> str:
    return f"{path.relative_to(ROOT).as_posix()}:{found.line}: {found.text}"


def broken_links(path: Path) -> list[str]:
    """Links of ``path`` to a missing file, or to a heading its target does not have."""
    broken = []
    for found in links(path):
        target = found.text
        if not target or _SCHEME.match(target):
            continue
        file_part, _, anchor = target.partition("#")
        destination = (path.parent / file_part).resolve() if file_part else path
        if not destination.is_relative_to(ROOT) or not destination.exists():
            broken.append(_where(path, found) + " (no such file)")
        elif anchor and destination.suffix != ".md":
            continue  # line anchors of source files (#L10) are GitHub's, not headings
        elif anchor and anchor not in anchors(destination):
            broken.append(_where(path, found) + " (no such heading)")
    return broken


def missing_repository_paths(path: Path) -> list[str]:
    """Repository paths cited anywhere in ``path`` (prose, code spans, code blocks) that
    do not exist: rooted ones (``docs/x.md``) and the package's without ``squall/``
    (``runtime/x.py``)."""
    text = path.read_text(encoding="utf-8")
    missing = [
        (match.start(), match[1])
        for match in _REPO_PATH.finditer(text)
        if not (ROOT / match[1]).exists()
    ]
    missing += [
        (match.start(), match[1])
        for match in _PACKAGE_PATH.finditer(text)
        if not (ROOT / "squall" / match[1]).exists()
    ]
    return [_where(path, Found(_line(text, start), name)) for start, name in sorted(missing)]


def _is_repository_md(path: Path, name: str) -> bool:
    if "/" in name:
        return any((base / name).resolve() in markdown_files() for base in (path.parent, ROOT))
    return any(file.name == name for file in markdown_files())


def unknown_md_names(path: Path) -> list[str]:
    """``.md`` names mentioned in ``path`` (outside code blocks and link targets, which
    :func:`broken_links` checks) that are no file of the repository."""
    text = _LINK_TARGET.sub(_blank, prose(path))
    return [
        _where(path, Found(_line(text, match.start()), match[1]))
        for match in _MD_NAME.finditer(text)
        if not _is_repository_md(path, match[1])
    ]


def _page(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


@pytest.mark.parametrize("page", DOCUMENTS, ids=_page)
def test_links_reach_existing_files_and_headings(page: Path) -> None:
    assert broken_links(page) == []


@pytest.mark.parametrize("page", DOCUMENTS + CITING_FILES, ids=_page)
def test_repository_paths_cited_exist(page: Path) -> None:
    assert missing_repository_paths(page) == []


@pytest.mark.parametrize("page", DOCUMENTS, ids=_page)
def test_md_file_names_mentioned_are_files_of_the_repository(page: Path) -> None:
    assert unknown_md_names(page) == []


# --- the checks themselves ------------------------------------------------------------


def test_slugs_follow_githubs_rules() -> None:
    assert slug("Backpressure: bounded queues") == "backpressure-bounded-queues"
    assert slug("`squall drpc`") == "squall-drpc"
    assert slug("Count windows on event time") == "count-windows-on-event-time"
    assert slug("The `__system` stream") == "the-__system-stream"
    assert slug("Limits, sizing & defaults (v2.0)") == "limits-sizing--defaults-v20"
    assert slug("See [metrics](metrics.md)") == "see-metrics"


def test_the_checks_find_what_is_broken(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path)
    (tmp_path / "docs").mkdir()
    (tmp_path / "examples").mkdir()
    (tmp_path / "examples" / "real.py").write_text("")
    (tmp_path / "squall" / "runtime").mkdir(parents=True)
    (tmp_path / "squall" / "runtime" / "real.py").write_text("")
    monkeypatch.setattr(f"{__name__}._PACKAGE_PATH", re.compile(r"(?<![\w./-])(runtime/\S*\.py)"))
    (tmp_path / "docs" / "other.md").write_text("# Other page\n\n## A `section`: here\n")
    page = tmp_path / "docs" / "page.md"
    page.write_text(
        "# Page\n"
        "[ok](other.md#a-section-here) [ok](../examples/real.py) [ok](#page) "
        "[web](https://example.org/x.md)\n"
        "[gone](missing.md) [bad anchor](other.md#nowhere) [here](#nothing)\n"
        "`examples/real.py` and `python examples/gone.py`, see other.md and API.md.\n"
        "```python\n# not a heading\nprint('docs/inside_code.md')\n```\n"
        "In prose, docs/gone.md; runtime/real.py and runtime/gone.py, squall/runtime/real.py.\n"
    )
    setup = tmp_path / "setup.py"
    setup.write_text('"""The build (docs/performance.md, docs/other.md)."""\n')
    markdown_files.cache_clear()
    try:
        assert broken_links(page) == [
            "docs/page.md:3: missing.md (no such file)",
            "docs/page.md:3: other.md#nowhere (no such heading)",
            "docs/page.md:3: #nothing (no such heading)",
        ]
        assert missing_repository_paths(page) == [
            "docs/page.md:4: examples/gone.py",
            "docs/page.md:7: docs/inside_code.md",
            "docs/page.md:9: docs/gone.md",
            "docs/page.md:9: runtime/gone.py",
        ]
        assert missing_repository_paths(setup) == ["setup.py:1: docs/performance.md"]
        assert unknown_md_names(page) == ["docs/page.md:4: API.md", "docs/page.md:9: docs/gone.md"]
    finally:
        markdown_files.cache_clear()
