"""``flux test`` throughput (issue 12): ≥ 20 scenarios/s over 100 recorded scenarios, offline.

    python benchmarks/bench_testkit.py [--dir /tmp/flux-bench-scenarios] [--n 100] [--repeat 5]

1. Records ``--n`` scenarios once (``Scenario.record`` with the deterministic mock model: two tool
   calls and three model calls each, over a small seeded workspace) unless the directory already
   holds them.
2. With every socket blocked (``socket.socket.connect``/``connect_ex``/``create_connection`` raise
   and are counted), runs the full ``flux test DIR`` — discovery, replay, plan snapshot and check
   (re-drive through the agent loop against model.jsonl and the frozen world) — in-process
   ``--repeat`` times; reports the median wall time, scenarios/s, and the number of connection
   attempts (must be 0).
3. The same as a command: ``python -c <block sockets; flux test DIR>`` end to end (interpreter
   start-up included), median of ``--repeat``.
4. A floor for comparison: the replay half only (``--replay-only``), same work minus the re-drive.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "core"))

BLOCK = """
import socket, sys
def _refuse(*a, **k):
    raise OSError("network blocked by bench_testkit")
socket.socket.connect = _refuse
socket.socket.connect_ex = _refuse
socket.create_connection = _refuse
sys.argv = ["flux", "test", *sys.argv[1:]]
from flux.cli import main
main()
"""


def record_all(d: Path, n: int) -> None:
    from flux.agent.client import Client
    from flux.testkit import Scenario

    d.mkdir(parents=True, exist_ok=True)
    have = sum(1 for p in d.iterdir() if (p / "scenario.toml").is_file())
    if have >= n:
        return
    ws = d.parent / (d.name + "-ws")
    for i in range(have, n):
        shutil.rmtree(ws, ignore_errors=True)
        ws.mkdir(parents=True)
        (ws / "README.md").write_text(f"# project {i}\n")
        with Client("mock", workspace=ws, auto_approve=True, env_secrets=False) as c:
            Scenario.record(c, f"write a quick note #{i}", d / f"s{i:03d}").close()
    shutil.rmtree(ws, ignore_errors=True)


class Blocked:
    def __init__(self) -> None:
        self.attempts = 0

    def __enter__(self) -> "Blocked":
        self.saved = (socket.socket.connect, socket.socket.connect_ex, socket.create_connection)

        def refuse(*a, **k):
            self.attempts += 1
            raise OSError("network blocked by bench_testkit")

        socket.socket.connect = refuse  # type: ignore[assignment]
        socket.socket.connect_ex = refuse  # type: ignore[assignment]
        socket.create_connection = refuse  # type: ignore[assignment]
        return self

    def __exit__(self, *exc) -> None:
        socket.socket.connect, socket.socket.connect_ex, socket.create_connection = self.saved  # type: ignore[misc]


def in_process(d: Path, repeat: int, extra: list[str]) -> tuple[list[float], int]:
    from click.testing import CliRunner

    from flux.cli import main

    times = []
    with Blocked() as b:
        for _ in range(repeat):
            t0 = time.perf_counter()
            res = CliRunner().invoke(main, ["test", str(d), *extra])
            times.append(time.perf_counter() - t0)
            if res.exit_code != 0:
                raise SystemExit(f"flux test failed:\n{res.output[-2000:]}")
    return times, b.attempts


def as_command(d: Path, repeat: int) -> list[float]:
    times = []
    env = {**os.environ, "PYTHONPATH": str(ROOT / "core")}
    for k in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "FLUX_GOLDEN"):
        env.pop(k, None)
    for _ in range(repeat):
        t0 = time.perf_counter()
        p = subprocess.run([sys.executable, "-c", BLOCK, str(d)], capture_output=True, text=True, env=env)
        times.append(time.perf_counter() - t0)
        if p.returncode != 0:
            raise SystemExit(f"flux test (command) failed:\n{p.stdout[-2000:]}{p.stderr[-2000:]}")
    return times


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", type=Path, default=Path("/tmp/flux-bench-scenarios"))
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    t0 = time.perf_counter()
    record_all(a.dir, a.n)
    n = sum(1 for p in a.dir.iterdir() if (p / "scenario.toml").is_file())
    print(f"{n} scenarios in {a.dir} (recorded/found in {time.perf_counter() - t0:.1f}s)")

    times, attempts = in_process(a.dir, a.repeat, [])
    med = statistics.median(times)
    print(f"flux test (replay + check), in-process: median {med:.3f}s over {a.repeat} runs · {n / med:.1f} scenarios/s "
          f"· connection attempts under the blocked socket: {attempts}")
    floor, attempts2 = in_process(a.dir, a.repeat, ["--replay-only"])
    fmed = statistics.median(floor)
    print(f"floor: flux test --replay-only, in-process: median {fmed:.3f}s · {n / fmed:.1f} scenarios/s "
          f"(replay+check / replay-only = {med / fmed:.2f}x) · connection attempts: {attempts2}")
    cmd = as_command(a.dir, a.repeat)
    cmed = statistics.median(cmd)
    print(f"flux test as a command (interpreter start-up included, sockets blocked): median {cmed:.3f}s · "
          f"{n / cmed:.1f} scenarios/s")
    ok = n / med >= 20 and attempts == 0 and attempts2 == 0
    print("target ≥ 20 scenarios/s with zero network access:", "MET" if ok else "MISSED")


if __name__ == "__main__":
    main()
