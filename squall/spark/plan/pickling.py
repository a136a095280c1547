"""Getting user code to Spark's Python processes: by value, with clear errors (see
:mod:`squall.runtime.shipping`)."""

from __future__ import annotations

from typing import Any

from squall.model.topology import StormTopology
from squall.runtime import shipping
from squall.runtime.shipping import find_unpicklable

#: Where Spark sends components, as errors name it.
DESTINATION = "Spark executors"


def pickle_user_code_by_value(topology: StormTopology) -> list[str]:
    """Make user modules travel with the pickled components.

    A topology loaded from a file (``squall run app.py``) lives in a module Spark's
    Python workers cannot import; pickling its code by value lets them run it anyway.
    Returns the module names.
    """
    from pyspark import cloudpickle as spark_cloudpickle

    names = shipping.pickle_by_value(topology)
    for module in shipping.user_modules(topology).values():
        spark_cloudpickle.register_pickle_by_value(module)
    return names


def check_picklable(component: Any, component_id: str) -> None:
    """Raise a clear error if ``component`` cannot travel to Spark executors.

    Raises:
        InvalidTopologyError: naming the component and the attribute that cannot be
            pickled.
    """
    shipping.check_picklable(component, component_id, DESTINATION)


__all__ = ["check_picklable", "find_unpicklable", "pickle_user_code_by_value"]
