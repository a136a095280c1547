"""The options of ``KafkaSpout`` and their submit-time checks."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from squall.connectors.kafka.client import (
    CONSUMER_OWNED,
    TopicSelection,
    check_bootstrap,
    check_client_conf,
    check_conf,
    check_installed,
    consumer_config,
)
from squall.connectors.kafka.records import ERRORS_STREAM, FORMATS, RECORD_ATTRIBUTES
from squall.connectors.kafka.retry import RetryBackoff
from squall.connectors.options import OptionChecker

AT_LEAST_ONCE = "at_least_once"
AT_MOST_ONCE = "at_most_once"
NO_GUARANTEE = "no_guarantee"
#: The values of ``processing_guarantee``.
GUARANTEES = (AT_LEAST_ONCE, AT_MOST_ONCE, NO_GUARANTEE)
#: The values of ``first_poll_offset``.
STRATEGIES = ("uncommitted_earliest", "earliest", "latest", "uncommitted_latest")
#: Consumer settings the spout sets itself: refused in ``consumer_conf``.
SPOUT_OWNED = {
    **CONSUMER_OWNED,
    "auto.offset.reset": "first_poll_offset",
    "error_cb": "(the spout reports errors itself)",
    "on_commit": "(the spout tracks its commits itself)",
}


def check_translator(
    checker: OptionChecker, translator: Any, fields: tuple[str, ...], value_format: str
) -> None:
    """``translator`` is None (then every field not of the record itself is read from a
    JSON value) or a callable, whose ``output_fields`` (if any) map streams other than
    ``"errors"`` to field names."""
    if translator is None:
        others = [name for name in fields if name not in RECORD_ATTRIBUTES]
        if others and value_format != "json":
            raise checker.fail(
                f"fields {others} are read from the value, which needs "
                f"value_format='json' (got {value_format!r})"
            )
        return
    if not callable(translator):
        raise checker.fail(f"translator must be callable, got {translator!r}")
    routed = getattr(translator, "output_fields", None)
    if routed is None:
        return
    if not isinstance(routed, Mapping) or not routed:
        raise checker.fail(
            f"translator.output_fields must map streams to field names, got {routed!r}"
        )
    for stream, names in routed.items():
        checker.field_names(f"translator.output_fields[{stream!r}]", names)
        if stream == ERRORS_STREAM:
            raise checker.fail(f"translator.output_fields may not declare {stream!r}")


def check_spout_options(checker: OptionChecker, spout: Any) -> None:
    """Check every option of ``spout`` (a ``KafkaSpout``); librdkafka checks the
    consumer settings. Raises the checker's error at the first wrong one."""
    check_installed(checker)
    check_bootstrap(checker, spout.bootstrap_servers)
    TopicSelection.of(checker, spout.topics)
    checker.text("group_id", spout.group_id)
    checker.choice("processing_guarantee", spout.processing_guarantee, GUARANTEES)
    checker.choice("first_poll_offset", spout.first_poll_offset, STRATEGIES)
    fields = checker.field_names("fields", spout.fields)
    checker.choice("key_format", spout.key_format, FORMATS)
    checker.choice("value_format", spout.value_format, FORMATS)
    check_translator(checker, spout.translator, fields, spout.value_format)
    checker.positive_int("commit_period_ms", spout.commit_period_ms)
    checker.positive_int("max_uncommitted_offsets", spout.max_uncommitted_offsets)
    checker.positive_int("poll_timeout_ms", spout.poll_timeout_ms)
    checker.positive_int("partition_refresh_ms", spout.partition_refresh_ms)
    if not isinstance(spout.retry, RetryBackoff):
        raise checker.fail(f"retry must be a RetryBackoff, got {spout.retry!r}")
    spout.retry.check(checker)
    conf = check_conf(checker, "consumer_conf", spout.consumer_conf, SPOUT_OWNED)
    check_client_conf(
        checker, "consumer_conf", consumer_config(spout.bootstrap_servers, spout.group_id, conf)
    )


__all__ = [
    "AT_LEAST_ONCE",
    "AT_MOST_ONCE",
    "GUARANTEES",
    "NO_GUARANTEE",
    "SPOUT_OWNED",
    "STRATEGIES",
    "check_spout_options",
    "check_translator",
]
