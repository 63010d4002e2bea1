"""Lazy re-exports for a package's ``__init__`` (PEP 562): a public name loads its submodule on first
use, so importing the package (as every command does) stays cheap."""

from __future__ import annotations

import importlib
from typing import Any, Callable, Mapping


def lazy_exports(package: str, exports: Mapping[str, str]) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package`` that serves each name of ``exports`` (name -> relative
    submodule, e.g. ``".client"``) from its submodule, imported when the name is first asked for."""

    def __getattr__(name: str) -> Any:
        mod = exports.get(name)
        if mod is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(mod, package), name)

    return __getattr__
