"""Names a package offers from modules of a higher layer, imported at first use.

A package may not import a layer above its own (see docs/architecture.md), yet some names
users import from it live above it: ``squall.trident.state.RedisMapState`` is filed with
the Redis connector. The package's ``__init__`` declares those names with
:func:`lazy_exports` (PEP 562 module ``__getattr__`` and ``__dir__``): the module that
holds a name is imported when the name is first read, and never by importing the package.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any


def lazy_exports(
    package: str, homes: Mapping[str, str], public: Iterable[str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A package's ``__getattr__`` and ``__dir__`` for names that live elsewhere.

    Runs where the package is imported; the returned ``__getattr__`` runs at the first
    read of each name and caches it in the package.

    Args:
        package: the package's ``__name__``.
        homes: name -> the dotted module that defines it.
        public: the package's ``__all__`` (what ``dir()`` lists besides its globals).

    Returns:
        ``(__getattr__, __dir__)`` to assign at the package's top level. ``__getattr__``
        raises ``AttributeError`` for a name that is not in ``homes``.
    """
    listed = sorted(set(public))

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(listed))

    return __getattr__, __dir__


__all__ = ["lazy_exports"]
