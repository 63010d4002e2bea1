"""Ctrl-C that cancels: the running op is stopped, nothing further runs, and the turn is recorded
``cancelled``.

:func:`tracked` registers a running ``bash`` command's process group, :func:`kill_running` kills
them, :func:`sigint_cancels` is the SIGINT handler ``flux run`` / ``flux flow run`` run under, and
:func:`raise_if_cancelled` is the check before each model call and dispatch (docs/architecture.md).
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from contextlib import contextmanager
from typing import Callable, Iterator

__all__ = ["cancel_requested", "clear_cancel", "kill_group", "kill_running", "raise_if_cancelled", "request_cancel",
           "sigint_cancels", "tracked"]

_CANCEL = threading.Event()
_RUNNING: set[subprocess.Popen] = set()
_RUNNING_LOCK = threading.RLock()  # re-entrant: the signal handler runs on a thread that may hold it
_MAIN_STARTING = False  # the main thread is starting and registering a command (see tracked)


def request_cancel() -> None:
    _CANCEL.set()


def clear_cancel() -> None:
    _CANCEL.clear()


def cancel_requested() -> bool:
    return _CANCEL.is_set()


def raise_if_cancelled() -> None:
    """Stop here (``KeyboardInterrupt``) when a cancel was requested: nothing further may run."""
    if _CANCEL.is_set():
        raise KeyboardInterrupt


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL ``proc``'s process group (it leads one: started with ``start_new_session``)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        try:
            proc.kill()
        except OSError:
            pass


@contextmanager
def tracked(start: Callable[[], subprocess.Popen]) -> Iterator[subprocess.Popen]:
    """Start a command (``start()``: a ``Popen`` leading its own process group) and register it
    while the block runs, so a cancel kills its process group; a cancel that came before it was
    registered kills it at once. A Ctrl-C on the main thread while it is being started and
    registered does not interrupt that (a command started but not yet registered would outlive
    the cancel): the cancel is noted, the command killed once registered, and the turn stops at
    its next step (:func:`raise_if_cancelled`)."""
    global _MAIN_STARTING
    main = threading.current_thread() is threading.main_thread()
    if main:
        _MAIN_STARTING = True
    try:
        proc = start()
        with _RUNNING_LOCK:
            _RUNNING.add(proc)
    finally:
        if main:
            _MAIN_STARTING = False
    try:
        if _CANCEL.is_set():  # set before the handler looked at the running set: killed here
            kill_group(proc)
        yield proc
    finally:
        with _RUNNING_LOCK:
            _RUNNING.discard(proc)


def kill_running() -> int:
    """Kill every registered command's process group; returns how many were running."""
    with _RUNNING_LOCK:
        procs = [p for p in _RUNNING if p.poll() is None]
    for p in procs:
        kill_group(p)
    return len(procs)


@contextmanager
def sigint_cancels() -> Iterator[None]:
    """Run the block with Ctrl-C cancelling it (docs/architecture.md, "Cancel"); the previous handler is back
    and the flag clear afterwards. Outside the main thread (no signals there) it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_sigint(signum: int, frame: object) -> None:
        first = not _CANCEL.is_set()
        _CANCEL.set()
        kill_running()
        if first and not _MAIN_STARTING:
            raise KeyboardInterrupt

    clear_cancel()
    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        clear_cancel()
