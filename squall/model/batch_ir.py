"""``BatchIR``: what a topology that runs on the batch layer was compiled from.

A Trident topology's compiler (:class:`squall.trident.ir.TridentIR`) and a
transactional topology's builder (:class:`squall.transactional.ir.TransactionalIR`)
describe the batch components they made and hand the description to the engines as
``StormTopology.batch_ir``. This is what every engine may ask of either, whatever its
kind; an engine that lowers the IR itself (the Spark engine's plan) tells the two kinds
apart by their classes.
"""

from __future__ import annotations

from abc import ABC, abstractmethod


class BatchIR(ABC):
    """The batch layer's description of a compiled topology (see the module docstring).

    Read by the engines at submit, in the submitting process; never changed after the
    compiler made it.
    """

    #: Whether the compiler names the streams between its components with ids numbered
    #: over the whole process (Trident's ``s23``), so that two compilations of one
    #: topology may name the same stream differently.
    numbered_streams: bool = False

    @abstractmethod
    def user_components(self) -> dict[str, object]:
        """Component id -> the user's object the component runs, for the components
        that run one as it was given (a spout, a batch bolt), in declaration order."""

    def check_worker_processes(self, topology_name: str) -> None:
        """Check that the topology gives the same results when its workers are processes
        of their own (parts of it may share this process's memory when its workers are
        threads). Nothing to check unless the kind says otherwise.

        Called by the local engine when it runs the topology in worker processes, in the
        submitting process, before any worker starts.

        Raises:
            InvalidTopologyError: it would not; the submission is refused.
        """
