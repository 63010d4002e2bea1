"""The flux store: the event log and session registry — in a ``Storage::dir`` (SQLite, beside its
flow store) or in a Postgres database a team shares — read and written by flux's rules.

Names load lazily (PEP 562) so a command that only lists sessions does not pay for importing every
event type.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

_STORE_NAMES = ("SessionRow", "StoredEvent", "StoreReader", "StoreWriter", "default_store_dir", "session_number")
# The event model and its payload codecs, asked in order for any other name.
_EVENT_MODULES = (".events", ".payload_decode", ".payload_encode")


def __getattr__(name: str) -> Any:
    if Path(__file__).with_name(name + ".py").is_file():  # a submodule (``from . import rawfile``)
        return importlib.import_module("." + name, __name__)
    if name in _STORE_NAMES:
        return getattr(importlib.import_module(".store", __name__), name)
    if name == "Usage":
        return importlib.import_module(".usage", __name__).Usage
    for module in _EVENT_MODULES:
        events = importlib.import_module(module, __name__)
        if name in events.__all__:
            return getattr(events, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    names = set(_STORE_NAMES)
    for module in _EVENT_MODULES:
        names.update(importlib.import_module(module, __name__).__all__)
    return sorted(names)
