"""Issue 7 item 2: every path an op touches — named, or yielded by a directory walk — resolves
inside the workspace or is refused; a FIFO or device can neither hang an op nor be read.

``OUTSIDE`` content is planted next to the workspace; no probe may return it, and no write probe
may change a file outside."""

from __future__ import annotations

import os
import string
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flux.agent.builtin_ops import Workspace, coding_ops

OUTSIDE = "OUTSIDE-CONTENT-7e1f needle"


@pytest.fixture
def world(tmp_path: Path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(OUTSIDE + "\n")
    (outside / "sub").mkdir()
    (outside / "sub" / "deep.txt").write_text(OUTSIDE + " deep\n")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "inside.txt").write_text("inside needle\n")
    (ws / "src").mkdir()
    (ws / "src" / "a.py").write_text("print('needle')\n")
    os.symlink(outside / "secret.txt", ws / "link-out.txt")  # symlinked file → out
    os.symlink(outside / "sub", ws / "dir-out")  # symlinked directory → out
    os.symlink(ws / "inside.txt", ws / "link-in.txt")  # symlink that stays inside
    os.symlink("../../outside/secret.txt", ws / "src" / "rel-out.txt")  # relative symlink → out
    os.symlink(outside / "new.txt", ws / "dangling-out.txt")  # dangling symlink → out (a write target)
    os.symlink(ws / "loop-b", ws / "loop-a")
    os.symlink(ws / "loop-a", ws / "loop-b")
    os.mkfifo(ws / "pipe")
    ops = {o.name: o for o in coding_ops(Workspace(ws), bash_timeout_s=5)}
    return ws, outside, ops


def _outside_digest(outside: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in sorted(outside.rglob("*")) if p.is_file()}


PROBES = [
    ("read", {"path": "../outside/secret.txt"}),
    ("read", {"path": "src/../../outside/secret.txt"}),
    ("read", {"path": "./../outside/secret.txt"}),
    ("read", {"path": "{outside}/secret.txt"}),
    ("read", {"path": "/etc/passwd"}),
    ("read", {"path": "~"}),
    ("read", {"path": "~/.bashrc"}),
    ("read", {"path": "~root/.profile"}),
    ("read", {"path": "~no-such-user-7e1f/x"}),
    ("read", {"path": "link-out.txt"}),
    ("read", {"path": "src/rel-out.txt"}),
    ("read", {"path": "dir-out/deep.txt"}),
    ("read", {"path": "loop-a"}),
    ("read", {"path": "pipe"}),
    ("read", {"path": "inside.txt\x00../../outside/secret.txt"}),
    ("read", {"path": "x" * 5000}),
    ("glob", {"pattern": "*", "path": "x" * 300}),  # found by benchmarks/fuzz.py workspace
    ("grep", {"pattern": "x", "path": "x" * 300}),
    ("read", {"path": "\ud83d.txt"}),
    ("read_many", {"paths": ["inside.txt", "link-out.txt"]}),
    ("glob", {"pattern": "*", "path": ".."}),
    ("glob", {"pattern": "*", "path": "dir-out"}),
    ("grep", {"pattern": "needle", "path": "link-out.txt"}),
    ("grep", {"pattern": "needle", "path": "dir-out"}),
    ("grep", {"pattern": "needle", "path": "pipe"}),
    ("write", {"path": "dangling-out.txt", "content": "x"}),
    ("write", {"path": "../outside/secret.txt", "content": "x"}),
    ("write", {"path": "pipe", "content": "x"}),
    ("append", {"path": "link-out.txt", "content": "x"}),
    ("append", {"path": "pipe", "content": "x"}),
    ("edit", {"path": "link-out.txt", "old": "OUTSIDE", "new": "x"}),
    ("bash", {"command": "pwd", "cwd": ".."}),
    ("bash", {"command": "pwd", "cwd": "dir-out"}),
]


@pytest.mark.parametrize("name, inp", PROBES, ids=[f"{n}:{list(i.values())[-1]!r}"[:60] for n, i in PROBES])
def test_probe_is_refused(world, name, inp):
    ws, outside, ops = world
    inp = {k: (v.format(outside=outside) if isinstance(v, str) and "{outside}" in v else v) for k, v in inp.items()}
    before = _outside_digest(outside)
    out = ops[name].call(inp)
    assert out.is_error, (name, inp, out.content)
    assert OUTSIDE not in out.content
    assert "raised" not in out.content  # a refusal, not a crash dressed as a tool error
    assert _outside_digest(outside) == before
    assert not (outside / "new.txt").exists()


def test_directory_walks_skip_everything_outside_and_every_special_file(world):
    ws, outside, ops = world
    # the reproducer: grep over "." used to follow link-out.txt out of the workspace
    out = ops["grep"].call({"pattern": "needle", "path": "."})
    assert not out.is_error
    assert OUTSIDE not in out.content
    lines = sorted(out.content.splitlines())
    assert lines == ["inside.txt:1:inside needle", "link-in.txt:1:inside needle", "src/a.py:1:print('needle')"]
    listed = ops["glob"].call({"pattern": "*"}).content.splitlines()
    assert "link-out.txt" not in listed and "src/rel-out.txt" not in listed and "pipe" not in listed
    assert "inside.txt" in listed and "link-in.txt" in listed


def test_symlink_inside_the_workspace_still_works(world):
    ws, outside, ops = world
    assert ops["read"].call({"path": "link-in.txt"}).content == "inside needle\n"
    assert not ops["append"].call({"path": "link-in.txt", "content": "more\n"}).is_error
    assert (ws / "inside.txt").read_text() == "inside needle\nmore\n"


SEGMENTS = st.sampled_from(["..", ".", "src", "link-out.txt", "dir-out", "loop-a", "pipe", "~", "outside",
                            "secret.txt", "deep.txt", "", "link-in.txt", "dangling-out.txt", "sub"])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(segs=st.lists(SEGMENTS, min_size=1, max_size=6), absolute=st.booleans(),
       noise=st.text(alphabet=string.printable, max_size=6))
def test_fuzzed_paths_never_leave_the_workspace(world, segs, absolute, noise):
    ws, outside, ops = world
    path = ("/" if absolute else "") + "/".join(segs) + noise
    before = _outside_digest(outside)
    for name, inp in (("read", {"path": path}), ("grep", {"pattern": "needle|OUTSIDE", "path": path}),
                      ("glob", {"pattern": "*", "path": path}), ("read_many", {"paths": [path]}),
                      ("append", {"path": path, "content": ""})):
        out = ops[name].call(inp)
        assert OUTSIDE not in out.content, (name, path)
        assert "raised" not in out.content, (name, path, out.content)
    assert _outside_digest(outside) == before


@pytest.mark.parametrize("name", ["append", "write", "read", "edit"])
def test_a_path_through_a_symlink_loop_is_refused(world, name):
    """os.path.realpath gives up at a loop and hands back the rest unresolved and lexically
    normalized: "loop-a/../dir-out/x" came back as <ws>/dir-out/x and `append` created x outside
    (found by test_fuzzed_paths_never_leave_the_workspace)."""
    ws, outside, ops = world
    before = _outside_digest(outside)
    path = "loop-a//.././dir-out/loop-a"
    inp = {"path": path, "content": "x"} if name in ("append", "write") else {"path": path}
    if name == "edit":
        inp.update(old="a", new="b")
    out = ops[name].call(inp)
    assert out.is_error and "symlink loop" in out.content, out.content
    assert _outside_digest(outside) == before
    assert not (outside / "sub" / "loop-a").exists()
