"""Authored flows from the command line: which flow a target names and the values of its declared
inputs, by flux's rules for ``flux flow list``, ``flux flow run TARGET`` and ``flux run FILE --entry``.

:class:`FlowCatalog` is the saved-flow catalog; inputs come from ``--inputs`` and ``--arg`` and become
binds before the flow's first statement. A flow that calls a composite ``op`` is refused before
anything is written (docs/agent.md).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

from ..errors import FluxError
from ..lang import ast as A
from ..lang.parser import parse_program
from ..lang.program import Program
from .loop import escape_braces

__all__ = ["FlowCatalog", "FlowEntry", "LoadedFlow", "load_flow_target", "load_flow_entry", "apply_flow_inputs",
           "flow_dirs", "fits", "refuse_composite_calls"]


def flow_dirs(cwd: Path, home: Optional[Path] = None) -> list[Path]:
    """The catalog's directories, in precedence order."""
    home = Path.home() if home is None else home
    return [cwd / ".flux" / "flows", home / ".flux" / "flows", cwd / ".flux" / "ops", home / ".flux" / "ops"]


@dataclass(frozen=True)
class FlowEntry:
    name: str
    kind: str  # flow | op | error
    description: str
    params: tuple
    path: str


@dataclass(frozen=True)
class LoadedFlow:
    draft: A.DraftAst
    label: str  # the file it came from
    composite_ops: frozenset  # the names of the composite ops its module declares


@dataclass
class _File:
    rank: int
    path: Path
    stem: str
    module: Any  # DraftAst | Program, or None when it does not parse
    error: str = ""


def _parse_file(path: Path) -> tuple[Any, str]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        return None, f"cannot read it: {getattr(e, 'strerror', None) or e}"
    try:
        return parse_program(text.removeprefix("\ufeff")), ""
    except FluxError as e:
        return None, str(e)
    except RecursionError:
        return None, "nested too deeply to parse"


class FlowCatalog:
    """The saved flows and composite ops (docs/agent.md)."""

    def __init__(self, dirs: Sequence[Path]):
        self.files: list[_File] = []
        for rank, d in enumerate(dirs):
            try:
                found = sorted(p for p in d.iterdir() if p.suffix == ".flux" and p.is_file())
            except OSError:
                continue
            for p in found:
                module, error = _parse_file(p)
                self.files.append(_File(rank, p, p.stem, module, error))
        self.entries: list[FlowEntry] = []
        seen: set[str] = set()
        for f in self.files:
            for e in _entries_of(f):
                if e.name not in seen:
                    seen.add(e.name)
                    self.entries.append(e)

    @classmethod
    def load(cls, cwd: Optional[Path] = None, home: Optional[Path] = None) -> "FlowCatalog":
        return cls(flow_dirs(Path.cwd() if cwd is None else cwd, home))

    def render(self) -> str:
        """flux's ``flux flow list`` text: ``name [flow|op|error] — description  (params: a, b)``."""
        if not self.entries:
            return "no flows found — add .flux files under .flux/flows or ~/.flux/flows"
        lines = []
        for e in self.entries:
            desc = f" — {e.description}" if e.description else ""
            params = f"  (params: {', '.join(p.name for p in e.params)})" if e.params else ""
            lines.append(f"{e.name} [{e.kind}]{desc}{params}")
        return "\n".join(lines)

    def resolve(self, name: str) -> LoadedFlow:
        """A saved flow by file stem or declared name (docs/agent.md); one line when there is none."""
        ranks = sorted({f.rank for f in self.files})
        for rank in ranks:
            tier = [f for f in self.files if f.rank == rank]
            stem = next((f for f in tier if f.stem == name), None)
            if stem is not None:
                return _from_stem(stem, name)
            for f in tier:
                if isinstance(f.module, A.DraftAst) and f.module.name == name:
                    return LoadedFlow(f.module, str(f.path), frozenset())
                if isinstance(f.module, Program):
                    flow = next((x for x in f.module.flows if x.name == name), None)
                    if flow is not None:
                        return LoadedFlow(flow, str(f.path), _ops(f.module))
                    if any(o.name == name for o in f.module.ops):
                        raise _op_only(str(f.path), name)
        raise FluxError(f"no stored flow named `{name}` under .flux/flows or ~/.flux/flows — try `flux flow list`")


def _ops(p: Program) -> frozenset:
    return frozenset(o.name for o in p.ops)


def _entries_of(f: _File) -> list[FlowEntry]:
    if f.module is None:
        return [FlowEntry(f.stem, "error", f"parse error: {f.error}", (), str(f.path))]
    if isinstance(f.module, A.DraftAst):
        return [FlowEntry(f.module.name or f.stem, "flow", "", tuple(f.module.params), str(f.path))]
    out = [FlowEntry(x.name or f.stem, "flow", "", tuple(x.params), str(f.path)) for x in f.module.flows]
    out += [FlowEntry(o.name, "op", o.meta.description or "", tuple(o.params), str(f.path)) for o in f.module.ops]
    return out


def _op_only(path: str, op: str) -> FluxError:
    return FluxError(f"`{path}` defines composite op `{op}` and no runnable flow — a composite op cannot be run with "
                     f"`flux flow run`; call it from a flow")


def _from_stem(f: _File, name: str) -> LoadedFlow:
    if f.module is None:
        raise FluxError(f"{f.path}: {f.error}")
    if isinstance(f.module, A.DraftAst):
        return LoadedFlow(f.module, str(f.path), frozenset())
    flow = next((x for x in f.module.flows if x.name == name), None) or (f.module.flows[0] if f.module.flows else None)
    if flow is not None:
        return LoadedFlow(flow, str(f.path), _ops(f.module))
    if f.module.ops:
        raise _op_only(str(f.path), f.module.ops[0].name)
    raise FluxError(f"`{f.path}` has no runnable flow")


def _read(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise FluxError(f"{path} is not UTF-8 text") from None
    except OSError as e:
        raise FluxError(f"cannot read {path}: {e.strerror or e}") from None
    try:
        return parse_program(text.removeprefix("\ufeff"))
    except FluxError as e:
        raise FluxError(f"{path} does not parse: {e}") from None
    except RecursionError:
        raise FluxError(f"{path} does not parse: nested too deeply") from None


def load_flow_target(target: str, catalog: Optional[FlowCatalog] = None) -> LoadedFlow:
    """``flux flow run TARGET``: an existing file (a bare flow, or a program with exactly one flow
    or journey), else a saved flow (docs/agent.md)."""
    path = Path(target)
    if path.is_file():
        module = _read(path)
        if isinstance(module, A.DraftAst):
            return LoadedFlow(module, target, frozenset())
        bodies = [*module.flows, *(j.flow for j in module.journeys)]
        if len(bodies) != 1:
            raise FluxError(f"`flux flow run` needs a bare flow or a module with exactly one flow/journey — {target} "
                            f"declares {len(module.flows)} flow(s) and {len(module.journeys)} journey(s); "
                            "pick one with `flux run FILE --entry FLOW`")
        return LoadedFlow(bodies[0], target, _ops(module))
    if path.suffix == ".flux" or "/" in target:
        raise FluxError(f"no such flow file: {target}")
    return (catalog or FlowCatalog.load()).resolve(target)


def load_flow_entry(target: str, entry: str) -> LoadedFlow:
    """``flux run FILE --entry FLOW``: the flow named ``entry`` of the program in ``target``."""
    if not target.endswith(".flux"):
        raise FluxError(f"`--entry` requires a `.flux` program path, got `{target}`")
    path = Path(target)
    if not path.is_file():
        raise FluxError(f"no such flow file: {target}")
    module = _read(path)
    if isinstance(module, A.DraftAst):
        if module.name == entry:
            return LoadedFlow(module, target, frozenset())
        raise FluxError(f"flow entrypoint `{entry}` was not found in {target}; available flow: "
                        f"{module.name or '<unnamed>'}")
    flow = next((f for f in module.flows if f.name == entry), None)
    if flow is None:
        names = ", ".join(f.name for f in module.flows if f.name) or "<none>"
        raise FluxError(f"flow entrypoint `{entry}` was not found in {target}; available flows: {names}")
    return LoadedFlow(flow, target, _ops(module))


# ------------------------------------------------------------------------------------------------
# Inputs


def _kind(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "Bool"
    if isinstance(v, (int, float)):
        return "Number"
    if isinstance(v, str):
        return "String"
    if isinstance(v, list):
        return "List"
    return "object"


def fits(v: Any, ty: Optional[A.TypeRef]) -> bool:
    """Whether a JSON value has the declared type (``Any`` and named types take anything)."""
    if ty is None or ty.tag in ("any", "named"):
        return True
    if ty.tag == "bool":
        return isinstance(v, bool)
    if ty.tag == "number":
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    if ty.tag == "string":
        return isinstance(v, str)
    if ty.tag == "list":
        return isinstance(v, list) and all(fits(x, ty.inner) for x in v)
    return True


def _label(ty: Optional[A.TypeRef]) -> str:
    return ty.label() if ty is not None else "Any"


def _check(key: str, v: Any, ty: Optional[A.TypeRef]) -> Any:
    if not fits(v, ty):
        raise FluxError(f"input `{key}` expects {_label(ty)}, got {_kind(v)}")
    return v


def _coerce_arg(key: str, raw: str, ty: Optional[A.TypeRef]) -> Any:
    tag = ty.tag if ty is not None else "any"
    if tag == "string":
        return raw
    if tag in ("any", "named"):
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    try:
        value = json.loads(raw)
    except ValueError:
        raise FluxError(f"--arg {_shown(key)} expects {_label(ty)} JSON, got `{_shown(raw)}`") from None
    return _check(key, value, ty)


def _shown(text: str) -> str:
    """User text echoed in an error: as typed, or JSON-quoted when it holds a control character."""
    return json.dumps(text) if any(ord(c) < 32 or 127 <= ord(c) < 160 for c in text) else text


def apply_flow_inputs(draft: A.DraftAst, inputs: Optional[str], args: Sequence[str]) -> A.DraftAst:
    """The flow with its declared parameters bound from ``--inputs`` / ``--arg`` (docs/agent.md)."""
    values: dict[str, Any] = {}
    if inputs is not None:
        try:
            obj = json.loads(inputs)
        except ValueError:
            raise FluxError("--inputs must be a valid JSON object (e.g. --inputs '{\"version\": \"1.2\"}')") from None
        if not isinstance(obj, dict):
            raise FluxError(f"--inputs must be a JSON object, got {_kind(obj)}")
        values.update(obj)
    raw: dict[str, str] = {}
    for a in args:
        key, eq, value = a.partition("=")
        if not eq:
            raise FluxError(f"--arg expects NAME=VALUE (got `{_shown(a)}`)")
        if not key:
            raise FluxError(f"--arg expects a non-empty NAME in NAME=VALUE (got `{_shown(a)}`)")
        raw[key] = value
    declared = {p.name: p for p in draft.params}
    unknown = sorted(k for k in {*values, *raw} if k not in declared)
    if unknown:
        have = ", ".join(declared) or "none"
        raise FluxError(f"unknown flow input parameter(s): {', '.join(map(_shown, unknown))} — declared parameters: {have}")
    for key, text in raw.items():
        values[key] = _coerce_arg(key, text, declared[key].ty)
    for p in draft.params:
        if p.name in values:
            _check(p.name, values[p.name], p.ty)
    missing = [p for p in draft.params if p.name not in values]
    if missing:
        need = ", ".join(f"{p.name} ({_label(p.ty)})" for p in missing)
        raise FluxError(f"missing required flow parameter(s): {need} — pass --inputs or --arg")
    binds = tuple(A.Bind(name=p.name, value=A.Lit(value=escape_braces(values[p.name])), ty=p.ty) for p in draft.params)
    return A.DraftAst(name=draft.name, params=draft.params, returns=draft.returns, body=binds + tuple(draft.body))


def refuse_composite_calls(loaded: LoadedFlow, called: Sequence[str]) -> None:
    """One line when the flow calls a composite op of its module (this runtime has none)."""
    used = sorted(set(called) & loaded.composite_ops)
    if used:
        raise FluxError(f"the flow calls composite op(s) {', '.join(f'`{o}`' for o in used)} declared in {loaded.label} "
                        "— this runtime cannot run composite ops yet; call the ops they wrap directly")
