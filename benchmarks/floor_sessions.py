"""The floor of ``flux sessions``: a bare script that prints the same rows from the same facts.

    python benchmarks/floor_sessions.py STORE [--limit N] [--json]

It does what ``flux sessions`` must do and nothing else: stdlib ``sqlite3`` opens ``events.db``
read-only the way the store reader does (a regular file with the SQLite header, ``immutable=1``
when no WAL is pending — this floor refuses a store with a live WAL instead of snapshotting it — and
the schema checked), reads the registry, and computes each listed session's facts in SQL, one query
per fact group (``json_extract`` over the ``(stream, kind)``/``(stream, turn_id)`` indexes):

* turns and the newest turn, its outcome or "pending";
* spend: ``call_usage`` sums per (turn, model, reported-or-not), else a call-less turn's
  ``turn_ended`` usage priced by its turn's model — priced with flux-tui's table and lookup
  (``flux.model.pricing``: the same pricing, not a second copy of it);
* the interrupted flag of spec §3.8: for a session whose newest turn has no ``turn_ended``, its last
  accepted plan is parsed and keyed (``flux.lang.parser`` + ``flux.lang.hashes`` — there is no
  other Flux-Lang parser; imported only when such a turn exists) and its ledger rows read — the
  same ``statement_completed``/``plan_resumed``/``checkpoint_reached`` rows the listing reads (the
  count folds the first two); an older open turn gets flux's "needs manual recovery" reason;
* lineage from the registry's ``correlation_id``/``agent_id``.

Then it prints the same text lines as ``flux sessions`` (``--json``: the same JSON document).
``bench_browse.py`` checks that both outputs are identical before timing anything. It assumes a
well-formed store (no hostile rows): the floor of the healthy path.
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import sys
import time
from urllib.parse import quote

FIELDS = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens",
          "cache_creation_1h_input_tokens", "reasoning_tokens", "audio_input_tokens", "audio_output_tokens")
SUMS = ", ".join(f"SUM(json_extract(payload, '$.data.usage.{f}'))" for f in FIELDS)
REPORTED = ("CASE WHEN json_type(payload, '$.data.usage.reported_cost_usd') IN ('integer', 'real')"
            " THEN json_extract(payload, '$.data.usage.reported_cost_usd') END")
HINT = ("{n} interrupted session(s) — the next turn entered on one (`flux run --session s_<n>`) "
        "finishes its killed turn from the crash point (no model call); `flux resurrect s_<n>` does it now. "
        "`FLUX_AUTO_RESURRECT=0` disables the automatic one.")


def connect(store: str) -> sqlite3.Connection:
    path = os.path.join(store, "events.db")
    st = os.stat(path)
    if not stat.S_ISREG(st.st_mode):
        sys.exit("error: events.db is not a regular file")
    with open(path, "rb") as f:
        head = f.read(100)
    if not head.startswith(b"SQLite format 3\x00"):
        sys.exit("error: not a SQLite database")
    if head[19] != 1 and os.path.exists(path + "-wal") and os.path.getsize(path + "-wal") > 0:
        sys.exit("error: the floor reads quiet stores only (this one has a live WAL)")
    mode = "immutable=1" if head[19] != 1 else "mode=ro"
    con = sqlite3.connect(f"file:{quote(os.path.realpath(path))}?{mode}", uri=True)
    con.execute("PRAGMA query_only = 1")
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    cols = {r[1] for r in con.execute("PRAGMA table_info(events)")}
    if "events" not in tables or not {"global_seq", "stream", "stream_seq", "kind", "payload", "ts"} <= cols:
        sys.exit("error: not a flux event store")
    con.execute("PRAGMA table_info(streams)").fetchall()
    return con


def lineage(corr, agent):
    agent = agent or ""
    if not corr:
        return None
    at = agent.split("@", 1)[1] if "@" in agent else ""
    if agent.startswith("fork:"):
        return {"kind": "fork", "source": corr, "detail": f"@{at}" if at else ""}
    if agent.startswith("what_if:check@"):
        return {"kind": "check", "source": corr, "detail": at}
    if agent.startswith("what_if:"):
        return {"kind": "what-if", "source": corr, "detail": f"@{at}" if at else ""}
    if agent.startswith("subagent:"):
        return {"kind": "sub-agent", "source": corr, "detail": agent.split(":", 1)[1]}
    if agent == "a2a":
        return {"kind": "a2a", "source": corr, "detail": ""}
    return {"kind": "child", "source": corr, "detail": agent}


class Facts:
    __slots__ = ("turns", "newest", "ended", "last_outcome", "usage", "usd", "interrupted", "reason")

    def __init__(self):
        self.turns, self.newest, self.ended, self.last_outcome = 0, None, 0, None
        self.usage = [0] * 8 + [None, None]  # 8 token fields, then 1h (None: never reported), reported cost
        self.usd, self.interrupted, self.reason = 0.0, None, None

    def spend(self, lookup, model, sums, reported):
        vals = [int(v) if isinstance(v, (int, float)) else 0 for v in sums]
        for i in (0, 1, 2, 3, 5, 6, 7):
            self.usage[i] += vals[i]
        one_h = vals[4] or None
        if one_h is not None:
            self.usage[8] = (self.usage[8] or 0) + one_h
        if reported is not None:
            self.usage[9] = (self.usage[9] or 0) + reported
        if reported is not None:
            cost = reported
        else:
            price = lookup(model)
            if price is None:
                if vals[0] + vals[1] + vals[2] + vals[3] + (one_h or 0):
                    self.usd = None
                return
            cost = (vals[0] * price.input + vals[1] * price.output + vals[3] * price.cache_read
                    + (vals[2] + (one_h or 0)) * price.cache_write) / 1_000_000
        if self.usd is not None:
            self.usd += cost

    def usage_body(self):
        u = self.usage
        out = dict(zip(FIELDS[:4], u[:4]))
        if u[8] is not None:
            out["cache_creation_1h_input_tokens"] = u[8]
        out.update(zip(FIELDS[5:], u[5:8]))
        if u[9] is not None:
            out["reported_cost_usd"] = u[9]
        return out


def interrupt(con, stream, tid, number):
    """§3.8 steps 3-5 for an open newest turn."""
    ts, user_input = con.execute("SELECT ts, json_extract(payload, '$.data.user_input') FROM events WHERE global_seq = ?",
                                 (tid,)).fetchone()
    plans = con.execute("SELECT json_extract(payload, '$.data.outcome'), json_extract(payload, '$.data.plan_source')"
                        " FROM events WHERE stream = ? AND turn_id = ? AND kind = 'plan_attempted' ORDER BY stream_seq",
                        (stream, tid)).fetchall()
    accepted = [src for outcome, src in plans if outcome == "accepted"]
    if not accepted:
        return None, f"turn {number} crashed before any plan was accepted — nothing to resume"
    if accepted[-1] is None:
        return None, f"turn {number}'s last accepted plan has no plan_source — not resumable"
    from flux.lang.hashes import flow_key
    from flux.lang.parser import parse

    draft = parse(accepted[-1])
    key = flow_key(draft.name, draft.body)
    nodes = []
    for event, plan, node, prior in con.execute(
            "SELECT json_extract(payload, '$.data.event'), json_extract(payload, '$.data.plan'),"
            " json_extract(payload, '$.data.node'), json_extract(payload, '$.data.prior')"
            " FROM events WHERE stream = ? AND kind = 'run' AND global_seq >= ?"
            " AND json_extract(payload, '$.data.event') IN ('statement_completed', 'plan_resumed', 'checkpoint_reached')"
            " ORDER BY stream_seq",
            (stream, tid)):
        if event == "statement_completed" and plan == key:
            if nodes and node <= nodes[-1]:
                nodes = []
            nodes.append(node)
        elif event == "plan_resumed" and prior == key:
            nodes = []
    return {"turn": number, "turn_id": tid, "started_at_ms": ts, "user_input": user_input, "flow_key": key,
            "completed": len(nodes)}, None


def facts(con, models, everything, lookup):
    """``models``: the listed sessions' ids → their registry model."""
    streams = list(models)
    out = {s: Facts() for s in streams}
    where = "" if everything else f" AND stream IN ({','.join('?' * len(streams))})"
    params = () if everything else tuple(streams)
    for stream, n, tid in con.execute("SELECT stream, COUNT(*), MAX(global_seq) FROM events"
                                      f" WHERE kind = 'turn_started'{where} GROUP BY stream", params):
        if stream in out:
            out[stream].turns, out[stream].newest = n, tid
    called = set()
    for stream, tid, model, n_rep, reported, *sums in con.execute(
            f"SELECT stream, turn_id, json_extract(payload, '$.data.model') AS m,"
            f" json_type(payload, '$.data.usage.reported_cost_usd') IN ('integer', 'real') AS r, SUM({REPORTED}), {SUMS}"
            f" FROM events WHERE kind = 'call_usage'{where} GROUP BY stream, turn_id, m, r", params):
        if stream in out:
            called.add(tid)
            out[stream].spend(lookup, model if isinstance(model, str) else "", sums, float(reported) if n_rep else None)
    ended_ids = {}
    for stream, tid, outcome, has_usage, reported, *sums in con.execute(
            f"SELECT stream, turn_id, json_extract(payload, '$.data.outcome'), json_type(payload, '$.data.usage') = 'object',"
            f" {REPORTED}, {SUMS.replace('SUM(', '(')} FROM events WHERE kind = 'turn_ended'{where}", params):
        f = out.get(stream)
        if f is None:
            continue
        ended_ids.setdefault(stream, set()).add(tid)
        if tid == f.newest:
            f.last_outcome = outcome
        if has_usage and tid not in called:  # a call-less turn: its ended usage, priced by its turn's model
            (model,) = con.execute("SELECT json_extract(payload, '$.data.model') FROM events WHERE global_seq = ?",
                                   (tid,)).fetchone() or (None,)
            f.spend(lookup, model if isinstance(model, str) and model else models[stream], sums, reported)
    for stream, f in out.items():
        if f.newest is None:
            continue
        ended = ended_ids.get(stream, set())
        if f.newest not in ended:
            f.last_outcome = "pending"
            f.interrupted, f.reason = interrupt(con, stream, f.newest, f.turns)
        elif len(ended) < f.turns:
            starts = [gs for (gs,) in con.execute("SELECT global_seq FROM events WHERE stream = ? AND kind = 'turn_started'"
                                                  " ORDER BY global_seq", (stream,))]
            x = [i + 1 for i, gs in enumerate(starts) if gs not in ended][-1]
            f.reason = f"turn {x} is interrupted, but turn {f.turns} ran and closed after it — needs manual recovery"
    return out


def age(ms, now):
    secs = max(0, (now - ms) // 1000)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if secs >= size:
            return f"{secs // size}{unit} ago"
    return f"{secs}s ago"


def main(argv):
    store = argv[1]
    limit = int(argv[argv.index("--limit") + 1]) if "--limit" in argv else 30
    as_json = "--json" in argv
    con = connect(store)
    rows = con.execute("SELECT n, model, created_at, updated_at, msg_count, account, agent_id, agent_version, correlation_id"
                       " FROM streams ORDER BY updated_at DESC, n DESC LIMIT ?", (limit,)).fetchall()
    everything = len(rows) == con.execute("SELECT COUNT(*) FROM streams").fetchone()[0]
    from flux.model.pricing import load_price_table

    lookup = load_price_table(None, store).lookup
    by = facts(con, {f"s_{r[0]}": r[1] for r in rows}, everything, lookup)
    if as_json:
        sessions = []
        for n, model, created, updated, msgs, account, agent_id, agent_version, corr in rows:
            f = by[f"s_{n}"]
            sessions.append({
                "id": f"s_{n}", "model": model, "messages": msgs, "created_at_ms": created, "updated_at_ms": updated,
                "context": {"account": account, "agent_id": agent_id, "agent_version": agent_version, "correlation_id": corr},
                "turns": f.turns, "last_outcome": f.last_outcome, "interrupted": f.interrupted,
                "open_turn_not_flagged": f.reason, "lineage": lineage(corr, agent_id), "usage": f.usage_body(),
                "cost_usd": f.usd,
            })
        print(json.dumps({"store": store, "sessions": sessions, "skipped_rows": 0}, ensure_ascii=False, indent=2,
                         sort_keys=True))
        return
    now = int(time.time() * 1000)
    flagged = 0
    lines = []
    for n, model, created, updated, msgs, *_ in rows:
        when = f"active {age(updated, now)}" if updated > created else age(created, now)
        line = f"s_{n}  {msgs:>3} msg  {model:<22} {when}"
        if by[f"s_{n}"].interrupted:
            flagged += 1
            line += "  ⚠ interrupted"
        lines.append(line)
    print("\n".join(lines))
    if flagged:
        print(HINT.format(n=flagged), file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv)
