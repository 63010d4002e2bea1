"""``OpError`` raised outside an op call is bad input like any other: one ``error:`` line, exit 1,
never a traceback (it escaped the one-line contract as a 40-line traceback). Inside an op call it
is still the tool error the model sees."""

from __future__ import annotations

from click.testing import CliRunner

from flux.agent import client as client_mod
from flux.agent.ops import OpError, op
from flux.cli import main
from flux.errors import FluxError


def test_op_error_building_the_ops_is_one_error_line(tmp_path, monkeypatch):
    def broken(*_a, **_k):
        raise OpError("workspace /gone does not exist")

    monkeypatch.setattr(client_mod, "coding_ops", broken)
    (tmp_path / "ws").mkdir()
    res = CliRunner().invoke(main, ["run", "-m", "mock", "--store", str(tmp_path / "st"), "--workspace",
                                    str(tmp_path / "ws"), "--yes", "write a note"])
    assert res.exit_code == 1
    assert res.stderr == "error: workspace /gone does not exist\n"
    assert "Traceback" not in res.output


def test_inside_an_op_it_is_still_the_tool_error():
    @op(effect="read")
    def fetch(path: str) -> str:
        """Fetch."""
        raise OpError(f"{path}: no such file")

    out = fetch.call({"path": "a.txt"})
    assert out.is_error and out.content == "a.txt: no such file"
    assert issubclass(OpError, FluxError)
