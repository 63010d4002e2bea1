"""A session: one conversation (stream ``s_<n>``) in a client's store; the runtime's session records turns.

``send``/``send_sync`` run one adaptive turn, ``run_flow`` an authored flow; the history is read back
from the store, so a session continues where an earlier process left it. While a turn runs the
session's lease is held, so a second writer is refused before it writes. Fork, resurrect and what-if
are :class:`flux.sdk.Session`, built on it.
"""

from __future__ import annotations

import asyncio
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Optional

from ..errors import FluxError
from ..lang import ast as A
from ..lang.parser import parse
from ..store.events import Compacted, Message
from ..store.payload_decode import decode_payload
from ..model.interrupted import check_session_interrupted
from ..model.session import load_session
from ..store.lease import SessionLease
from ..store.store import StoreReader
from .approver import confirm_with
from .loop import TurnOutput, TurnRunner, check_flow, provider_history

__all__ = ["Session"]


class Session:
    """One conversation of a :class:`~flux.agent.client.Client` (``client``), recording its turns."""

    def __init__(self, client: Any, session_id: str):
        self.client = client
        self.id = session_id
        self.history: list[dict] = self.load_history()
        self._busy = False

    def __repr__(self) -> str:
        return f"Session({self.id!r})"

    def load_history(self) -> list[dict]:
        """The conversation as the store holds it: every message since the last compaction."""
        rows = self.client.writer.conn.execute(
            "SELECT kind, payload FROM events WHERE stream = ? AND kind IN ('message', 'compacted') ORDER BY stream_seq",
            (self.id,)).fetchall()
        msgs: list[dict] = []
        for kind, payload in rows:
            body = decode_payload(kind, payload)
            if isinstance(body, Message):
                msgs.append({"role": body.role, "content": list(body.content)})
            elif isinstance(body, Compacted):
                msgs = [dict(m) for m in body.messages if isinstance(m, dict)]
        return msgs

    @contextmanager
    def turn_lease(self) -> Iterator[None]:
        """Hold this session for one turn: refused while a turn runs here, or when another process holds its lease."""
        if self._busy:
            raise FluxError(f"session {self.id} is already running a turn — wait for it to finish")
        self._busy = True
        try:
            with SessionLease.acquire(self.client.store_dir, self.id):
                yield
        finally:
            self._busy = False

    @property
    def messages(self) -> list[dict]:
        """The conversation as a valid provider history (what the next request resends)."""
        return provider_history(self.history)

    async def send(self, text: str, *, on_event: Optional[Callable[[dict], None]] = None,
                   resurrect: Optional[bool] = None) -> TurnOutput:
        """Run one adaptive turn for ``text``; the turn is recorded whatever its outcome.

        :meth:`before_turn` runs first, inside the lease (the SDK's session finishes an interrupted
        turn there, unless ``resurrect=False``); its report is on ``out.resurrected``."""
        if not isinstance(text, str) or not text.strip():
            raise FluxError("the prompt is empty — say what the agent should do")
        with self.turn_lease():
            report = self.before_turn(resurrect)
            runner = TurnRunner(self.client.turn_config(self.id, on_event))
            out, new_msgs = await runner.run_turn(self.history, text)
            self.history.extend(new_msgs)
            out.resurrected = report
            return out

    def send_sync(self, text: str, *, on_event: Optional[Callable[[dict], None]] = None,
                  resurrect: Optional[bool] = None) -> TurnOutput:
        return _run(self.send(text, on_event=on_event, resurrect=resurrect))

    def before_turn(self, resurrect: Optional[bool]) -> Any:
        """What runs inside a new turn's lease before the turn itself, returning its report (here:
        nothing). The SDK's session (:class:`flux.sdk.Session`) finishes an interrupted turn here."""
        if resurrect:
            raise FluxError("finishing an interrupted turn takes the time machine — open the session "
                            "with flux.sdk.Client, or run `flux resurrect`")
        return None

    def interrupted(self) -> Any:
        """This session's interrupted turn — the newest turn, left open by a killed process after its
        plan was accepted — as an :class:`~flux.model.interrupted.InterruptedTurn` (``turn_id``,
        ``turn_number``, ``user_input``, ``plan_source``, ``completed`` statements), or ``None`` when
        there is nothing to resurrect (every turn closed, or a live process is recording it). Only
        reads: finishing the turn is :meth:`flux.sdk.Session.resurrect`."""
        with StoreReader(self.client.store_dir) as reader:
            return check_session_interrupted(reader.dir, load_session(reader, self.id)).interrupted

    async def run_flow(self, flow: str | A.DraftAst, *, on_event: Optional[Callable[[dict], None]] = None,
                       resume: Any = None) -> TurnOutput:
        """Run an authored flow (Flux-Lang text or a parsed DraftAst) as one recorded turn.

        The text is parsed and its ops checked against the catalog before anything is written, so
        a bad flow leaves the store untouched. ``resume``: this session's halted plan
        (:func:`flux.agent.flow_resume.prepare_resume`) — the turn continues it."""
        draft = parse(flow) if isinstance(flow, str) else flow
        check_flow(draft, self.client.toolbox)
        confirm = confirm_with(self.client.approver)
        with self.turn_lease():
            report = self.before_turn(None)
            runner = TurnRunner(self.client.turn_config(self.id, on_event))
            out, new_msgs = runner.run_flow(draft, confirm, resume)
            self.history.extend(new_msgs)
            out.resurrected = report
            return out

    def run_flow_sync(self, flow: str | A.DraftAst, **kw: Any) -> TurnOutput:
        return _run(self.run_flow(flow, **kw))


def _run(coro: Any) -> Any:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        # The result leaves through a box, not as the task's result: on its way out asyncio.run
        # (CPython 3.11's signal.getsignal on its SIGINT partial) builds the main task's repr,
        # which would repr the whole TurnOutput — every cell and tool call of the turn.
        box: list[Any] = []

        async def main() -> None:
            box.append(await coro)

        asyncio.run(main())
        return box[0]
    raise FluxError("send_sync/run_flow_sync cannot run inside an event loop — await send()/run_flow() instead")
