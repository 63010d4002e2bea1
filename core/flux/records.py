"""Value classes for the modules ``flux sessions`` loads, without ``@dataclass``'s start-up cost.

A :class:`Record` subclass writes its ``__init__`` by hand and inherits dataclass-like ``==``,
``repr``, copying and pickling over its ``__slots__``; a :class:`FrozenRecord` is also immutable and
hashable. Why: docs/architecture.md.
"""

from __future__ import annotations

__all__ = ["Record", "FrozenRecord", "init_fields"]


class Record:
    """Fields are ``__slots__`` in ``__init__``'s positional order; ``==`` compares the fields of two
    objects of the same class (``_NOT_COMPARED`` left out), ``repr`` lists them (``_NOT_SHOWN`` left
    out); copying and pickling rebuild through ``__init__``. Mutable and unhashable."""

    __slots__ = ()
    _NOT_COMPARED: tuple[str, ...] = ()
    _NOT_SHOWN: tuple[str, ...] = ()

    def _compared(self) -> tuple:
        skip = self._NOT_COMPARED
        return tuple(getattr(self, f) for f in self.__slots__ if f not in skip)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._compared() == other._compared()  # type: ignore[attr-defined]

    __hash__ = None  # type: ignore[assignment]  # mutable: unhashable, as a dataclass with eq

    def __repr__(self) -> str:
        skip = self._NOT_SHOWN
        fields = ", ".join(f"{f}={getattr(self, f)!r}" for f in self.__slots__ if f not in skip)
        return f"{self.__class__.__qualname__}({fields})"

    def __reduce__(self):
        return (self.__class__, tuple(getattr(self, f) for f in self.__slots__))


class FrozenRecord(Record):
    """A :class:`Record` whose fields cannot be assigned or deleted (``__init__`` sets them through
    ``object.__setattr__``, as a frozen dataclass does); it hashes by its compared fields."""

    __slots__ = ()

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"cannot assign to field {name!r} of a frozen {self.__class__.__qualname__}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r} of a frozen {self.__class__.__qualname__}")

    def __hash__(self) -> int:
        return hash(self._compared())


def init_fields(record: Record, *values: object) -> None:
    """Set ``record``'s fields to ``values`` in ``__slots__`` order, each through
    ``object.__setattr__`` as a frozen ``__init__`` does. A loop, so about 1 us slower per object
    than the same assignments written out: for a class that is not built once per stored row."""
    for name, value in zip(record.__slots__, values, strict=True):
        object.__setattr__(record, name, value)
