"""events.new_op_recorded: the cell the fused call builds without the frozen ``__init__`` — the
same object ``OpRecorded(*fields)`` is."""

from __future__ import annotations

from dataclasses import fields

from hypothesis import given, settings
from hypothesis import strategies as st

from flux.store.events import OpRecorded, new_op_recorded
from flux.store.payload_encode import encode_op_recorded

_text = st.text(max_size=12)
_opt_text = st.none() | _text


@settings(max_examples=60, deadline=None)
@given(st.tuples(st.integers(), _text, _text, _text, _opt_text, _opt_text, st.booleans(), _text, _opt_text,
                 st.booleans(), st.booleans(), st.booleans(), st.booleans()))
def test_new_op_recorded_is_the_dataclass(values):
    fast, slow = new_op_recorded(*values), OpRecorded(*values)
    assert type(fast) is OpRecorded
    assert [getattr(fast, f.name) for f in fields(OpRecorded)] == list(values)
    assert fast == slow and hash(fast) == hash(slow) and repr(fast) == repr(slow)
    assert encode_op_recorded(fast) == encode_op_recorded(slow)
    assert fast.__dict__ == slow.__dict__ == {}


def test_new_op_recorded_stays_frozen():
    cell = new_op_recorded(1, "s", "op", "h", None, "{}", False, "c", None, False, False, False, False)
    try:
        cell.content = "x"  # type: ignore[misc]
    except AttributeError:
        return
    raise AssertionError("a cell must stay frozen")
