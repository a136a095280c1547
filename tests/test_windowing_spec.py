"""Window specs: Count and Duration, WindowSpec checks and tick intervals, the
WindowedBolt configuration methods, the executor's component configuration and
declared streams, TupleWindow, and the configurations create_topology rejects."""

from __future__ import annotations

from typing import Any

import pytest

from squall import (
    Config,
    Count,
    Duration,
    Fields,
    InvalidTopologyError,
    TopologyBuilder,
    TupleWindow,
    WindowedBolt,
)
from squall.testing import FeederSpout
from squall.windowing import WindowedBoltExecutor, WindowSpec


class Noop(WindowedBolt):
    outputs = ["n"]

    def execute(self, window: TupleWindow) -> None:
        pass


class WithConf(Noop):
    def get_component_configuration(self) -> dict[str, Any] | None:
        return {"my.setting": 7}


# --- Count and Duration ------------------------------------------------------------------


def test_count() -> None:
    assert Count(3).value == 3
    assert Count.of(5) == Count(5)
    assert Count(1) != Count(2)


@pytest.mark.parametrize("bad", [0, -1, 1.5, "3", True, None])
def test_count_rejects_non_positive_or_non_integers(bad: Any) -> None:
    with pytest.raises(ValueError, match="Count"):
        Count(bad)


def test_duration_helpers() -> None:
    assert Duration(250).value == 250
    assert Duration(250).ms == 250
    assert Duration.milliseconds(5) == Duration(5)
    assert Duration.seconds(20) == Duration(20_000)
    assert Duration.seconds(1.5) == Duration(1_500)
    assert Duration.minutes(2) == Duration(120_000)
    assert Duration.minutes(0.5) == Duration(30_000)
    assert Duration.hours(1) == Duration(3_600_000)
    assert Duration.days(1) == Duration(86_400_000)
    assert Duration.days(2).ms == 172_800_000
    assert Duration(0).ms == 0  # a zero lag is fine


@pytest.mark.parametrize("bad", [-1, 1.5, "10", True, None])
def test_duration_rejects_negative_or_non_integers(bad: Any) -> None:
    with pytest.raises(ValueError, match="Duration"):
        Duration(bad)


def test_duration_helpers_reject_negative_values() -> None:
    with pytest.raises(ValueError):
        Duration.seconds(-1)
    with pytest.raises(ValueError):
        Duration.milliseconds(-5)


# --- WindowSpec --------------------------------------------------------------------------


def test_event_time_is_on_with_a_timestamp_field_or_extractor() -> None:
    assert not WindowSpec(Count(2), Count(1)).event_time
    assert WindowSpec(Count(2), Count(1), timestamp_field="ts").event_time
    assert WindowSpec(Count(2), Count(1), timestamp_extractor=lambda t: 0).event_time


@pytest.mark.parametrize(
    ("length", "sliding", "expected"),
    [
        (Count(5), Count(2), None),
        (Count(5), Count(1), None),
        (Duration(800), Count(2), None),
        (Count(5), Duration(300), 300),
        (Duration(800), Duration(200), 200),
        (Duration(500), Duration(500), 500),
    ],
)
def test_processing_time_tick_interval_is_the_time_sliding_interval(
    length: Any, sliding: Any, expected: int | None
) -> None:
    assert WindowSpec(length, sliding).tick_interval_ms == expected


@pytest.mark.parametrize(
    ("length", "sliding"),
    [(Count(5), Count(2)), (Duration(800), Duration(200)), (Count(3), Duration(100))],
)
def test_event_time_tick_interval_is_the_watermark_interval(length: Any, sliding: Any) -> None:
    assert WindowSpec(length, sliding, timestamp_field="ts").tick_interval_ms == 1000
    spec = WindowSpec(length, sliding, timestamp_field="ts", watermark_interval=Duration(250))
    assert spec.tick_interval_ms == 250


def test_valid_specs_pass_validation() -> None:
    WindowSpec(Count(1), Count(1)).validate("b")
    WindowSpec(Duration(1), Duration(1)).validate("b")
    WindowSpec(
        Duration(20_000),
        Duration(10_000),
        timestamp_field="ts",
        lag=Duration(5_000),
        watermark_interval=Duration(1_000),
        late_stream="late",
    ).validate("b")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (WindowSpec(Duration(0), Duration(10)), "window length must be at least 1 ms"),
        (WindowSpec(Duration(10), Duration(0)), "sliding interval must be at least 1 ms"),
        (WindowSpec(10, Count(1)), "window length must be a Count or a Duration"),  # type: ignore[arg-type]
        (WindowSpec(Count(1), 10), "sliding interval must be a Count or a Duration"),  # type: ignore[arg-type]
        (
            WindowSpec(Count(1), Count(1), timestamp_field="ts", timestamp_extractor=len),
            "either a timestamp field or a timestamp extractor",
        ),
        (WindowSpec(Count(1), Count(1), lag=Duration(5)), "a lag only applies to event time"),
        (
            WindowSpec(Count(1), Count(1), watermark_interval=Duration(5)),
            "a watermark interval only applies to event time",
        ),
        (
            WindowSpec(Count(1), Count(1), late_stream="late"),
            "a late tuple stream only applies to event time",
        ),
        (
            WindowSpec(Count(1), Count(1), timestamp_field="ts", watermark_interval=Duration(0)),
            "watermark interval must be at least 1 ms",
        ),
        (
            WindowSpec(Count(1), Count(1), timestamp_field="ts", late_stream=""),
            "late tuple stream id",
        ),
    ],
)
def test_invalid_specs_name_the_bolt_and_the_problem(spec: WindowSpec, message: str) -> None:
    with pytest.raises(InvalidTopologyError, match=r"^my-bolt: ") as info:
        spec.validate("my-bolt")
    assert message in str(info.value)


def test_message_timeout_check_counts_only_time_spans() -> None:
    WindowSpec(Count(10_000), Count(10_000)).check_message_timeout("b", 1)
    WindowSpec(Duration(20_000), Duration(10_000)).check_message_timeout("b", 30)  # equal
    WindowSpec(Duration(30_000), Count(5)).check_message_timeout("b", 30)
    WindowSpec(Count(5), Duration(30_000)).check_message_timeout("b", 30)
    with pytest.raises(InvalidTopologyError) as info:
        WindowSpec(Duration(20_000), Duration(10_001)).check_message_timeout("bolt 'w'", 30)
    message = str(info.value)
    assert message.startswith("bolt 'w': ")
    assert "30001 ms" in message
    assert "topology.message.timeout.secs" in message
    assert "set_message_timeout_secs(40)" in message
    with pytest.raises(InvalidTopologyError, match=r"topology\.message\.timeout\.secs"):
        WindowSpec(Duration(30_001), Count(1)).check_message_timeout("b", 30)
    with pytest.raises(InvalidTopologyError, match=r"topology\.message\.timeout\.secs"):
        WindowSpec(Count(3), Duration(5_000)).check_message_timeout("b", 4)


# --- WindowedBolt configuration ----------------------------------------------------------


def test_with_window_and_defaults() -> None:
    bolt = Noop()
    assert bolt.with_window(Count(5), Count(2)) is bolt
    assert bolt.window_spec() == WindowSpec(Count(5), Count(2))
    assert Noop().with_window(Count(5)).window_spec().sliding == Count(1)
    assert Noop().with_window(Duration(500)).window_spec().sliding == Count(1)
    assert Noop().with_window(Duration(500), Count(3)).window_spec() == WindowSpec(
        Duration(500), Count(3)
    )
    assert Noop().with_window(Count(4), Duration(100)).window_spec() == WindowSpec(
        Count(4), Duration(100)
    )
    spec = Noop().with_window(Duration(5)).window_spec()
    assert not spec.event_time
    assert spec.lag == Duration(0)
    assert spec.watermark_interval == Duration(1000)
    assert spec.late_stream is None


def test_with_tumbling_window() -> None:
    assert Noop().with_tumbling_window(Count(3)).window_spec() == WindowSpec(Count(3), Count(3))
    assert Noop().with_tumbling_window(Duration(300)).window_spec() == WindowSpec(
        Duration(300), Duration(300)
    )


def test_event_time_settings() -> None:
    bolt = Noop()
    assert (
        bolt.with_window(Duration.seconds(20), Duration.seconds(10))
        .with_timestamp_field("ts")
        .with_lag(Duration.seconds(5))
        .with_watermark_interval(Duration.seconds(1))
        .with_late_tuple_stream("late")
    ) is bolt
    assert bolt.window_spec() == WindowSpec(
        Duration(20_000),
        Duration(10_000),
        timestamp_field="ts",
        lag=Duration(5_000),
        watermark_interval=Duration(1_000),
        late_stream="late",
    )


def test_lag_and_watermark_interval_accept_int_milliseconds() -> None:
    spec = (
        Noop()
        .with_window(Count(2))
        .with_timestamp_extractor(len)
        .with_lag(250)
        .with_watermark_interval(100)
        .window_spec()
    )
    assert spec.lag == Duration(250)
    assert spec.watermark_interval == Duration(100)
    assert spec.timestamp_extractor is len
    with pytest.raises(TypeError, match="lag"):
        Noop().with_lag("5")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="watermark interval"):
        Noop().with_watermark_interval(1.5)  # type: ignore[arg-type]


def test_no_window_raises_value_error() -> None:
    with pytest.raises(ValueError, match="with_window"):
        Noop().window_spec()


# --- the executor ------------------------------------------------------------------------


def test_executor_sets_the_tick_frequency() -> None:
    def conf(bolt: WindowedBolt) -> dict[str, Any] | None:
        return WindowedBoltExecutor(bolt).get_component_configuration()

    key = Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS
    assert key == "topology.tick.tuple.freq.secs"
    assert conf(Noop().with_window(Duration(800), Duration(200))) == {key: 0.2}
    assert conf(Noop().with_tumbling_window(Duration.seconds(3))) == {key: 3.0}
    assert conf(Noop().with_window(Count(3), Duration(100))) == {key: 0.1}
    assert conf(Noop().with_window(Count(3), Count(2))) == {}
    assert conf(Noop().with_window(Duration(500))) == {}
    assert conf(Noop().with_window(Count(3)).with_timestamp_field("ts")) == {key: 1.0}
    assert conf(
        Noop().with_window(Count(3)).with_timestamp_field("ts").with_watermark_interval(50)
    ) == {key: 0.05}
    assert conf(WithConf().with_tumbling_window(Duration(400))) == {"my.setting": 7, key: 0.4}


def test_executor_validates_its_spec() -> None:
    with pytest.raises(InvalidTopologyError, match=r"Noop.*lag"):
        WindowedBoltExecutor(Noop().with_window(Count(2)).with_lag(5))


def test_executor_submission_check() -> None:
    executor = WindowedBoltExecutor(Noop().with_window(Duration(20_000), Duration(15_000)))
    with pytest.raises(InvalidTopologyError, match=r"windowed bolt 'w'.*timeout"):
        executor.validate_submission("w", {})  # the default timeout: 30 s
    with pytest.raises(InvalidTopologyError):
        executor.validate_submission("w", {Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 34})
    executor.validate_submission("w", {Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 35})
    executor.validate_submission("w", {Config.TOPOLOGY_ACKER_EXECUTORS: 0})


# --- create_topology ---------------------------------------------------------------------


def build(bolt: Any, late_subscriber: bool = False) -> Any:
    builder = TopologyBuilder()
    builder.set_spout("events", FeederSpout(["ts", "v"]))
    builder.set_bolt("avg", bolt).shuffle_grouping("events")
    if late_subscriber:
        builder.set_bolt("late-sink", Noop().with_window(Count(1))).shuffle_grouping("avg", "late")
    return builder.create_topology()


def test_a_windowed_bolt_runs_through_its_executor() -> None:
    bolt = Noop().with_window(Duration(800), Duration(200))
    topology = build(bolt)
    spec = topology.get_component("avg")
    assert isinstance(spec.component, WindowedBoltExecutor)
    assert spec.component.spec == bolt.window_spec()
    assert spec.conf[Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS] == 0.2
    assert topology.output_fields("avg", "default") == Fields("n")
    assert "late" not in spec.streams


def test_the_late_tuple_stream_is_declared_automatically() -> None:
    topology = build(
        Noop()
        .with_tumbling_window(Duration(1000))
        .with_timestamp_field("ts")
        .with_late_tuple_stream("late"),
        late_subscriber=True,
    )
    assert topology.output_fields("avg", "late") == Fields("late_tuple")
    assert topology.output_fields("avg", "default") == Fields("n")


def test_subscribing_to_a_late_stream_that_is_not_configured_is_rejected() -> None:
    with pytest.raises(InvalidTopologyError, match="late"):
        build(Noop().with_tumbling_window(Duration(1000)), late_subscriber=True)


@pytest.mark.parametrize(
    ("bolt", "message"),
    [
        (Noop(), "with_window"),
        (Noop().with_window(Count(3)).with_lag(Duration(100)), "lag"),
        (Noop().with_window(Count(3)).with_watermark_interval(Duration(100)), "watermark"),
        (Noop().with_window(Count(3)).with_late_tuple_stream("late"), "late tuple stream"),
        (
            Noop().with_window(Count(3)).with_timestamp_field("ts").with_timestamp_extractor(len),
            "not both",
        ),
        (Noop().with_window(Duration(0), Duration(10)), "at least 1 ms"),
        (Noop().with_window(3, Count(1)), "Count or a Duration"),
    ],
)
def test_create_topology_rejects_invalid_windows_naming_the_bolt(bolt: Any, message: str) -> None:
    with pytest.raises(InvalidTopologyError) as info:
        build(bolt)
    text = str(info.value)
    assert "'avg'" in text
    assert message in text


def test_window_length_and_sliding_reject_bad_values_at_construction() -> None:
    with pytest.raises(ValueError):
        Noop().with_window(Count(0))
    with pytest.raises(ValueError):
        Noop().with_window(Duration(-1), Duration(10))


# --- TupleWindow -------------------------------------------------------------------------


def test_tuple_window_accessors() -> None:
    a, b, c = object(), object(), object()
    window = TupleWindow([a, b], [b], [c], 1_000, 3_000)  # type: ignore[list-item]
    assert window.get() == [a, b]
    assert window.get_new() == [b]
    assert window.get_expired() == [c]
    assert window.start_timestamp == 1_000
    assert window.end_timestamp == 3_000
    assert len(window) == 2
    assert list(window) == [a, b]
    assert "2 tuples" in repr(window)


def test_count_window_has_no_timestamps() -> None:
    window = TupleWindow([], [], [])
    assert window.start_timestamp is None
    assert window.end_timestamp is None
    assert len(window) == 0
