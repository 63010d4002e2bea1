"""The module layer of a ``.flux`` file (``parse_program``): several flows and the
pure-data declarations of a multi-agent app — ``permissions``, ``agent``, ``agent_loop``,
``channel``, ``datasource``, ``board``, ``trigger``, ``journey`` and composite ``op`` with its metadata.

These add no node kinds; each flow-shaped body is an ordinary :class:`~flux.lang.ast.DraftAst`.
``program_to_json`` writes serde's field order for flux's ``Program`` (``program.rs``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Union

from . import ast as A
from .astjson import draft_to_json, sort_json, type_to_json

__all__ = [
    "Program", "PermissionDecl", "AgentDecl", "AgentLoopDecl", "ChannelDecl", "DatasourceDecl", "BoardDecl",
    "TriggerDecl", "JourneyDecl", "CompositeOpDecl", "CompositeOpMeta", "Module", "program_to_json",
]


@dataclass
class PermissionDecl:
    allow: Optional[list] = None
    deny: list = field(default_factory=list)

    def to_json(self) -> dict:
        out: dict = {}
        if self.allow is not None:
            out["allow"] = list(self.allow)
        out["deny"] = list(self.deny)
        return out


@dataclass
class AgentDecl:
    name: str
    model: Optional[str] = None
    tools: list = field(default_factory=list)
    datasources: list = field(default_factory=list)
    description: Optional[str] = None
    agent_loop: Optional[str] = None
    permissions: Optional[PermissionDecl] = None
    settings: Optional[dict] = None

    def to_json(self) -> dict:
        out: dict = {"name": self.name}
        if self.model is not None:
            out["model"] = self.model
        out["tools"] = list(self.tools)
        out["datasources"] = list(self.datasources)
        if self.description is not None:
            out["description"] = self.description
        if self.agent_loop is not None:
            out["loop"] = self.agent_loop
        if self.permissions is not None:
            out["permissions"] = self.permissions.to_json()
        if self.settings:
            out["settings"] = sort_json(self.settings)  # a serde_json Map: keys sorted
        return out


@dataclass
class AgentLoopDecl:
    name: str
    flow: A.DraftAst

    def to_json(self) -> dict:
        return {"name": self.name, "flow": draft_to_json(self.flow)}


@dataclass
class ChannelDecl:
    name: str
    kind: str
    settings: Optional[dict] = None

    def to_json(self) -> dict:
        out: dict = {"name": self.name, "kind": self.kind}
        if self.settings:
            out["settings"] = sort_json(self.settings)  # a serde_json Map: keys sorted
        return out


@dataclass
class DatasourceDecl:
    name: str
    kind: str
    path: Optional[str] = None
    settings: Optional[dict] = None

    def to_json(self) -> dict:
        out: dict = {"name": self.name, "kind": self.kind}
        if self.path is not None:
            out["path"] = self.path
        if self.settings:
            out["settings"] = sort_json(self.settings)  # a serde_json Map: keys sorted
        return out


@dataclass
class BoardDecl:
    """``board NAME`` with its three required axes (where it lives, which state machine, which
    backend) and the backend's own fields (``root``)."""

    SCOPES = ("session", "repository", "workspace")
    PROFILES = ("general", "planning", "execution")
    KINDS = ("session", "track", "markdown", "memory", "federated")

    name: str
    scope: str
    profile: str
    kind: str
    root: Optional[str] = None

    def to_json(self) -> dict:
        out: dict = {"name": self.name, "scope": self.scope, "profile": self.profile, "kind": self.kind}
        if self.root is not None:
            out["root"] = self.root
        return out


@dataclass
class TriggerDecl:
    name: str
    on: str
    run: str
    agent: Optional[str] = None

    def to_json(self) -> dict:
        out: dict = {"name": self.name, "on": self.on, "run": self.run}
        if self.agent is not None:
            out["agent"] = self.agent
        return out


@dataclass
class JourneyDecl:
    name: str
    flow: A.DraftAst
    agent: Optional[str] = None

    def to_json(self) -> dict:
        out: dict = {"name": self.name}
        if self.agent is not None:
            out["agent"] = self.agent
        out["flow"] = draft_to_json(self.flow)
        return out


@dataclass
class CompositeOpMeta:
    description: str = ""
    risk: str = "low"
    idempotency: str = "idempotent"
    effects: list = field(default_factory=list)
    expose: bool = True
    limits: dict = field(default_factory=dict)
    view: Optional[str] = None

    def to_json(self) -> dict:
        out: dict = {"description": self.description, "risk": self.risk,
                     "idempotency": self.idempotency, "effects": list(self.effects),
                     "expose": self.expose,
                     "limits": {k: self.limits[k] for k in
                                ("dispatches", "timeout_ms", "context_chars", "max_depth")
                                if k in self.limits}}
        if self.view is not None:
            out["view"] = self.view
        return out


@dataclass
class CompositeOpDecl:
    name: str
    params: tuple = ()
    returns: Optional[A.TypeRef] = None
    meta: CompositeOpMeta = field(default_factory=CompositeOpMeta)
    body: A.DraftAst = field(default_factory=A.DraftAst)

    def to_json(self) -> dict:
        out: dict = {"name": self.name,
                     "params": [{"name": p.name, "ty": type_to_json(p.ty)} for p in self.params]}
        if self.returns is not None:
            out["returns"] = type_to_json(self.returns)
        out["meta"] = self.meta.to_json()
        out["body"] = draft_to_json(self.body)
        return out


@dataclass
class Program:
    name: Optional[str] = None
    permissions: Optional[PermissionDecl] = None
    agents: list = field(default_factory=list)
    agent_loops: list = field(default_factory=list)
    channels: list = field(default_factory=list)
    datasources: list = field(default_factory=list)
    boards: list = field(default_factory=list)
    triggers: list = field(default_factory=list)
    journeys: list = field(default_factory=list)
    ops: list = field(default_factory=list)
    flows: list = field(default_factory=list)

    def flow_asts(self) -> list:
        """Every executable body, in flux's census order (agent loops, journeys, ops, flows)."""
        return ([d.flow for d in self.agent_loops] + [j.flow for j in self.journeys] +
                [o.body for o in self.ops] + list(self.flows))


#: ``parse_program``'s result: a lone flow, or a whole program.
Module = Union[A.DraftAst, Program]


def program_to_json(p: Program) -> dict:
    """serde's JSON of flux's ``Program`` (declared field order; optional fields omitted).

    ``boards`` only when there are any: the hash flux pins for ``hello.flux`` is of a Program
    without the field."""
    out: dict = {}
    if p.name is not None:
        out["name"] = p.name
    if p.permissions is not None:
        out["permissions"] = p.permissions.to_json()
    out["agents"] = [a.to_json() for a in p.agents]
    out["agent_loops"] = [a.to_json() for a in p.agent_loops]
    out["channels"] = [c.to_json() for c in p.channels]
    out["datasources"] = [d.to_json() for d in p.datasources]
    if p.boards:
        out["boards"] = [b.to_json() for b in p.boards]
    out["triggers"] = [t.to_json() for t in p.triggers]
    out["journeys"] = [j.to_json() for j in p.journeys]
    out["ops"] = [o.to_json() for o in p.ops]
    out["flows"] = [draft_to_json(f) for f in p.flows]
    return out


