"""The join of a ``JoinBolt``: its description (sources, join fields, selected fields),
the checks of that description, and the hash join of one window's tuples.

Pure and engine-neutral: it runs where the topology is built (the checks) and on the
bolt's task thread (the join).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, Literal

from squall.model.fields import Fields
from squall.model.topology import is_control_stream
from squall.model.tuple import Tuple

JoinKind = Literal["inner", "left"]


@dataclass(frozen=True)
class FieldPath:
    """A field of a joined tuple (Storm's ``FieldSelector``): ``source`` (``None``: any
    source), the field and nested keys (``"user.name"`` -> ``("user", "name")``), and the
    output name (the text as written, qualifier included)."""

    source: str | None
    path: tuple[str, ...]
    name: str

    @staticmethod
    def parse(text: str) -> FieldPath:
        """``"src:x.y"``, ``"x.y"`` or ``":x.y"`` (no source).

        Raises:
            ValueError: an empty name, or an empty part of a dotted path.
        """
        name = text.strip()
        source: str | None = None
        field = name
        colon = name.find(":")
        if colon > 0:
            source, field = name[:colon].strip(), name[colon + 1 :].strip()
        elif colon == 0:
            name = field = name[1:].strip()
        path = tuple(part.strip() for part in field.split("."))
        if not field or not all(path):
            raise ValueError(f"{text!r} is not a field name (name or source:name, dots for keys)")
        return FieldPath(source, path, name)

    def lookup(self, selector: Selector, tup: Tuple) -> Any:
        """The value of this field in ``tup``; ``None`` if ``tup`` is from another source
        than this path's, lacks the field or a nested key, or holds ``None``.

        Raises:
            ValueError: a value a nested key is looked up in is not a mapping.
        """
        if self.source is not None and self.source != selector.of(tup):
            return None
        first = self.path[0]
        if not tup.contains(first):
            return None
        value = tup.get_value_by_field(first)
        for depth, key in enumerate(self.path[1:], 1):
            if value is None:
                return None
            if not isinstance(value, Mapping):
                raise ValueError(
                    f"JoinBolt: field {'.'.join(self.path)!r}: "
                    f"{'.'.join(self.path[:depth])!r} of a tuple from "
                    f"{tup.source_component!r} stream {tup.source_stream!r} is a "
                    f"{type(value).__name__}, not a mapping: {list(tup.values)!r}"
                )
            value = value.get(key)
        return value


class Selector(str, Enum):
    """What the names in a ``JoinBolt``'s joins and selects refer to: the components
    tuples come from (``SOURCE``, the default) or the streams they come on (``STREAM``)."""

    SOURCE = "source"
    STREAM = "stream"

    def of(self, tup: Tuple) -> str:
        """The name of ``tup``'s source: its component or its stream."""
        return tup.source_component if self is Selector.SOURCE else tup.source_stream

    def describe(self, name: str) -> str:
        """``component 'x'`` or ``stream 'x'``."""
        return f"{'component' if self is Selector.SOURCE else 'stream'} {name!r}"


@dataclass(frozen=True)
class JoinClause:
    """One source of a join, as declared: its name and join field, and (but for the
    first source) the prior source it joins and how (``"inner"``/``"left"``)."""

    source: str
    field: str
    prior: str | None
    kind: JoinKind | None


@dataclass(frozen=True)
class JoinStep:
    """A checked clause: the source, its join field, and for a join the prior source's
    join field to match (a path qualified by the prior source)."""

    source: str
    key: FieldPath
    prior_key: FieldPath | None
    kind: JoinKind | None


def parse_select(text: str | None) -> list[FieldPath]:
    """The fields of ``select(text)``.

    Raises:
        ValueError: no select, or a name that is not a field name.
    """
    if text is None:
        raise ValueError(
            "JoinBolt has no output fields: call select('field, source:field, ...') to name them"
        )
    if not isinstance(text, str):
        raise ValueError(
            f"JoinBolt: select takes the output fields as one comma-separated string, got {text!r}"
        )
    try:
        return [FieldPath.parse(part) for part in text.split(",")]
    except ValueError as exc:
        raise ValueError(f"JoinBolt: select({text!r}): {exc}") from None


@dataclass(frozen=True)
class JoinPlan:
    """A ``JoinBolt``'s checked join: the steps in join order and the selected fields."""

    selector: Selector
    steps: tuple[JoinStep, ...]
    select: tuple[FieldPath, ...]

    @staticmethod
    def of(
        selector: Selector, clauses: Sequence[JoinClause], select: Sequence[FieldPath]
    ) -> JoinPlan:
        """Check ``clauses`` and ``select`` against each other.

        Raises:
            ValueError: a source joined twice, a prior source not introduced before its
                join, a join field with a ``source:`` qualifier or not a field name, a
                selected field of a source not in the join, or two output fields with the
                same name.
        """
        steps: dict[str, JoinStep] = {}
        for clause in clauses:
            for label, value in (("source", clause.source), ("join field", clause.field)):
                if not isinstance(value, str) or not value:
                    raise ValueError(
                        f"JoinBolt: a {label} must be a non-empty string, got {value!r}"
                    )
            where = f"JoinBolt: {selector.describe(clause.source)}"
            if clause.source in steps:
                raise ValueError(f"{where} is already part of the join: a source is joined once")
            if ":" in clause.field:
                raise ValueError(
                    f"{where}: join field {clause.field!r} must not name a source ('x:'): "
                    f"the source is {clause.source!r}"
                )
            key = FieldPath.parse(clause.field)
            key = FieldPath(clause.source, key.path, key.name)
            prior_key = None
            if clause.prior is not None:
                prior = steps.get(clause.prior)
                if prior is None:
                    raise ValueError(
                        f"{where} joins {clause.prior!r}, which is not introduced before it "
                        f"(the sources so far: {sorted(steps)})"
                    )
                prior_key = prior.key
            steps[clause.source] = JoinStep(clause.source, key, prior_key, clause.kind)
        seen: set[str] = set()
        for path in select:
            if path.source is not None and path.source not in steps:
                raise ValueError(
                    f"JoinBolt: select names {path.name!r} of {selector.describe(path.source)}, "
                    f"which is not part of the join (its sources: {list(steps)})"
                )
            if path.name in seen:
                raise ValueError(
                    f"JoinBolt: select names the output field {path.name!r} twice; qualify "
                    f"the fields of different sources ('source:{path.path[0]}')"
                )
            seen.add(path.name)
        return JoinPlan(selector, tuple(steps.values()), tuple(select))

    @property
    def output_names(self) -> list[str]:
        """The declared output fields, named as ``select`` writes them."""
        return [path.name for path in self.select]

    def check_inputs(self, inputs: Mapping[tuple[str, str], Fields]) -> None:
        """Check the bolt's inputs, ``(component, stream) -> declared fields``: every
        input is a source of the join, every source has an input, every input of a
        source declares its join field, and every selected field is declared by an
        input (of its source, if qualified). System streams are left out.

        Raises:
            ValueError: naming the source or field and the inputs.
        """
        selector = self.selector
        by_source: dict[str, list[tuple[tuple[str, str], Fields]]] = {}
        described = ", ".join(f"{c!r} stream {s!r}" for c, s in inputs if not is_control_stream(s))
        for (component, stream), fields in inputs.items():
            if is_control_stream(stream):
                continue
            name = component if selector is Selector.SOURCE else stream
            if not any(step.source == name for step in self.steps):
                raise ValueError(
                    f"JoinBolt subscribes to {component!r} stream {stream!r}, whose "
                    f"{selector.describe(name)} is not part of the join (its sources: "
                    f"{[step.source for step in self.steps]}); add it with join(...) or "
                    "left_join(...), or remove the subscription"
                )
            by_source.setdefault(name, []).append(((component, stream), fields))
        for step in self.steps:
            received = by_source.get(step.source)
            if not received:
                raise ValueError(
                    f"JoinBolt joins {selector.describe(step.source)}, but the bolt "
                    f"receives nothing from it (its inputs: {described or 'none'}); "
                    f"subscribe to it, e.g. .fields_grouping(...)"
                )
            for (component, stream), fields in received:
                if step.key.path[0] not in fields:
                    raise ValueError(
                        f"JoinBolt: join field {step.key.name!r} of "
                        f"{selector.describe(step.source)} is not a field of {component!r} "
                        f"stream {stream!r} (its fields: {fields.to_list()})"
                    )
        for path in self.select:
            sources = [path.source] if path.source is not None else list(by_source)
            declared = [fields for source in sources for _, fields in by_source[source]]
            if not any(path.path[0] in fields for fields in declared):
                owner = (
                    f"{selector.describe(path.source)}'s inputs"
                    if path.source is not None
                    else "any input"
                )
                all_fields = sorted({name for fields in declared for name in fields})
                raise ValueError(
                    f"JoinBolt: selected field {path.name!r} is not a field of {owner} "
                    f"(their fields: {all_fields})"
                )

    def project(self, joined: Sequence[Tuple]) -> list[Any]:
        """The selected values of one join result: for each field, the first value not
        ``None`` among the joined tuples (in join order), else ``None``."""
        return [_first(path, self.selector, joined) for path in self.select]


def _hashable(value: Any) -> Any:
    """``value`` as a dict key: lists become tuples, mappings and sets frozensets."""
    try:
        hash(value)
        return value
    except TypeError:
        pass
    if isinstance(value, Mapping):
        return frozenset((key, _hashable(item)) for key, item in value.items())
    if isinstance(value, set):
        return frozenset(_hashable(item) for item in value)
    if isinstance(value, Iterable):
        return tuple(_hashable(item) for item in value)
    raise TypeError(f"JoinBolt: a join key must be hashable, got {value!r}")


def _first(path: FieldPath, selector: Selector, joined: Sequence[Tuple]) -> Any:
    for tup in joined:
        value = path.lookup(selector, tup)
        if value is not None:
            return value
    return None


def hash_join(plan: JoinPlan, tuples: Iterable[Tuple]) -> list[list[Tuple]]:
    """Join one window's ``tuples`` (in window order) as ``plan`` says: the joined tuples
    of each result, in Storm's order (the base source's tuples in window order, each
    one's matches in window order).

    Raises:
        ValueError: a tuple comes from a source outside the join, or a nested key is
            looked up in a value that is not a mapping.
    """
    selector = plan.selector
    base = plan.steps[0]
    tables: dict[str, dict[Any, list[Tuple]]] = {step.source: {} for step in plan.steps[1:]}
    keys = {step.source: step.key for step in plan.steps}
    records: list[list[Tuple]] = []
    for tup in tuples:
        name = selector.of(tup)
        if name == base.source:
            records.append([tup])
            continue
        table = tables.get(name)
        if table is None:
            raise ValueError(
                f"JoinBolt received a tuple from {tup.source_component!r} stream "
                f"{tup.source_stream!r}, whose {selector.describe(name)} is not part of "
                f"the join (its sources: {list(keys)})"
            )
        key = keys[name].lookup(selector, tup)
        if key is not None:
            table.setdefault(_hashable(key), []).append(tup)
    for step in plan.steps[1:]:
        assert step.prior_key is not None
        table = tables[step.source]
        joined: list[list[Tuple]] = []
        for record in records:
            key = _first(step.prior_key, selector, record)
            if key is None:
                continue  # as in Storm: no key, no result (even for a left join)
            matches = table.get(_hashable(key))
            if matches:
                joined.extend([*record, match] for match in matches)
            elif step.kind == "left":
                joined.append(record)
        records = joined
    return records


__all__ = [
    "FieldPath",
    "JoinClause",
    "JoinPlan",
    "JoinStep",
    "Selector",
    "hash_join",
    "parse_select",
]
