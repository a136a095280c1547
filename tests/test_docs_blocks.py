"""Every ```python code block of README.md and docs/*.md runs on its own.

A user copies one block, not a page: so each block is a test case of its own, run in a
fresh namespace (a module of its own), with nothing defined by the blocks before it. A
case is named by its page and the line its block starts on (``README.md:120``).

The blocks of docs/connectors.md talk to Redis, PostgreSQL and Kafka: they read the
servers' addresses from ``REDIS_URL``, ``POSTGRES_DSN`` and ``KAFKA_BOOTSTRAP``, which
each case gets from servers the test session starts (a case is skipped, saying why,
where a server cannot be started). docs/spark.md shows Spark sessions as text, not as
python blocks: tests/test_spark_trident.py runs them (a Spark session per page would
cost more than the rest of these cases together).

The blocks of the pages in :data:`WHOLE_PAGES` still use names that earlier blocks of
their page define: until each of their blocks stands alone, such a page runs as one
case, its blocks in order in one namespace.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest

from tests.servers import RedisServer

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
DOCUMENTS = [
    path
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    if path.name != "spark.md"
]
#: Pages whose blocks need servers: their cases get ``REDIS_URL`` and the others.
NEEDS_SERVERS = {"connectors.md"}
#: Pages whose blocks do not run alone yet: each runs as one case (see above).
WHOLE_PAGES: set[str] = set()
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)


@dataclass(frozen=True)
class Block:
    """One python code block of a page."""

    page: Path
    #: The line of the block's first line of code (1-based).
    line: int
    code: str

    @property
    def name(self) -> str:
        """``page:line``: the test case's id and the file name in tracebacks."""
        return f"{self.page.relative_to(ROOT).as_posix()}:{self.line}"


def python_blocks(page: Path) -> list[Block]:
    """The ```python blocks of ``page``, in order."""
    text = page.read_text(encoding="utf-8")
    return [
        Block(page, text.count("\n", 0, match.start(1)) + 1, match[1])
        for match in _BLOCK.finditer(text)
    ]


BLOCKS = [
    block for page in DOCUMENTS if page.name not in WHOLE_PAGES for block in python_blocks(page)
]


def _run(
    blocks: list[Block], monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    """Run ``blocks`` in order in one fresh namespace, from the repository's root, with
    the servers their page needs."""
    page = blocks[0].page
    if page.name in NEEDS_SERVERS:
        redis_server = RedisServer().start()
        request.addfinalizer(redis_server.stop)
        postgres = request.getfixturevalue("postgres_server")
        database = postgres.create_database(f"docs_{page.stem}_{blocks[0].line}")
        monkeypatch.setenv("REDIS_URL", redis_server.url)
        monkeypatch.setenv("POSTGRES_DSN", database)
        monkeypatch.setenv("KAFKA_BOOTSTRAP", request.getfixturevalue("kafka_broker").bootstrap)
    monkeypatch.chdir(ROOT)
    monkeypatch.syspath_prepend(str(EXAMPLES))
    # A module of its own, so that classes the blocks define can be found by name
    # (copied, pickled) while they run.
    module = ModuleType(re.sub(r"\W", "_", f"doc_{blocks[0].name}"))
    monkeypatch.setitem(sys.modules, module.__name__, module)
    for block in blocks:
        # Blank lines first: a traceback gives the line of the page.
        code = compile("\n" * (block.line - 1) + block.code, block.name, "exec")
        exec(code, module.__dict__)


@pytest.mark.parametrize("block", BLOCKS, ids=lambda block: block.name)
def test_python_block_runs_alone(
    block: Block, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    """The block runs in a namespace of its own, with nothing from the blocks before."""
    _run([block], monkeypatch, request)


@pytest.mark.parametrize(
    "page",
    [page for page in DOCUMENTS if page.name in WHOLE_PAGES],
    ids=lambda page: page.relative_to(ROOT).as_posix(),
)
def test_python_blocks_of_a_whole_page_run_in_order(
    page: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    """The blocks of a page in :data:`WHOLE_PAGES` run in order, in one namespace."""
    _run(python_blocks(page), monkeypatch, request)


@pytest.mark.parametrize("page", DOCUMENTS, ids=lambda path: path.name)
def test_every_page_has_a_python_block(page: Path) -> None:
    assert python_blocks(page), f"{page.name} has no python block to run"


def test_blocks_are_found_with_their_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path)
    page = tmp_path / "page.md"
    page.write_text(
        "# Page\n\n```python\nx = 1\n```\n\n```bash\nls\n```\n\n```python\ny = 2\nz = 3\n```\n"
    )
    assert [(block.name, block.line, block.code) for block in python_blocks(page)] == [
        ("page.md:4", 4, "x = 1\n"),
        ("page.md:12", 12, "y = 2\nz = 3\n"),
    ]
