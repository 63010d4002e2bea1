"""Every behaviour case of cases.json, run live against the case world with a manual clock."""

from __future__ import annotations

import pytest

from flux.lang import parse

from .harness import CASES, interpreter_for


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_case(case):
    interp, world, approvals = interpreter_for(case)
    exp = case["expect"]
    halts, last = [], None
    for src in case["sources"]:
        last = interp.run(parse(src), resumable=True)
        halts.append(last.halted)
    assert len(exp["halted"]) == len(halts)
    for want, got in zip(exp["halted"], halts):
        if want is None:
            assert got is None, got
            continue
        assert got is not None, "expected a halt"
        assert got.kind == want["kind"], got
        if "error" in want:
            assert got.error == want["error"]
        if "error_contains" in want:
            assert want["error_contains"] in got.error, got.error
    if "marks" in exp:
        assert world.marks == exp["marks"]
    for name, value in exp.get("symbols", {}).items():
        assert last.symbols.get(name) == value, name
    if "returned" in exp:
        assert last.returned and last.value == exp["returned"]
    if "steps" in exp:
        assert interp.steps == exp["steps"]
    if "sleeps" in exp:
        assert interp.clock.sleeps == exp["sleeps"]
    if "approvals" in exp:
        assert len(approvals) == exp["approvals"]
    events = interp.sink.events
    for ev in exp.get("events", []):
        assert ev in events, ev
    if "events" in exp:  # and in that order
        wanted_kinds = {e["event"] for e in exp["events"]}
        assert [e for e in events if e["event"] in wanted_kinds] == exp["events"]
    for kind in exp.get("no_events", []):
        assert all(e["event"] != kind for e in events)
