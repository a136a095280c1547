"""The topology graph as SVG, drawn by the server (the pages load nothing from other
sites): spouts and bolts as boxes in columns by depth (a spout at depth 0, a bolt one
column right of its deepest input), streams as arrows labelled with the stream and
its grouping, and each box with its figures. Bolts are filled by capacity, green (idle)
through yellow to red (busy all the time, 1.0 or more), as Storm UI colours them; a
component a task of which has a full input queue (backpressure) gets a thick red
dashed border and says so.

Every name and label is escaped: component and stream names are the user's text.
"""

from __future__ import annotations

from collections.abc import Mapping
from html import escape
from urllib.parse import quote

from squall.model.topology import StormTopology
from squall.runtime.metrics import TopologyInfo

BOX_WIDTH = 270
BOX_HEIGHT = 58
COLUMN_GAP = 120
ROW_GAP = 34
MARGIN = 24


def _depths(topology: StormTopology) -> dict[str, int]:
    """Each user component's column: 0 for spouts, else one past its deepest input
    (a cycle, which a topology cannot have, would stop at the component count)."""
    specs = {spec.component_id: spec for spec in topology if not spec.system}
    depth = {cid: 0 for cid in specs}
    for _ in range(len(specs)):
        changed = False
        for cid, spec in specs.items():
            inputs = [sub.source for sub in spec.inputs if sub.source in specs]
            wanted = max((depth[source] + 1 for source in inputs), default=0)
            if wanted != depth[cid]:
                depth[cid] = wanted
                changed = True
        if not changed:
            break
    return depth


def _figures(info: TopologyInfo | None, component_id: str, kind: str) -> str:
    stats = info.components.get(component_id) if info else None
    if stats is None:
        return ""
    if kind == "spout":
        return f"emitted {stats.emitted:,} · acked {stats.acked:,} · failed {stats.failed:,}"
    return f"executed {stats.executed:,} · capacity {stats.capacity:.3f}"


def capacity_colour(capacity: float) -> str:
    """A bolt's fill for its capacity: hue 120 (green) at 0 down to 0 (red) at 1.0 and
    above, as ``hsl(H, 70%, 82%)``."""
    busy = min(max(capacity, 0.0), 1.0)
    return f"hsl({round(120 * (1.0 - busy))}, 70%, 82%)"


def topology_svg(
    name: str,
    topology: StormTopology,
    info: TopologyInfo | None,
    queued: Mapping[str, tuple[int, bool]] | None = None,
) -> str:
    """The graph of ``topology`` (running as ``name``), with the figures of ``info``
    and, per component, ``queued``: its tuples queued and whether a task's queue is full
    (see :func:`squall.ui.series.queues`; None where the engine reports no queues)."""
    depth = _depths(topology)
    columns: dict[int, list[str]] = {}
    for cid, column in depth.items():
        columns.setdefault(column, []).append(cid)
    place: dict[str, tuple[int, int]] = {}
    for column, members in columns.items():
        for row, cid in enumerate(members):
            x = MARGIN + column * (BOX_WIDTH + COLUMN_GAP)
            y = MARGIN + row * (BOX_HEIGHT + ROW_GAP)
            place[cid] = (x, y)
    width = MARGIN * 2 + max((c + 1 for c in columns), default=1) * (BOX_WIDTH + COLUMN_GAP)
    rows = max((len(m) for m in columns.values()), default=1)
    height = MARGIN * 2 + rows * (BOX_HEIGHT + ROW_GAP)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="topology {escape(name)}">',
        "<defs><marker id='arrow' viewBox='0 0 10 10' refX='10' refY='5' markerWidth='7' "
        "markerHeight='7' orient='auto-start-reverse'><path d='M 0 0 L 10 5 L 0 10 z' "
        "fill='#555'/></marker></defs>",
    ]
    for spec in topology:
        if spec.system or spec.component_id not in place:
            continue
        x2, y2 = place[spec.component_id]
        for index, sub in enumerate(spec.inputs):
            if sub.source not in place:
                continue
            x1, y1 = place[sub.source]
            start = (x1 + BOX_WIDTH, y1 + BOX_HEIGHT // 2)
            end = (x2, y2 + BOX_HEIGHT // 2 + index * 6)
            label = f"{sub.stream_id} · {sub.grouping.describe()}"
            mid_x = (start[0] + end[0]) // 2
            mid_y = (start[1] + end[1]) // 2 - 6
            parts.append(
                f'<g class="edge"><path d="M {start[0]} {start[1]} C {mid_x} {start[1]}, '
                f'{mid_x} {end[1]}, {end[0]} {end[1]}" fill="none" stroke="#555" '
                'stroke-width="1.4" marker-end="url(#arrow)"/>'
                f'<text x="{mid_x}" y="{mid_y}" text-anchor="middle" font-size="11" '
                f'fill="#333">{escape(label)}</text></g>'
            )
    for spec in topology:
        if spec.system or spec.component_id not in place:
            continue
        x, y = place[spec.component_id]
        stats = info.components.get(spec.component_id) if info else None
        capacity = stats.capacity if stats is not None else 0.0
        fill = "#dbeafe" if spec.is_spout else capacity_colour(capacity)
        waiting, full = (queued or {}).get(spec.component_id, (None, False))
        stroke = (
            'stroke="#dc2626" stroke-width="4" stroke-dasharray="8 4"'
            if full
            else 'stroke="#334155"'
        )
        link = f"/topology/{quote(name, safe='')}/component/{quote(spec.component_id, safe='')}"
        figures = _figures(info, spec.component_id, spec.kind)
        if waiting:
            figures += f" · queued {waiting:,}"
        if full:
            figures += " · BACKPRESSURE"
        parts.append(
            f'<a href="{escape(link)}"><g class="node {spec.kind}" '
            f'data-component="{escape(spec.component_id)}" data-capacity="{capacity:.3f}" '
            f'data-fill="{fill}" data-backpressure="{"true" if full else "false"}">'
            f"<title>{escape(spec.component_id)}: capacity {capacity:.3f}"
            f"{' (backpressure: a task queue is full)' if full else ''}</title>"
            f'<rect x="{x}" y="{y}" width="{BOX_WIDTH}" height="{BOX_HEIGHT}" rx="8" '
            f'fill="{fill}" {stroke}/>'
            f'<text x="{x + 10}" y="{y + 20}" font-size="13" font-weight="bold" '
            f'fill="#0f172a">{escape(spec.component_id)}</text>'
            f'<text x="{x + 10}" y="{y + 36}" font-size="11" fill="#334155">'
            f"{spec.kind} · {spec.parallelism} executor(s) · {spec.num_tasks} task(s)</text>"
            f'<text x="{x + 10}" y="{y + 50}" font-size="10" fill="#475569">'
            f"{escape(figures)}</text></g></a>"
        )
    parts.append("</svg>")
    return "".join(parts)


__all__ = ["capacity_colour", "topology_svg"]
