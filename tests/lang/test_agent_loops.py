"""Issue 9 part 3: the agent-loop program a turn ran (``agent-loops/<sha>.flux``) is parsed and
named by ``flux show`` — and a missing, tampered, oversized or unparsable one is said, not raised."""

from __future__ import annotations

import json
import os

from click.testing import CliRunner

from flux.cli import main
from flux.lang.agent_loops import MAX_LOOP_BYTES, load_agent_loop
from tests.helpers import tree_digest
from tests.lang.loop_store import AGENT_LOOP_SHA, binding, build_loop_store


def _show(store, *args):
    return CliRunner().invoke(main, ["show", "--store", str(store), *args], env={})


def test_load_parses_and_names_the_loop(tmp_path):
    store, _ = build_loop_store(tmp_path / "s")
    loop = load_agent_loop(store, binding(AGENT_LOOP_SHA))
    assert loop.problem is None and loop.name == "agent-loop"
    assert len(loop.draft.body) == 5  # three binds, the repeat, the return
    assert loop.draft.body[3].until is not None  # `until $done` on its own line
    assert load_agent_loop(store, None) is None
    assert load_agent_loop(store, {"source_sha256": "../../etc/passwd"}) is None


def test_flux_show_names_the_loop_human_and_json(tmp_path):
    store, sid = build_loop_store(tmp_path / "s")
    before = tree_digest(store)
    res = _show(store, sid)
    assert res.exit_code == 0, res.output
    assert (f"  agent loop agent-loop (builtin:adaptive@1) · agent-loops/{AGENT_LOOP_SHA[:12]}….flux"
            f" · 5 statement(s)") in res.output
    data = json.loads(_show(store, sid, "--json").output)
    loop = data["turns"][0]["agent_loop"]
    assert loop["name"] == "agent-loop" and loop["statements"] == 5 and loop["problem"] is None
    assert loop["file"] == f"agent-loops/{AGENT_LOOP_SHA}.flux"
    assert tree_digest(store) == before


def test_a_missing_tampered_or_bad_loop_file_is_said_not_raised(tmp_path):
    store, sid = build_loop_store(tmp_path / "s", missing=True)
    assert "agent-loop (builtin:adaptive@1) · agent-loops/" in _show(store, sid).output
    assert "not in this store" in _show(store, sid).output
    loops = store / "agent-loops"
    loops.mkdir()
    f = loops / f"{AGENT_LOOP_SHA}.flux"
    f.write_text("flow tampered\n  x = 1\n")
    assert "does not match its sha256 name" in _show(store, sid).output
    # a file named by its own content that does not parse
    bad = b"flow\n  x = " + b"f(" * 300 + b")" * 300 + b"\n"
    sha = __import__("hashlib").sha256(bad).hexdigest()
    (loops / f"{sha}.flux").write_bytes(bad)
    loop = load_agent_loop(store, binding(sha))
    assert loop.problem.startswith("does not parse: line 2") and loop.source is not None
    big = loops / ("0" * 64 + ".flux")
    with open(big, "wb") as fh:
        fh.truncate(MAX_LOOP_BYTES + 1)
    assert load_agent_loop(store, binding("0" * 64)).problem.startswith("larger than")
    fifo = loops / ("1" * 64 + ".flux")
    os.mkfifo(fifo)
    assert load_agent_loop(store, binding("1" * 64)).problem == "not a regular file"


def test_turns_without_a_binding_show_no_loop(fixture_store):
    data = json.loads(_show(fixture_store, "--json").output)
    assert all(t["agent_loop"] is None for t in data["turns"])
    assert "agent loop" not in _show(fixture_store).output
