"""The backend registry a store's reader and writer each keep: constructing the family's root
(``StoreReader(location)``, ``StoreWriter(location)``) builds the first registered backend that
holds the location."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, ClassVar

from ..errors import StoreError

__all__ = ["ChosenByLocation"]


class ChosenByLocation:
    """Base of a family of store backends. The family's root declares its own ``_backends``;
    constructing the root picks the backend, constructing a backend builds that backend."""

    # Backends, asked in order which one holds a location (the first that does opens it).
    _backends: ClassVar[list[tuple[Callable[[Path], bool], type]]]

    def __new__(cls, store_dir: "str | os.PathLike[str]" = "", *args, **kwargs):
        if "_backends" in cls.__dict__:  # the family's root: the backend that holds the location
            path = Path(store_dir).expanduser()
            for holds, backend in cls._backends:
                if holds(path):
                    cls = backend
                    break
            else:
                raise StoreError(f"no store backend can open {path}")
        return super().__new__(cls)

    @classmethod
    def register_backend(cls, holds: Callable[[Path], bool], backend: type, *, first: bool = False) -> None:
        """``backend`` opens the locations ``holds`` answers True for (``first``: asked before the others)."""
        entry = (holds, backend)
        if entry not in cls._backends:
            if first:
                cls._backends.insert(0, entry)
            else:
                cls._backends.append(entry)
