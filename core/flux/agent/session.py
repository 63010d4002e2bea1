"""A session: one conversation (stream ``s_<n>``) in a client's store.

``await session.send(text)`` runs one adaptive turn and returns a
:class:`~flux.agent.loop.TurnOutput`; ``session.send_sync(text)`` is the same for synchronous code.
``await session.run_flow(source)`` runs an authored Flux-Lang flow as a turn (resumable mode).
The conversation (:attr:`Session.history`) is read back from the store on open, so a session
continues where any earlier process left it.

While a turn runs (a new turn, a flow, a resurrect — the automatic one included) the session's
liveness lease (:mod:`flux.store.lease`) is held, so no other process or thread takes the live
turn for an interrupted one; a second writer on the same session is refused in one line
(:class:`~flux.store.lease.SessionLeased`) before it writes anything.
"""

from __future__ import annotations

import asyncio
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Callable, Iterator, Optional

from ..errors import FluxError
from ..lang import ast as A
from ..lang.parser import parse
from ..store.events import Compacted, Message, decode_payload
from ..store.lease import SessionLease
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

        When the session's newest turn was interrupted (a killed process) and the client's
        ``auto_resurrect`` is on (``resurrect=None``), that turn is finished first from the crash
        point with no model call (spec §4.7); its report is on ``out.resurrected``."""
        if not isinstance(text, str) or not text.strip():
            raise FluxError("the prompt is empty — say what the agent should do")
        with self._turn():
            report = None
            if resurrect if resurrect is not None else self.client.auto_resurrect:
                report = self._resurrect_on_open()
            runner = TurnRunner(self.client._turn_config(self.id, on_event))
            out, new_msgs = await runner.run_turn(self.history, text)
            self.history.extend(new_msgs)
            out.resurrected = report
            return out

    def send_sync(self, text: str, *, on_event: Optional[Callable[[dict], None]] = None,
                  resurrect: Optional[bool] = None) -> TurnOutput:
        return _run(self.send(text, on_event=on_event, resurrect=resurrect))

    # ---------------------------------------------------------------- time machine
    def _resurrect_on_open(self) -> Any:
        """The automatic resurrect before a new turn: exactly what ``flux resurrect`` would do — the
        store's recorded toolbox and workspace (``toolbox.json``), unless the client was given its own
        ``ops`` — or a :class:`FluxError` before anything is written when it cannot be done right
        (an op the toolbox lacks, a live op the approver denies). A session flux would not flag
        (nothing to finish, or needs manual recovery) is said through the hook and the turn goes on."""
        w = self.client.writer
        if w.session_exists(self.id) and w.conn.execute(
                "SELECT 1 FROM events WHERE stream = ? AND kind = 'turn_started' LIMIT 1", (self.id,)).fetchone() is None:
            return None  # a session with no turn yet has none to finish (spares opening a reader and the check)
        from ..store.store import StoreReader
        from ..timemachine.resurrect import prepare_resurrect, resurrect_session

        hook = self.client.on_resurrect
        try:
            toolbox, workspace = self.client.resurrect_toolbox()
            toolbox_error = None
        except FluxError as e:  # a bad toolbox.json matters only if there is a turn to finish
            toolbox, workspace, toolbox_error = self.client.toolbox, self.client.workspace, e
        try:
            with StoreReader(self.client.store_dir) as reader:
                plan = prepare_resurrect(reader, self.id, catalog=toolbox.catalog(), workspace=str(workspace))
        except FluxError as e:  # e.g. "needs manual recovery": said, and the new turn still runs
            if hook is not None:
                hook("error", e)
            return None
        if plan is None:
            return None
        if toolbox_error is not None:
            raise toolbox_error
        _gate_auto_resurrect(plan, toolbox, self.client.approver)
        report = resurrect_session(self.client, self.id, plan=plan, toolbox=toolbox,
                                   on_plan=(lambda p: hook("plan", p)) if hook else None)
        if report is not None:
            if hook is not None:
                hook("report", report)
            self.history = self._load_history()
        return report

    def interrupted(self) -> Any:
        """This session's interrupted turn — the newest turn, left open by a killed process after its
        plan was accepted — as an :class:`~flux.model.interrupted.InterruptedTurn` (``turn_id``,
        ``turn_number``, ``user_input``, ``plan_source``, ``completed`` statements), or ``None`` when
        there is nothing to resurrect (every turn closed, or a live process is recording it). Only
        reads: finishing the turn is :meth:`resurrect`."""
        from ..model.interrupted import check_session_interrupted
        from ..model.session import load_session
        from ..store.store import StoreReader

        with StoreReader(self.client.store_dir) as reader:
            return check_session_interrupted(reader.dir, load_session(reader, self.id)).interrupted

    def resurrect(self, *, confirm: Optional[Callable[[Any], bool]] = None) -> Any:
        """Finish this session's interrupted turn from the crash point, no model call (§4.7).
        Returns the :class:`~flux.timemachine.resurrect.ResurrectReport`, or ``None`` when no turn
        is interrupted. ``confirm(preview)`` is asked before an op with no cell runs again."""
        from ..timemachine.resurrect import resurrect_session

        with self._turn():
            report = resurrect_session(self.client, self.id, confirm=confirm)
            if report is not None:
                self.history = self._load_history()
            return report

    def fork(self, at: int, **kw: Any) -> Any:
        """Fork this session at position ``at`` (``inject=``, ``edit=``, ``prompt=``, ``turn=``,
        ``confirm=``); returns a :class:`~flux.timemachine.fork.ForkResult` (``.session`` is the
        new id — open it with ``client.open_session``)."""
        from ..timemachine.fork import fork_session

        return fork_session(self.client, self.id, at, **kw)

    def what_if(self) -> Any:
        """A what-if builder (§4.8): ``session.what_if().substitute("run_tests", "ok").run()``."""
        from ..timemachine.whatif import WhatIf

        return WhatIf(self.client, self.id)

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
            report = self._resurrect_on_open() if self.client.auto_resurrect else None
            runner = TurnRunner(self.client._turn_config(self.id, on_event))
            out, new_msgs = runner.run_flow(draft, confirm)
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


def _gate_auto_resurrect(plan: Any, toolbox: Any, approver: Any) -> None:
    """Refuse, before anything is written, an automatic resurrect that could not finish the turn
    right: an op it would run live that the toolbox has no implementation of, or that the approver
    denies (deny-all without ``--yes``) — either would close the turn ``halted`` for good."""
    preview = plan.preview
    refusal = preview.refusal(toolbox.catalog())
    if refusal is not None:
        raise FluxError(f"{refusal} (or pass FLUX_AUTO_RESURRECT=0 to leave the turn interrupted)")
    denied = [o for o in preview.with_policy(approver).ops if o.denied]
    if denied:
        names = ", ".join(dict.fromkeys(f"`{o.op}` ({o.effect})" for o in denied))
        raise FluxError(f"{plan.session}'s interrupted turn {plan.turn} would run {names} live and the approver "
                        f"denies it — pass --yes or --policy FILE, or run `flux resurrect {plan.session}` first; "
                        "nothing was written")
