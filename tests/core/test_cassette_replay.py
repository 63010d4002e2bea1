"""The replay tape's matcher (§4.4) on hand-built cells."""

from __future__ import annotations

from flux.canonical import sha256_hex
from flux.cassette.replay import ReplayHost, ReplayTape, miss_message, truncated_message
from flux.lang.interpreter import OpOutcome
from flux.store.events import OpRecorded


def cell(op: str, input_json: str, content: str, **kw) -> OpRecorded:
    h = sha256_hex(input_json)
    return OpRecorded(step=f"step_{op}_{h[:16]}", op=op, input_hash=h, content=content, **kw)


def test_serves_first_unconsumed_match_and_scans_forward():
    tape = ReplayTape([cell("a", "{}", "a1"), cell("b", "{}", "b1"), cell("a", "{}", "a2")])
    # parallel interleaving: b first, then the two a's in recorded order
    assert tape.serve("b", "{}").content == "b1"
    assert tape.serve("a", "{}").content == "a1"
    assert tape.serve("a", "{}").content == "a2"
    assert tape.served == [1, 0, 2] and tape.consumed == 3 and tape.unconsumed == []
    assert tape.diverged is None


def test_outcome_fields_come_from_the_cell():
    tape = ReplayTape([cell("x", "{}", "nope", view="<v>", is_error=True, denied=True)])
    out = tape.serve("x", "{}")
    assert isinstance(out, OpOutcome)
    assert (out.content, out.view, out.is_error, out.denied) == ("nope", "<v>", True, True)


def test_matches_the_redacted_hash_too():
    real = '{"k":"secret"}'
    red = '{"k":"[redacted]"}'
    c = OpRecorded(op="x", input_hash=sha256_hex(real), input_hash_redacted=sha256_hex(red), content="ok")
    tape = ReplayTape([c])
    assert tape.serve("x", red).content == "ok"
    assert tape.log[0].input_hash == sha256_hex(red) and tape.log[0].index == 0


def test_op_must_match_as_well_as_the_hash():
    tape = ReplayTape([cell("a", "{}", "a")])
    out = tape.serve("b", "{}")
    assert out.is_error and out.content == f"replay diverged: {miss_message('b', sha256_hex('{}'))}"
    assert tape.consumed == 0


def test_miss_latches_only_the_first():
    tape = ReplayTape([cell("a", "{}", "a")])
    tape.serve("x", "{}")
    first = tape.diverged
    tape.serve("y", "{}")
    assert tape.diverged == first == miss_message("x", sha256_hex("{}"))
    assert first == (f"op `x` (input hash {sha256_hex('{}')[:16]}…) has no matching unconsumed recorded cell — "
                     "the plan's dataflow diverged from the recording")
    assert [r.status for r in tape.log] == ["miss", "miss"]


def test_truncated_match_overwrites_the_latch_and_is_not_consumed():
    tape = ReplayTape([cell("a", "{}", "a"), cell("t", "{}", "cut", truncated=True)])
    tape.serve("x", "{}")  # a miss latches first
    out = tape.serve("t", "{}")
    assert out.is_error
    assert tape.diverged == truncated_message(1, "t")
    assert tape.diverged.startswith("recorded cell 1 for op `t` was truncated at the capture cap")
    assert tape.consumed == 0 and tape.unconsumed == [0, 1]
    assert tape.log[-1].status == "truncated" and tape.log[-1].index == 1


def test_consumed_cells_are_not_served_twice():
    tape = ReplayTape([cell("a", "{}", "once")])
    assert tape.serve("a", "{}").content == "once"
    assert tape.serve("a", "{}").is_error
    assert tape.diverged.startswith("op `a`")


def test_host_is_hermetic_and_auto_approves():
    tape = ReplayTape([cell("a", '{"q":1}', "r")])
    host = ReplayHost(tape)
    assert host.auto_approve and host.approve("deploy?", "high") is True
    assert host.dispatch("a", {"q": 1}).content == "r"  # input_json defaults to canonical
    assert host.diverged is None and tape.total == 1


def test_takes_model_cells_or_bare_records():
    class Wrapped:
        def __init__(self, rec):
            self.rec = rec

    tape = ReplayTape([Wrapped(cell("a", "{}", "w"))])
    assert tape.serve("a", "{}").content == "w"
    assert tape.is_consumed(0)


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


def _naive(cells, consumed, op, h):
    for i, c in enumerate(cells):
        if not consumed[i] and c.op == op and (c.input_hash == h or c.input_hash_redacted == h):
            return i
    return None


@settings(max_examples=200, deadline=None)
@given(spec=st.lists(st.tuples(st.sampled_from("ab"), st.sampled_from("xyz"), st.sampled_from([None, "x", "y", "w"]),
                               st.booleans()), max_size=12),
       requests=st.lists(st.tuples(st.sampled_from("ab"), st.sampled_from("xyzw")), max_size=16))
def test_indexed_matcher_equals_the_spec_scan(spec, requests):
    """The index + cursor lookup picks exactly the cell §4.4's scan-from-0 rule picks."""
    cells = [OpRecorded(op=op, input_hash=sha256_hex(h), input_hash_redacted=sha256_hex(r) if r else None,
                        content=f"{i}", truncated=t) for i, (op, h, r, t) in enumerate(spec)]
    tape = ReplayTape(cells)
    consumed = [False] * len(cells)
    for op, key in requests:
        h = sha256_hex(key)
        want = _naive(cells, consumed, op, h)
        assert tape.find(op, h) == want
        tape.serve(op, key)
        if want is not None and not cells[want].truncated:
            consumed[want] = True
    assert tape.unconsumed == [i for i, c in enumerate(consumed) if not c]
