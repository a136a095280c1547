"""Custom metrics and metrics consumers: Storm's ``org.apache.storm.metric.api`` (and
``org.apache.storm.metric.LoggingMetricsConsumer``) under one name.

``from squall.metric import CountMetric, IMetricsConsumer, LoggingMetricsConsumer``. The
classes are defined in ``squall.model.metrics``; docs/metrics.md describes them.
"""

from squall.model.metrics import (
    AssignableMetric,
    CombinedMetric,
    CountMetric,
    DataPoint,
    ICombiner,
    IMetric,
    IMetricsConsumer,
    IReducer,
    LoggingMetricsConsumer,
    MeanReducer,
    MeanReducerState,
    MultiCountMetric,
    MultiReducedMetric,
    ReducedMetric,
    TaskInfo,
)

__all__ = [
    "AssignableMetric",
    "CombinedMetric",
    "CountMetric",
    "DataPoint",
    "ICombiner",
    "IMetric",
    "IMetricsConsumer",
    "IReducer",
    "LoggingMetricsConsumer",
    "MeanReducer",
    "MeanReducerState",
    "MultiCountMetric",
    "MultiReducedMetric",
    "ReducedMetric",
    "TaskInfo",
]
