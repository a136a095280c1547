"""Loading storm-starter's ports (``examples/storm_starter/<name>.py``) in tests: the
folder is no package, so each module is imported from its file."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

STORM_STARTER = Path(__file__).resolve().parent.parent / "examples" / "storm_starter"


def load_starter(name: str) -> ModuleType:
    """Import ``examples/storm_starter/<name>.py`` as module ``storm_starter_<name>``
    (once per process)."""
    module_name = f"storm_starter_{name}"
    if module_name not in sys.modules:
        spec = importlib.util.spec_from_file_location(module_name, STORM_STARTER / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
    return sys.modules[module_name]
