"""`flux run --session S` on an interrupted session resurrects it exactly as `flux resurrect S`
does — the store's recorded toolbox (toolbox.json) and workspace, whatever the current directory —
or refuses before anything is written. Built from the reproduction: `flux demo --store D; cd
elsewhere; flux run --store D --session s_9 -m mock --yes "write a quick note"`, which recorded
`unknown op 'publish'`, closed turn 1 `halted` for good and printed no reason."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from flux.cli import main
from flux.model.session import load_session
from flux.store.store import StoreReader


def _cli(*args: str):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture(scope="module")
def demo_store(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("demo") / "D"
    r = _cli("demo", "--store", d)
    assert r.exit_code == 0, r.output
    return d


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, symlinks=True)
    return dst


def _turn1(store: Path) -> tuple[str, list[tuple]]:
    """Turn 1 of s_9 as resurrect left it: its outcome and its cells (op, error flag, content)."""
    with StoreReader(store) as r:
        d = load_session(r, "s_9")
        t = d.turns[0]
        cells = [(c.rec.op, c.rec.is_error, c.rec.content) for c in d.turn_cells(t)]
        return t.outcome, cells


def _digest(store: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(store.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(store)).encode() + b"\0" + p.read_bytes())
    return h.hexdigest()


def test_run_session_resurrects_with_the_stores_toolbox_like_flux_resurrect(demo_store, tmp_path, monkeypatch):
    auto, manual = _copy(demo_store, tmp_path / "auto"), _copy(demo_store, tmp_path / "manual")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.delenv("FLUX_AUTO_RESURRECT", raising=False)
    r = _cli("run", "--store", auto, "--session", "s_9", "-m", "mock", "--yes", "write a quick note")
    assert r.exit_code == 0, r.output
    assert "unknown op" not in r.output and "halted" not in r.output
    assert "resurrect · resurrected · 2 statement(s) fast-forwarded, 0 op(s) served from the cassette, 2 run live" in r.output
    m = _cli("resurrect", "s_9", "--store", manual, "--yes")
    assert m.exit_code == 0, m.output
    outcome, cells = _turn1(auto)
    assert outcome == "resurrected" and not any(err for _, err, _ in cells)
    assert (outcome, cells) == _turn1(manual)  # the same turn `flux resurrect` writes
    # the live ops acted on the store's workspace, as `flux resurrect`'s did — not on the current directory
    assert (auto / "workspace" / "index").is_dir() and (manual / "workspace" / "index").is_dir()
    assert sorted(p.name for p in elsewhere.iterdir()) == ["flux-mock.txt"]  # only the new turn's note
    with StoreReader(auto) as rd:
        d = load_session(rd, "s_9")
        assert [t.outcome for t in d.turns] == ["resurrected", "ok"]


def test_without_approval_the_automatic_resurrect_refuses_before_writing(demo_store, tmp_path, monkeypatch):
    store = _copy(demo_store, tmp_path / "D")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.delenv("FLUX_AUTO_RESURRECT", raising=False)
    before = _digest(store)
    r = _cli("run", "--store", store, "--session", "s_9", "-m", "mock", "write a quick note")
    assert r.exit_code == 1
    errors = [ln for ln in r.output.splitlines() if ln.startswith("error:")]
    assert errors == ["error: s_9's interrupted turn 1 would run `publish` (write), `append` (write) live and the "
                      "approver denies it — pass --yes or --policy FILE, or run `flux resurrect s_9` first; "
                      "nothing was written"], r.output
    assert _digest(store) == before and list(elsewhere.iterdir()) == []


def test_a_toolbox_that_lacks_the_op_is_refused_before_writing(demo_store, tmp_path, monkeypatch):
    """The broken input of the reproduction: the store says it was recorded with the coding toolbox,
    which has no `publish` — the resurrect would halt on it, so it is refused, the turn stays
    interrupted and nothing is written (before the fix: `✗ publish [is_error]` and `halted`)."""
    store = _copy(demo_store, tmp_path / "D")
    (store / "toolbox.json").write_text(json.dumps({"toolbox": "coding", "workspace": "workspace"}))
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("FLUX_AUTO_RESURRECT", raising=False)
    before = _digest(store)
    r = _cli("run", "--store", store, "--session", "s_9", "-m", "mock", "--yes", "write a quick note")
    assert r.exit_code == 1
    err = [ln for ln in r.output.splitlines() if ln.startswith("error:")]
    assert len(err) == 1 and "`publish`" in err[0] and "no implementation" in err[0] and "nothing was written" in err[0]
    assert _digest(store) == before
    with StoreReader(store) as rd:
        assert not load_session(rd, "s_9").turns[0].ended  # still interrupted: `flux resurrect` can finish it


def test_a_malformed_toolbox_json_is_one_line(demo_store, tmp_path, monkeypatch):
    store = _copy(demo_store, tmp_path / "D")
    (store / "toolbox.json").write_text("{not json")
    monkeypatch.chdir(tmp_path)
    before = _digest(store)
    r = _cli("run", "--store", store, "--session", "s_9", "-m", "mock", "--yes", "write a quick note")
    assert r.exit_code == 1 and "Traceback" not in r.output
    assert [ln for ln in r.output.splitlines() if ln.startswith("error:")][0].startswith("error: ")
    assert "toolbox.json is not JSON" in r.output
    assert _digest(store) == before


def test_a_malformed_toolbox_json_does_not_stop_a_session_with_nothing_to_finish(demo_store, tmp_path, monkeypatch):
    store = _copy(demo_store, tmp_path / "D")
    (store / "toolbox.json").write_text("{not json")
    monkeypatch.chdir(tmp_path)
    r = _cli("run", "--store", store, "--session", "s_1", "-m", "mock", "--yes", "write a quick note")
    assert r.exit_code == 0, r.output
