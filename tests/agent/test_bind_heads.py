"""The fused call's bind check, cached per head (direct_call._bind_head_ok): a head's verdict is the plain
check's (``not in RESERVED and IDENT.fullmatch``) for the head followed by any non-negative int."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from flux.agent import direct_call
from flux.lang.parse_text import IDENT

_heads = st.text(alphabet="ab_Z9-. é\u00b2", max_size=8).map(lambda t: "adaptive_" + t) | st.text(max_size=6)


@settings(max_examples=120, deadline=None)
@given(_heads, st.lists(st.integers(min_value=0, max_value=10**30), min_size=1, max_size=4))
def test_a_heads_verdict_is_every_binds(head, numbers):
    ok = direct_call._bind_head_ok(head)
    for n in numbers:
        bind = f"{head}{n}"
        assert ok == (bind not in direct_call.RESERVED and IDENT.fullmatch(bind) is not None), bind


def test_a_reserved_word_of_head_and_digits_refuses_the_head(monkeypatch):
    monkeypatch.setattr(direct_call, "RESERVED", direct_call.RESERVED | {"adaptive_gather_12"})
    assert not direct_call._bind_head_ok("adaptive_gather_")
    assert direct_call._bind_head_ok("adaptive_batch_x_action_")
