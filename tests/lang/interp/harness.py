"""The small op world the interpreter behaviour cases run in (see cases.json's "about")."""

from __future__ import annotations

import json
from pathlib import Path

from flux.lang.catalog import OpCatalog, OpSpec
from flux.lang.clock import ManualClock
from flux.lang.interpreter import Interpreter, ListSink, OpOutcome

CASES = json.loads((Path(__file__).parent / "cases.json").read_text(encoding="utf-8"))["cases"]

CATALOG = OpCatalog([OpSpec("echo", required=("v",)), OpSpec("pick", required=("label",)),
                     OpSpec("boom"), OpSpec("slow"), OpSpec("nap"), OpSpec("flaky")])

COST_MS = {"slow": 150.0, "nap": 400.0}


class World:
    """Ops of the cases; ``clock`` is charged each op's cost; ``marks`` logs what ran."""

    def __init__(self, clock: ManualClock, denied=()):
        self.clock, self.denied, self.marks = clock, set(denied), []

    def dispatch(self, op, input, input_json):
        if op in self.denied:
            self.marks.append(op)
            return OpOutcome(f"`{op}` denied by policy", denied=True)
        self.clock.advance(COST_MS.get(op, 0.0))
        if op == "echo":
            self.marks.append(input["v"])
            return OpOutcome(input["v"])
        if op == "pick":
            self.marks.append(f"pick={input['label']}")
            return OpOutcome(input["label"])
        self.marks.append(op)
        if op == "boom":
            return OpOutcome("boom failed", is_error=True)
        if op == "flaky":
            if self.marks.count("flaky") <= 2:
                return OpOutcome("transient", is_error=True)
            return OpOutcome("recovered")
        return OpOutcome(f"{op} done")


def interpreter_for(case: dict, host=None, sink=None, clock=None):
    clock = clock or ManualClock()
    host = host or World(clock, case.get("denied", ()))
    approvals: list = []

    def approver(message, risk):
        approvals.append((message, risk))
        return case.get("approve", True)

    interp = Interpreter(CATALOG, host, sink or ListSink(), approver, clock=clock)
    return interp, host, approvals
