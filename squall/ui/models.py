"""The REST API's JSON documents, with Storm UI's field names where they apply (its
``/api/v1/`` paths and camelCase names); squall's own additions are noted.

Latencies and capacity are strings with three decimals (``"1.250"``), as Storm UI
writes them. These models are also the OpenAPI description's schemas.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field


class ClusterSummary(BaseModel):
    """``GET /api/v1/cluster/summary``."""

    squallVersion: str = Field(description="squall's version (squall's own field)")
    engine: str = Field(description='"local" (LocalCluster) or "spark" (SparkCluster)')
    resources: str = Field(description="what the engine runs on, e.g. a Spark master")
    uptime: str = Field(description='how long the UI server has run, e.g. "6m 5s"')
    uptimeSeconds: int
    topologies: int = Field(description="topologies running")
    workersTotal: int
    executorsTotal: int
    tasksTotal: int


class TopologySummaryEntry(BaseModel):
    """One topology of ``GET /api/v1/topology/summary``."""

    id: str = Field(description="the topology's name (squall names topologies by name)")
    name: str
    status: str = Field(description="ACTIVE, INACTIVE, KILLED (being killed) or FAILED")
    uptime: str
    uptimeSeconds: int
    tasksTotal: int
    workersTotal: int
    executorsTotal: int


class TopologySummary(BaseModel):
    """``GET /api/v1/topology/summary``."""

    topologies: list[TopologySummaryEntry]


class WindowStats(BaseModel):
    """A topology's figures over one window (``topologyStats``)."""

    window: str = Field(description='"600", "10800", "86400" or ":all-time"')
    windowPretty: str = Field(description='"10m 0s", "3h 0m 0s", "1d 0h 0m 0s", "All time"')
    emitted: int
    transferred: int
    acked: int
    failed: int
    completeLatency: str


class ErrorFields(BaseModel):
    """A component's last error (empty string and nulls when there is none)."""

    lastError: str
    errorTime: int | None = Field(description="epoch seconds")
    errorLapsedSecs: int | None
    errorTask: int | None = Field(description="the task that reported it (squall's own field)")


class SpoutEntry(ErrorFields):
    """One spout of ``GET /api/v1/topology/{id}`` (over the requested window)."""

    spoutId: str
    executors: int
    tasks: int
    emitted: int
    transferred: int
    acked: int
    failed: int
    completeLatency: str
    completeLatencyPercentiles: dict[str, str] = Field(
        description="percentile (50, 90, 99, 99.9, 99.99) -> complete latency in ms, as the mean"
    )


class BoltEntry(ErrorFields):
    """One bolt of ``GET /api/v1/topology/{id}`` (over the requested window)."""

    boltId: str
    executors: int
    tasks: int
    emitted: int
    transferred: int
    executed: int
    acked: int
    failed: int
    capacity: str = Field(description="fraction of the last ~10 s its busiest task executed")
    executeLatency: str
    processLatency: str
    executeLatencyPercentiles: dict[str, str] = Field(
        description="percentile (50, 90, 99, 99.9, 99.99) -> execute latency in ms, as the mean"
    )
    processLatencyPercentiles: dict[str, str] = Field(
        description="percentile (50, 90, 99, 99.9, 99.99) -> process latency in ms, as the mean"
    )


class SparkBatch(BaseModel):
    """A recent micro-batch of a topology on SparkCluster (squall's own)."""

    batchId: int
    rows: int
    durationMs: float
    stateCommits: int = Field(
        description="state partitions committed (Trident and transactional topologies)"
    )


class SparkFigures(BaseModel):
    """The micro-batches of a topology on SparkCluster (squall's own)."""

    batches: int = Field(description="micro-batches completed")
    lastBatchId: int | None
    lastBatchRows: int
    lastBatchMs: float
    medianBatchMs: float
    rowsTotal: int
    retries: int
    recent: list[SparkBatch]


class TopologyPage(BaseModel):
    """``GET /api/v1/topology/{id}``."""

    id: str
    name: str
    status: str
    uptime: str
    uptimeSeconds: int
    tasksTotal: int
    workersTotal: int
    executorsTotal: int
    msgTimeout: int = Field(description="seconds before a tuple tree counts as failed")
    window: str
    windowHint: str
    topologyStats: list[WindowStats]
    spouts: list[SpoutEntry]
    bolts: list[BoltEntry]
    configuration: dict[str, str | int | float | bool | None]
    spark: SparkFigures | None = Field(description="micro-batches, on SparkCluster only")


class StreamStats(BaseModel):
    """One output stream of a component (``outputStats``)."""

    stream: str
    emitted: int
    transferred: int


class ExecutorStats(BaseModel):
    """One task of a component (``executorStats``; squall runs a task per executor
    entry here, ``id`` ``"[t-t]"``)."""

    id: str
    task: int
    emitted: int
    transferred: int
    executed: int
    acked: int
    failed: int


class ComponentError(BaseModel):
    """One recent error of a component (``componentErrors``)."""

    error: str
    errorTime: int = Field(description="epoch milliseconds")
    errorLapsedSecs: int
    errorTask: int
    traceback: str = Field(description="the formatted traceback (squall's own field)")


class ComponentWindowStats(BaseModel):
    """A component's figures over one window (``spoutSummary`` / ``boltStats``)."""

    window: str
    windowPretty: str
    emitted: int
    transferred: int
    executed: int
    acked: int
    failed: int
    completeLatency: str
    executeLatency: str
    processLatency: str
    completeLatencyPercentiles: dict[str, str] = Field(
        description="percentile (50, 90, 99, 99.9, 99.99) -> complete latency in ms, as the mean"
    )
    executeLatencyPercentiles: dict[str, str] = Field(
        description="percentile (50, 90, 99, 99.9, 99.99) -> execute latency in ms, as the mean"
    )
    processLatencyPercentiles: dict[str, str] = Field(
        description="percentile (50, 90, 99, 99.9, 99.99) -> process latency in ms, as the mean"
    )


class InputEntry(BaseModel):
    """A stream a bolt subscribes to, and how (squall's own ``inputs``)."""

    component: str
    stream: str
    grouping: str


class ComponentPage(BaseModel):
    """``GET /api/v1/topology/{id}/component/{component}``."""

    id: str
    name: str = Field(description="the topology's name")
    topologyId: str
    topologyStatus: str
    componentType: str = Field(description='"spout" or "bolt"')
    window: str
    windowHint: str
    executors: int
    tasks: int
    spoutSummary: list[ComponentWindowStats] | None
    boltStats: list[ComponentWindowStats] | None
    outputStats: list[StreamStats]
    inputs: list[InputEntry]
    executorStats: list[ExecutorStats]
    componentErrors: list[ComponentError]
    custom: dict[str, float] = Field(description="the component's own metrics")


class GraphInput(BaseModel):
    """A stream into a component, as the graph draws it."""

    component: str
    stream: str
    grouping: str = Field(description='e.g. "shuffle", "fields(word)"')


class GraphNode(BaseModel):
    """A component of ``GET /api/v1/topology/{id}/visualization`` (Storm's keys
    without their leading colons)."""

    type: str = Field(description='"spout" or "bolt"')
    capacity: float
    latency: float = Field(description="complete latency (spouts), execute latency (bolts), ms")
    transferred: int
    link: str = Field(description="the component's page")
    inputs: list[GraphInput]
    queued: int | None = Field(
        None, description="tuples waiting in its tasks' input queues (squall's own field)"
    )
    backpressure: bool = Field(
        False, description="a task's input queue is full (squall's own field)"
    )


class SeriesValues(BaseModel):
    """One topology's or component's figures across the samples (``None``: not known
    at that sample)."""

    emitted: list[float | None] = Field(description="tuples emitted per second")
    acked: list[float | None] = Field(description="tuples (spouts: trees) acked per second")
    latency: list[float | None] = Field(
        description="complete (spouts) or execute (bolts) latency, ms: p99 or mean"
    )
    capacity: list[float | None] = Field(description="capacity (bolts; topology: the highest)")
    queued: list[int | None] = Field(description="tuples waiting in its input queues")
    backpressure: list[bool] = Field(description="a task's input queue was full")


class ComponentSeries(SeriesValues):
    """``GET /api/v1/topology/{id}/component/{component}/series`` (squall's own), and a
    component of a topology's series."""

    type: str = Field(description='"spout" or "bolt"')


class TopologySeries(BaseModel):
    """``GET /api/v1/topology/{id}/series`` (squall's own): the UI's charts."""

    id: str
    window: str
    sampleSecs: float = Field(description="time between the latest samples")
    latencyKind: str = Field(description='"p99" (99th percentiles) or "mean"')
    times: list[float] = Field(description="when each sample was taken, epoch seconds")
    topology: SeriesValues
    components: dict[str, ComponentSeries]


class ComponentSeriesPage(ComponentSeries):
    """``GET /api/v1/topology/{id}/component/{component}/series`` (squall's own)."""

    id: str = Field(description="the component")
    topologyId: str
    window: str
    sampleSecs: float
    latencyKind: str
    times: list[float]


class Operation(BaseModel):
    """The answer to a control request."""

    topologyOperation: str = Field(description="activate, deactivate, rebalance or kill")
    topologyId: str
    status: str = Field(description='"success"')


#: A request body: every key it has is one the model declares (another one is refused,
#: naming it), and every number an integer given as one (not ``true``, ``"2"`` or 2.5).
EXACT = ConfigDict(extra="forbid", strict=True)


class RebalanceOptions(BaseModel):
    """What to change: workers, and executors per component (up to its task count)."""

    model_config = EXACT

    numWorkers: int | None = Field(
        default=None,
        ge=1,
        description="the new number of workers, up to the topology's executors after the "
        "rebalance (system executors such as __acker included)",
    )
    executors: dict[str, Annotated[int, Field(ge=1)]] | None = Field(
        default=None, description="component id -> its new executors, up to its task count"
    )


class RebalanceRequest(BaseModel):
    """The optional body of ``POST /api/v1/topology/{id}/rebalance/{wait}``."""

    model_config = EXACT

    rebalanceOptions: RebalanceOptions | None = None


class ErrorAnswer(BaseModel):
    """Every 4xx and 5xx answer."""

    error: str = Field(description='the HTTP status\'s phrase, e.g. "Not Found"')
    errorMessage: str = Field(description="what was wrong")
