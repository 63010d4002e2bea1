"""The conversation a re-planned fork's child starts from: the source's messages as they stood at
the fork point — the turns before it, the fork turn's opening message and its complete tool
exchanges before the statement forked at — where flux copies the whole conversation (so the model
would read the calls the fork redoes). How exchanges are cut and matched to plans:
docs/architecture.md, "Replay"."""

from __future__ import annotations

from typing import Any, Optional, Sequence

from ..lang import ast as A
from ..store.events import Compacted, Message, TurnStarted
from ..store.store import StoreReader
from .engine import calls_in

__all__ = ["conversation_before", "conversation_at", "turn_prefix", "call_of"]

_KINDS = ("message", "compacted", "turn_started")


def conversation_before(reader: StoreReader, sid: str, turn_id: int | None) -> list[dict]:
    """The conversation as it stood before the turn ``turn_id`` began (the whole one for None):
    ``message`` appends, ``compacted`` replaces; the user message that opened the turn is left out."""
    evs = reader.events(sid, kinds=_KINDS, sparse=True)
    msgs: list[dict] = []
    for i, e in enumerate(evs):
        if turn_id is not None and e.global_seq >= turn_id:
            break
        b = e.body
        if isinstance(b, Message):
            nxt = evs[i + 1] if i + 1 < len(evs) else None
            if (turn_id is not None and b.role == "user" and nxt is not None and nxt.global_seq == turn_id):
                break
            msgs.append({"role": b.role, "content": list(b.content)})
        elif isinstance(b, Compacted):
            msgs = [dict(m) for m in b.messages if isinstance(m, dict)]
    return msgs


def call_of(draft: A.DraftAst) -> tuple[Optional[str], Any]:
    """The (op, input) a host-derived plan dispatches — ``name = op({…})`` — or (first op, None) for
    any other plan, (None, None) when it calls nothing."""
    body = draft.body
    if len(body) == 1 and isinstance(body[0], A.Bind) and isinstance(body[0].value, A.Call):
        call = body[0].value
        if len(call.args) == 1 and isinstance(call.args[0], A.Lit):
            return call.op, call.args[0].value
    for node in body:  # the first call in source order: the first statement that calls anything holds it
        calls = calls_in(node)
        if calls:
            return calls[0].op, None
    return None, None


def conversation_at(reader: StoreReader, sid: str, turn_id: int | None,
                    calls: Sequence[tuple[Optional[str], Any]], before: int) -> list[dict]:
    """S's conversation at a fork point inside the turn ``turn_id`` (module doc), as a valid
    provider history. ``calls``: the (op, input) of that turn's executions in order, from its first
    through the one holding the fork point (:func:`call_of`); ``before``: how many of them lie
    wholly before the fork point. ``turn_id`` None: the whole conversation."""
    from ..agent.loop import provider_history

    if turn_id is None:
        return provider_history(conversation_before(reader, sid, None))
    evs = reader.events(sid, kinds=_KINDS, sparse=True)
    msgs: list[dict] = []
    opening: list[dict] = []
    turn: list[dict] = []
    inside = False
    for i, e in enumerate(evs):
        b = e.body
        nxt = evs[i + 1] if i + 1 < len(evs) else None
        opens_next = nxt is not None and isinstance(nxt.body, TurnStarted)
        if not inside:
            if e.global_seq == turn_id:
                inside = True
            elif e.global_seq > turn_id:
                break
            elif isinstance(b, Message):
                m = {"role": b.role, "content": list(b.content)}
                if b.role == "user" and opens_next and nxt.global_seq == turn_id:
                    opening.append(m)
                else:
                    msgs.append(m)
            elif isinstance(b, Compacted):
                msgs = [dict(m) for m in b.messages if isinstance(m, dict)]
            continue
        if isinstance(b, (TurnStarted, Compacted)):
            break
        if isinstance(b, Message):
            if b.role == "user" and opens_next:
                break  # the next turn's opening message
            turn.append({"role": b.role, "content": list(b.content)})
    return provider_history(msgs + opening + turn_prefix(turn, calls, before))


def _blocks(m: dict, kind: str) -> list[dict]:
    return [b for b in (m.get("content") or []) if isinstance(b, dict) and b.get("type") == kind]


def _same_input(a: Any, b: Any) -> bool:
    from ..agent.loop import escape_braces

    return a == b or escape_braces(a) == b


def turn_prefix(turn: Sequence[dict], calls: Sequence[tuple[Optional[str], Any]], before: int) -> list[dict]:
    """The fork turn's messages (after its opening user message) up to the last complete tool
    exchange before the fork point (module doc). Pure: ``turn`` is the turn's stored messages,
    ``calls``/``before`` as in :func:`conversation_at`."""
    out: list[dict] = []
    placed = 0  # executions before the fork point matched to a tool_use so far
    i = 0
    while i + 1 < len(turn):
        m, nxt = turn[i], turn[i + 1]
        if m.get("role") != "assistant" or nxt.get("role") != "user":
            break
        uses = _blocks(m, "tool_use")
        if not uses:
            break  # a text answer: the turn's own answer comes after every call in it
        results: dict[Any, dict] = {}
        for r in _blocks(nxt, "tool_result"):
            results.setdefault(r.get("tool_use_id"), r)  # a repeated result for one call: the first counts
        local = placed
        at_fork = False
        for u in uses:
            r = results.get(u.get("id"))
            refused = r is not None and bool(r.get("is_error"))  # an invalid call's result is an error
            if local >= before:
                # The next plan is the fork point's: a call to its op is that call (the whole message
                # goes); an erroring call to another op was refused as invalid and had no plan.
                op = calls[before][0] if before < len(calls) else None
                if op is None or u.get("name") == op or not refused:
                    at_fork = True
                    break
                continue
            op, inp = calls[local]
            if u.get("name") == op and (inp is None or _same_input(u.get("input"), inp) or not refused):
                local += 1
            elif not refused:  # a call that ran but matches no plan: the messages and plans disagree
                at_fork = True
                break
        if at_fork:
            break
        ids = [u.get("id") for u in uses]
        if any(x not in results for x in ids):
            break  # a tool_use with no recorded result: the exchange never completed
        kept = [b for b in (nxt.get("content") or []) if isinstance(b, dict)
                and (b.get("type") != "tool_result" or results.get(b.get("tool_use_id")) is b and b.get("tool_use_id") in ids)]
        out.append({"role": "assistant", "content": list(m.get("content") or [])})
        out.append({"role": "user", "content": kept})
        placed = local
        i += 2
    return out
