"""A small store whose turns ran agent-loop programs recorded under ``agent-loops/<sha>.flux``."""

from __future__ import annotations

import hashlib
import itertools
from pathlib import Path

from flux.store import Message, PlanAttempted, StoreWriter, TurnEnded

AGENT_LOOP = (Path(__file__).parent / "data" / "flux" / "crates" / "flux-flow" / "assets" /
              "agent-loop.flux").read_bytes()
AGENT_LOOP_SHA = hashlib.sha256(AGENT_LOOP).hexdigest()


def binding(sha: str) -> dict:
    return {"schema": "flux.agent-loop-binding/v1", "profile": "adaptive", "revision": "1",
            "runner": "native-flux", "source_ref": "builtin:adaptive@1", "source_sha256": sha,
            "entry_point": "agent-loop", "required_operations": ["plan", "run_plan"],
            "required_runtime_features": ["agent-loop/native-flux/v1"]}


def build_loop_store(path: Path, *, missing: bool = False) -> tuple[Path, str]:
    """One session, one turn bound to the shipped agent loop (its file written unless ``missing``)."""
    clock = itertools.count(1_785_000_000_000, 1_000)
    with StoreWriter(path, clock=lambda: next(clock)) as w:
        sid = w.create_session("mock")
        w.append(sid, Message.text("user", "write a note"))
        tid = w.begin_turn(sid, "write a note", "mock", loop_binding=binding(AGENT_LOOP_SHA))
        w.append(sid, PlanAttempted(step=1, outcome="accepted", phase="execute",
                                    plan_source='flow\n  note = write({"path":"n.txt","content":"hi"})\n'),
                 turn_id=tid)
        w.append(sid, TurnEnded(outcome="ok", iterations=1, answer="Wrote it."), turn_id=tid)
        w.append(sid, Message.text("assistant", "Wrote it."))
    if not missing:
        (path / "agent-loops").mkdir()
        (path / "agent-loops" / f"{AGENT_LOOP_SHA}.flux").write_bytes(AGENT_LOOP)
    return path, sid
