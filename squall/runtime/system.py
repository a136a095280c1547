"""The system topology: the user's topology plus the components the engine adds.

As in Storm, acking is done by ordinary bolts (``__acker``) on reserved ``__`` streams:
spouts declare ``__ack_init``, bolts ``__ack_ack``/``__ack_fail``/``__ack_reset_timeout``,
all fields-grouped on the root id into the acker, which answers each spout task on
direct streams. Every spout and bolt of the user's topology also gets Storm's system
stream ``__system`` (fields ``["event"]``), which bolts may subscribe to; nothing is
emitted on it.

With metrics consumers registered (``topology.metrics.consumer.register``), every user
component also declares Storm's ``__metrics`` stream, and each consumer gets a system
bolt ``__metrics_<ClassName>`` subscribed to all of them with a shuffle grouping (see
``squall.runtime.metrics_consumers``).
"""

from __future__ import annotations

from typing import Any

from squall.model.config import Config, component_config
from squall.model.declarer import SYSTEM_STREAM, SYSTEM_STREAM_DECLARATION, StreamDeclaration
from squall.model.errors import InvalidTopologyError
from squall.model.fields import Fields
from squall.model.grouping import Grouping, GroupingKind
from squall.model.hooks import ValidatesSubmission, implements
from squall.model.metrics import METRICS_STREAM
from squall.model.topology import ComponentSpec, StormTopology, Subscription
from squall.runtime.acker import (
    ACK_ACK_STREAM,
    ACK_DONE_STREAM,
    ACK_FAIL_STREAM,
    ACK_INIT_STREAM,
    ACK_RESET_TIMEOUT_STREAM,
    ACKER_COMPONENT,
    AckerBolt,
)
from squall.runtime.checkpointing import CHECKPOINT_STREAM
from squall.runtime.metrics_consumers import MetricsConsumerBolt, consumer_registrations
from squall.runtime.task_metrics import builtin_bucket_secs

_ROOT_FIELDS = Fields("id")
#: The fields of the ``__metrics`` stream.
METRICS_FIELDS = Fields("task_info", "data_points")


def acker_count(conf: dict[str, Any]) -> int:
    """Acker executors: the configured number, or one per worker when unset."""
    configured = conf.get(Config.TOPOLOGY_ACKER_EXECUTORS)
    if configured is None:
        return max(1, int(conf.get(Config.TOPOLOGY_WORKERS) or 1))
    return max(0, int(configured))


def system_topology(topology: StormTopology, conf: dict[str, Any]) -> StormTopology:
    """The topology with its system components and streams added (a new object, which
    carries the topology's ``batch_ir``: the components it describes are unchanged)."""
    ackers = acker_count(conf)
    components = {spec.component_id: spec.copy() for spec in topology}
    for spec in components.values():
        spec.streams[SYSTEM_STREAM] = SYSTEM_STREAM_DECLARATION
    _add_metrics_consumers(components, conf)
    if ackers == 0:
        return _carrying_ir(StormTopology(components), topology)
    by_root = Grouping(GroupingKind.FIELDS, _ROOT_FIELDS)
    acker_inputs = []
    for spec in components.values():
        if spec.is_spout:
            spec.streams[ACK_INIT_STREAM] = StreamDeclaration(
                ACK_INIT_STREAM, Fields("id", "ack_val", "spout_task")
            )
            acker_inputs.append(Subscription(spec.component_id, ACK_INIT_STREAM, by_root))
            streams = (ACK_ACK_STREAM, ACK_FAIL_STREAM, ACK_RESET_TIMEOUT_STREAM)
            for stream in (*streams, ACK_DONE_STREAM):
                spec.inputs.append(
                    Subscription(ACKER_COMPONENT, stream, Grouping(GroupingKind.DIRECT))
                )
        if not spec.is_spout or any(s.stream_id == CHECKPOINT_STREAM for s in spec.inputs):
            # A bolt, or a spout that also acks tuples it receives (checkpoint tuples).
            spec.streams[ACK_ACK_STREAM] = StreamDeclaration(
                ACK_ACK_STREAM, Fields("id", "ack_val")
            )
            spec.streams[ACK_FAIL_STREAM] = StreamDeclaration(ACK_FAIL_STREAM, _ROOT_FIELDS)
            spec.streams[ACK_RESET_TIMEOUT_STREAM] = StreamDeclaration(
                ACK_RESET_TIMEOUT_STREAM, _ROOT_FIELDS
            )
            for stream in (ACK_ACK_STREAM, ACK_FAIL_STREAM, ACK_RESET_TIMEOUT_STREAM):
                acker_inputs.append(Subscription(spec.component_id, stream, by_root))
    acker_conf: dict[str, Any] = {}
    if conf.get(Config.TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS, True):
        acker_conf[Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS] = conf.get(
            Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS, 30
        )
    acker_streams = {
        stream: StreamDeclaration(stream, _ROOT_FIELDS, direct=True)
        for stream in (ACK_ACK_STREAM, ACK_FAIL_STREAM, ACK_RESET_TIMEOUT_STREAM)
    }
    # Trees completed by one bulk message (see AckBuffer and stateful bolts' commits).
    acker_streams[ACK_DONE_STREAM] = StreamDeclaration(ACK_DONE_STREAM, Fields("ids"), direct=True)
    components[ACKER_COMPONENT] = ComponentSpec(
        ACKER_COMPONENT,
        AckerBolt(),
        "bolt",
        ackers,
        ackers,
        acker_conf,
        acker_inputs,
        acker_streams,
        system=True,
    )
    return _carrying_ir(StormTopology(components), topology)


def _add_metrics_consumers(components: dict[str, ComponentSpec], conf: dict[str, Any]) -> None:
    """Give every component the ``__metrics`` stream and add a consumer bolt per
    registered consumer (nothing without registrations).

    Raises:
        InvalidTopologyError: a registration is not valid, or its component id is taken.
    """
    registrations = consumer_registrations(conf)
    if not registrations:
        return
    builtin_bucket_secs(conf)  # checked at submission
    shuffle = Grouping(GroupingKind.SHUFFLE)
    sources = list(components)
    for spec in components.values():
        spec.streams[METRICS_STREAM] = StreamDeclaration(METRICS_STREAM, METRICS_FIELDS)
    for registration in registrations:
        if registration.component_id in components:
            raise InvalidTopologyError(
                f"metrics consumer {registration.component_id!r}: a component of the "
                "topology has that id"
            )
        components[registration.component_id] = ComponentSpec(
            registration.component_id,
            MetricsConsumerBolt(registration.consumer, registration.argument),
            "bolt",
            registration.parallelism,
            registration.parallelism,
            {},
            [Subscription(source, METRICS_STREAM, shuffle) for source in sources],
            {},
            system=True,
        )


def _carrying_ir(system: StormTopology, topology: StormTopology) -> StormTopology:
    system.batch_ir = topology.batch_ir
    return system


def validate_submission(topology: StormTopology, conf: dict[str, Any]) -> None:
    """Submit-time checks that need the configuration, run by every engine.

    A component may implement ``ValidatesSubmission`` (a windowed bolt checks its
    window against the message timeout); it receives the configuration its tasks will
    see.

    Raises:
        InvalidTopologyError: from a component's check.
    """
    for spec in topology:
        if implements(spec.component, ValidatesSubmission):
            spec.component.validate_submission(spec.component_id, component_config(conf, spec.conf))
