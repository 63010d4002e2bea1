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


def test_init_fields_sets_the_slots_in_order_and_refuses_a_wrong_count():
    from flux.model.interrupted import OpenTurn
    from flux.records import FrozenRecord, init_fields

    turn = OpenTurn(2, 30, 7, "go", (("accepted", "x = 1"),))
    assert (turn.number, turn.turn_id, turn.started_at_ms, turn.user_input, turn.plans) == (2, 30, 7, "go", (("accepted", "x = 1"),))
    assert InterruptedTurn(1, 10, 5, "hi", "src", "k", 2).position == 2  # the default position: the completed count
    assert InterruptedTurn(1, 10, 5, "hi", "src", "k", 2, position=9).position == 9

    class Pair(FrozenRecord):
        __slots__ = ("a", "b")

        def __init__(self, *values: object) -> None:
            init_fields(self, *values)

    assert Pair(1, 2) == Pair(1, 2) and (Pair(1, 2).a, Pair(1, 2).b) == (1, 2)
    with pytest.raises(ValueError):
        Pair(1)  # one value short: no half-built record
    with pytest.raises(ValueError):
        Pair(1, 2, 3)
