"""The Python API (``flux.cases``) and the ladder's codes that need changed code or a changed
bundle to reach: prefix_diverged, unexpected_call, recorded_error, unconsumed calls."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flux.agent.builtin_ops import coding_ops
from flux.agent.ops import op
from flux.cases import (
    Bundle, CaseRefusal, MemoryStore, capture_case, gc_cases, list_cases, run_case, save_case,
)


def test_save_and_run_through_the_api(recorded):
    st = MemoryStore()
    saved = save_case(recorded, "s_1", at=1, fixture_store=st)
    assert saved.stored and save_case(recorded, "s_1", at=1, fixture_store=st).stored is False
    out = run_case(saved.hash, replay_only=True, fixture_store=st)
    assert out.complete and out.exit_code == 0
    assert [c.provenance for c in out.calls] == ["reused"] * 3
    assert [r.hash for r in list_cases(fixture_store=st)] == [saved.hash]
    assert gc_cases(fixture_store=st) == ([saved.hash], [])


def test_changed_tools_diverge_in_the_prefix(recorded, tmp_path):
    """Code under test that offers another tool list no longer makes the prefix's model call."""
    b = capture_case(recorded, "s_1", at=1)

    @op(effect="read")
    def extra(path: str) -> str:
        """A tool the recording did not offer."""
        return path

    out = run_case(b, replay_only=True, ops=coding_ops(tmp_path) + [extra])
    assert out.status == "refused" and out.code == "prefix_diverged" and out.exit_code == 2
    assert out.stop_key == "model:1" and out.calls == []
    # The same code with the recorded tools passes.
    assert run_case(b, replay_only=True, ops=coding_ops(tmp_path)).complete


def _edited(b: Bundle, edit) -> Bundle:
    obj = json.loads(b.data)
    edit(obj)
    return Bundle.build(obj["manifest"], obj["history"], obj["results"])


def test_a_call_the_recording_never_made_is_unexpected_call(recorded):
    b = capture_case(recorded, "s_1", at=1)
    gone = _edited(b, lambda o: o.__setitem__("results", [r for r in o["results"] if (r["kind"], r["key"]) != ("op", "1")]))
    out = run_case(gone, replay_only=True)
    assert (out.code, out.reason, out.stop_key) == ("replay_diverged", "unexpected_call", "op:1")


def test_a_cell_cut_at_the_capture_cap_is_recorded_error(recorded):
    b = capture_case(recorded, "s_1", at=1)

    def cut(o):
        for r in o["results"]:
            if (r["kind"], r["key"]) == ("op", "1"):
                r["truncated"] = True
    out = run_case(_edited(b, cut), replay_only=True)
    assert (out.code, out.reason) == ("replay_diverged", "recorded_error")


def test_a_changed_recorded_input_is_input_changed(recorded):
    b = capture_case(recorded, "s_1", at=1)

    def other(o):
        for r in o["results"]:
            if (r["kind"], r["key"]) == ("op", "1"):
                r["fingerprint"] = "0" * 64
    out = run_case(_edited(b, other), replay_only=True)
    assert (out.code, out.reason, out.stop_key) == ("replay_diverged", "input_changed", "op:1")


def test_a_recorded_call_the_run_never_makes_is_unconsumed(recorded):
    b = capture_case(recorded, "s_1", at=1)

    def extra(o):
        o["results"].append({"kind": "op", "key": "2", "op": "read", "fingerprint": "1" * 64, "truncated": False,
                             "result": {"content": "x", "view": None}})
    out = run_case(_edited(b, extra), replay_only=True)
    assert out.status == "incomplete" and out.unconsumed_keys == ["op:2"] and out.exit_code == 3


def test_a_flow_case_replays_through_the_interpreter(tmp_path):
    from click.testing import CliRunner

    from flux.cli import main

    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "a.txt").write_text("alpha\n")
    flow = tmp_path / "f.flux"
    flow.write_text('flow\n  a = read({"path": "a.txt"})\n  b = read({"path": "a.txt"})\n')
    res = CliRunner().invoke(main, ["flow", "run", str(flow), "--store", str(tmp_path / "st"), "--workspace",
                                    str(tmp_path / "ws"), "--yes"])
    assert res.exit_code == 0, res.output
    with pytest.raises(CaseRefusal) as e:
        capture_case(tmp_path / "st", "s_1", kind="agent")
    assert e.value.code == "kind_mismatch"
    b = capture_case(tmp_path / "st", "s_1", at=1)
    assert b.manifest["kind"] == "flow"
    out = run_case(b, replay_only=True)
    assert out.complete, out.to_json()
    assert [(c.key, c.provenance) for c in out.calls] == [("op:1", "reused")] and out.prefix_calls == 1


def test_a_case_run_never_waits_a_recorded_delay_advances_the_clock(tmp_path):
    """The flow waited 3 s between its retry attempts when it was recorded; its case run answers the
    same calls from the recording on the replay clock, without waiting."""
    import time

    from click.testing import CliRunner

    from flux.cli import main

    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "a.txt").write_text("alpha\n")
    flow = tmp_path / "f.flux"
    flow.write_text('flow\n  a = read({"path": "a.txt"})\n  retry 2, delay: 3s -> b\n    read({"path": "missing.txt"})\n')
    t0 = time.monotonic()
    res = CliRunner().invoke(main, ["flow", "run", str(flow), "--store", str(tmp_path / "st"), "--workspace",
                                    str(tmp_path / "ws"), "--yes"])
    recorded_s = time.monotonic() - t0
    assert recorded_s >= 3, res.output  # the recording did wait
    b = capture_case(tmp_path / "st", "s_1", at=1)
    t0 = time.monotonic()
    out = run_case(b, replay_only=True)
    assert time.monotonic() - t0 < 2.5
    assert [(c.key, c.provenance) for c in out.calls] == [("op:1", "reused"), ("op:2", "reused")]
    # The flow halts as it did when recorded (the retry is exhausted): a runtime failure, not a stop.
    assert out.status == "failed" and out.code == "runtime_error" and "retry" in out.message


def test_an_interrupted_run_is_cancelled(recorded, tmp_path):
    """Ctrl-C inside a live call: the run ends ``cancelled`` (exit 3), not a traceback."""
    from flux.cases import Supplied

    @op(effect="read")
    def read(path: str) -> str:
        """Read a file (interrupted)."""
        raise KeyboardInterrupt

    others = [o for o in coding_ops(tmp_path) if o.name != "read"]
    b = capture_case(recorded, "s_1")
    # A changed first answer asks for another file: the recording cannot answer it, so it goes live.
    ask = {"role": "assistant", "content": [{"type": "tool_use", "id": "x", "name": "read", "input": {"path": "X"}}]}
    out = run_case(b, ops=[read, *others], prompt="Another prompt.", supply=Supplied(calls={"model:1": ask}))
    assert (out.status, out.code, out.exit_code) == ("cancelled", "cancelled", 3)
