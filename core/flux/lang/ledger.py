"""The resume ledger: which statements of a plan execution completed, folded from run-event
bodies. Its own module so that cheap readers (the interrupted check of ``flux sessions``) use it
without loading the interpreter, which re-exports it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Optional

__all__ = ["LedgerEntry", "ResumeLedger"]


@dataclass(frozen=True)
class LedgerEntry:
    node: int
    stmt: str
    value: Optional[str] = None


@dataclass
class ResumeLedger:
    """The completed statements of one plan execution, used to fast-forward a resume."""

    plan: str
    completed: list[LedgerEntry] = field(default_factory=list)
    checkpoint: Optional[int] = None

    def entry(self, node: int) -> Optional[LedgerEntry]:
        """The last completed row for ``node`` (an index built once: a 10,000-statement
        fast-forward must stay linear)."""
        idx = self.__dict__.get("_by_node")
        if idx is None or self.__dict__.get("_indexed") != len(self.completed):
            idx = {e.node: e for e in self.completed}
            self.__dict__["_by_node"] = idx
            self.__dict__["_indexed"] = len(self.completed)
        return idx.get(node)

    @staticmethod
    def _entry(ev: dict) -> LedgerEntry:
        return LedgerEntry(int(ev.get("node", 0)), str(ev.get("stmt", "")), ev.get("value"))

    @staticmethod
    def _checkpoint(trace: Iterable[dict], plan: str) -> Optional[int]:
        cp = None
        for ev in trace:
            if ev.get("event") == "checkpoint_reached" and ev.get("flow_key") == plan:
                cp = int(ev.get("node", 0))
        return cp

    @classmethod
    def from_interrupted(cls, trace: list[dict], flow_key: str, *,
                         across_resumes: bool = False) -> Optional["ResumeLedger"]:
        """The ``statement_completed`` rows of ``flow_key`` since its last (re)start, or None.

        flux also clears at every ``plan_resumed`` naming ``flow_key`` as ``prior``; that
        drops the ``skipped`` rows a fast-forward of the same plan writes just before it, so a
        resume that was itself killed leaves a ledger without its first statements.
        ``across_resumes=True`` (resurrect's own fast-forward) keeps them when the resumption is
        of the same plan (``plan == prior``): they restate completions, and a restart is still
        seen where a node does not grow. The ``completed`` count shown to users stays flux's."""
        rows: list[LedgerEntry] = []
        for ev in trace:
            kind = ev.get("event")
            if kind == "statement_completed" and ev.get("plan") == flow_key:
                entry = cls._entry(ev)
                if rows and entry.node <= rows[-1].node:
                    rows = []  # a same-plan restart
                rows.append(entry)
            elif kind == "plan_resumed" and ev.get("prior") == flow_key:
                if not (across_resumes and ev.get("plan") == flow_key):
                    rows = []
        if not rows:
            return None
        return cls(flow_key, rows, cls._checkpoint(trace, flow_key))

    @classmethod
    def fold(cls, trace: list[dict]) -> Optional["ResumeLedger"]:
        """The open halt latch: the last ``plan_halted`` not closed by a later ``plan_resumed``."""
        latch: Optional[str] = None
        resumed_later: set = set()
        for ev in reversed(trace):  # one pass from the end: priors seen so far were resumed later
            kind = ev.get("event")
            if kind == "plan_resumed":
                resumed_later.add(ev.get("prior"))
            elif kind == "plan_halted" and ev.get("plan") not in resumed_later:
                latch = ev.get("plan")
                break
        if latch is None:
            return None
        rows = [cls._entry(ev) for ev in trace
                if ev.get("event") == "statement_completed" and ev.get("plan") == latch]
        return cls(latch, rows, cls._checkpoint(trace, latch))
