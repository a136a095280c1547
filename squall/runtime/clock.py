"""Injected time; the clocks live in :mod:`squall.model.clock` (``TopologyContext.clock``
is part of the component interface) and are re-exported here."""

from squall.model.clock import SYSTEM_CLOCK, Clock, ManualClock

__all__ = ["SYSTEM_CLOCK", "Clock", "ManualClock"]
