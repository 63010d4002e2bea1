"""Proxy latency benchmark (issue 29), run by hand:

    python benchmarks/bench_proxy.py [--calls 50]

The official ``openai`` client makes ``--calls`` streamed chat completions against the fake
OpenAI server of the tests (127.0.0.1), directly and through ``flux proxy`` (recording), and the
medians of the time to the last chunk are compared: the proxy's added latency per streamed call.
Each call through the proxy is its own turn (a question answered without tools), so every call also
writes a turn to the store — the recording's cost is in the number.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from flux.importers.proxy import ProxyServer  # noqa: E402
from tests.agent.fake_servers import Answer, FakeOpenAI  # noqa: E402


def timed(base_url: str, calls: int) -> list[float]:
    import openai

    client = openai.OpenAI(base_url=base_url, api_key="sk-bench", max_retries=0)
    out = []
    for i in range(calls):
        t0 = time.perf_counter()
        for _ch in client.chat.completions.create(model="gpt-4.1-mini", stream=True,
                                                  messages=[{"role": "user", "content": f"question {i}"}]):
            pass
        out.append(time.perf_counter() - t0)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=50)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-proxy-") as tmp, FakeOpenAI() as up:
        up.always(Answer(text="an answer of a few words", pieces=8))
        direct = timed(up.base_url, args.calls)
        server = ProxyServer(str(Path(tmp) / "store"), upstream=up.root)
        t = threading.Thread(target=server.serve_forever, daemon=True)
        t.start()
        proxied = timed(f"http://127.0.0.1:{server.server_address[1]}/v1", args.calls)
        server.shutdown()
        t.join()
        t0 = time.perf_counter()
        sessions = server.finish()
        drain = time.perf_counter() - t0
    d, p = statistics.median(direct) * 1e3, statistics.median(proxied) * 1e3
    print(f"{args.calls} streamed calls · direct median {d:.1f} ms · through flux proxy {p:.1f} ms · "
          f"added {p - d:.1f} ms/call · recorded into {sessions} (pending writes drained in {drain:.2f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
