"""Browsing writes nothing (README promise, issue 13 item 6): driving the app through a whole visit —
open, step, replay, diff, quit — leaves every store file byte-identical and creates none, also when a
crashed writer left ``-wal``/``-shm`` sidecars; and the read verbs work in a read-only directory
holding those sidecars."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from flux.store import Message, StoreWriter
from screen_text import settle
from stores import build_diff
from tests.helpers import REPO, tree_digest

from flux_tui.screens.diff import DiffPrompt, DiffScreen
from flux_tui.screens.session import SessionScreen

pytestmark = pytest.mark.anyio


def _crashed_copy(src: Path, dst: Path) -> Path:
    """``src``'s rows plus one more still in the WAL, copied with -wal and -shm as a killed writer leaves them."""
    w = StoreWriter(src)
    try:
        w.conn.execute("PRAGMA wal_autocheckpoint = 0")
        w.append("s_2", Message.text("user", "still in the WAL"))
        dst.mkdir()
        for p in src.iterdir():
            if p.is_file():
                shutil.copyfile(p, dst / p.name)
    finally:
        w.close()
    assert {"events.db-wal", "events.db-shm"} <= {p.name for p in dst.iterdir()}
    return dst


async def _visit(app) -> None:
    """Open the newest session, step, replay, diff against its fork source, back out, quit."""
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, SessionScreen)
        for key in ("j", "j", "k", "]", "["):
            await pilot.press(key)
        await settle(pilot)
        await pilot.press("r")
        await settle(pilot)
        assert app.screen.replay is not None
        await pilot.press("d")
        await settle(pilot)
        assert isinstance(app.screen, DiffPrompt)
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, DiffScreen)
        await pilot.press("escape")
        await settle(pilot)
        await pilot.press("escape")
        await settle(pilot)
        await pilot.press("q")
        await settle(pilot)


async def test_a_whole_visit_in_the_app_leaves_every_file_byte_identical(make_app, tmp_path):
    store = build_diff(tmp_path / "diff")
    before = tree_digest(store)
    await _visit(make_app(store, poll_interval=0.05))
    assert tree_digest(store) == before


async def test_a_visit_to_a_crashed_writers_store_with_sidecars_writes_nothing(make_app, tmp_path):
    """Every file, the -shm included: the reader never attaches to a store's -shm (issue 7 item 8)."""
    store = _crashed_copy(build_diff(tmp_path / "diff"), tmp_path / "crashed")
    before = tree_digest(store)
    await _visit(make_app(store, poll_interval=0.05))
    assert tree_digest(store) == before


_READ = r"""
import json, sys
from click.testing import CliRunner
from flux.cli import main
store = sys.argv[1]
out = {}
for verb in (["sessions", "--json"], ["show", "s_1", "--json"], ["replay", "s_1", "--json"], ["diff", "s_2", "s_1", "--json"]):
    res = CliRunner().invoke(main, [*verb, "--store", store])
    out[verb[0]] = [res.exit_code, res.stdout, res.stderr]
print(json.dumps(out))
"""


def test_read_verbs_in_a_read_only_directory_with_wal_and_shm(tmp_path):
    """Root ignores permissions: as root the read runs without CAP_DAC_OVERRIDE (util-linux setpriv)."""
    base = Path(tempfile.mkdtemp(prefix="flux-ro-"))
    try:
        base.chmod(0o755)
        store = _crashed_copy(build_diff(tmp_path / "diff"), base / "store")
        for p in store.iterdir():
            p.chmod(0o444)
        store.chmod(0o555)
        before = tree_digest(store)
        env = dict(os.environ, PYTHONPATH=f"{REPO / 'core'}{os.pathsep}{REPO / 'tui'}", HOME=str(base))
        cmd = [sys.executable, "-c", _READ, str(store)]
        if os.geteuid() == 0:
            setpriv = shutil.which("setpriv")
            if setpriv is None:
                pytest.fail("running as root needs util-linux `setpriv` to drop CAP_DAC_OVERRIDE (apt-get install util-linux)")
            caps = "-dac_override,-dac_read_search"
            cmd = [setpriv, f"--bounding-set={caps}", f"--inh-caps={caps}", *cmd]
            probe = subprocess.run([setpriv, f"--bounding-set={caps}", f"--inh-caps={caps}", "touch", str(store / "probe")],
                                   capture_output=True)
            assert probe.returncode != 0, "the directory must really be read-only for this test"
        res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120, cwd=base)
        assert res.returncode == 0, res.stderr
        out = json.loads(res.stdout)
        for verb, (code, stdout, stderr) in out.items():
            assert code in (0, 1) and "Traceback" not in stderr and json.loads(stdout), (verb, code, stderr)
        listed = json.loads(out["sessions"][1])["sessions"]
        assert [s["id"] for s in listed] == ["s_2", "s_1"]
        # the same answers as from a writable copy of the same files
        writable = base / "writable"
        shutil.copytree(store, writable)
        for p in [writable, *writable.iterdir()]:
            p.chmod(0o755 if p.is_dir() else 0o644)
        same = subprocess.run([sys.executable, "-c", _READ, str(writable)], env=env, capture_output=True, text=True,
                              timeout=120, cwd=base)
        assert json.loads(same.stdout) == {k: [c, o.replace(str(store), str(writable)), e.replace(str(store), str(writable))]
                                           for k, (c, o, e) in out.items()}
        with sqlite3.connect(writable / "events.db") as con:  # the row still in the WAL is seen
            assert con.execute("SELECT MAX(msg_count) FROM streams").fetchone()[0] == listed[0]["messages"]
        assert tree_digest(store) == before
    finally:
        for p in [base, *base.rglob("*")]:
            p.chmod(0o755 if p.is_dir() else 0o644)
        shutil.rmtree(base)
