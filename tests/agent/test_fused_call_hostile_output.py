"""qa5: the fused tool call (DirectCall.tool, which writes its cell straight to the store writer)
records hostile op *output* — a benign flat input answered with NULs, lone surrogates, line
separators, a huge text, registered secrets whole, JSON-escaped-looking or split by a surrogate — row
for row as the general path (Interpreter.run_call) records it, and no registered secret reaches a row."""

from __future__ import annotations

from typing import Any

import pytest

import tests.agent.test_direct_call as D
from flux.agent.ops import op

SECRET = "sk-SECRETSECRET1234"
_OUTPUTS = [
    "nul\x00byte\x00",
    "lone \ud800 high and \udfff low",
    "line\u2028sep\u2029para\x85nel\r\n",
    "big:" + "é✓\x01" * 120_000,
    f"token={SECRET}",
    f"quoted \"{SECRET}\" and \\{SECRET}\\",
    f"{SECRET[:6]}\ud800{SECRET[6:]} split by a surrogate",
    f"{{{SECRET}}} {{name}} {{{{x}}}}",
    "\ud83d\ude00 pair and \ude00\ud83d reversed",
    "",
]


@op(effect="write")
def note(path: str, n: int = 0, flag: bool = False, tag: Any = None) -> str:
    """A flat typed schema (the fused tool call's kind) whose answer is hostile output number ``n``."""
    return _OUTPUTS[n]


@pytest.mark.parametrize("approver,cap", [("callback", 200), ("auto", None)])
def test_hostile_output_is_recorded_fused_as_the_general_path_records_it(tmp_path, monkeypatch, approver, cap):
    monkeypatch.setattr(D, "note", note)
    calls = [{"id": f"t{i}", "name": "note", "input": {"path": "a.txt", "n": i}} for i in range(len(_OUTPUTS))]
    taken = D._spy_on_the_fused_call(monkeypatch)
    fused = D._record(tmp_path, "fused", monkeypatch, calls, approver=approver, ticking=True, cap=cap)
    assert taken == [True] * len(calls)  # every call here is one the fused path takes
    monkeypatch.setattr(D, "note", note)
    general = D._record(tmp_path, "run_call", monkeypatch, calls, approver=approver, ticking=True, cap=cap)
    assert fused == general
    rows = fused[0]
    assert not any(SECRET in p for *_, p in rows)  # the registered secret is in no row
    assert not any("\x00" in p or "\ud800" in p for *_, p in rows)  # (JSON escapes the NUL; surrogates scrubbed)
