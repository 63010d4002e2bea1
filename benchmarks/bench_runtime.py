"""Recording-runtime benchmark (issue 4 §12):

    python benchmarks/bench_runtime.py [--calls 1000] [--repeat 5]

One adaptive turn in which the scripted provider asks for ``--calls`` trivial op calls (a pure op
that echoes its argument) in one response, then answers. Every call becomes an accepted
host-derived plan, its ``step_*`` rows and — with the cassette on — its ``op_recorded`` cell.
The turn runs into a fresh store directory each time, twice per repeat: cassette on, then
``FLUX_CASSETTE=0`` (the client's ``cassette=False``, exactly what the variable selects).

Prints medians: turn wall time with the cassette on and off, their ratio (the issue's bar: within
2×), and events appended per second (rows in ``events.db`` / turn wall time).
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# --core DIR measures another checkout's flux package with this harness (e.g. a detached worktree of
# main, interleaved with this one's runs for a before/after in the same minutes).
_CORE = sys.argv[sys.argv.index("--core") + 1] if "--core" in sys.argv[:-1] else str(ROOT / "core")
sys.path.insert(0, _CORE)

from flux.agent.client import Client  # noqa: E402
from flux.agent.ops import op  # noqa: E402
from flux.agent.providers.scripted import ScriptedProvider  # noqa: E402


@op(effect="pure")
def echo(i: int) -> str:
    """Return the number as text."""
    return str(i)


LAST_CPU = [0.0]  # process time of the last timed turn


def one_turn(calls: int, cassette: bool) -> tuple[float, int]:
    responses = [
        {"tool_calls": [{"name": "echo", "input": {"i": i}} for i in range(calls)],
         "usage": {"input_tokens": 100, "output_tokens": 10 * calls}},
        {"text": "done", "usage": {"input_tokens": 100 + 5 * calls, "output_tokens": 2}},
    ]
    with tempfile.TemporaryDirectory(prefix="flux-bench-") as d:
        store = Path(d) / "store"
        client = Client(ScriptedProvider(responses=responses), model="scripted", ops=[echo], store=store,
                        workspace=d, env_secrets=False, cassette=cassette)
        session = client.session()
        t0, c0 = time.perf_counter(), time.process_time()
        out = session.send_sync(f"call echo {calls} times")
        elapsed = time.perf_counter() - t0
        LAST_CPU[0] = time.process_time() - c0
        client.close()
        assert out.outcome == "ok" and len(out.tool_calls) == calls, out.outcome
        assert len(out.cells) == (calls if cassette else 0)
        with sqlite3.connect(store / "events.db") as c:
            events = c.execute("SELECT COUNT(*) FROM events").fetchone()[0]
    return elapsed, events


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--core", default=_CORE, help="the core/ directory whose flux package is measured (default: this checkout's)")
    args = ap.parse_args()
    one_turn(20, True)  # warm-up (imports, page cache)
    on_t, off_t, on_rate, off_rate, on_ev, off_ev = [], [], [], [], 0, 0
    on_c, off_c = [], []
    for _ in range(args.repeat):
        t, on_ev = one_turn(args.calls, True)
        on_t.append(t)
        on_c.append(LAST_CPU[0])
        on_rate.append(on_ev / t)
        t, off_ev = one_turn(args.calls, False)
        off_t.append(t)
        off_c.append(LAST_CPU[0])
        off_rate.append(off_ev / t)
    m_on, m_off = statistics.median(on_t), statistics.median(off_t)
    print(f"turn of {args.calls} op calls, median of {args.repeat}:")
    print(f"  cassette on   {m_on * 1000:8.1f} ms  ({on_ev} events, {statistics.median(on_rate):8.0f} events/s, "
          f"{m_on / args.calls * 1e6:6.0f} µs per call)")
    print(f"  FLUX_CASSETTE=0 {m_off * 1000:6.1f} ms  ({off_ev} events, {statistics.median(off_rate):8.0f} events/s, "
          f"{m_off / args.calls * 1e6:6.0f} µs per call)")
    print(f"  ratio on/off  {m_on / m_off:8.2f}×  (bar: within 2×)")
    c_on, c_off = statistics.median(on_c), statistics.median(off_c)
    print(f"  CPU: cassette on {c_on * 1000:.1f} ms ({c_on / args.calls * 1e6:.0f} µs per call), "
          f"off {c_off * 1000:.1f} ms; ratio {c_on / c_off:.2f}×  (load {os.getloadavg()[0]:.1f}, flux from {args.core})")


if __name__ == "__main__":
    main()
