"""Ops: Python functions the agent can call, with a name, a JSON schema, a description and an effect.

``@op`` builds an :class:`Op` from a function: the schema from its signature and type hints, the
description from its docstring's first paragraph, the effect one of :data:`EFFECTS` (what a policy
allows or denies by). :class:`OpError` is a tool error with exactly its message; any other exception
is a tool error naming it.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import json
import os
import re
import sys
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Literal, Optional, Union, get_args, get_origin

from ..canonical import compact_json
from ..errors import FluxError
from ..lang.catalog import OpCatalog, OpSpec
from ..lang.interpreter import OpOutcome

__all__ = ["EFFECTS", "MUTATING_EFFECTS", "Op", "OpError", "op", "Toolbox", "validate_input", "schema_for", "OPS_REF",
           "load_ops"]

#: The effect vocabulary, least to most dangerous.
EFFECTS = ("pure", "read", "write", "delete", "network", "exec")
#: Effects that change the world (they run as ``phase: execute`` plans).
MUTATING_EFFECTS = frozenset({"write", "delete", "network", "exec"})


class OpError(FluxError):
    """Raise from an op to return a tool error with exactly this message. Raised outside an op
    call (a workspace that does not exist when the ops are built), it is a :class:`FluxError` like
    any other bad input: one ``error:`` line on the command line, never a traceback."""


@dataclass
class Op:
    name: str
    fn: Callable[..., Any]
    input_schema: dict
    description: str = ""
    effect: str = "read"

    @property
    def required(self) -> tuple[str, ...]:
        return tuple(self.input_schema.get("required", ()))

    @property
    def optional(self) -> tuple[str, ...]:
        req = set(self.required)
        return tuple(k for k in self.input_schema.get("properties", {}) if k not in req)

    def spec(self) -> OpSpec:
        return OpSpec(self.name, self.required, self.optional, self.effect, self.description)

    def tool(self) -> dict:
        """The tool definition of the canonical model request."""
        return {"name": self.name, "description": self.description, "input_schema": self.input_schema}

    def call(self, input_obj: dict) -> OpOutcome:
        """Run the function; never raises (a failure is an ``is_error`` outcome)."""
        try:
            result = self.fn(**input_obj)
            if type(result) not in _NEVER_AWAITABLE and inspect.isawaitable(result):
                result = _run_awaitable(result)
        except OpError as e:
            return OpOutcome(content=str(e), is_error=True)
        except Exception as e:  # an op raising is a tool error, never a crashed turn
            if type(e) is TypeError:  # arguments the function refuses (an authored flow's call is not
                why = validate_input(self, input_obj)  # validated before dispatch): say which, as to a model
                if why is not None:
                    return OpOutcome(content=why, is_error=True)
            return OpOutcome(content=f"op `{self.name}` raised {type(e).__name__}: {e}", is_error=True)
        if isinstance(result, OpOutcome):
            return result
        if result is None:
            return OpOutcome(content="")
        if isinstance(result, str):
            return OpOutcome(content=result)
        try:
            return OpOutcome(content=compact_json(result))
        except TypeError:
            return OpOutcome(content=str(result))

    def __call__(self, *args, **kwargs):  # the decorated function stays callable
        return self.fn(*args, **kwargs)


_NEVER_AWAITABLE = frozenset({str, dict, list, int, float, bool, type(None), OpOutcome})  # spares the ABC check


def _run_awaitable(aw: Any) -> Any:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_wrap(aw))
    # Inside a running loop (the agent loop dispatches synchronously): run in a helper thread.
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(1) as ex:
        return ex.submit(asyncio.run, _wrap(aw)).result()


async def _wrap(aw: Any) -> Any:
    return await aw


# ---------------------------------------------------------------------------------------------
# Schema from type hints


def schema_for(tp: Any) -> dict:
    """A JSON schema for one Python type hint."""
    if tp is inspect.Parameter.empty or tp is Any:
        return {}
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        args = [a for a in get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return schema_for(args[0])
        return {"anyOf": [schema_for(a) for a in args]}
    if origin is Literal:
        vals = list(get_args(tp))
        out: dict = {"enum": vals}
        if all(isinstance(v, str) for v in vals):
            out["type"] = "string"
        return out
    if tp is str:
        return {"type": "string"}
    if tp is bool:
        return {"type": "boolean"}
    if tp is int:
        return {"type": "integer"}
    if tp is float:
        return {"type": "number"}
    if tp in (list, tuple) or origin in (list, tuple, typing.Sequence):
        args = get_args(tp)
        out = {"type": "array"}
        if args and args[0] is not Ellipsis:
            out["items"] = schema_for(args[0])
        return out
    if tp is dict or origin is dict:
        return {"type": "object"}
    return {}


def _doc_parts(fn: Callable) -> tuple[str, dict[str, str]]:
    """Description (first paragraph) and ``name: text`` lines of an ``Args:`` section."""
    doc = inspect.getdoc(fn) or ""
    paras = doc.split("\n\n")
    desc = " ".join(paras[0].split()) if paras and paras[0].strip() else ""
    params: dict[str, str] = {}
    in_args = False
    for line in doc.splitlines():
        s = line.strip()
        if s.lower() in ("args:", "arguments:", "parameters:"):
            in_args = True
            continue
        if in_args:
            if not s:
                continue
            if ":" in s and not line.startswith(" " * 8):
                name, _, text = s.partition(":")
                name = name.split("(")[0].strip()
                if name.isidentifier():
                    params[name] = text.strip()
                    continue
            if not line.startswith(" "):
                in_args = False
    return desc, params


def op(fn: Callable | None = None, *, name: str | None = None, effect: str = "read",
       description: str | None = None) -> Any:
    """Decorator: ``@op`` or ``@op(name=..., effect="write", description=...)``."""
    if effect not in EFFECTS:
        raise FluxError(f"unknown effect {effect!r} — use one of {', '.join(EFFECTS)}")

    def make(f: Callable) -> Op:
        try:
            hints = typing.get_type_hints(f)
        except Exception:
            hints = {}
        sig = inspect.signature(f)
        desc, param_docs = _doc_parts(f)
        props: dict[str, dict] = {}
        required: list[str] = []
        for p in sig.parameters.values():
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                continue
            s = dict(schema_for(hints.get(p.name, p.annotation)))
            if p.name in param_docs:
                s["description"] = param_docs[p.name]
            if p.default is inspect.Parameter.empty:
                required.append(p.name)
            elif p.default is not None and _jsonable(p.default):
                s["default"] = p.default
            props[p.name] = s
        schema = {"type": "object", "properties": props, "required": required}
        return Op(name or f.__name__, f, schema, description if description is not None else desc, effect)

    return make(fn) if fn is not None else make


def _jsonable(v: Any) -> bool:
    try:
        json.dumps(v)
        return True
    except TypeError:
        return False


# ---------------------------------------------------------------------------------------------
# Input validation (malformed tool arguments go back to the model as a tool error)

_JSON_TYPES = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
    "null": lambda v: v is None,
}


def _check(value: Any, schema: dict, where: str) -> str | None:
    t = schema.get("type")
    if isinstance(t, str) and t in _JSON_TYPES and not _JSON_TYPES[t](value):
        return f"`{where}` must be {'an' if t[0] in 'aeiou' else 'a'} {t}, got {compact_json(value)[:60]}"
    if "enum" in schema and value not in schema["enum"]:
        return f"`{where}` must be one of {', '.join(compact_json(v) for v in schema['enum'])}"
    if "anyOf" in schema and all(_check(value, s, where) for s in schema["anyOf"]):
        return f"`{where}` has the wrong type ({compact_json(value)[:60]})"
    if t == "array" and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            err = _check(item, schema["items"], f"{where}[{i}]")
            if err:
                return err
    return None


def validate_input(op_: Op, input_obj: Any) -> str | None:
    """``None`` if ``input_obj`` fits the op's schema, else a one-line reason for the model."""
    if not isinstance(input_obj, dict):
        return f"arguments of `{op_.name}` must be a JSON object, got {compact_json(input_obj)[:80]}"
    if "__malformed_arguments__" in input_obj:  # a provider's marker for unparsable JSON arguments
        raw = str(input_obj["__malformed_arguments__"])
        return f"the arguments of `{op_.name}` are not a JSON object: {raw[:200]} — send the arguments as one JSON object"
    props = op_.input_schema.get("properties", {})
    missing = [k for k in op_.input_schema.get("required", ()) if k not in input_obj]
    if missing:
        return f"`{op_.name}` is missing required argument(s): {', '.join(missing)}"
    unknown = [k for k in input_obj if k not in props]
    if unknown and props is not None and not op_.input_schema.get("additionalProperties", False):
        return (f"`{op_.name}` has no argument(s) {', '.join(unknown)} — it takes "
                f"{', '.join(props) or 'no arguments'}")
    for k, v in input_obj.items():
        if k in props and v is not None:
            err = _check(v, props[k], k)
            if err:
                return f"bad arguments for `{op_.name}`: {err}"
    return None


# ---------------------------------------------------------------------------------------------


@dataclass
class Toolbox:
    """The ops a client offers: name → :class:`Op`, plus the catalog and tool list views."""

    ops: dict[str, Op] = field(default_factory=dict)

    @classmethod
    def of(cls, ops: Iterable[Op | Callable]) -> "Toolbox":
        tb = cls()
        for o in ops:
            tb.add(o)
        return tb

    def add(self, o: Op | Callable) -> None:
        if not isinstance(o, Op):
            o = op(o)
        self.ops[o.name] = o

    def get(self, name: str) -> Optional[Op]:
        return self.ops.get(name)

    def catalog(self) -> OpCatalog:
        return OpCatalog([o.spec() for o in self.ops.values()])

    def tools(self) -> list[dict]:
        return [self.ops[n].tool() for n in sorted(self.ops)]

    def __contains__(self, name: object) -> bool:
        return name in self.ops

    def __len__(self) -> int:
        return len(self.ops)


# ---------------------------------------------------------------------------------------------
# Ops named by reference ("module:attr"), so a recording can say which ops it was made with.

#: ``module:attr`` — a dotted module path, a colon, a dotted attribute path.
OPS_REF = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


def _as_ops(value: Any, ref: str, *, called: bool = False) -> list[Op | Callable]:
    if isinstance(value, Toolbox):
        return list(value.ops.values())
    if isinstance(value, Op):
        return [value]
    if isinstance(value, (list, tuple)):
        return list(value)
    if callable(value) and not called:
        try:
            made = value()
        except Exception as e:  # noqa: BLE001 - the user's factory failing is their ops' failure
            raise FluxError(f"ops {ref!r}: calling {ref.split(':', 1)[1]}() failed ({type(e).__name__}: {e})") from None
        return _as_ops(made, ref, called=True)
    raise FluxError(f"ops {ref!r} is a {type(value).__name__} — name a list of ops, a Toolbox, or a function "
                    f"that returns one")


def load_ops(ref: str) -> list[Op | Callable]:
    """The ops ``ref`` (``"module:attr"``) names: a list or tuple of ops (or plain functions), a
    :class:`Toolbox`, one :class:`Op`, or a function of no arguments returning one of those. The
    module is imported with the current directory on ``sys.path`` (as ``python -m`` would). Any
    failure is one :class:`FluxError` line naming the reference."""
    if not isinstance(ref, str) or not OPS_REF.fullmatch(ref):
        raise FluxError(f"ops {ref!r}: name them as module:attr (e.g. myproject.tools:OPS)")
    module_name, attr = ref.split(":", 1)
    cwd = os.getcwd()
    added = cwd not in sys.path
    if added:
        sys.path.insert(0, cwd)
    try:
        try:
            value: Any = importlib.import_module(module_name)
        except Exception as e:  # noqa: BLE001 - a module that fails to import is the user's ops failing
            raise FluxError(f"ops {ref!r}: cannot import {module_name} ({type(e).__name__}: {e}) — is it on "
                            f"PYTHONPATH (or under the current directory)?") from None
    finally:
        if added:
            try:
                sys.path.remove(cwd)
            except ValueError:
                pass
    for part in attr.split("."):
        if not hasattr(value, part):
            raise FluxError(f"ops {ref!r}: {module_name} has no attribute {attr}")
        value = getattr(value, part)
    ops = _as_ops(value, ref)
    for o in ops:
        if not isinstance(o, Op) and not callable(o):
            raise FluxError(f"ops {ref!r}: {o!r} is not an op (an @op function or a plain function)")
    return ops
