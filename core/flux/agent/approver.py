"""Approvers: who decides whether a live op dispatch may run.

:class:`DenyAll` (the default: everything but ``pure`` refused), :class:`AutoApprove` (``--yes``),
:class:`PolicyApprover` (a policy file's ``allow``/``deny``/``ask`` lists and ``default``; deny beats
ask beats allow) and :class:`CallbackApprover`. A refusal does not raise: it is recorded as a denied
cell and returned to the model as a tool error (docs/agent.md, "Approval").
"""

from __future__ import annotations

import fnmatch
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Protocol

from ..errors import FluxError

__all__ = [
    "ApprovalRequest", "Decision", "Approver", "DenyAll", "AutoApprove", "PolicyApprover", "CallbackApprover",
    "load_policy", "PolicyError", "confirm_with",
]


class PolicyError(FluxError):
    """A policy file that cannot be used."""


@dataclass(frozen=True)
class ApprovalRequest:
    op: str
    effect: str
    input: Any
    kind: str = "op"  # "op" for a dispatch, "confirm" for a flow's confirm gate
    message: str = ""
    risk: str = ""


@dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: str = ""


class Approver(Protocol):
    def decide(self, request: ApprovalRequest) -> Decision: ...


def confirm_with(approver: Approver) -> Callable[[str, str], bool]:
    """A flow's ``confirm`` gate answered by ``approver`` (a ``kind="confirm"`` request)."""
    def confirm(message: str, risk: str) -> bool:
        return approver.decide(ApprovalRequest(op="confirm", effect="confirm", input=None, kind="confirm",
                                               message=message, risk=risk)).allowed
    return confirm


def _refusal(req: ApprovalRequest, why: str) -> Decision:
    if req.kind == "confirm":
        return Decision(False, f"confirmation refused ({why}): {req.message}")
    return Decision(False, f"denied by policy: `{req.op}` (effect {req.effect}) {why} — "
                           f"run with --yes or allow it in a --policy file")


class DenyAll:
    """Refuse every op that touches the world (effect ≠ ``pure``) and every confirm gate."""

    name = "deny-all"

    def decide(self, request: ApprovalRequest) -> Decision:
        if request.kind == "op" and request.effect == "pure":
            return Decision(True, "pure op")
        return _refusal(request, "needs approval and the default approver denies everything")


class AutoApprove:
    name = "auto-approve"

    def decide(self, request: ApprovalRequest) -> Decision:
        return Decision(True, "auto-approved")


class CallbackApprover:
    """``fn(request)`` returns a bool or a :class:`Decision`; an exception counts as a refusal."""

    name = "callback"

    def __init__(self, fn: Callable[[ApprovalRequest], Any]):
        self.fn = fn

    def decide(self, request: ApprovalRequest) -> Decision:
        try:
            r = self.fn(request)
        except Exception as e:
            return _refusal(request, f"the approval callback failed ({type(e).__name__}: {e})")
        if isinstance(r, Decision):
            return r
        return Decision(True, "approved") if r else _refusal(request, "was refused by the approver")


@dataclass
class PolicyApprover:
    allow: list[str] = field(default_factory=list)
    deny: list[str] = field(default_factory=list)
    ask: list[str] = field(default_factory=list)
    default: str = "deny"
    ask_fn: Optional[Callable[[ApprovalRequest], Any]] = None
    source: str = "policy"
    name: str = "policy"

    def __post_init__(self) -> None:
        if self.default not in ("allow", "deny", "ask"):
            raise PolicyError(f"{self.source}: default must be allow, deny or ask, got {self.default!r}")

    @staticmethod
    def _match(patterns: list[str], req: ApprovalRequest) -> Optional[str]:
        for p in patterns:
            if p.startswith("effect:"):
                if fnmatch.fnmatchcase(req.effect, p[7:]):
                    return p
            elif fnmatch.fnmatchcase(req.op, p):
                return p
        return None

    def action_for(self, req: ApprovalRequest) -> tuple[str, str]:
        for action, pats in (("deny", self.deny), ("ask", self.ask), ("allow", self.allow)):
            m = self._match(pats, req)
            if m is not None:
                return action, m
        return self.default, "default"

    def decide(self, request: ApprovalRequest) -> Decision:
        if request.kind == "confirm":
            action, rule = ("ask" if self.ask_fn else self.default), "confirm"
        else:
            action, rule = self.action_for(request)
        if action == "allow":
            return Decision(True, f"allowed by {self.source} ({rule})")
        if action == "deny":
            return Decision(False, f"denied by policy: `{request.op}` (effect {request.effect}) is denied by "
                                   f"{self.source} ({rule})" if request.kind == "op" else
                                   f"confirmation refused by {self.source}: {request.message}")
        if self.ask_fn is None:
            return _refusal(request, f"needs approval ({self.source}: ask {rule}) and nobody can be asked")
        return CallbackApprover(self.ask_fn).decide(request)


def load_policy(path: str | Path, ask_fn: Optional[Callable[[ApprovalRequest], Any]] = None) -> PolicyApprover:
    """Read a TOML or JSON policy file (docs/agent.md)."""
    p = Path(path).expanduser()
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise PolicyError(f"cannot read the policy file {p}: {e.strerror or e}") from None
    data: Any
    if p.suffix.lower() == ".json" or text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
        except ValueError as e:
            raise PolicyError(f"the policy file {p} is not valid JSON ({e})") from None
    else:
        import tomllib

        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise PolicyError(f"the policy file {p} is not valid TOML ({e})") from None
    if not isinstance(data, dict):
        raise PolicyError(f"the policy file {p} must be a table/object with allow, deny, ask and default")
    unknown = set(data) - {"allow", "deny", "ask", "default"}
    if unknown:
        raise PolicyError(f"the policy file {p} has unknown key(s) {', '.join(sorted(unknown))} — "
                          "use allow, deny, ask and default")
    lists = {}
    for key in ("allow", "deny", "ask"):
        v = data.get(key, [])
        if isinstance(v, str):
            v = [v]
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise PolicyError(f"the policy file {p}: `{key}` must be a list of op names or effect:<effect> patterns")
        lists[key] = v
    return PolicyApprover(lists["allow"], lists["deny"], lists["ask"], str(data.get("default", "deny")),
                          ask_fn=ask_fn, source=p.name)
