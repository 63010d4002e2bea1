"""A session: one conversation (stream ``s_<n>``) in a client's store.

``await session.send(text)`` runs one adaptive turn and returns a
:class:`~flux.agent.loop.TurnOutput`; ``session.send_sync(text)`` is the same for synchronous code.
``await session.run_flow(source)`` runs an authored Flux-Lang flow as a turn (resumable mode).
The conversation (:attr:`Session.history`) is read back from the store on open, so a session
continues where any earlier process left it.
"""

from __future__ import annotations

import asyncio
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Callable, Iterator, Optional

from ..errors import FluxError
from ..lang import ast as A
from ..lang.parser import parse
from ..store.events import Compacted, Message, decode_payload
from .approver import ApprovalRequest
from .loop import TurnOutput, TurnRunner, check_flow, provider_history

if TYPE_CHECKING:  # pragma: no cover
    from .client import Client

__all__ = ["Session"]


class Session:
    def __init__(self, client: "Client", session_id: str):
        self.client = client
        self.id = session_id
        self.history: list[dict] = self._load_history()
        self._busy = False

    def __repr__(self) -> str:
        return f"Session({self.id!r})"

    def _load_history(self) -> list[dict]:
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
    def _turn(self) -> Iterator[None]:
        if self._busy:
            raise FluxError(f"session {self.id} is already running a turn — wait for it to finish")
        self._busy = True
        try:
            yield
        finally:
            self._busy = False

    @property
    def messages(self) -> list[dict]:
        """The conversation as a valid provider history (what the next request resends)."""
        return provider_history(self.history)

    async def send(self, text: str, *, on_event: Optional[Callable[[dict], None]] = None) -> TurnOutput:
        """Run one adaptive turn for ``text``; the turn is recorded whatever its outcome."""
        if not isinstance(text, str) or not text.strip():
            raise FluxError("the prompt is empty — say what the agent should do")
        with self._turn():
            runner = TurnRunner(self.client._turn_config(self.id, on_event))
            out, new_msgs = await runner.run_turn(self.history, text)
            self.history.extend(new_msgs)
            return out

    def send_sync(self, text: str, *, on_event: Optional[Callable[[dict], None]] = None) -> TurnOutput:
        return _run(self.send(text, on_event=on_event))

    async def run_flow(self, flow: str | A.DraftAst, *, on_event: Optional[Callable[[dict], None]] = None) -> TurnOutput:
        """Run an authored flow (Flux-Lang text or a parsed DraftAst) as one recorded turn.

        The text is parsed and its ops checked against the catalog before anything is written, so
        a bad flow leaves the store untouched."""
        draft = parse(flow) if isinstance(flow, str) else flow
        check_flow(draft, self.client.toolbox)
        approver = self.client.approver

        def confirm(message: str, risk: str) -> bool:
            return approver.decide(ApprovalRequest(op="confirm", effect="confirm", input=None, kind="confirm",
                                                   message=message, risk=risk)).allowed

        with self._turn():
            runner = TurnRunner(self.client._turn_config(self.id, on_event))
            out, new_msgs = runner.run_flow(draft, confirm)
            self.history.extend(new_msgs)
            return out

    def run_flow_sync(self, flow: str | A.DraftAst, **kw: Any) -> TurnOutput:
        return _run(self.run_flow(flow, **kw))


def _run(coro: Any) -> Any:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    raise FluxError("send_sync/run_flow_sync cannot run inside an event loop — await send()/run_flow() instead")
