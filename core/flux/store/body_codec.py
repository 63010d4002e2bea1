"""How a payload body maps to a frozen dataclass and back, whatever the event kind: fields in declared
order, ``None`` omitted, a missing field at its default, a wrongly typed scalar coerced to its default
(flux's serde rules, docs/store-format.md) — and the readers and constructors generated from a class's
fields for the hot paths that skip building the dataclass."""

from __future__ import annotations

import math
from dataclasses import MISSING, fields
from typing import Any, ClassVar

from .usage import Usage

__all__ = ["Struct", "field_plan", "json_name", "positional_maker", "coerce", "fields_exact", "field_reader"]


class Struct:
    """Mixin: ``to_body`` / ``from_body`` by dataclass field order.

    Fields whose value is ``None`` are omitted (serde ``skip_serializing_if = Option::is_none``).
    Fields listed in ``_nested`` are (de)serialized through the named class.
    """

    _nested: ClassVar[dict[str, type]] = {}

    def to_body(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, key, _sub in field_plan(type(self)):
            v = getattr(self, name)
            if v is None:
                continue
            if isinstance(v, (Struct, Usage)):
                v = v.to_body()
            out[key] = v
        return out

    @classmethod
    def from_body(cls, d: Any):
        if not isinstance(d, dict):
            d = {}
        kwargs = {}
        for name, key, sub in field_plan(cls):
            if key in d:
                v = d[key]
                if sub is not None:
                    if v is None:  # a null nested struct (`"usage": null`) takes the field's default
                        continue
                    v = sub.from_body(v)
                kwargs[name] = v
        return cls(**kwargs)


_PLANS: dict[type, tuple[tuple[str, str, type | None], ...]] = {}


def field_plan(cls: type) -> tuple[tuple[str, str, type | None], ...]:
    """(attribute, JSON key, nested class) per field, in declared order — computed once per class."""
    plan = _PLANS.get(cls)
    if plan is None:
        nested = getattr(cls, "_nested", {})
        plan = tuple((f.name, json_name(f.name), nested.get(f.name)) for f in fields(cls) if not f.name.startswith("_"))
        _PLANS[cls] = plan
    return plan


def json_name(name: str) -> str:
    return name[:-1] if name.endswith("_") else name  # `type_` style escapes


def positional_maker(cls: type) -> Any:
    """``cls(*fields)`` for a frozen slotted dataclass without ``__post_init__``, in declared field
    order, each slot set through its member descriptor: the generated frozen ``__init__`` goes
    through ``object.__setattr__`` once per field (13 for a cell: ~3 us a call, once per recorded
    op). The same object — tests/core/test_events_fast.py compares every field, ``==`` and hash."""
    names = [f.name for f in fields(cls)]
    if hasattr(cls, "__post_init__") or not getattr(cls, "__slots__", None) or any(f.init is False for f in fields(cls)):
        raise TypeError(f"{cls.__name__}: not a plain frozen slotted dataclass")
    ns: dict[str, Any] = {"_new": object.__new__, "_cls": cls}
    for i, name in enumerate(names):
        ns[f"_set{i}"] = getattr(cls, name).__set__
    src = (f"def new_{cls.__name__}(" + ", ".join(names) + "):\n    self = _new(_cls)\n"
           + "".join(f"    _set{i}(self, {name})\n" for i, name in enumerate(names)) + "    return self\n")
    exec(src, ns)  # noqa: S102 - the source is built from the dataclass's own field names
    return ns[f"new_{cls.__name__}"]


_TYPES: dict[type, tuple[tuple[str, str], ...]] = {}


def _coerce_types(cls: type) -> tuple[tuple[str, str], ...]:
    typed = tuple((f.name, f.type if isinstance(f.type, str) else getattr(f.type, "__name__", "")) for f in fields(cls))
    _TYPES[cls] = typed
    return typed


def coerce(cls: type, obj: Any) -> Any:
    """Replace wrongly-typed scalar fields with their defaults (tolerant decoding of odd writers)."""
    typed = _TYPES.get(cls) or _coerce_types(cls)
    changes = None
    for name, t in typed:
        v = getattr(obj, name)
        if t == "int":
            if not isinstance(v, int) or isinstance(v, bool):
                changes = changes or {}
                # A float field holding a whole number keeps it; inf and NaN (Python's json reads
                # 1e999 and the bare NaN) have none: the default, like any other wrong type.
                changes[name] = int(v) if isinstance(v, float) and math.isfinite(v) else 0
        elif t == "str":
            if not isinstance(v, str):
                changes = changes or {}
                changes[name] = "" if v is None else str(v)
        elif t == "bool":
            if not isinstance(v, bool):
                changes = changes or {}
                changes[name] = bool(v)
        elif t == "str | None" and v is not None and not isinstance(v, str):
            changes = changes or {}
            changes[name] = str(v)
    if not changes:
        return obj
    kwargs = {name: getattr(obj, name) for name, _ in typed}
    kwargs.update(changes)
    return cls(**kwargs)


_STR_OR_NONE: Any = object()  # the exact-type marker of a ``str | None`` field
_EXACT: dict[type, dict[str, Any] | None] = {}


def _exact_types(cls: type) -> dict[str, Any] | None:
    """JSON key → the exact type its value must have (``str``/``int``/``bool``, or
    :data:`_STR_OR_NONE`), for the scalar fields :func:`coerce` checks — or None when some such
    field's default would itself be coerced (then an absent field is not "exact")."""
    types = dict(_TYPES.get(cls) or _coerce_types(cls))
    by_name = {f.name: f for f in fields(cls)}
    marks = {"str": str, "int": int, "bool": bool, "str | None": _STR_OR_NONE}
    out: dict[str, Any] | None = {}
    for name, key, _sub in field_plan(cls):
        mark = marks.get(types.get(name, ""))
        if mark is None:
            continue
        default = by_name[name].default
        if default is not MISSING and not (type(default) is mark or (mark is _STR_OR_NONE and
                                                                      (default is None or type(default) is str))):
            out = None
            break
        out[key] = mark
    _EXACT[cls] = out
    return out


def fields_exact(cls: type, d: dict) -> bool:
    """Whether every scalar field of ``cls`` that ``d`` (a body's JSON object) holds already has its
    declared type, so :func:`coerce` would change nothing (absent fields take their defaults,
    which are well-typed). One pass over ``d``'s items, exact type checks."""
    marks = _EXACT[cls] if cls in _EXACT else _exact_types(cls)
    if marks is None:
        return False
    for key, v in d.items():
        mark = marks.get(key)
        if mark is None or type(v) is mark:
            continue
        if mark is _STR_OR_NONE and (v is None or type(v) is str):
            continue
        return False
    return True


_READERS: dict[tuple[type, tuple[str, ...] | None, type | None], Any] = {}


def field_reader(cls: type, want: tuple[str, ...] | None = None, make: type[tuple] | None = None) -> Any:
    """A function ``(d, build=None) -> build(*values) | None`` for bodies of ``cls``: when
    :func:`fields_exact` holds for ``d`` (a body's JSON object), ``build`` of the ``want`` fields'
    values (JSON keys, in that order; each absent one at its default — exactly what decoding the
    body gives for it; without ``build``, their tuple), else None. With ``want=()`` it answers
    True for an exact body. ``make``, a named tuple class of the ``want`` fields: the result is
    that tuple, built without a call to its ``__new__`` (what it would do: ``tuple.__new__``). A reader's
    hot path in one generated function: one ``dict.get`` per field and exact type checks, no loop
    over the body and nothing built but the result. None when ``cls`` has a field whose default
    would itself be coerced (:func:`fields_exact` is then always False) or a nested field.
    Generated once per (class, want) from the dataclass's fields (trusted names and literal
    defaults, never stored text)."""
    key = (cls, want, make)
    if key in _READERS:
        return _READERS[key]
    marks = _EXACT[cls] if cls in _EXACT else _exact_types(cls)
    fn = None
    if marks is not None and not getattr(cls, "_nested", None):
        defaults = {k: f.default for (name, k, _sub), f in zip(field_plan(cls), [f for f in fields(cls)
                                                                                  if not f.name.startswith("_")])}
        names = want if want is not None else tuple(defaults)
        if all(k in defaults for k in names) and all(type(defaults[k]) in (str, int, bool, type(None))
                                                     for k in (*marks, *names)):
            var = {k: f"v{i}" for i, k in enumerate(dict.fromkeys((*marks, *names)))}
            loads = [f"    {var[k]} = g({k!r}, {defaults[k]!r})" for k in var]
            checks = [f"({var[k]} is None or t({var[k]}) is s)" if m is _STR_OR_NONE
                      else f"t({var[k]}) is {m.__name__[0]}" for k, m in marks.items()]
            vals = ", ".join(var[k] for k in names)
            result = f"({vals},) if build is None else build({vals})" if names else "True"
            if make is not None and names:
                result = f"new(make, ({vals},))"
            src = "\n".join(["def read(d, build=None, t=type, s=str, i=int, b=bool):", "    g = d.get", *loads,
                             f"    if not ({' and '.join(checks) or 'True'}):", "        return None",
                             f"    return {result}"])
            scope: dict[str, Any] = {"new": tuple.__new__, "make": make}
            exec(compile(src, f"<field reader {cls.__name__}>", "exec"), scope)  # noqa: S102 - from field names
            fn = scope["read"]
    _READERS[key] = fn
    return fn
