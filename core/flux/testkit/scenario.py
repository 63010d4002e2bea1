"""Scenario fixtures: record a turn once, then test every later change offline.

``Scenario.record`` writes a flux-compatible scenario directory; ``Scenario.load`` works on a copy of
it; ``replay()`` re-executes the recorded plans from the cassette, and ``check(client)`` re-drives
today's agent loop against ``model.jsonl`` with the world frozen to the recorded cells, compared with
the golden (docs/testing.md).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import weakref
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Iterable, Optional

from ..agent.approver import AutoApprove
from ..agent.builtin_ops import coding_ops
from ..agent.loop import RetryPolicy, TurnRunner
from ..agent.model_cassette import ModelCassetteWriter, TeeProvider, load_records
from ..agent.ops import Toolbox, load_ops
from ..cassette.record import cassette_enabled
from ..cassette.replay import ReplayTape
from ..model.pricing import load_price_table, session_spend
from ..model.session import SessionDetail, load_session
from ..model.surfaces import (
    as_the_redrive_sees_it, cell_trajectory, event_log, redacted_cells, side_by_side, surface_diff, transcript,
)
from ..store.store import StoreReader, StoreWriter
from ..timemachine.diff import RunDiff, diff_details
from ..timemachine.replay import ReplayReport, replay_detail
from ..timemachine.whatif import Counterfactual
from .blocking import run_blocking
from .cassette import OVERRIDE_FILE, StrictCassette, load_overrides
from .errors import AssertionFailed, MissingFixture, ScenarioError, kit_failure
from .frozen import frozen_toolbox
from .golden import Rebaseline, update_mode
from .judge import judge
from .linediff import line_diff
from .manifest import MANIFEST_FILE, RUNTIME_VERSION, Manifest, record_command
from .vacuous import CountsReads

if TYPE_CHECKING:  # pragma: no cover
    from ..agent.client import Client

__all__ = ["Scenario", "Outcome", "Report", "Counterfactual", "snapshot_text", "is_scenario_dir", "SNAP_FILE", "MODEL_FILE",
           "JUDGE_FILE"]

SNAP_FILE = "plan.flux.snap"
MODEL_FILE = "model.jsonl"
JUDGE_FILE = "judge.jsonl"
LOOPS_DIR = "agent-loops"
_STORES = ("events.db", "flow.db")
_SIDECARS = ("", "-wal", "-shm")
UPDATE_HINT = ("if the change is intended, re-record the scenario (live, it spends): flux record … --update, or "
               "FLUX_GOLDEN=update with your client's check()")


def is_scenario_dir(path: str | os.PathLike[str]) -> bool:
    return (Path(path) / MANIFEST_FILE).is_file()


def snapshot_text(detail: SessionDetail) -> str:
    """The plan snapshot (``plan.flux.snap``): every accepted ``plan_source`` across the turns in
    ``turn_id`` order, joined by ``"\\n---\\n"``."""
    return "\n---\n".join(p.plan_source for t in detail.turns for p in t.plan_attempts
                          if p.outcome == "accepted" and p.plan_source is not None)


def work_root() -> Optional[str]:
    """Where work copies go: ``$FLUX_TESTKIT_TMP``, else a RAM-backed ``/dev/shm`` when there is
    one (work copies are small and thrown away), else the system temp directory."""
    env = os.environ.get("FLUX_TESTKIT_TMP")
    if env:
        return env
    shm = "/dev/shm"
    return shm if os.path.isdir(shm) and os.access(shm, os.W_OK | os.X_OK) else None


def throwaway(writer: StoreWriter) -> StoreWriter:
    """The work copy is discarded after the test: no fsync on its commits or checkpoints."""
    writer.conn.execute("PRAGMA synchronous = OFF")
    return writer


def _copy_stores(src: Path, dst: Path) -> None:
    for name in _STORES:
        if not (src / name).is_file():
            raise ScenarioError(f"{src}: {name} is missing — the fixture is incomplete; re-record it")
        for suffix in _SIDECARS:
            p = src / (name + suffix)
            if p.is_file():
                shutil.copyfile(p, dst / (name + suffix))


# ------------------------------------------------------------------------------------------------
# Results


@dataclass
class Outcome(CountsReads):
    """What :meth:`Scenario.replay` found. ``calls``, ``text`` and ``plan_source`` are read from the
    **recorded** events; ``report`` is the hermetic replay. A test reading any of them asserts on
    the scenario (:mod:`flux.testkit.vacuous`)."""

    COUNTED: ClassVar[frozenset[str]] = frozenset({"faithful", "calls", "text", "plan_source", "report", "cost",
                                                   "detail"})

    scenario: "Scenario"
    report: ReplayReport
    detail: SessionDetail
    rebaselined: list[Rebaseline] = field(default_factory=list)
    asserted: int = 0

    def counted_scenario(self) -> Any:
        return self.scenario

    @property
    def faithful(self) -> bool:
        return self.report.faithful

    @property
    def calls(self) -> list[str]:
        return [c.op for c in self.detail.cells]

    @property
    def text(self) -> str:
        return self.detail.turns[-1].answer if self.detail.turns else ""

    @property
    def plan_source(self) -> str:
        return snapshot_text(self.detail)

    def cost(self, prices: Any = None) -> tuple[Optional[float], list[str]]:
        """USD the recorded run spent (its stored usage, priced by :mod:`flux.model.pricing`),
        and the models without a price."""
        table = prices if prices is not None else load_price_table(store_dir=self.scenario.path)
        spend = session_spend(table, self.detail.turns, self.detail.row.model)
        return spend.usd, list(spend.unpriced_models)

    # -- assertions ------------------------------------------------------------------------------

    def assert_faithful(self) -> "Outcome":
        __tracebackhide__ = kit_failure
        from .assertions import assert_faithful

        assert_faithful(self)
        return self

    def assert_plan_snapshot(self, *, update: Optional[bool] = None) -> "Outcome":
        __tracebackhide__ = kit_failure
        from .assertions import assert_plan_snapshot

        assert_plan_snapshot(self, update=update)
        return self

    def assert_calls(self, ops: Iterable[str], *, exact: bool = False) -> "Outcome":
        __tracebackhide__ = kit_failure
        from .assertions import assert_calls

        assert_calls(self, ops, exact=exact)
        return self

    def assert_never_calls(self, *ops: str) -> "Outcome":
        __tracebackhide__ = kit_failure
        from .assertions import assert_never_calls

        assert_never_calls(self, *ops)
        return self

    def assert_text_contains(self, needle: str) -> "Outcome":
        __tracebackhide__ = kit_failure
        from .assertions import assert_text_contains

        assert_text_contains(self, needle)
        return self

    def assert_cost_below(self, usd: float, prices: Any = None) -> "Outcome":
        __tracebackhide__ = kit_failure
        from .assertions import assert_cost_below

        assert_cost_below(self, usd, prices)
        return self

    assert_cost_under = assert_cost_below  # flux's name


@dataclass(repr=False)
class Report(CountsReads):
    """What :meth:`Scenario.check` found (the run diff and flux's three verdicts, plus the two
    surfaces and the cassette). A test reading a verdict off it (``assert not report.plan_changed``,
    ``report.is_clean()``) asserts on the scenario (:mod:`flux.testkit.vacuous`)."""

    COUNTED: ClassVar[frozenset[str]] = frozenset({
        "diff", "plan_changed", "left_world", "model_served", "model_live", "model_unconsumed", "error", "divergence",
        "transcript_diff", "events_diff", "outcome", "actual_ops", "is_clean", "first_divergence", "status", "explain",
        "trajectory_diff", "to_json", "replay_only"})

    scenario: str
    diff: Optional[RunDiff] = None
    plan_changed: bool = False
    left_world: bool = False
    model_served: int = 0
    model_live: int = 0
    model_unconsumed: int = 0  # recorded calls the re-drive never asked for
    replay_only: bool = False
    note: Optional[str] = None  # why replay only
    error: Optional[str] = None  # the cassette failure / turn error, one line
    divergence: Optional[str] = None  # the frozen world's latched refusal
    transcript_diff: list[str] = field(default_factory=list)
    events_diff: list[str] = field(default_factory=list)
    golden_transcript: list[str] = field(default_factory=list)
    actual_transcript: list[str] = field(default_factory=list)
    session: Optional[str] = None  # the re-drive's session id in the work copy
    outcome: Optional[str] = None  # the re-drive turn's outcome
    rebaselined: list[Rebaseline] = field(default_factory=list)
    actual_ops: list[str] = field(default_factory=list)  # ops the re-drive dispatched, in order
    scenario_ref: Any = field(default=None, repr=False, compare=False)

    def counted_scenario(self) -> Any:
        return self.scenario_ref

    def __repr__(self) -> str:
        fd = self.first_divergence
        return f"Report({self.scenario}: {self.status()}" + (f" — {fd}" if fd else "") + ")"

    def is_clean(self) -> bool:
        """No plan change, the world not left, no live model call — and, beyond flux, both
        surfaces equal, the cassette fully used, no error. A replay-only report is never clean."""
        return (not self.replay_only and not self.plan_changed and not self.left_world and self.model_live == 0
                and self.model_unconsumed == 0 and self.error is None and not self.transcript_diff
                and not self.events_diff)

    @property
    def first_divergence(self) -> Optional[str]:
        """One line: the first thing that differs from the golden, or ``None`` when clean."""
        if self.replay_only:
            return None
        if self.divergence:  # the world diverged first; a model-call mismatch follows from it
            return f"left the recorded world: {self.divergence}"
        if self.error:
            return self.error
        if self.diff is not None:
            for r in self.diff.rows:
                if r.kind == "plan":
                    return (f"plan changed at statement {r.node}: {self.diff.text(r.a_stmt)} → "
                            f"{self.diff.text(r.b_stmt)}")
                if r.kind == "output":
                    return f"different world at statement {r.node}: op `{r.op}` returned something else"
        if self.model_unconsumed:
            return (f"the re-drive made fewer model calls than recorded ({self.model_unconsumed} recorded call(s) "
                    f"never asked for)")
        if self.transcript_diff:
            first = next((ln for ln in self.transcript_diff[2:] if ln[:1] in "+-"), "")
            return f"transcript differs: {first}"
        if self.events_diff:
            first = next((ln for ln in self.events_diff[2:] if ln[:1] in "+-"), "")
            return f"event log differs: {first[:160]}"
        return None

    def status(self) -> str:
        if self.replay_only:
            return "replay only"
        if self.is_clean():
            return "✓ faithful"
        parts = []
        if self.plan_changed:
            parts.append("✗ plan changed")
        if self.left_world:
            parts.append("≠ left the world")
        if self.model_live:
            parts.append(f"model live {self.model_live}")
        if not parts:
            parts.append("✗ check failed")
        return " · ".join(parts)

    def trajectory_diff(self, width: int = 120) -> str:
        return side_by_side(self.golden_transcript, self.actual_transcript, width)

    def explain(self, width: int = 120) -> str:
        """The full failure text: status, first divergence, side-by-side trajectory, run diff,
        surface diffs and the re-baseline hint."""
        if self.replay_only:
            return f"{self.scenario}: replay only — {self.note}"
        lines = [f"{self.scenario}: {self.status()}"]
        fd = self.first_divergence
        if fd:
            lines.append(f"first divergence: {fd}")
        lines.append(f"model calls: {self.model_served} served from model.jsonl, {self.model_live} would have gone live, "
                     f"{self.model_unconsumed} recorded but not asked for")
        lines += ["", "trajectory (golden ↔ this run):", self.trajectory_diff(width)]
        if self.diff is not None and not self.diff.identical:
            lines += ["", self.diff.render_text().rstrip()]
        if self.transcript_diff:
            lines += ["", *self.transcript_diff]
        if self.events_diff:
            lines += ["", *self.events_diff[:40]]
            if len(self.events_diff) > 40:
                lines.append(f"… {len(self.events_diff) - 40} more event-log diff line(s)")
        lines += ["", UPDATE_HINT]
        return "\n".join(lines)

    def assert_clean(self) -> "Report":
        __tracebackhide__ = kit_failure
        if self.scenario_ref is not None:
            self.scenario_ref.assertions += 1
        if self.replay_only:
            raise AssertionFailed(f"{self.scenario}: check cannot run — {self.note}")
        if not self.is_clean():
            raise AssertionFailed(f"{self.scenario}: check failed — {self.first_divergence}", detail=self.explain())
        return self

    def to_json(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario, "clean": self.is_clean(), "status": self.status(),
            "replay_only": self.replay_only, "note": self.note, "plan_changed": self.plan_changed,
            "left_world": self.left_world, "model_served": self.model_served, "model_live": self.model_live,
            "model_unconsumed": self.model_unconsumed, "error": self.error, "divergence": self.divergence,
            "first_divergence": self.first_divergence, "outcome": self.outcome,
            "diff": self.diff.to_json() if self.diff is not None else None,
            "transcript_diff": self.transcript_diff, "events_diff": self.events_diff,
        }


# ------------------------------------------------------------------------------------------------


def _outcome_departure(golden: SessionDetail, actual: SessionDetail, out: Any) -> Optional[str]:
    """How the re-drive's turn ended unlike the recorded one, in one line (``None``: as recorded).
    An error turn the recording also ended with, with the same message, is the agent behaving as
    recorded (an error-path scenario); any other error, or an ok turn where the recording failed,
    is a departure."""
    if out is None:
        return None
    g = golden.turns[-1] if golden.turns else None
    a = actual.turns[-1] if actual.turns else None
    recorded_error = g.answer if g is not None and g.outcome == "error" else None
    if out.outcome == "error" and out.error:
        got = a.answer if a is not None else out.error
        if recorded_error is not None and got == recorded_error:
            return None
        if recorded_error is not None:
            return f"the re-drive ended in error: {out.error} — the recording ended in error: {recorded_error}"
        return f"the re-drive ended in error: {out.error}"
    if recorded_error is not None:
        return f"the recording ended in error ({recorded_error}); the re-drive ended {out.outcome}"
    return None


def _recorded_ops(client: "Client", ops: Optional[str]) -> Optional[str]:
    """The ``ops`` reference scenario.toml gets (None: the built-in coding ops), or a refusal."""
    ref = ops if ops is not None else getattr(client, "ops_ref", None)
    tools = client.toolbox.tools()
    if ref is not None:
        if Toolbox.of(load_ops(ref)).tools() != tools:
            raise ScenarioError(f"ops {ref!r} are not the ops this client records with (their tool definitions "
                                f"differ) — name the client's own ops")
        return ref
    if Toolbox.of(coding_ops(client.workspace)).tools() != tools:
        names = ", ".join(sorted(client.toolbox.ops)) or "none"
        raise ScenarioError(f"this client's ops ({names}) are not the built-in coding ops, and nothing names them — "
                            f"build the client with ops=\"module:attr\" (flux record --ops module:attr) or pass "
                            f"Scenario.record(…, ops=\"module:attr\"), so flux test can re-drive the scenario with them")
    return None


def _all_denied(detail: SessionDetail) -> Optional[str]:
    """Why a finished turn should not become a golden: the approver denied every tool call it made
    (None when it may)."""
    cells = detail.cells
    if cells and all(c.rec.denied for c in cells):
        ops = ", ".join(dict.fromkeys(c.rec.op for c in cells))
        return f"the approver denied every tool call of the recorded turn ({len(cells)}: {ops})"
    return None


def _cleanup(path: str) -> None:
    shutil.rmtree(path, ignore_errors=True)


class Scenario:
    """A loaded scenario fixture (docs/testing.md). Use :meth:`load` or :meth:`record`."""

    def __init__(self, path: Path, manifest: Manifest, work: Path):
        self.path = path
        self.manifest = manifest
        self.work = work
        self._detail: Optional[SessionDetail] = None
        self._surfaces: Optional[tuple[list[str], list[str]]] = None  # the golden's transcript and event log
        self.assertions = 0  # assertions run against this scenario (the plugin's no-vacuous-pass guard)
        self.rebaselined: list[Rebaseline] = []  # every golden rewritten under update mode (snapshot, judge verdicts)
        self.last_report: Optional["Report"] = None  # the latest check (the pytest plugin shows its diff)
        self._finalizer = weakref.finalize(self, _cleanup, str(work))

    def __repr__(self) -> str:
        return f"Scenario({str(self.path)!r})"

    @property
    def name(self) -> str:
        return self.manifest.name

    # -- loading ---------------------------------------------------------------------------------

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> "Scenario":
        """Read the manifest and copy the stores to a temporary work directory (removed on
        :meth:`close` or when the object is collected). No scenario here → "record first"."""
        __tracebackhide__ = kit_failure
        p = Path(path).expanduser()
        if not (p / MANIFEST_FILE).is_file():
            raise MissingFixture(f"{p}: no recorded scenario (no scenario.toml) — record first: "
                                 f"{record_command(p)}")
        manifest = Manifest.read(p / MANIFEST_FILE)
        work = Path(tempfile.mkdtemp(prefix="flux-scenario-", dir=work_root()))
        try:
            _copy_stores(p, work)
        except BaseException:
            _cleanup(str(work))
            raise
        return cls(p, manifest, work)

    def close(self) -> None:
        self._finalizer()

    def __enter__(self) -> "Scenario":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def golden(self) -> SessionDetail:
        """The recorded session (``manifest.session`` in the work copy)."""
        if self._detail is None:
            with StoreReader(self.work) as reader:
                self._detail = load_session(reader, self.manifest.session)
        return self._detail

    def session_detail(self, session_id: str) -> SessionDetail:
        with StoreReader(self.work) as reader:
            return load_session(reader, session_id)

    # -- record ----------------------------------------------------------------------------------

    @classmethod
    def record(cls, client: "Client", input: str, path: str | os.PathLike[str], *,
               name: Optional[str] = None, allow_error: bool = False, ops: Optional[str] = None) -> "Scenario":
        __tracebackhide__ = kit_failure
        return run_blocking(cls.record_async(client, input, path, name=name, allow_error=allow_error, ops=ops))

    @classmethod
    async def record_async(cls, client: "Client", input: str, path: str | os.PathLike[str], *,
                           name: Optional[str] = None, allow_error: bool = False,
                           ops: Optional[str] = None) -> "Scenario":
        """Run one turn for ``input`` through ``client`` (live: this spends) and write the fixture.

        Refuses to overwrite a recorded scenario unless ``FLUX_GOLDEN=update``. The turn is run
        into a staging directory beside ``path``; the fixture's files are replaced only once the
        turn has finished, so a failed or interrupted record leaves the old fixture intact. A turn
        that ends in ``error`` (a provider failure), whose every tool call was denied by the
        approver, or that reached no model is not written unless ``allow_error``.

        The ops travel with the scenario: ``ops`` (``"module:attr"``, else the client's own
        ``ops_ref`` when it was built with ``ops="module:attr"``) is written to scenario.toml so
        ``flux test`` re-drives with them. A client whose ops are not the built-in coding ops and
        not named that way is refused — its scenario could never be re-driven."""
        __tracebackhide__ = kit_failure
        if not isinstance(input, str) or not input.strip():
            raise ScenarioError("the scenario input is empty — say what the agent should do")
        ops_ref = _recorded_ops(client, ops)
        if not cassette_enabled():
            raise ScenarioError("FLUX_CASSETTE=0 turns the cassette off: the recording would hold no tool results and "
                                "could never be replayed or tested — unset FLUX_CASSETTE to record a scenario")
        p = Path(path).expanduser()
        if (p / MANIFEST_FILE).exists() and not update_mode():
            raise ScenarioError(f"{p} already holds a recorded scenario — re-record it deliberately with "
                                f"FLUX_GOLDEN=update (flux record --update)")
        if p.exists() and not p.is_dir():
            raise ScenarioError(f"{p} is a file — give a directory for the scenario")
        p.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".flux-record-", dir=p))
        try:
            writer = StoreWriter(staging, clock=client._clock)
            try:
                sid = writer.create_session(client.model, context=client.context)
                tee = TeeProvider(client.provider, ModelCassetteWriter(staging / MODEL_FILE, client.redactor))
                cfg = replace(client.turn_config(sid, None), writer=writer, session=sid, provider=tee)
                out, _ = await TurnRunner(cfg).run_turn([], input)
                recorded_at = writer.now()
            finally:
                writer.close()
            if out.outcome == "cancelled":
                raise ScenarioError("the recorded turn was cancelled — nothing was written; record again")
            if out.outcome == "error" and not allow_error:
                answered = [r for r in load_records(staging / MODEL_FILE) if r.error is None or r.chunks]
                what = "reached no model (no model call was answered)" if not answered else "ended in error"
                raise ScenarioError(f"the recorded turn {what} ({out.error}) — nothing was written"
                                    f"{' (the old golden is kept)' if (p / MANIFEST_FILE).exists() else ''}; fix the "
                                    f"cause and record again (or keep the error turn as a scenario: --allow-error)")
            (staging / MODEL_FILE).touch()
            with StoreReader(staging) as reader:
                detail = load_session(reader, sid)
            if not allow_error:
                refusal = _all_denied(detail)
                if refusal:
                    raise ScenarioError(f"{refusal} — nothing was written{' (the old golden is kept)' if (p / MANIFEST_FILE).exists() else ''}; "
                                        f"record with an approver that allows the run (--yes or --policy FILE), or keep "
                                        f"exactly this run as the scenario: --allow-error")
            (staging / SNAP_FILE).write_text(snapshot_text(detail), encoding="utf-8")
            # The input as events.db keeps it (redacted): the manifest is committed with the fixture.
            manifest = Manifest(schema=1, name=name or p.resolve().name, flux_version=RUNTIME_VERSION,
                                recorded_at_ms=recorded_at, session=sid, input=client.redactor.redact(input),
                                model=client.model,
                                cassette_max_bytes=client.cap, redaction_marker=client.redactor.marker, ops=ops_ref)
            manifest.write(staging / MANIFEST_FILE)
            # Swap in: the old stores, cassette, snapshot and manifest go; judge.jsonl (additive),
            # the override sidecar and trajectory goldens stay.
            for n in _STORES:
                for suffix in _SIDECARS:
                    (p / (n + suffix)).unlink(missing_ok=True)
            shutil.rmtree(p / LOOPS_DIR, ignore_errors=True)
            for f in (*_STORES, MODEL_FILE, SNAP_FILE, MANIFEST_FILE):
                os.replace(staging / f, p / f)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return cls.load(p)

    # -- replay ----------------------------------------------------------------------------------

    def replay(self, client: "Client | None" = None) -> Outcome:
        """Hermetic replay of the work copy's recorded session: no model call, no live op, $0. With a
        ``client``, its op catalog is used (a plan naming an op it lacks is refused)."""
        __tracebackhide__ = kit_failure
        catalog = client.toolbox.catalog() if client is not None else None
        report = replay_detail(self.golden(), catalog=catalog)
        return Outcome(self, report, self.golden())

    # -- check -----------------------------------------------------------------------------------

    def check(self, client: "Client", *, timeout: float = 60.0, update: Optional[bool] = None,
              on_miss: str = "strict") -> Report:
        __tracebackhide__ = kit_failure
        return run_blocking(self.check_async(client, timeout=timeout, update=update, on_miss=on_miss))

    async def check_async(self, client: "Client", *, timeout: float = 60.0, update: Optional[bool] = None,
                          on_miss: str = "strict") -> Report:
        """Re-drive the recorded input through ``client``'s agent loop against the recording.

        ``on_miss="strict"`` (the default): a model request the recording cannot answer fails the
        check. ``on_miss="live"``: it goes to ``client``'s own provider (live: this spends) and is
        counted in ``model_live`` — every miss — while the ops stay pinned to the recorded world.

        Under ``FLUX_GOLDEN=update`` (or ``update=True``) the scenario is re-recorded through the
        client instead (live: this spends), and the report shows old golden ↔ new golden."""
        __tracebackhide__ = kit_failure
        m = self.manifest
        if m.foreign:
            g = self.golden()
            return Report(m.name, replay_only=True, scenario_ref=self,
                          golden_transcript=transcript(g) + [f"cell {line}" for line in cell_trajectory(g)],
                          note=f"recorded by {m.recorded_by}, another runtime: check re-drives this runtime's agent "
                               f"loop, whose model requests cannot match that cassette — replay only")
        rerecord = update if update is not None else (update_mode() and not getattr(client, "offline", False))
        if rerecord:
            return await self._rerecord(client)
        marker = client.redactor.marker
        if marker != m.redaction_marker:
            raise ScenarioError(f"redaction marker drifted — scenario.toml pins {m.redaction_marker!r}, this "
                                f"check's redactor writes {marker!r}; the recorded cells cannot compare. Check with a "
                                f"client whose redaction_marker is {m.redaction_marker!r}, or re-record the scenario")
        golden = self.golden()
        records = load_records(self.path / MODEL_FILE)
        overrides = load_overrides(self.path / OVERRIDE_FILE)
        if not (self.path / MODEL_FILE).exists() and overrides is None:
            raise MissingFixture(f"{self.path}: no model cassette (model.jsonl) — record first: "
                                 f"{record_command(self.path, m.input, m.model)} --update")
        if on_miss not in ("strict", "live"):
            raise ScenarioError(f"on_miss={on_miss!r}: use \"strict\" (a miss fails) or \"live\" (a miss goes to the "
                                f"client's provider and is counted in model_live)")
        tape = ReplayTape(golden.cells)
        cassette = StrictCassette(records, overrides, client.redactor,
                                  fallback=client.provider if on_miss == "live" else None)

        async def _no_sleep(_s: float) -> None:
            return None

        writer = StoreWriter(self.work, clock=client._clock)
        throwaway(writer)
        hung = False
        out = None
        try:
            sid = writer.create_session(client.model, context={"correlation_id": m.session,
                                                               "agent_id": f"what_if:check@{m.name}"})
            cfg = replace(client.turn_config(sid, None), writer=writer, session=sid, provider=cassette,
                          toolbox=frozen_toolbox(client.toolbox, tape), approver=AutoApprove(),
                          # retries as the recording retried: the cassette marks a recorded failure
                          # retryable only when the recording's next call repeated the request
                          retry=RetryPolicy(attempts=len(records) + 1), sleep=_no_sleep, on_event=None)
            with writer.transaction():  # one commit for the whole re-drive (the copy is throwaway)
                try:
                    out, _ = await asyncio.wait_for(TurnRunner(cfg).run_turn([], m.input), timeout)
                except asyncio.TimeoutError:
                    hung = True
        finally:
            writer.close()
        actual = self.session_detail(sid)
        golden = as_the_redrive_sees_it(golden, marker)  # a secret in a tool input reached it redacted
        diff = diff_details(golden, actual)
        rep = Report(m.name, diff=diff, session=sid, outcome=out.outcome if out is not None else "cancelled",
                     model_served=cassette.served, model_live=cassette.model_live, scenario_ref=self,
                     actual_ops=[c.op for c in actual.cells])
        rep.plan_changed = any(r.kind == "plan" for r in diff.rows)
        rep.divergence = tape.diverged
        rep.left_world = tape.diverged is not None or any(r.kind == "output" for r in diff.rows)
        failures = [f for f in cassette.failures]
        if failures:
            rep.error = str(failures[0])
        elif hung:
            rep.error = f"the re-drive did not finish within {timeout:g}s and was cancelled"
        else:
            rep.error = _outcome_departure(golden, actual, out)
        if not failures and not hung:
            rep.model_unconsumed = cassette.unconsumed
        if self._surfaces is None:
            self._surfaces = (transcript(golden), event_log(golden))
        rep.golden_transcript = self._surfaces[0]
        rep.actual_transcript = transcript(actual)
        rep.transcript_diff = surface_diff(rep.golden_transcript, rep.actual_transcript, "transcript")
        rep.events_diff = surface_diff(self._surfaces[1], event_log(actual, served_redacted=redacted_cells(golden)),
                                       "event log")
        self.last_report = rep
        return rep

    async def _rerecord(self, client: "Client") -> Report:
        old = self.golden()
        old_snap = snapshot_text(old)
        new = await Scenario.record_async(client, self.manifest.input, self.path, name=self.manifest.name,
                                          ops=getattr(client, "ops_ref", None) or self.manifest.ops)
        try:
            nd = new.golden()
            rep = Report(self.manifest.name, diff=diff_details(old, nd), left_world=True, scenario_ref=self,
                         actual_ops=[c.op for c in nd.cells])
            rep.plan_changed = any(r.kind == "plan" for r in rep.diff.rows)
            rep.golden_transcript, rep.actual_transcript = transcript(old), transcript(nd)
            rep.transcript_diff = surface_diff(rep.golden_transcript, rep.actual_transcript, "transcript")
            new_snap = snapshot_text(nd)
            snap_diff = line_diff(old_snap, new_snap) if new_snap != old_snap else ""
            # What the re-record overwrote: the plans and what a person sees of the run.
            overwritten = "\n".join(part for part in (snap_diff, "\n".join(rep.transcript_diff)) if part)
            rb = Rebaseline(str(self.path), "scenario", overwritten or "(the re-recorded run is the same as the golden)")
            rep.rebaselined.append(rb)
            self.rebaselined.append(rb)
            rep.note = "re-recorded under FLUX_GOLDEN=update"
        finally:
            new.close()
        # This object now describes the new recording.
        self.manifest = Manifest.read(self.path / MANIFEST_FILE)
        _copy_stores(self.path, self.work)
        self._detail = None
        self._surfaces = None
        return rep

    # -- fault injection -------------------------------------------------------------------------

    def inject_at(self, client: "Client", node: int, value: Any) -> Counterfactual:
        """Fork the work copy's recorded session at statement position ``node`` (0-based, across
        every execution: the N-th tool call of an adaptive turn) with ``value`` as that statement's
        result, and re-run the tail (:func:`flux.timemachine.fork.fork_session`, inject mode).

        The tail is tape-first: a dispatch the recording can answer is served from it; a miss runs
        through ``client``'s ops **and approver** (a deny-all approver keeps it side-effect free).
        The fixture itself is never written — the fork lands in the work copy."""
        __tracebackhide__ = kit_failure
        from ..timemachine.fork import fork_session

        saved = (client.store_dir, client.writer)
        writer = throwaway(StoreWriter(self.work, clock=client._clock))
        client.store_dir, client.writer = self.work, writer
        try:
            result = fork_session(client, self.manifest.session, node, inject=value)
        finally:
            client.store_dir, client.writer = saved
            writer.close()
        golden = self.golden()
        fork = self.session_detail(result.session)
        return Counterfactual(self.manifest.session, result.session, str(self.work), went_live=len(result.live_ops),
                              live_ops=list(result.live_ops), served=result.prefix_served + result.tail_served,
                              at=node, fork=result, label=self.manifest.name, scenario_ref=self,
                              golden_transcript=cell_trajectory(golden), actual_transcript=cell_trajectory(fork))

    # -- judge -----------------------------------------------------------------------------------

    def judge(self, client: Any, criterion: str, text: str, rubric: Any) -> Any:
        __tracebackhide__ = kit_failure
        self.assertions += 1
        return judge(self, criterion, text, rubric, live=client)

    def assert_judge(self, client: Any, criterion: str, text: str, rubric: Any) -> Any:
        __tracebackhide__ = kit_failure
        verdict = self.judge(client, criterion, text, rubric)
        verdict.assert_pass()
        return verdict
