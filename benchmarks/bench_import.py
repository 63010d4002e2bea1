"""Import benchmark (issue 29), run by hand:

    python benchmarks/bench_import.py [--steps 1000] [--repeat 3]

Builds an ATIF trajectory of one user step and ``--steps`` agent steps (each a tool call with its
result, the last the answer) and a Claude Code log of the same run, then times, per format, the
parse alone and the whole ``flux import`` into a fresh store (parse + recording through the agent
loop + the provenance event), reporting medians, events written and the store's size.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from flux.importers import import_file, parse_file
from flux.store.store import StoreReader


def atif(steps: int) -> dict:
    out = [{"step_id": 1, "timestamp": "2026-05-01T10:00:00Z", "source": "user", "message": "process every file"}]
    for i in range(steps - 1):
        out.append({"step_id": i + 2, "timestamp": "2026-05-01T10:00:01Z", "source": "agent",
                    "message": f"step {i}", "tool_calls": [{"tool_call_id": f"c{i}", "function_name": "read_file",
                                                             "arguments": {"path": f"src/m{i}.py"}}],
                    "observation": {"results": [{"source_call_id": f"c{i}", "content": f"def f{i}():\n    return {i}\n" * 4}]},
                    "metrics": {"prompt_tokens": 1000 + i, "completion_tokens": 20, "cached_tokens": 900}})
    out.append({"step_id": steps + 1, "timestamp": "2026-05-01T10:10:00Z", "source": "agent", "message": "done",
                "metrics": {"prompt_tokens": 2000, "completion_tokens": 5}})
    return {"schema_version": "ATIF-v1.7", "session_id": "bench", "agent": {"name": "bench", "version": "1",
                                                                              "model_name": "gpt-4.1"}, "steps": out}


def claude(steps: int) -> str:
    lines = [{"type": "user", "sessionId": "b", "uuid": "u0", "version": "2.0.14", "timestamp": "2026-05-01T10:00:00Z",
              "message": {"role": "user", "content": "process every file"}}]
    for i in range(steps - 1):
        lines.append({"type": "assistant", "sessionId": "b", "uuid": f"a{i}", "timestamp": "2026-05-01T10:00:01Z",
                      "message": {"id": f"msg_{i}", "role": "assistant", "model": "claude-sonnet-4-5",
                                  "content": [{"type": "tool_use", "id": f"t{i}", "name": "Read",
                                               "input": {"file_path": f"src/m{i}.py"}}],
                                  "usage": {"input_tokens": 10, "output_tokens": 20, "cache_read_input_tokens": 900}}})
        lines.append({"type": "user", "sessionId": "b", "uuid": f"r{i}", "timestamp": "2026-05-01T10:00:02Z",
                      "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{i}",
                                                               "content": f"def f{i}():\n    return {i}\n" * 4}]}})
    lines.append({"type": "assistant", "sessionId": "b", "uuid": "end", "timestamp": "2026-05-01T10:10:00Z",
                  "message": {"id": "msg_end", "role": "assistant", "model": "claude-sonnet-4-5",
                              "content": [{"type": "text", "text": "done"}], "usage": {"input_tokens": 10, "output_tokens": 5}}})
    return "".join(json.dumps(x) + "\n" for x in lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-import-") as tmp:
        root = Path(tmp)
        files = {"atif": root / "run.json", "claude-code": root / "session.jsonl"}
        files["atif"].write_text(json.dumps(atif(args.steps)), encoding="utf-8")
        files["claude-code"].write_text(claude(args.steps), encoding="utf-8")
        for fmt, f in files.items():
            parse_s, import_s = [], []
            events = size = 0
            for k in range(args.repeat):
                t0 = time.perf_counter()
                parse_file(f, fmt)
                parse_s.append(time.perf_counter() - t0)
                store = root / f"store-{fmt}-{k}"
                t0 = time.perf_counter()
                res = import_file(f, store, fmt)
                import_s.append(time.perf_counter() - t0)
                with StoreReader(store) as r:
                    events = r.count_events()
                size = sum(p.stat().st_size for p in store.rglob("*") if p.is_file())
                assert res.tool_calls == args.steps - 1
            print(f"{fmt:12} {args.steps} steps · {f.stat().st_size / 1e6:.1f} MB log · parse "
                  f"{statistics.median(parse_s) * 1000:.0f} ms · import {statistics.median(import_s):.2f} s "
                  f"({statistics.median(import_s) / args.steps * 1e3:.2f} ms/step) · {events} events · "
                  f"store {size / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
