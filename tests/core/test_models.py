"""Read models (spec §3) on the real fixture and on synthetic stores built through the writer."""

from __future__ import annotations

from pathlib import Path

import pytest

from flux.model.interrupted import check_interrupted
from flux.model.lineage import lineage_of
from flux.model.listing import list_sessions
from flux.model.pricing import BUILTIN_PRICES, PriceTable, load_price_table
from flux.model.session import cell_rows, execution_keys, load_session, stmt_rows
from flux.model.timeline import build_timeline
from flux.store import (
    Compacted, Message, PlanHalted, StatementCompleted, StoreReader, StoreWriter, Usage,
)
from flux.errors import FluxError
from tests.helpers import HOST_PLAN, cell, fixture_dir, write_turn


def test_fixture_session_turn_plan_and_cell(fixture_store):
    with StoreReader(fixture_store) as r:
        d = load_session(r, "s_1")
    [t] = d.turns
    assert (t.number, t.turn_id, t.outcome, t.answer, t.calls) == (1, 3, "ok", "Finished.", 1)
    assert t.effective_usage.input_tokens == 180 and t.effective_usage.cache_read_input_tokens == 1240
    [plan] = t.accepted_plans
    assert plan.plan_source == (fixture_dir() / "plan.flux.snap").read_text()
    assert plan.fingerprint == "4d77ff8dba152ad56556d59eac770b0e36f266a5399d667d34140a64a10ff735"
    [c] = d.cells
    assert c.op == "append" and c.rec.content == "appended 21 bytes to flux-mock.txt" and c.turn_number == 1
    assert [m.role for m in d.conversation] == ["user", "assistant"]
    assert check_interrupted(d.turns, d.turn_run_trace).interrupted is None
    assert execution_keys(d.run_events) == []
    rows = cell_rows(d.cells)
    assert rows[0].stmt == "call:append:7b7d06ae306ee31a" and rows[0].cells == (("append", "appended 21 bytes to flux-mock.txt"),)


def test_fixture_timeline_places_the_cell_on_the_plan_statement(fixture_store):
    with StoreReader(fixture_store) as r:
        d = load_session(r, "s_1")
    tl = build_timeline(d, d.turns[0])
    [p] = tl.plans
    assert p.flow_key == "h:0aac945488efbfd1"
    [st] = p.statements
    assert st.text.startswith("adaptive_batch_ae51354e0a259cd3c68b_action_1 = append(")
    assert st.status == "completed" and [c.op for c in st.cells] == ["append"]
    assert [it.cell is not None for it in tl.items] == [False, True]


def test_fixture_listing(fixture_store):
    with StoreReader(fixture_store) as r:
        [s] = list_sessions(r, prices=load_price_table())
    assert (s.id, s.row.model, s.row.msg_count, s.turns, s.last_outcome, s.interrupted) == ("s_1", "mock", 2, 1, "ok", False)
    assert s.cost == 0.0


def _store(tmp_path: Path) -> Path:
    return tmp_path / "store"


def test_newest_turn_with_accepted_plan_and_no_end_is_interrupted(tmp_path):
    d = _store(tmp_path)
    with StoreWriter(d) as w:
        sid = w.create_session("mock")
        write_turn(w, sid, "first", plan=HOST_PLAN.format(path="a"), cells=[cell("read", {"path": "a"}, "A")])
        write_turn(w, sid, "second", plan=HOST_PLAN.format(path="b"), cells=[cell("read", {"path": "b"}, "B")], end=None, ts=1_700_000_100_000)
    with StoreReader(d) as r:
        [s] = list_sessions(r)
        det = load_session(r, sid)
    assert s.interrupted and s.last_outcome == "pending"
    it = s.interrupt.interrupted
    assert (it.turn_number, it.user_input, it.completed) == (2, "second", 0)
    assert it.flow_key.startswith("h:")
    assert check_interrupted(det.turns, det.turn_run_trace).interrupted == it


def test_open_turn_cases_flux_does_not_flag_carry_a_reason(tmp_path):
    d = _store(tmp_path)
    with StoreWriter(d) as w:
        no_plan = w.create_session("mock")
        write_turn(w, no_plan, "crashed early", end=None)
        older_open = w.create_session("mock")
        write_turn(w, older_open, "open", plan=HOST_PLAN.format(path="a"), end=None)
        write_turn(w, older_open, "closed later", ts=1_700_000_200_000)
        bad = w.create_session("mock")
        write_turn(w, bad, "bad plan", plan="flow\n  x = = =\n", end=None)
    with StoreReader(d) as r:
        by_id = {s.id: s for s in list_sessions(r)}
    assert not any(s.interrupted for s in by_id.values())
    assert "before any plan was accepted" in by_id[no_plan].interrupt.reason
    assert "turn 2 ran and closed after it" in by_id[older_open].interrupt.reason
    assert "does not parse" in by_id[bad].interrupt.reason


def test_ledger_counts_completed_statements_and_statement_rows(tmp_path):
    from flux.lang.hashes import flow_key, stmt_hash16
    from flux.lang.parser import parse

    src = 'flow\n  a = read({"path":"a"})\n  b = read({"path":"b"})\n  c = read({"path":"c"})\n'
    draft = parse(src)
    key = flow_key(draft.name, draft.body)
    d = _store(tmp_path)
    with StoreWriter(d) as w:
        sid = w.create_session("mock")
        w.append(sid, Message.text("user", "go"))
        tid = w.begin_turn(sid, "go", "mock")
        from flux.store import PlanAttempted
        w.append(sid, PlanAttempted(step=1, plan_source=src), turn_id=tid)
        for i, p in enumerate("ab"):
            w.append(sid, cell("read", {"path": p}, p.upper()))
            w.append(sid, __import__("flux.store", fromlist=["Run"]).Run(event=StatementCompleted(plan=key, node=i, stmt=stmt_hash16(draft.body[i]))))
        w.append(sid, cell("read", {"path": "c"}, "C"))  # in flight when killed
    with StoreReader(d) as r:
        [s] = list_sessions(r)
        det = load_session(r, sid)
    assert s.interrupt.interrupted.completed == 2
    rows = stmt_rows(det.run_events)
    assert [(x.node, x.cells) for x in rows] == [(0, (("read", "A"),)), (1, (("read", "B"),))]
    assert execution_keys(det.run_events) == [key]
    tl = build_timeline(det, det.turns[0])
    assert [st.status for st in tl.plans[0].statements] == ["completed", "completed", "dispatched"]
    assert [len(st.cells) for st in tl.plans[0].statements] == [1, 1, 1]


def test_halted_statement_and_error_positions(tmp_path):
    from flux.lang.hashes import flow_key, stmt_hash16
    from flux.lang.parser import parse
    from flux.store import PlanAttempted, Run

    src = 'flow\n  a = read({"path":"a"})\n  b = bash({"command":"false"})\n'
    draft = parse(src)
    key = flow_key(draft.name, draft.body)
    d = _store(tmp_path)
    with StoreWriter(d) as w:
        sid = w.create_session("mock")
        tid = w.begin_turn(sid, "go", "mock")
        w.append(sid, PlanAttempted(step=1, plan_source=src), turn_id=tid)
        w.append(sid, cell("read", {"path": "a"}, "A"))
        w.append(sid, Run(event=StatementCompleted(plan=key, node=0, stmt=stmt_hash16(draft.body[0]))))
        w.append(sid, cell("bash", {"command": "false"}, "[exit 1]", is_error=True))
        w.append(sid, Run(event=PlanHalted(plan=key, node=1, stmt=stmt_hash16(draft.body[1]), op="bash", kind="runtime", error="bash failed: exit 1")))
        from flux.store import TurnEnded
        w.append(sid, TurnEnded(outcome="halted", answer="halted"), turn_id=tid)
    with StoreReader(d) as r:
        det = load_session(r, sid)
    rows = stmt_rows(det.run_events)
    assert rows[1].halted and rows[1].cells == (("bash", "[exit 1]"),)
    tl = build_timeline(det, det.turns[0])
    st = tl.plans[0].statements[1]
    assert (st.status, st.halt_kind, st.halt_error) == ("halted", "runtime", "bash failed: exit 1")
    errs = tl.error_positions()
    assert [tl.items[i].cell is not None for i in errs] == [False, True]


def test_compacted_replaces_the_conversation_and_msg_count(tmp_path):
    d = _store(tmp_path)
    with StoreWriter(d) as w:
        sid = w.create_session("mock")
        for i in range(3):
            w.append(sid, Message.text("user" if i % 2 == 0 else "assistant", f"m{i}"))
        w.append(sid, Compacted(messages=[Message.text("user", "summary").to_body()]))
        w.append(sid, Message.text("assistant", "after"))
    with StoreReader(d) as r:
        det = load_session(r, sid)
        assert r.get_session(sid).msg_count == 2
    assert [m.plain_text for m in det.conversation] == ["summary", "after"]


def test_lineage_kinds_and_children(tmp_path):
    d = _store(tmp_path)
    with StoreWriter(d) as w:
        src = w.create_session("mock")
        fork = w.create_session("mock", context={"correlation_id": src, "agent_id": f"fork:{src}@2"})
        wi = w.create_session("mock", context={"correlation_id": src, "agent_id": f"what_if:{src}@latest"})
        sub = w.create_session("mock", context={"correlation_id": src, "agent_id": "subagent:explorer"})
    with StoreReader(d) as r:
        kids = r.children_of(src)
        assert [k.id for k in kids] == [fork, wi, sub]
        kinds = [lineage_of(k).kind for k in kids]
        assert lineage_of(r.get_session(src)) is None
    assert kinds == ["fork", "what-if", "sub-agent"]
    assert lineage_of(kids[0]).detail == "@2" and lineage_of(kids[2]).detail == "explorer"


def test_cost_known_unknown_and_prices_file(tmp_path):
    table = PriceTable(BUILTIN_PRICES)
    u = Usage(input_tokens=1_000_000, output_tokens=1_000_000, cache_read_input_tokens=1_000_000)
    assert table.cost("anthropic:claude-sonnet-4-5", u) == pytest.approx(3 + 15 + 0.3)
    assert table.cost("claude-sonnet-4-5-20250929", u) == pytest.approx(18.3)
    assert table.cost("acme:frontier-9", u) is None
    assert table.cost("ollama:qwen2.5:1.5b", u) == 0
    prices = tmp_path / "prices.json"
    prices.write_text('{"frontier-9": {"input": 1, "output": 2}}')
    assert load_price_table(prices).cost("acme:frontier-9", u) == pytest.approx(4)  # cache reads default to the input rate
    prices.write_text("{oops")
    with pytest.raises(FluxError, match="not valid JSON"):
        load_price_table(prices)


def test_unknown_model_cost_is_unknown_in_listing(tmp_path):
    d = _store(tmp_path)
    with StoreWriter(d) as w:
        sid = w.create_session("acme:frontier-9")
        write_turn(w, sid, "hi", usage=Usage(input_tokens=10), model="acme:frontier-9")
        free = w.create_session("mock")
        write_turn(w, free, "hi", usage=Usage(input_tokens=10))
    with StoreReader(d) as r:
        by = {s.id: s for s in list_sessions(r, prices=load_price_table())}
    assert by[sid].cost is None and by[sid].unpriced_models == ("acme:frontier-9",)
    assert by[free].cost == 0.0


def test_listing_filters(tmp_path):
    d = _store(tmp_path)
    with StoreWriter(d) as w:
        a = w.create_session("mock", ts=1_000)
        write_turn(w, a, "fix the Tokenizer", ts=2_000)
        b = w.create_session("mock", ts=10_000)
        write_turn(w, b, "write docs", ts=20_000)
    with StoreReader(d) as r:
        assert [s.id for s in list_sessions(r, query="tokenizer")] == [a]
        assert [s.id for s in list_sessions(r, query="nothing like it")] == []
        assert [s.id for s in list_sessions(r, since_ms=15_000)] == [b]
        assert [s.id for s in list_sessions(r, until_ms=5_000)] == [a]
        assert [s.id for s in list_sessions(r, limit=1)] == [b]


def test_listing_cost_uses_reported_cost_and_ended_usage_without_calls(tmp_path):
    from flux.store import CallUsage, TurnEnded

    d = _store(tmp_path)
    with StoreWriter(d) as w:
        sid = w.create_session("acme:frontier-9")
        tid = w.begin_turn(sid, "a", "acme:frontier-9")
        w.append(sid, CallUsage(model="acme:frontier-9", usage=Usage(input_tokens=10, reported_cost_usd=0.5)), turn_id=tid)
        w.append(sid, TurnEnded(outcome="ok", usage=Usage(input_tokens=10)), turn_id=tid)
        tid2 = w.begin_turn(sid, "b", "claude-sonnet-4-5")
        w.append(sid, TurnEnded(outcome="ok", usage=Usage(input_tokens=1_000_000)), turn_id=tid2)
    with StoreReader(d) as r:
        [s] = list_sessions(r, prices=load_price_table())
        det = load_session(r, sid)
    assert s.cost == pytest.approx(0.5 + 3.0)
    assert s.usage.input_tokens == 1_000_010
    from flux.model.pricing import session_spend
    spend = session_spend(load_price_table(), det.turns, det.row.model)
    assert spend.usd == pytest.approx(s.cost) and spend.unpriced_models == ()


def test_turn_slices_and_messages_by_position(tmp_path):
    d = _store(tmp_path)
    with StoreWriter(d) as w:
        sid = w.create_session("mock")
        write_turn(w, sid, "one", plan=HOST_PLAN.format(path="a"), cells=[cell("read", {"path": "a"}, "A")], ts=1_000)
        write_turn(w, sid, "two", plan=HOST_PLAN.format(path="b"), cells=[cell("read", {"path": "b"}, "B")], ts=2_000)
    with StoreReader(d) as r:
        det = load_session(r, sid)
    t1, t2 = det.turns
    assert [c.rec.content for c in det.turn_cells(t1)] == ["A"] and [c.rec.content for c in det.turn_cells(t2)] == ["B"]
    assert [e.body.plain_text for e in det.turn_messages(t1)] == ["one", "answer to one"]
    assert [e.body.plain_text for e in det.turn_messages(t2)] == ["two", "answer to two"]
    assert all(t1.turn_id <= e.global_seq < t2.turn_id for e in det.turn_events(t1))


def test_one_turn_load_matches_the_full_load_for_that_turn(tmp_path):
    d = _store(tmp_path)
    with StoreWriter(d) as w:
        sid = w.create_session("mock")
        for i in range(3):
            write_turn(w, sid, f"t{i}", plan=HOST_PLAN.format(path=str(i)), cells=[cell("read", {"path": str(i)}, str(i))], ts=1_000 * (i + 1),
                       usage=Usage(input_tokens=i + 1))
    with StoreReader(d) as r:
        full = load_session(r, sid)
        part = load_session(r, sid, turn=2)
        newest = load_session(r, sid, turn=-1)
    assert part.partial and part.window == full.turn_window(full.turns[1])
    assert [t.outcome for t in part.turns] == [t.outcome for t in full.turns]
    assert [t.effective_usage for t in part.turns] == [t.effective_usage for t in full.turns]
    assert part.turn_events(part.turns[1]) == full.turn_events(full.turns[1])
    assert [(c.index, c.rec) for c in part.cells] == [(c.index, c.rec) for c in full.turn_cells(full.turns[1])]
    assert [m.plain_text for m in part.conversation] == [m.plain_text for m in full.conversation]
    assert newest.window[0] == full.turns[-1].turn_id
    tl_full = build_timeline(full, full.turns[1])
    tl_part = build_timeline(part, part.turns[1])
    assert [(s.text, s.status) for p in tl_part.plans for s in p.statements] == [(s.text, s.status) for p in tl_full.plans for s in p.statements]


def test_interrupted_sessions_across_the_store(tmp_path):
    from flux.model.listing import interrupted_sessions

    d = _store(tmp_path)
    with StoreWriter(d) as w:
        ok = w.create_session("mock")
        write_turn(w, ok, "done", plan=HOST_PLAN.format(path="a"))
        killed = w.create_session("mock")
        write_turn(w, killed, "killed", plan=HOST_PLAN.format(path="b"), end=None)
        early = w.create_session("mock")
        write_turn(w, early, "no plan", end=None)
    with StoreReader(d) as r:
        found = interrupted_sessions(r)
        listed = {s.id for s in list_sessions(r) if s.interrupted}
    assert set(found) == listed == {killed}
    assert found[killed].interrupted.user_input == "killed"
