"""Flux-Lang parse + format speed (issue 9 proof), and the ratio to the parser on main at 255040f.

    .venv/bin/python benchmarks/bench_lang.py [--runs 15] [--base 255040f]

Two workloads, each parsed then formatted (``format_flow(parse(text))``):
- flux's built-in agent loop, the version flux's cst_agreement.rs pins
  (tests/lang/data/flux/pinned/crates/flux-flow/assets/agent-loop.flux: `repeat 50`, `await`);
- a generated 1,000-statement authored plan (binds, calls, templates, field access, formulas,
  when/each/repeat/parallel blocks, JSON literals, fmt).
The base parser is loaded from ``git show <base>:core/flux/lang/…`` into a private package, so both
run the same text in the same process. An older base cannot read the agent loop's older spelling (`until`
on its own line), so the agent-loop ratio uses the loop's canonical text, which both read.
Prints medians (new and base timed in alternation); the target is new/base ≤ 1.2.
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "core"))

from flux.lang.formatter import format_flow  # noqa: E402
from flux.lang.parser import parse  # noqa: E402

AGENT_LOOP = (ROOT / "tests/lang/data/flux/pinned/crates/flux-flow/assets/agent-loop.flux").read_text()


def big_plan(n: int = 1000) -> str:
    """An authored flow of exactly ``n`` statements (nested ones included)."""
    lines = ["flow big(items: List<String>) -> String"]
    count = 0
    i = 0
    while count < n:
        k = i % 10
        if k == 0:
            lines.append(f'  r{i} = read({{"path":"src/file_{i}.py","limit":{i}}})'); count += 1
        elif k == 1:
            lines.append(f"  t{i} = task(role: \"reviewer\", task: r{i - 1}, depth: {i})"); count += 1
        elif k == 2:
            lines.append(f"  f{i} = r{i - 2}.body[0].text"); count += 1
        elif k == 3:
            lines.append(f"  ok{i} = $f{i - 1} > 3 && !$t{i - 2} || ($f{i - 1} + 1) * 2 == {i}"); count += 1
        elif k == 4:
            lines.append(f"  when ok{i - 1}"); lines.append(f'    log(msg: fmt("step {{f{i - 2}}} of {i}"))')
            lines.append("  else"); lines.append(f"    warn({{ at: {i}, item: t{i - 3} }})"); count += 3
        elif k == 5:
            lines.append(f"  each it in items -> out{i}"); lines.append(f"    s{i} = stat(path: it)")
            count += 2
        elif k == 6:
            lines.append(f"  repeat 3, until: done{i} -> tries{i}"); lines.append(f"    done{i} = probe({i})")
            count += 2
        elif k == 7:
            lines.append("  parallel"); lines.append(f"    branch a{i}"); lines.append(f"      a{i} = one({i})")
            lines.append(f"    branch b{i}"); lines.append(f"      b{i} = two({i})"); count += 3
        elif k == 8:
            lines.append(f'  lit{i} = {{"k":[1,2,{i}],"s":"text {i}","nested":{{"a":true,"b":null}}}}')
            count += 1
        else:
            lines.append(f"  obs{i} = observe({{ kind: \"step\", data: {{ i: {i}, v: lit{i - 1} }} }})")
            count += 1
        i += 1
    lines.append("  return r0")
    return "\n".join(lines) + "\n"


_BLOCKS = ("body", "then", "otherwise", "handler", "default", "finally_", "steps", "undo")


def statements(draft) -> int:
    """Statements in the flow, nested blocks included (branches, cases and saga steps opened)."""
    from flux.lang import ast as A

    n = 0
    stack = list(draft.body)
    while stack:
        x = stack.pop()
        if isinstance(x, A.Node):
            n += 1
        for name in _BLOCKS + ("branches", "cases"):
            for y in getattr(x, name, ()) or ():
                if isinstance(y, (A.Node, A.Branch, A.FallbackBranch, A.MatchCase, A.RouteCase,
                                  A.SagaStep)):
                    stack.append(y)
    return n


def load_base(rev: str):
    """The parser and formatter of ``rev`` as a private package (same flux.canonical underneath)."""
    tmp = Path(tempfile.mkdtemp(prefix="bench-lang-"))
    pkg = tmp / "flux_lang_base"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    for mod in ("ast", "astjson", "parser", "formatter", "program"):
        got = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:core/flux/lang/{mod}.py"],
                             capture_output=True, text=True)
        if got.returncode != 0 and mod == "program":  # older revisions have no program module
            continue
        got.check_returncode()
        (pkg / f"{mod}.py").write_text(got.stdout)
    sys.path.insert(0, str(tmp))
    return (importlib.import_module("flux_lang_base.parser").parse,
            importlib.import_module("flux_lang_base.formatter").format_flow)


def median_time(fn, text: str, runs: int) -> float:
    fn(text)  # warm
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn(text)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def paired_medians(new, old, text: str, runs: int) -> tuple[float, float]:
    """Medians of ``new`` and ``old`` timed in alternation, so load on the (shared) machine hits
    both sides alike instead of whichever ran second."""
    new(text), old(text)  # warm
    t_new, t_old = [], []
    for _ in range(runs):
        for fn, out in ((new, t_new), (old, t_old)):
            t0 = time.perf_counter()
            fn(text)
            out.append(time.perf_counter() - t0)
    return statistics.median(t_new), statistics.median(t_old)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--base", default="255040f")
    args = ap.parse_args()
    base_parse, base_format = load_base(args.base)
    loop_canonical = format_flow(parse(AGENT_LOOP))
    plan = big_plan()
    assert base_parse(plan) is not None and base_parse(loop_canonical) is not None

    def new(t: str) -> str:
        return format_flow(parse(t))

    def old(t: str) -> str:
        return base_format(base_parse(t))

    n_plan = statements(parse(plan))
    n_loop = statements(parse(AGENT_LOOP))
    print(f"runs {args.runs} (medians) · base {args.base}")
    for label, text, n in (("agent loop (as shipped)", AGENT_LOOP, n_loop),
                           ("agent loop (canonical)", loop_canonical, n_loop),
                           (f"{n_plan}-statement plan", plan, n_plan)):
        if label == "agent loop (as shipped)":
            t_new = median_time(new, text, args.runs)
        else:
            t_new, t_old = paired_medians(new, old, text, args.runs)
        line = f"{label:<28} parse+format {t_new * 1e3:8.2f} ms  {n / t_new:>10,.0f} stmt/s"
        if label != "agent loop (as shipped)":
            line += f"   base {t_old * 1e3:8.2f} ms   ratio new/base {t_new / t_old:.2f}"
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
