"""The hooks engines look for on components, contexts and state factories.

They are part of the component interface and live in :mod:`squall.model.hooks`; this
module re-exports them so ``squall.runtime.hooks`` keeps working.
"""

from squall.model.hooks import (
    AdaptsToBolt,
    BeginsBatch,
    CachesState,
    CarriesCoordinationStore,
    ChecksWorkerProcesses,
    CleansUpTask,
    CommitsAcks,
    Exhaustible,
    FlagsCommitter,
    HandlesFailedTransaction,
    MakesBatchInstances,
    PreparesTask,
    ReportsMetrics,
    SettlesBatch,
    SettlesBeforeCheckpoint,
    ValidatesSubmission,
    implements,
)

__all__ = [
    "AdaptsToBolt",
    "BeginsBatch",
    "CachesState",
    "CarriesCoordinationStore",
    "ChecksWorkerProcesses",
    "CleansUpTask",
    "CommitsAcks",
    "Exhaustible",
    "FlagsCommitter",
    "HandlesFailedTransaction",
    "MakesBatchInstances",
    "PreparesTask",
    "ReportsMetrics",
    "SettlesBatch",
    "SettlesBeforeCheckpoint",
    "ValidatesSubmission",
    "implements",
]
