"""The lineage tree's facts (flux.timemachine.family): the whole family from any member, tree
connectors, hostile registries (cycles, a missing source, limits) and a child's difference."""

from __future__ import annotations

import pytest

from flux.errors import SessionNotFound
from flux.store import StoreReader, StoreWriter
from flux.timemachine.family import child_difference, family_of
from tests.helpers import cell, write_turn

PLAN = 'flow\n  a = read({"path":"A"})\n  b = read({"path":"B"})\n'


def _family_store(path):
    """s_1 root; s_2 fork of s_1 (same plan, one world change); s_3 sub-agent of s_1;
    s_4 fork of s_2; s_5 unrelated."""
    with StoreWriter(path) as w:
        s1 = w.create_session("mock")
        write_turn(w, s1, "go", plan=PLAN, cells=[cell("read", {"path": "A"}, "a"), cell("read", {"path": "B"}, "b")])
        s2 = w.create_session("mock", context={"agent_id": f"fork:{s1}@1", "correlation_id": s1})
        write_turn(w, s2, "<fork>", plan=PLAN, cells=[cell("read", {"path": "A"}, "a"), cell("read", {"path": "B"}, "B!")])
        s3 = w.create_session("mock", context={"agent_id": "subagent:explorer", "correlation_id": s1})
        write_turn(w, s3, "explore", cells=[cell("grep", {"p": "x"}, "hit")])
        s4 = w.create_session("mock", context={"agent_id": f"fork:{s2}@0", "correlation_id": s2})
        write_turn(w, s4, "<fork>", plan=PLAN, cells=[cell("read", {"path": "A"}, "a"), cell("read", {"path": "B"}, "B!")])
        s5 = w.create_session("mock")
        write_turn(w, s5, "other", cells=[cell("read", {"path": "Z"}, "z")])
    return StoreReader(path)


def test_the_whole_family_from_any_member(tmp_path):
    reader = _family_store(tmp_path / "s")
    for member in ("s_1", "s_2", "s_3", "s_4"):
        fam = family_of(reader, member)
        assert fam.focus == member and fam.root == "s_1"
        assert [n.id for n in fam.nodes] == ["s_1", "s_2", "s_4", "s_3"]  # pre-order, siblings by n
    fam = family_of(reader, "s_4")
    by = {n.id: n for n in fam.nodes}
    assert [by[i].depth for i in ("s_1", "s_2", "s_4", "s_3")] == [0, 1, 2, 1]
    assert by["s_2"].parent == "s_1" and by["s_4"].parent == "s_2" and by["s_1"].parent is None
    assert by["s_2"].lineage.kind == "fork" and by["s_3"].lineage.kind == "sub-agent"
    assert by["s_2"].diffable and by["s_4"].diffable and not by["s_3"].diffable and not by["s_1"].diffable
    # connectors: s_2 is not its parent's last child (s_3 follows), so s_4 draws │ under it
    assert not by["s_2"].last_child and by["s_3"].last_child and by["s_4"].last_child
    assert by["s_4"].open_ancestors == (True,)
    assert family_of(reader, "s_5").nodes[0].id == "s_5" and len(family_of(reader, "s_5").nodes) == 1


def test_child_difference_is_the_run_diff_reduced(tmp_path):
    reader = _family_store(tmp_path / "s")
    d = child_difference(reader, "s_1", "s_2")
    assert (d.same, d.plan, d.world) == (1, 0, 1) and d.first_divergence == 1 and d.first_node == 1
    assert not d.identical
    assert child_difference(reader, "s_2", "s_4").identical


def test_hostile_registries(tmp_path):
    # s_1 and s_2 name each other as their source; s_3 names a source that is not in the store.
    with StoreWriter(tmp_path / "h") as w:
        w.create_session("mock", context={"agent_id": "fork:s_2@0", "correlation_id": "s_2"})
        w.create_session("mock", context={"agent_id": "fork:s_1@0", "correlation_id": "s_1"})
        w.create_session("mock", context={"agent_id": "fork:s_99@3", "correlation_id": "s_99"})
        w.create_session("mock", context={"agent_id": "fork:s_4@0", "correlation_id": "s_4"})  # its own source
    reader = StoreReader(tmp_path / "h")
    fam = family_of(reader, "s_1")
    assert {n.id for n in fam.nodes} == {"s_1", "s_2"} and any("cycle" in c for c in fam.cut)
    fam = family_of(reader, "s_3")
    assert fam.root == "s_3" and fam.missing_source == "s_99" and [n.id for n in fam.nodes] == ["s_3"]
    assert [n.id for n in family_of(reader, "s_4").nodes] == ["s_4"]
    with pytest.raises(SessionNotFound):
        family_of(reader, "s_42")


def test_limits_are_said(tmp_path):
    with StoreWriter(tmp_path / "deep") as w:
        prev = w.create_session("mock")
        for _ in range(5):
            prev = w.create_session("mock", context={"agent_id": f"fork:{prev}@0", "correlation_id": prev})
    reader = StoreReader(tmp_path / "deep")
    fam = family_of(reader, "s_1", max_depth=3)
    assert [n.depth for n in fam.nodes] == [0, 1, 2, 3] and any("below depth 3" in c for c in fam.cut)
    fam = family_of(reader, "s_1", max_nodes=2)
    assert len(fam.nodes) == 2 and any("more than 2" in c for c in fam.cut)
