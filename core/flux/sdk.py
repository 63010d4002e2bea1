"""The SDK: the agent runtime's client and sessions with the time machine on them.

It stands above the runtime (:mod:`flux.agent`, which records turns) and the time machine
(:mod:`flux.timemachine`): each convenience (``fork``, ``resurrect``, ``what_if``, ``what_if_over``)
is one call into the time machine with this client and session. Usage is in docs/agent.md ("The SDK").
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Optional

from .agent.approver import AutoApprove, CallbackApprover, DenyAll, PolicyApprover, load_policy
from .agent.client import DEFAULT_INSTRUCTIONS, Client as RuntimeClient
from .agent.loop import TurnOutput
from .agent.ops import Op, OpError, Toolbox, op
from .agent.registry import DEFAULT_MODEL
from .agent.session import Session as RuntimeSession
from .errors import FluxError
from .store.store import StoreReader
from .timemachine.fork import ForkResult, fork_session
from .timemachine.resurrect import ResurrectReport, prepare_resurrect, resurrect_session
from .timemachine.whatif import SweepReport, WhatIf, WhatIfSpec, what_if_over

__all__ = [
    "Client", "Session", "WhatIfSpec", "DEFAULT_INSTRUCTIONS", "TurnOutput", "op", "Op", "OpError", "Toolbox",
    "AutoApprove", "CallbackApprover", "DenyAll", "PolicyApprover", "load_policy",
]


class Session(RuntimeSession):
    """A runtime session that can also fork, resurrect and ask what-if — and that finishes an
    interrupted turn (no model call) before a new one, when its client's ``auto_resurrect`` is on."""

    client: "Client"

    def before_turn(self, resurrect: Optional[bool]) -> Optional[ResurrectReport]:
        if resurrect if resurrect is not None else self.client.auto_resurrect:
            return self._resurrect_interrupted_turn()
        return None

    def resurrect(self, *, confirm: Optional[Callable[[Any], bool]] = None) -> Optional[ResurrectReport]:
        """Finish this session's interrupted turn from the crash point, with no model call.
        Returns the :class:`~flux.timemachine.resurrect.ResurrectReport`, or ``None`` when no turn
        is interrupted. ``confirm(preview)`` is asked before an op with no cell runs again."""
        with self.turn_lease():
            report = resurrect_session(self.client, self.id, confirm=confirm)
            if report is not None:
                self.history = self.load_history()
            return report

    def fork(self, at: int, **kw: Any) -> ForkResult:
        """Fork this session at position ``at`` (``inject=``, ``edit=``, ``prompt=``, ``turn=``,
        ``confirm=``); returns a :class:`~flux.timemachine.fork.ForkResult` (``.session`` is the
        new id — open it with ``client.open_session``)."""
        return fork_session(self.client, self.id, at, **kw)

    def what_if(self) -> WhatIf:
        """A what-if builder: ``session.what_if().substitute("run_tests", "ok").run()``."""
        return WhatIf(self.client, self.id)

    def _resurrect_interrupted_turn(self) -> Optional[ResurrectReport]:
        """The automatic resurrect before a new turn: exactly what ``flux resurrect`` would do — the
        store's recorded toolbox and workspace (``toolbox.json``), unless the client was given its own
        ``ops`` — or a :class:`FluxError` before anything is written when it cannot be done right
        (an op the toolbox lacks, a live op the approver denies). A session flux would not flag
        (nothing to finish, or needs manual recovery) is said through the hook and the turn goes on."""
        w = self.client.writer
        if w.session_exists(self.id) and w.conn.execute(
                "SELECT 1 FROM events WHERE stream = ? AND kind = 'turn_started' LIMIT 1", (self.id,)).fetchone() is None:
            return None  # a session with no turn yet has none to finish (spares opening a reader and the check)
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
            self.history = self.load_history()
        return report


class Client(RuntimeClient):
    """The runtime's :class:`~flux.agent.client.Client` (every option of it), whose sessions are
    :class:`Session`. ``auto_resurrect`` (on by default) finishes an interrupted turn before the
    next turn on its session; ``on_resurrect(kind, value)`` hears ``("plan", LivePreview)`` before
    it, ``("report", ResurrectReport)`` after, and ``("error", FluxError)`` when it is skipped."""

    session_class = Session

    def __init__(self, provider: Any = DEFAULT_MODEL, *, auto_resurrect: bool = True,
                 on_resurrect: Optional[Callable[[str, Any], None]] = None, **options: Any):
        super().__init__(provider, **options)
        self.auto_resurrect = auto_resurrect
        self.on_resurrect = on_resurrect

    def session(self, *, context: Optional[dict[str, str | None]] = None) -> Session:
        return super().session(context=context)  # type: ignore[return-value]

    def open_session(self, session_id: str) -> Session:
        return super().open_session(session_id)  # type: ignore[return-value]

    def what_if_over(self, sessions: Iterable[str | RuntimeSession], spec: WhatIfSpec | WhatIf, *, jobs: int = 1,
                     on_progress: Optional[Callable[[int, int, Any], None]] = None) -> SweepReport:
        """A sweep: the same what-if over each session, as
        ``client.what_if_over(["s_1", "s_2"], WhatIfSpec(substitute={"run_tests": "1 failed"}), jobs=2)``.

        ``spec`` is a :class:`~flux.timemachine.whatif.WhatIfSpec` or a ``session.what_if()``
        builder (its knobs are used). Each counterfactual runs on this client's ops, approver,
        policy and model — in ``jobs`` forked worker processes, each with its own store
        connection. Returns a :class:`~flux.timemachine.whatif.SweepReport` (``outcomes`` in the
        given order, ``changed``, ``total``, ``offline_cost``); a session that fails is an error
        row, never the end of the sweep."""
        if isinstance(spec, WhatIf):
            spec = spec.spec
        if not isinstance(spec, WhatIfSpec):
            raise FluxError("what_if_over needs a WhatIfSpec (or a session.what_if() builder)")
        ids = [s.id if isinstance(s, RuntimeSession) else str(s) for s in sessions]
        return what_if_over(self.store_dir, ids, spec, jobs=jobs, on_progress=on_progress, client=self)


def _gate_auto_resurrect(plan: Any, toolbox: Toolbox, approver: Any) -> None:
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
