"""Adding the checkpoint mechanism to a topology that has stateful bolts (the local
engine's part of building the system topology).

* ``$checkpointspout`` (one task) emits on ``$checkpoint`` to every data spout task
  (all grouping);
* every data spout declares ``$checkpoint`` and passes the checkpoint tuples on, in band,
  to the bolts subscribed to it; every bolt does the same to its own subscribers
  (all grouping, so each task receives one checkpoint tuple per upstream task);
* every bolt runs inside a wrapper of :mod:`squall.state.executors`.

Runs where the topology is submitted. The topology must be acyclic, run with acking on,
hold no transactional or Trident components, and checkpoint more often than its message
timeout; violations raise :class:`InvalidTopologyError` naming the stateful bolt.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from squall.model.config import Config
from squall.model.declarer import StreamDeclaration
from squall.model.errors import InvalidTopologyError
from squall.model.grouping import Grouping, GroupingKind
from squall.model.topology import ComponentSpec, StormTopology, Subscription, is_control_stream
from squall.runtime.checkpointing import CHECKPOINT_STREAM
from squall.runtime.collectors import BoltCollector, SpoutCollector, TaskWiring
from squall.runtime.context import TopologyContext
from squall.runtime.metrics import TaskStats
from squall.runtime.system import acker_count
from squall.state.bolt import StatefulBolt
from squall.state.checkpoint_spout import (
    CHECKPOINT_COMPONENT,
    CHECKPOINT_FIELDS,
    DEFAULT_INTERVAL_MS,
    CheckpointSpout,
)
from squall.state.executors import CheckpointedBolt, StatefulBoltExecutor
from squall.state.spouts import SpoutCheckpointer


def stateful_bolts(topology: StormTopology) -> list[str]:
    """The ids of the topology's stateful bolts."""
    return [spec.component_id for spec in topology if isinstance(spec.component, StatefulBolt)]


def checkpoint_interval_ms(conf: dict[str, Any]) -> float:
    """``topology.state.checkpoint.interval.ms``, default 1000."""
    value = conf.get(Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL)
    return float(DEFAULT_INTERVAL_MS if value is None else value)


def check_stateful(topology: StormTopology, conf: dict[str, Any]) -> None:
    """What every engine checks of a topology with stateful bolts (nothing without).

    Raises:
        InvalidTopologyError: acking is off, the topology holds transactional or Trident
            components, or the state provider's settings are wrong; the message names
            the stateful bolts.
    """
    from squall.state.providers import check_provider

    stateful = stateful_bolts(topology)
    if not stateful:
        return
    prefix = _prefix(stateful)
    if acker_count(conf) == 0:
        raise InvalidTopologyError(
            f"{prefix}: a topology with stateful bolts needs acking (its checkpoints are "
            "tracked tuples, and inputs are acked once their state is committed): set "
            "topology.acker.executors above 0"
        )
    if topology.batch_ir is not None:
        raise InvalidTopologyError(
            f"{prefix}: stateful bolts cannot be mixed with transactional or Trident "
            "components in one topology"
        )
    problem = check_provider(conf, str(conf.get(Config.TOPOLOGY_NAME, "")))
    if problem is not None:
        raise InvalidTopologyError(f"{prefix}: {problem}")


def check_checkpointing(topology: StormTopology, conf: dict[str, Any]) -> None:
    """Refuse a topology with stateful bolts that the local engine cannot checkpoint.

    Raises:
        InvalidTopologyError: any :func:`check_stateful` problem, the interval is not
            a positive number below the message timeout, or the topology has a cycle.
    """
    check_stateful(topology, conf)
    stateful = stateful_bolts(topology)
    if not stateful:
        return
    prefix = _prefix(stateful)
    interval = conf.get(Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL, DEFAULT_INTERVAL_MS)
    if isinstance(interval, bool) or not isinstance(interval, (int, float)) or interval <= 0:
        raise InvalidTopologyError(
            f"{prefix}: {Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL} must be a number of "
            f"milliseconds above 0, got {interval!r}"
        )
    timeout_secs = conf.get(Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS, 30)
    if conf.get(Config.TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS, True) and interval >= timeout_secs * 1000:
        raise InvalidTopologyError(
            f"{prefix}: {Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL} ({interval}) must be "
            f"below the message timeout ({timeout_secs} s): inputs are acked only once "
            "their state is committed"
        )
    cycle = topology.find_cycle()
    if cycle is not None:
        raise InvalidTopologyError(
            f"{prefix}: a topology with stateful bolts must not have cycles (checkpoints "
            f"flow from the spouts down); cycle: {' -> '.join(cycle)}"
        )


def _prefix(stateful: list[str]) -> str:
    return f"stateful bolt(s) {', '.join(repr(name) for name in stateful)}"


def with_checkpointing(topology: StormTopology, conf: dict[str, Any]) -> StormTopology:
    """The topology with the checkpoint mechanism added, or ``topology`` itself when it
    has no stateful bolt. Call :func:`check_checkpointing` first."""
    if not stateful_bolts(topology):
        return topology
    all_tasks = Grouping(GroupingKind.ALL)
    declaration = StreamDeclaration(CHECKPOINT_STREAM, CHECKPOINT_FIELDS)
    components: dict[str, ComponentSpec] = {}
    for spec in topology:
        copy = spec.copy()
        copy.streams[CHECKPOINT_STREAM] = declaration
        if spec.is_spout:
            copy.inputs.append(Subscription(CHECKPOINT_COMPONENT, CHECKPOINT_STREAM, all_tasks))
        else:
            bolt = spec.component
            copy.component = (
                StatefulBoltExecutor(bolt)
                if isinstance(bolt, StatefulBolt)
                else CheckpointedBolt(bolt)
            )
            upstream = dict.fromkeys(
                source.source
                for source in spec.inputs
                if not is_control_stream(source.stream_id) and source.source != spec.component_id
            )
            copy.inputs.extend(
                Subscription(source, CHECKPOINT_STREAM, all_tasks) for source in upstream
            )
        components[copy.component_id] = copy
    components[CHECKPOINT_COMPONENT] = ComponentSpec(
        CHECKPOINT_COMPONENT,
        CheckpointSpout(checkpoint_interval_ms(conf)),
        "spout",
        1,
        1,
        {},
        [],
        {CHECKPOINT_STREAM: declaration},
        system=True,
    )
    result = StormTopology(components)
    result.batch_ir = topology.batch_ir
    return result


def spout_checkpointing(
    topology: StormTopology,
    spec: ComponentSpec,
    spout: Any,
    collector: SpoutCollector,
    wiring: TaskWiring,
    context: TopologyContext,
    conf: dict[str, Any],
) -> SpoutCheckpointer | None:
    """The checkpoint part of the data spout task running ``spout`` (its own copy of the
    component) in ``topology`` (built with :func:`with_checkpointing`), or None for a
    spout that takes no part."""
    from squall.state.providers import provider_for

    if not any(source.stream_id == CHECKPOINT_STREAM for source in spec.inputs):
        return None
    bolt_tasks = [
        (other.component_id, index)
        for other in topology
        if not other.is_spout and isinstance(other.component, CheckpointedBolt)
        for index in range(len(context.get_component_tasks(other.component_id)))
    ]
    keep_ms = 2000.0 * float(conf.get(Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS, 30))
    # Its own counters: the checkpoint tuples it acks are not the spout's trees.
    own_stats = TaskStats(spec.component_id, context.task_id)
    return SpoutCheckpointer(
        spout,
        collector,
        BoltCollector(dataclasses.replace(wiring, stats=own_stats)),
        provider_for(conf, str(conf.get(Config.TOPOLOGY_NAME, ""))),
        context,
        bolt_tasks,
        keep_ms,
    )
