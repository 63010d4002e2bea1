"""Key tables (``flux_tui.keys.key_table``): a table of keys reads back as the Bindings it spells;
a malformed entry is refused when the module loads, naming the line; random text never raises
anything but that refusal."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from textual.binding import Binding

from flux_tui.keys import key_table


def test_a_table_spells_its_bindings():
    table = key_table("demo", """
        # keys   id      action       label
        escape   back    back         Back
            Go back to the previous screen
        n,down   next    step(1)      Next one  [group Step]
            Move to the next one, a tooltip that goes on
            over two lines
        p        prev    step(-1)     Prev one  [hidden, group Step]
            Move to the previous one
    """)
    assert [(b.key, b.id, b.action, b.description, b.show) for b in table] == [
        ("escape", "demo.back", "back", "Back", True),
        ("n,down", "demo.next", "step(1)", "Next one", True),
        ("p", "demo.prev", "step(-1)", "Prev one", False),
    ]
    assert table[1].tooltip == "Move to the next one, a tooltip that goes on over two lines"
    assert table[0].group is None
    assert table[1].group is table[2].group and table[1].group == Binding.Group("Step", compact=True)


@pytest.mark.parametrize("table, complaint", [
    ("escape back back\n    no label\n", "needs <keys> <id> <action> <label>"),
    ("escape back back Back\n", "has no tooltip line"),
    ("    a tooltip first\nescape back back Back\n    tip\n", "before any key"),
    ("escape back back Back  [shown]\n    tip\n", "unknown key-table flag 'shown'"),
])
def test_a_malformed_entry_is_refused_naming_it(table, complaint):
    with pytest.raises(ValueError, match="key table demo: |unknown key-table flag") as e:
        key_table("demo", table)
    assert complaint in str(e.value)


_token = st.text(st.characters(min_codepoint=33, max_codepoint=126, exclude_characters="#[]"), min_size=1, max_size=12)
_words = st.lists(_token, min_size=1, max_size=4).map(" ".join)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(_token, _token, _token, _words, _words, st.booleans()), max_size=8))
def test_any_table_written_from_rows_reads_back_as_those_rows(rows):
    text = "\n".join(f"{k} {i} {a} {label}{'  [hidden]' if hidden else ''}\n    {tip}"
                     for k, i, a, label, tip, hidden in rows)
    got = key_table("fuzz", text)
    assert [(b.key, b.id, b.action, b.description, b.tooltip, b.show) for b in got] == [
        (k, f"fuzz.{i}", a, label, tip, not hidden) for k, i, a, label, tip, hidden in rows]


@settings(max_examples=200, deadline=None)
@given(st.text(st.sampled_from("ab [],#\n\t-")))
def test_random_text_is_a_table_or_a_refusal(text):
    try:
        got = key_table("fuzz", text)
    except ValueError as e:
        assert "key table fuzz" in str(e) or "key-table flag" in str(e)
    else:
        assert all(b.id.startswith("fuzz.") and b.tooltip for b in got)


def test_every_screen_table_has_unique_ids_and_a_tooltip_for_each_key():
    """The app's own tables: one id per key within a screen, and F1 has something to say for each."""
    from flux_tui.app import FluxApp
    from flux_tui.screens.session_keys import SESSION_BINDINGS
    from flux_tui.screens.sessions import SessionsScreen
    from flux_tui.screens.whatif import WhatIfScreen
    from flux_tui.widgets.virtual_list import VirtualList

    for bindings in (FluxApp.BINDINGS, SESSION_BINDINGS, SessionsScreen.BINDINGS, WhatIfScreen.BINDINGS,
                     VirtualList.BINDINGS):
        ids = [b.id for b in bindings]
        assert len(ids) == len(set(ids)) and all(b.tooltip for b in bindings)
    assert len(SESSION_BINDINGS) == 29 and sum(not b.show for b in SESSION_BINDINGS) == 12
