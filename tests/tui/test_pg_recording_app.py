"""The app follows the writers' leases while it is open: a session another machine records into a
shared Postgres store reads `● recording` in the sessions list and in the session's header, and
flips to `⚠ interrupted` — with no key and no new event — once the server has dropped that writer's
connection (a killed process, a vanished machine); a new writer flips it back. The same on a store
directory, with a real second process killed with SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from flux.store import pg_lease
from flux.store.location import store_location, url_schema
from screen_text import screen_text, settle
from stores import build_interrupted

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.anyio
SIZE = (160, 40)


def _another_machine(url: str, session: str):
    """What a writer on another laptop leaves on the shared server: its lease connection holding
    the session's advisory lock, named as ours are."""
    conn = psycopg.connect(url.split("?")[0], autocommit=True)
    conn.execute("SELECT set_config('application_name', 'flux-tui lease pid=4242 host=laptop-b', false)")
    k1, k2 = pg_lease.lease_key(url_schema(url), session)
    assert conn.execute("SELECT pg_try_advisory_lock(%s, %s)", (k1, k2)).fetchone()[0]
    return conn


def _drop(url: str, conn) -> None:
    """The server ends that connection, as it does when the writer dies or its keepalives time out."""
    with psycopg.connect(url.split("?")[0], autocommit=True) as admin:
        assert admin.execute("SELECT pg_terminate_backend(%s)", (conn.info.backend_pid,)).fetchone()[0]
    conn.close()


async def _until(pilot, predicate, what: str, tries: int = 150) -> None:
    for _ in range(tries):
        await pilot.pause(0.1)
        if predicate():
            await settle(pilot)
            return
    pytest.fail(f"the app never showed {what}:\n{screen_text(pilot.app)}")


def _row(app, sid: str) -> str:
    return next(ln for ln in screen_text(app).splitlines() if f" {sid} " in f" {ln} ")


def _status(app, sid: str):
    s = app.summaries.get(sid)
    return None if s is None else ("interrupted" if s.interrupted else
                                   "recording" if s.interrupt.recording_pid is not None else "other")


async def test_the_sessions_list_follows_a_writer_on_another_machine(make_app, pg_url):
    loc = build_interrupted(store_location(pg_url))  # s_2's newest turn is open, an accepted plan
    elsewhere = _another_machine(pg_url, "s_2")
    app = make_app(loc, poll_interval=0.1)
    async with app.run_test(size=SIZE) as pilot:
        await _until(pilot, lambda: _status(app, "s_2") == "recording", "s_2 recording")
        assert "● recording" in _row(app, "s_2") and "interrupted" not in _row(app, "s_2")
        _drop(pg_url, elsewhere)  # its broken twin: the writer is gone
        await _until(pilot, lambda: _status(app, "s_2") == "interrupted", "s_2 interrupted")
        assert "⚠ interrupted" in _row(app, "s_2") and "recording" not in _row(app, "s_2")
        again = _another_machine(pg_url, "s_2")  # and a new writer takes it
        try:
            await _until(pilot, lambda: _status(app, "s_2") == "recording", "s_2 recording again")
            assert "● recording" in _row(app, "s_2")
        finally:
            again.close()


async def test_an_open_sessions_header_follows_its_writer(make_app, pg_url):
    loc = build_interrupted(store_location(pg_url))
    elsewhere = _another_machine(pg_url, "s_2")
    app = make_app(loc, poll_interval=0.1)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        app.open_session("s_2")
        await _until(pilot, lambda: "● recording" in screen_text(app).splitlines()[0], "the header recording")
        assert "interrupted" not in screen_text(app).splitlines()[0]
        _drop(pg_url, elsewhere)
        await _until(pilot, lambda: "⚠ interrupted" in screen_text(app).splitlines()[0], "the header interrupted")
        assert "recording" not in screen_text(app).splitlines()[0]


_HOLD = """
import sys
from flux.store.lease import SessionLease
SessionLease.acquire(sys.argv[1], sys.argv[2])
print("held", flush=True)
sys.stdin.read()
"""


async def test_on_a_store_directory_the_list_flips_when_the_writer_is_killed(make_app, tmp_path):
    loc = build_interrupted(tmp_path / "st")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "core"), os.environ.get("PYTHONPATH", "")]))
    writer = subprocess.Popen([sys.executable, "-c", _HOLD, str(loc), "s_2"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert writer.stdout.readline().strip() == "held"
        app = make_app(loc, poll_interval=0.1)
        async with app.run_test(size=SIZE) as pilot:
            await _until(pilot, lambda: _status(app, "s_2") == "recording", "s_2 recording")
            assert f"● recording" in _row(app, "s_2")
            os.kill(writer.pid, signal.SIGKILL)
            writer.wait(30)
            await _until(pilot, lambda: _status(app, "s_2") == "interrupted", "s_2 interrupted")
            assert "⚠ interrupted" in _row(app, "s_2")
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.wait(30)
