"""The UI's pages in a real browser: headless Chromium (Debian's ``chromium``) driven by
Playwright. The topology page shows figures that change, its deactivate button stops
the spout, and a component page opens from it and shows the component's own metrics; a
screenshot is kept under the test's temporary directory."""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from squall import BasicBolt, LocalCluster, Spout, TopologyBuilder
from squall.ui import UIServer
from squall.ui.views import latency
from tests.helpers import wait_until
from tests.servers import missing_server

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))
from word_count import RandomSentenceSpout, build_topology  # noqa: E402

#: Generous, for a busy machine: the page refreshes every 2 s.
WAIT_MS = 30_000
EMITTED = "#spouts tr[data-row='sentences'] td[data-field='emitted']"
#: The spout's emitted count as the page shows it, in the page's script.
SHOWN = f"Number(document.querySelector({EMITTED!r}).textContent.replaceAll(',', ''))"


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        missing_server("Chromium", "chromium")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        yield launched
        launched.close()


def emitted(page: Page) -> int:
    return int(page.inner_text(EMITTED).replace(",", ""))


def test_the_topology_page_shows_live_figures_and_its_deactivate_button_stops_the_spout(
    browser: Browser, tmp_path: Path
) -> None:
    with LocalCluster() as cluster, UIServer(cluster, port=0) as ui:
        cluster.submit_topology("words", {}, build_topology())
        page = browser.new_page(viewport={"width": 1300, "height": 1400})
        problems: list[Any] = []
        page.on("pageerror", lambda error: problems.append(error))
        page.goto(f"{ui.url}topology/words")
        page.wait_for_selector(EMITTED, timeout=WAIT_MS)
        first = emitted(page)
        page.wait_for_function(
            f"n => {SHOWN} > n",
            arg=first,
            timeout=WAIT_MS,
        )
        assert page.inner_text("#topology-status") == "ACTIVE"
        assert page.locator("#graph svg text", has_text="split").count() == 1

        page.click("#do-deactivate")
        page.wait_for_selector("#topology-status [data-status='INACTIVE']", timeout=WAIT_MS)
        assert cluster.get_topology_info("words").status == "INACTIVE"
        final = cluster.get_topology_info("words").components["sentences"].emitted
        page.wait_for_function(
            f"n => {SHOWN} === n",
            arg=final,
            timeout=WAIT_MS,
        )
        shown = page.inner_text("#updated")
        page.wait_for_function(
            "t => document.getElementById('updated').textContent !== t",
            arg=shown,
            timeout=WAIT_MS,
        )
        assert emitted(page) == final  # a refresh later, the spout has emitted nothing more

        def p99_shown(table: str, row: str, field: str, kind: str) -> bool:
            stats = cluster.get_topology_info("words").components[row]
            want = latency(getattr(stats, f"{kind}_latency_percentiles")[99.0])
            cell = f"#{table} tr[data-row='{row}'] td[data-field='{field}']"
            return page.inner_text(cell) == want and want != latency(0.0)

        # The p99 latencies stand next to the means: the cluster's own figures.
        wait_until(lambda: p99_shown("spouts", "sentences", "completeP99", "complete"), 30.0)
        wait_until(lambda: p99_shown("bolts", "split", "executeP99", "execute"), 30.0)
        screenshot = tmp_path / "topology-page.png"
        page.screenshot(path=str(screenshot), full_page=True)
        assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

        page.click("#bolts tr[data-row='split'] a")
        page.wait_for_selector("#component-id", timeout=WAIT_MS)
        assert page.inner_text("#component-id") == "split"
        wait_until(lambda: page.locator("td", has_text="shuffle").count() == 1, timeout=30.0)
        assert problems == []
        page.close()


class MeteredSpout(Spout):
    """Emits nothing; reports metrics of its own (as the Kafka spout does)."""

    outputs = ["n"]

    def next_tuple(self) -> None:
        return None

    def metrics(self) -> dict[str, float]:
        return {"orders/partition_0/spoutLag": 1234, "malformed": 0}


def test_a_component_page_shows_the_components_own_metrics(browser: Browser) -> None:
    builder = TopologyBuilder()
    builder.set_spout("metered", MeteredSpout())
    with LocalCluster() as cluster, UIServer(cluster, port=0) as ui:
        cluster.submit_topology("metered", {}, builder.create_topology())
        page = browser.new_page()
        problems: list[Any] = []
        page.on("pageerror", lambda error: problems.append(error))
        page.goto(f"{ui.url}topology/metered/component/metered")
        cell = "#metrics tr[data-row='orders/partition_0/spoutLag'] td[data-field='value']"
        page.wait_for_selector(cell, timeout=WAIT_MS)
        assert page.inner_text(cell) == "1,234"
        assert page.inner_text("#metrics tr[data-row='malformed'] td[data-field='value']") == "0"
        assert problems == []
        page.close()


class Busy(BasicBolt):
    """Takes 5 ms a tuple: its capacity is near 1."""

    def execute(self, tup: Any, collector: Any) -> None:
        time.sleep(0.005)


class Idle(BasicBolt):
    """Takes no time: its capacity is near 0."""

    def execute(self, tup: Any, collector: Any) -> None:
        pass


#: The hue of a graph node's fill (``hsl(H, 70%, 82%)``), in the page's script.
HUE = (
    "id => Number((document.querySelector(`#graph g.node[data-component='${id}'] rect`)"
    "?.getAttribute('fill') || 'hsl(-1').slice(4).split(',')[0])"
)


def points(page: Page, chart: str) -> int:
    return int(page.get_attribute(f"#{chart}", "data-points") or 0)


def test_the_charts_draw_live_samples_and_the_graph_colours_bolts_by_capacity(
    browser: Browser,
) -> None:
    builder = TopologyBuilder()
    builder.set_spout("words", RandomSentenceSpout())
    builder.set_bolt("busy", Busy()).shuffle_grouping("words")
    builder.set_bolt("idle", Idle()).shuffle_grouping("words")
    with LocalCluster() as cluster, UIServer(cluster, port=0, sample_secs=0.5) as ui:
        cluster.submit_topology("charted", {}, builder.create_topology())
        page = browser.new_page(viewport={"width": 1300, "height": 1400})
        problems: list[Any] = []
        page.on("pageerror", lambda error: problems.append(error))
        page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
        page.goto(f"{ui.url}topology/charted")
        for chart in ["chart-throughput", "chart-latency", "chart-capacity"]:
            page.wait_for_selector(f"#{chart} canvas", timeout=WAIT_MS)
        page.wait_for_function(
            "() => Number(document.querySelector('#chart-throughput').dataset.points) >= 2",
            timeout=WAIT_MS,
        )
        first = points(page, "chart-throughput")
        page.wait_for_function(
            "n => Number(document.querySelector('#chart-throughput').dataset.points) > n",
            arg=first,
            timeout=WAIT_MS,
        )
        assert points(page, "chart-capacity") >= first
        assert page.inner_text("#chart-latency figcaption") == "Complete latency p99 (ms)"
        legend = page.locator("#chart-capacity .u-legend .u-series .u-label").all_inner_texts()
        assert legend[-2:] == ["busy", "idle"]
        page.wait_for_function(
            "() => JSON.parse(document.querySelector('#chart-throughput').dataset.last)[0] > 0",
            timeout=WAIT_MS,
        )

        # Bolts: the busy one turns red (hue near 0), the idle one stays green (near 120).
        page.wait_for_function(
            f"() => ({HUE})('busy') >= 0 && ({HUE})('busy') <= 30 && ({HUE})('idle') >= 100",
            timeout=WAIT_MS,
        )
        busy = float(
            page.get_attribute("#graph g.node[data-component='busy']", "data-capacity") or 0
        )
        assert busy > 0.75

        # The samples are the server's: a reload draws them again at once.
        shown = points(page, "chart-throughput")
        page.reload()
        page.wait_for_selector("#chart-throughput canvas", timeout=WAIT_MS)
        assert points(page, "chart-throughput") >= shown

        page.goto(f"{ui.url}topology/charted/component/busy")
        page.wait_for_selector("#chart-capacity canvas", timeout=WAIT_MS)
        assert page.inner_text("#chart-latency figcaption") == "Execute latency p99 (ms)"
        before = points(page, "chart-capacity")
        assert before >= shown
        page.wait_for_function(
            "n => Number(document.querySelector('#chart-capacity').dataset.points) > n",
            arg=before,
            timeout=WAIT_MS,
        )
        page.wait_for_selector("#component-id", timeout=WAIT_MS)
        assert problems == []
        page.close()
