"""The accepted plans of a recorded session, keyed by flow_key: what replay, fork, resurrect and
what-if re-execute. An accepted ``plan_source`` is parsed once per distinct text (a host plan is
read by the direct path instead, no AST); the last acceptance of a key wins; a plan whose text was
redacted before it was stored stands in for the execution it no longer keys to."""

from __future__ import annotations

from dataclasses import fields, is_dataclass
from typing import Any

from ..cassette.redactor import DEFAULT_MARKER
from ..errors import FluxError, NotReplayable
from ..lang import ast as A
from ..lang.catalog import OpCatalog
from ..model.session import SessionDetail
from ..model.stored_plan import parse_stored_plan, stored_plan_key
from .replay_direct import HostCall, HostPlan, direct_plan

__all__ = [
    "accepted_plans", "plans_by_key", "plan_turns", "parse_cached", "redacted_standins", "turn_keys", "check_ops",
    "not_replayable",
]


def not_replayable(session: str, why: str) -> NotReplayable:
    """The one-line refusal of a session that cannot be replayed, and why."""
    return NotReplayable(f"session {session} is not replayable: {why}")


def plans_by_key(detail: SessionDetail) -> tuple[dict[str, A.DraftAst], list[str]]:
    """flow_key → parsed accepted plan (last acceptance wins), and the acceptance order.

    An accepted ``plan_source`` that does not parse is a hard error naming the turn and attempt."""
    plans: dict[str, A.DraftAst] = {}
    order: list[str] = []
    for _turn, key, draft in accepted_plans(detail):
        order.append(key)
        plans[key] = draft
    return plans, order


def plan_turns(detail: SessionDetail) -> dict[str, int]:
    """flow_key → the number of the turn whose accepted plan replay runs under that key (last wins)."""
    return {key: turn.number for turn, key, _draft in accepted_plans(detail, direct=True)}


_PARSE_CACHE = 256  # distinct plan texts whose parse a replay keeps for a repeat (bounded: memory stays flat)


def accepted_plans(detail: SessionDetail, *, direct: bool = False):
    """``(turn, flow_key, parsed plan)`` per accepted plan in acceptance order; a damaged
    ``plan_source`` is :class:`NotReplayable` naming the turn and attempt. With ``direct``, a host
    plan comes as the :class:`~flux.timemachine.replay_direct.HostCall` its text gives (same key)
    instead of its AST.

    Identical plan texts are parsed once (the AST is frozen, and the same text always parses to
    the same AST and key): a session that accepts the same plan again — a retry, a revision that
    changed nothing, a loop of identical host-derived calls — pays for one parse. The cache keeps
    the last ``_PARSE_CACHE`` distinct texts, so a long session does not hold every plan's AST."""
    parsed: dict[str, tuple[A.DraftAst, str]] = {}
    for t in detail.turns:
        for att in t.plan_attempts:
            if att.outcome != "accepted" or att.plan_source is None:
                continue
            hc = direct_plan(att.plan_source) if direct else None
            if hc is not None:  # (held meanwhile: a HostCall is its text and three hashes, no AST)
                yield t, hc.flow_key, hc
            else:
                yield _parsed(detail, t, att, parsed)  # no local of this generator holds the plan meanwhile


def _parsed(detail: SessionDetail, t: Any, att: Any, parsed: dict[str, tuple[A.DraftAst, str]]):
    """``(turn, flow_key, AST)`` of one accepted attempt, parsed through the cache ``parsed``."""
    try:
        hit = parse_cached(att.plan_source, parsed)
    except FluxError as e:
        raise not_replayable(
            detail.id,
            f"the accepted plan of turn {t.number} (attempt step {att.step}, stream_seq {att.stream_seq}) "
            f"no longer parses: {e} — the stored plan_source is damaged; replay cannot re-execute it",
        ) from None
    return t, hit[1], hit[0]


def parse_cached(source: Any, parsed: dict[str, tuple[A.DraftAst, str]]) -> tuple[A.DraftAst, str]:
    """``parse_stored_plan(source)`` through ``parsed``, a cache of the last ``_PARSE_CACHE`` texts."""
    hit = parsed.get(source)
    if hit is None:
        hit = parse_stored_plan(source)
        if _PARSE_CACHE > 0:
            if len(parsed) >= _PARSE_CACHE:
                del parsed[next(iter(parsed))]
            parsed[source] = hit
    return hit


def redacted_standins(detail: SessionDetail, exec_keys: list[str], plans: dict[str, A.DraftAst]) -> dict[str, A.DraftAst]:
    """Stand-ins for executions whose plan text was redacted before it was stored.

    A live run keys its statement rows by the flow_key of the plan it *executed*; the stored
    ``plan_source`` went through the redactor first, so a plan with a secret literal parses to a
    different key and the execution finds no plan. Each such execution key is paired, in order,
    with an accepted plan that carries the redaction marker and whose own key never executed. The
    stand-in replays with redacted inputs, which the cells' ``input_hash_redacted`` match.
    """
    executed = set(exec_keys)
    orphans: list[A.DraftAst] = []
    seen: set[str] = set()
    for t in detail.turns:
        for att in t.plan_attempts:
            if att.outcome != "accepted" or att.plan_source is None or DEFAULT_MARKER not in att.plan_source:
                continue
            try:
                d, k = parse_stored_plan(att.plan_source)
            except FluxError:
                continue
            if k not in executed and k not in seen:
                seen.add(k)
                orphans.append(d)
    out: dict[str, A.DraftAst] = {}
    for k in exec_keys:
        if k in plans or k in out or not orphans:
            continue
        out[k] = orphans.pop(0)
    return out


def turn_keys(detail: SessionDetail, turn: int) -> set[str]:
    """The keys of the plans accepted in turn ``turn`` (1-based); a turn the session lacks is refused."""
    turns = detail.turns
    idx = max(turn, 1) - 1  # the SDK maps 0 to the first turn; the CLI rejects 0
    if idx >= len(turns):
        have = f"it has {len(turns)} turn(s)" if turns else "it has no turns"
        raise not_replayable(detail.id, f"turn {turn} does not exist ({have})")
    keys: set[str] = set()
    for att in turns[idx].plan_attempts:
        if att.outcome != "accepted" or att.plan_source is None:
            continue
        hc = direct_plan(att.plan_source)
        key = hc.flow_key if hc is not None else stored_plan_key(att.plan_source)
        if key is not None:
            keys.add(key)
    return keys


def _ops_in(obj: Any, out: list[str]) -> None:
    if isinstance(obj, A.Call):
        out.append(obj.op)
    if isinstance(obj, (tuple, list)):
        for x in obj:
            _ops_in(x, out)
    elif is_dataclass(obj) and not isinstance(obj, type):
        for f in fields(obj):
            _ops_in(getattr(obj, f.name), out)


def check_ops(sid: str, key: str, draft: A.DraftAst | HostCall | HostPlan, cat: OpCatalog) -> None:
    """A plan naming an op the caller's catalog lacks is refused (before it runs)."""
    ops: list[str] = []
    if type(draft) is HostCall:
        ops.append(draft.op)
    elif type(draft) is HostPlan:
        ops.extend(draft.ops)
    else:
        _ops_in(draft.body, ops)
    unknown = sorted({op for op in ops if cat.get(op) is None})
    if unknown:
        names = ", ".join(f"`{op}`" for op in unknown)
        raise not_replayable(sid, f"plan {key} uses unknown op {names} — the catalog has no such op")
