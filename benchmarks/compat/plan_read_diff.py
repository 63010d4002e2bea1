"""resurrect's plan read (resurrect._parse_plan: replay's direct_plan, else the parser) against
parse_stored_plan on generated hostile plan texts (hostplan_diff's spellings plus junk): the same
verdict (error text included), the same flow key, and per statement the same AST node, stmt hash and
binder; and the same predicted live calls for every tail.

  .venv/bin/python benchmarks/compat/plan_read_diff.py --n 20000 --seed 1
"""
import argparse
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import hostplan_diff as G  # noqa: E402

from flux.errors import FluxError  # noqa: E402
from flux.lang.hashes import stmt_hash16  # noqa: E402
from flux.model.stored_plan import parse_stored_plan  # noqa: E402
from flux.timemachine import resurrect as R  # noqa: E402
from flux.timemachine.engine import HostBody, binder_of, predict_calls  # noqa: E402
from flux.lang.catalog import OpCatalog  # noqa: E402


def outcome(fn, src):
    try:
        return fn(src)
    except FluxError as e:
        return ("error", type(e).__name__, str(e))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=5000)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    diffs = direct = 0
    from flux.agent.builtin_ops import coding_ops
    import tempfile
    from flux.timemachine.engine import catalog_for
    catalog = catalog_for(None)
    for i in range(a.n):
        stmts = []
        for _ in range(rng.randint(1, 5)):
            obj = {rng.choice(G.KEYS): G.value(rng) for _ in range(rng.randint(0, 3))}
            stmts.append((rng.choice(G.NAMES), rng.choice(G.OPS), G.spell(rng, obj)))
        if len(stmts) == 1 and rng.random() < 0.3:
            stmts[0] = (stmts[0][0], stmts[0][1], stmts[0][2].replace('"x"', '"""x"""'))
        src = G.plan_text(rng, stmts)
        if rng.random() < 0.05:
            src = rng.choice([None, 5, b"flow", src.encode(errors="surrogatepass"), src.replace("flow", "flow ", 1),
                              src + "\x00", "\ufeff" + src, src.replace("\n", "\r\n")])
        got = outcome(R._parse_plan, src)
        ref = outcome(parse_stored_plan, src)
        if type(got) is tuple and got and got[0] == "error":
            ok = got == ref
        elif type(ref) is tuple and ref and ref[0] == "error":
            ok = False
        else:
            (d1, k1), (d2, k2) = got, ref
            b1, b2 = d1.body, d2.body
            if type(b1) is HostBody:
                direct += 1
            ok = k1 == k2 and len(b1) == len(b2) and d1.name == d2.name
            if ok:
                for j in range(len(b2)):
                    n1, n2 = b1[j], b2[j]
                    if n1 != n2 or stmt_hash16(n1) != stmt_hash16(n2) or binder_of(n1) != binder_of(n2):
                        ok = False
                        break
                    if type(b1) is HostBody:
                        st = b1.statements[j]
                        if st.stmt != stmt_hash16(n2) or st.name != binder_of(n2):
                            ok = False
                            break
                for s in range(len(b2) + 1):
                    if list(b1[s:]) != list(b2[s:]):
                        ok = False
                    if catalog is not None:
                        if outcome(lambda _: predict_calls(list(b1[s:]), catalog), 0) != outcome(
                                lambda _: predict_calls(list(b2[s:]), catalog), 0):
                            ok = False
        if not ok:
            diffs += 1
            if diffs <= 10:
                print(f"DIFF {i}: {src!r}\n  got={got!r:.300}\n  ref={ref!r:.300}")
    print(f"plans={a.n} direct={direct} diffs={diffs}")


main()
