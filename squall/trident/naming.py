"""Component ids of compiled Trident segments: readable, deterministic and file-name safe.

A segment's bolt is named ``b<N>-<label>``: ``N`` numbers the segments that run as bolts
(1, 2, ... in the order their first operation was added, so the id is unique and stable
across runs of the same code), and the label is the first name given with
``Stream.name(...)`` in the segment or, without one, the segment's operations as written
in the API with the operation's class or function name: ``b1-each(Split)``,
``b2-persistent_aggregate(Count)``, ``b3-each(Split)+filter(FilterNull)+2`` (the first one
or two operations, then how many more). A repartition (``partition_by``, ``shuffle``,
...) and the map-side half of an aggregation are only named when a segment has nothing
else. Every character other than letters, digits and ``_ . + - ( )`` becomes ``_``, so
the ids contain no ``/`` and no space.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from squall.trident.graph import Node
from squall.trident.operations import CallableFilter, CallableFunction

#: The longest class or function name kept in a label (longer ones are cut).
MAX_ARGUMENT = 24
#: A second operation is shown only if the label stays this short.
MAX_LABEL = 40

#: The parameter holding the operation of per-tuple nodes.
_OPERATION_PARAM = {
    "each": "function",
    "filter": "filter",
    "map": "fn",
    "flat_map": "fn",
    "peek": "fn",
    "state_query": "query",
    "window": "aggregator",
}
_GROUPINGS = {"fields": "partition_by", "shuffle": "shuffle", "all": "broadcast"}
_UNSAFE = re.compile(r"[^\w.+()-]")
_NOT_IDENTIFIER = re.compile(r"[^\w.]")
#: Nodes named only when a segment has no other operation, in this order of preference.
_SECONDARY = ("combine_partial", "partition")


def segment_component_id(number: int, nodes: Sequence[Node]) -> str:
    """The component id of the ``number``-th bolt segment running ``nodes``.

    Runs at build time. The same operations (and names) give the same id.
    """
    return f"b{number}-{segment_label(nodes)}"


def segment_label(nodes: Sequence[Node]) -> str:
    """What follows ``b<N>-``: the first ``.name()``, else the operations (see module)."""
    names = [n.name for n in nodes if n.name]
    if names:
        return _UNSAFE.sub("_", names[0]) or "_"
    main = [n for n in nodes if n.kind not in _SECONDARY and not n.params.get("window_part")]
    if not main:
        main = sorted(nodes, key=lambda n: _SECONDARY.index(n.kind))[:1]
    operations = [describe_operation(n) for n in main]
    label, shown = operations[0], 1
    if len(operations) > 1 and len(label) + 1 + len(operations[1]) <= MAX_LABEL:
        label, shown = f"{label}+{operations[1]}", 2
    if len(operations) > shown:
        label += f"+{len(operations) - shown}"
    return label


def describe_operation(node: Node) -> str:
    """One operation as a label part: the API method, and its operation's name."""
    params = node.params
    kind = node.kind
    if kind in _OPERATION_PARAM:
        return f"{kind}({operation_name(params[_OPERATION_PARAM[kind]])})"
    if kind == "partition":
        return _GROUPINGS.get(params["grouping"], "global")
    if kind == "partition_aggregate" and "method" in params:
        # min/max/min_by/max_by and chained_agg: the API method and its argument
        return f"{params['method']}({_identifier(str(params['argument']))})"
    if kind == "partition_aggregate":
        method = "aggregate" if params.get("whole_batch") else "partition_aggregate"
        return f"{method}({operation_name(params['aggregator'])})"
    if kind == "combine_partial":
        method = params.get("operation", "aggregate")
        return f"{method}({operation_name(params['aggregator'])})"
    if kind == "combine_final":
        return f"aggregate({operation_name(params['aggregator'])})"
    if kind == "persist":
        if params["mode"] == "updater":
            return f"partition_persist({operation_name(params['updater'])})"
        return f"persistent_aggregate({operation_name(params['aggregator'])})"
    if kind == "drpc_return":
        return f"return({_identifier(str(node.source.params['function']))})"
    return kind  # project, merge, join


def operation_name(operation: Any) -> str:
    """The class name of an operation object, or a plain callable's function name
    (``lambda`` for a lambda), cut to :data:`MAX_ARGUMENT` characters."""
    if isinstance(operation, CallableFunction | CallableFilter):
        operation = operation.fn
    name = getattr(operation, "__name__", None)
    if not isinstance(name, str):
        name = type(operation).__name__
    return _identifier(name)


def _identifier(text: str) -> str:
    return _NOT_IDENTIFIER.sub("", text)[:MAX_ARGUMENT] or "fn"
