"""flux.records: the dataclass meanings the listing's value classes rely on."""

from __future__ import annotations

import copy
import pickle

import pytest

from flux.model.interrupted import InterruptCheck, InterruptedTurn
from flux.model.listing import SessionSummary
from flux.store.store import SessionRow, StoredEvent


def test_frozen_record_equality_hash_repr_and_immutability():
    a = SessionRow(3, "m", 1, 2, 3, 4, agent_id="fork:s_1@2")
    b = SessionRow(3, "m", 1, 2, 3, 4, None, "fork:s_1@2")
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert a != SessionRow(3, "m", 1, 2, 3, 5, agent_id="fork:s_1@2")
    assert a != (3, "m", 1, 2, 3, 4, None, "fork:s_1@2", None, None)  # another class never equals
    assert repr(a) == ("SessionRow(n=3, model='m', created_at=1, updated_at=2, last_seq=3, msg_count=4, account=None,"
                       " agent_id='fork:s_1@2', agent_version=None, correlation_id=None)")
    with pytest.raises(AttributeError):
        a.n = 4  # type: ignore[misc]
    with pytest.raises(AttributeError):
        del a.model
    with pytest.raises(AttributeError):
        a.extra = 1  # type: ignore[attr-defined]  # slotted: no new attributes either
    assert a.n == 3 and a.id == "s_3"


def test_fields_left_out_of_eq_and_repr():
    t1 = InterruptedTurn(1, 10, 5, "hi", "src", "k", 2, draft=object())
    t2 = InterruptedTurn(1, 10, 5, "hi", "src", "k", 2, draft=None)
    assert t1 == t2 and hash(t1) == hash(t2) and "draft" not in repr(t1)
    assert InterruptCheck(t1) == InterruptCheck(t2) != InterruptCheck(reason="r")


def test_copy_and_pickle_rebuild_every_field():
    ev = StoredEvent(1, "s_1", 2, "id", "run", 9, None, {"x": 1})
    assert pickle.loads(pickle.dumps(ev)) == ev and copy.deepcopy(ev) == ev and copy.copy(ev) is not None
    it = InterruptedTurn(1, 10, 5, "hi", "src", "k", 2, draft=("d",))
    assert copy.deepcopy(it).draft == ("d",)


def test_a_plain_record_is_mutable_and_unhashable():
    s = SessionSummary(SessionRow(1, "m", 0, 0, 0, 0))
    s.turns = 4
    assert s.turns == 4 and s == SessionSummary(SessionRow(1, "m", 0, 0, 0, 0), turns=4, spend=s.spend)
    with pytest.raises(TypeError):
        hash(s)
