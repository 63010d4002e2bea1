"""Where a corpus job's sessions run: ``pool`` (this machine's worker processes, the default), ``ray``
(a Ray cluster started for the job) or ``ray=ADDRESS`` (an existing cluster; the ``ray`` extra).

A job is one ``task(store, session, spec, args)`` per session (a sweep's, a policy simulation's); results
come back in input order, a task that dies as an error row. On a cluster the store must be one every
machine reaches.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

from ..errors import FluxError, import_extra

__all__ = ["Executor", "parse_executor", "run_on_ray", "run_on_pool"]


@dataclass(frozen=True)
class Executor:
    kind: str  # "pool" | "ray"
    address: Optional[str] = None  # ray: an existing cluster's address; None starts one here

    def describe(self) -> str:
        if self.kind == "pool":
            return "the local process pool"
        return f"the Ray cluster at {self.address}" if self.address else "a local Ray cluster"


def parse_executor(text: str | None) -> Executor:
    """``pool`` | ``ray`` | ``ray=ADDRESS`` → :class:`Executor`; anything else is one error line."""
    if text is None or text == "pool":
        return Executor("pool")
    if text == "ray":
        return Executor("ray")
    if text.startswith("ray="):
        address = text[4:].strip()
        if address:
            return Executor("ray", address)
    raise FluxError(f"unknown executor {text!r} — use pool, ray, or ray=ADDRESS (e.g. ray=auto)")


def _ray():
    return import_extra("ray", "--executor ray needs the ray extra: pip install 'flux-tui[ray]'")


class _Runner:
    """One Ray worker of a job (an actor: its own process for the job's lifetime), running the
    job's task session after session — so a task may keep what it opened (a what-if's client) for
    the next one, as a pool worker does — and ``close``-ing it before the actor is removed."""

    def __init__(self, task: Callable[..., Any], close: Callable[[], None] | None) -> None:
        self.task, self.closer = task, close

    def run(self, store: str, sid: str, spec: Any, args: dict) -> Any:
        return self.task(store, sid, spec, args)

    def close(self) -> None:
        if self.closer is not None:
            self.closer()


def run_on_ray(task: Callable[..., Any], store: str, sessions: Sequence[str], spec: Any, client_args: dict, *,
               executor: Executor, jobs: int, failed: Callable[[str, str], Any],
               on_progress: Callable[[int, int, Any], None] | None = None,
               close: Callable[[], None] | None = None) -> list[Any]:
    """Run ``task(store, sid, spec, client_args)`` for every session on ``jobs`` Ray workers, one
    session at a time each; results in input order. A worker that dies (killed, out of memory)
    turns its session into ``failed(sid, why)`` — an error row — and is replaced: the job goes on.
    ``close()`` runs in each worker when the job ends. A cluster this call started (no address)
    has ``jobs`` CPUs and is shut down at the end, however the job ends."""
    ray = _ray()
    if executor.address is not None:
        _check_reachable(executor.address)
    started_here = False
    if not ray.is_initialized():  # else: the caller's own ray.init() (a notebook, a test) is used
        try:
            if executor.address is None:
                ray.init(num_cpus=max(1, jobs), include_dashboard=False, log_to_driver=False,
                         configure_logging=False)
            else:
                ray.init(address=executor.address, log_to_driver=False, configure_logging=False)
        except (ConnectionError, RuntimeError, ValueError) as e:
            raise FluxError(f"cannot reach {executor.describe()}: {e}") from None
        started_here = True
    worker = ray.remote(num_cpus=1, max_restarts=0, max_task_retries=0)(_Runner)
    workers: list[Any] = []
    try:
        results: list[Any] = [None] * len(sessions)
        todo = list(range(len(sessions)))[::-1]  # popped from the end: input order
        running: dict[Any, tuple[Any, int]] = {}  # ref -> (its worker, session index)

        def give(w: Any) -> None:
            if todo:
                i = todo.pop()
                running[w.run.remote(store, sessions[i], spec, client_args)] = (w, i)

        for _ in range(min(max(1, jobs), len(sessions))):
            workers.append(worker.remote(task, close))
            give(workers[-1])
        done = 0
        while running:
            [ref], _ = ray.wait(list(running), num_returns=1)
            w, i = running.pop(ref)
            try:
                results[i] = ray.get(ref)
            except Exception as e:  # its worker died, or its error could not be carried back
                results[i] = failed(sessions[i], f"the Ray task failed: {type(e).__name__}: {_first_line(e)}")
                if isinstance(e, ray.exceptions.RayActorError):
                    workers.remove(w)
                    w = worker.remote(task, close)
                    workers.append(w)
            done += 1
            if on_progress is not None:
                on_progress(done, len(sessions), results[i])
            give(w)
        return results
    finally:
        _stop(ray, workers)
        if started_here:
            ray.shutdown()


def _stop(ray: Any, workers: list[Any]) -> None:
    """Let each worker close what its tasks kept open (within 30 s), then remove it."""
    closing = [w.close.remote() for w in workers]
    if closing:
        ray.wait(closing, num_returns=len(closing), timeout=30)
    for w in workers:
        ray.kill(w)


def run_on_pool(task: Callable[..., Any], store: str, sessions: Sequence[str], spec: Any, args: dict, *,
                jobs: int, failed: Callable[[str, str], Any],
                on_progress: Callable[[int, int, Any], None] | None = None) -> list[Any]:
    """Run ``task(store, sid, spec, args)`` for every session in ``jobs`` worker processes (in this
    process when ``jobs`` is 1); results in input order, a worker that died an error row."""
    results: list[Any] = [None] * len(sessions)
    if jobs <= 1 or len(sessions) <= 1:
        for i, sid in enumerate(sessions):
            results[i] = task(store, sid, spec, args)
            if on_progress is not None:
                on_progress(i + 1, len(sessions), results[i])
        return results
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor, as_completed

    ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else None
    with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
        futs = {pool.submit(task, store, sid, spec, args): i for i, sid in enumerate(sessions)}
        for done, f in enumerate(as_completed(futs), 1):
            i = futs[f]
            try:
                results[i] = f.result()
            except Exception as e:  # a worker that died
                results[i] = failed(sessions[i], f"the worker failed: {type(e).__name__}: {e}")
            if on_progress is not None:
                on_progress(done, len(sessions), results[i])
    return results


def _check_reachable(address: str) -> None:
    """Ray keeps retrying an address nobody answers on for minutes: a HOST:PORT (or
    ray://HOST:PORT) that refuses a connection within 5 s is one error line instead. ``auto``
    (the cluster this machine runs) is Ray's to find."""
    import socket

    hostport = address.removeprefix("ray://")
    host, sep, port = hostport.rpartition(":")
    if not sep or not port.isdigit():
        return
    try:
        socket.create_connection((host or "127.0.0.1", int(port)), timeout=5).close()
    except OSError as e:
        raise FluxError(f"cannot reach the Ray cluster at {address}: {e.strerror or e} — start it "
                        "(ray start --head) or use --executor ray for a cluster started for the sweep") from None


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else ""
