"""Issue 7 item 5: a lone surrogate in a model answer, a tool input or a tool's output is replaced by
U+FFFD (flux.canonical.scrub_text) before anything is hashed or stored — the turn closes, the store
reads back, and the session replays faithfully (the same rule on record and on replay)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from flux.agent.client import Client
from flux.agent.ops import op
from flux.agent.providers.scripted import ScriptedProvider
from flux.canonical import sha256_hex
from flux.cli import main as cli_main
from flux.model.session import load_session
from flux.store.store import StoreReader
from flux.timemachine.replay import replay_session

LONE = "\ud83d"


def test_sha256_of_a_lone_surrogate_is_the_sha256_of_the_replacement():
    assert sha256_hex("a" + LONE) == sha256_hex("a\ufffd")
    assert sha256_hex("\ud83d\ude00") == sha256_hex("\U0001F600")  # a split pair is joined back


def test_lone_surrogates_from_the_model_and_from_an_op_close_the_turn_and_replay(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()

    @op(effect="read")
    def shout(text: str) -> str:
        """Echo text with a lone surrogate glued on."""
        return text + LONE + "!"

    store = tmp_path / "store"
    cassette = tmp_path / "model.jsonl"
    prov = ScriptedProvider(responses=[
        {"text": "thinking " + LONE, "tool_calls": [{"name": "shout", "input": {"text": "hi" + LONE}}]},
        {"text": "done " + LONE + " bye"},
    ])
    c = Client(prov, model="scripted", store=store, workspace=ws, ops=[shout], auto_approve=True, env_secrets=False,
               model_cassette=cassette)
    try:
        out = c.session().send_sync("go " + LONE)
    finally:
        c.close()
    assert out.outcome == "ok"
    assert out.answer == "done \ufffd bye"
    assert out.tool_calls[0].content == "hi\ufffd\ufffd!"
    cassette.read_text(encoding="utf-8")  # valid UTF-8
    with StoreReader(store) as r:
        d = load_session(r, "last")
        [turn] = d.turns
        assert turn.outcome == "ok"
        [cell] = d.cells
        assert cell.rec.content == "hi\ufffd\ufffd!"
        assert json.loads(cell.rec.input_view) == {"text": "hi\ufffd"}
        assert cell.rec.input_hash == sha256_hex('{"text":"hi\ufffd"}')
        rep = replay_session(r, "last")
    assert rep.diverged is None and rep.cells_consumed == rep.cells_total == 1


def test_flux_run_with_a_lone_surrogate_in_the_model_answer_has_no_traceback(tmp_path):
    script = tmp_path / "script.jsonl"
    # JSON text can carry "\ud83d" even though no UTF-8 file can
    script.write_text('{"text": "answer \\ud83d end"}\n')
    ws = tmp_path / "ws"
    ws.mkdir()
    store = tmp_path / "store"
    res = CliRunner().invoke(cli_main, ["run", "--model", f"scripted:{script}", "--store", str(store),
                                        "--workspace", str(ws), "--yes", "hello"])
    assert res.exception is None or isinstance(res.exception, SystemExit), res.output
    assert "Traceback" not in res.output
    assert res.exit_code == 0, res.output
    with StoreReader(store) as r:
        [turn] = load_session(r, "last").turns
    assert turn.outcome == "ok"


_SURR_TEXT = st.one_of(st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF, blacklist_categories=()), max_size=6),
                       st.sampled_from(["\ud83d", "a\udc00b", "\ud83d\ude00", "é", "plain"]))
_SURR_JSON = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), _SURR_TEXT),
                          lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_SURR_TEXT, inner, max_size=3)),
                          max_leaves=10)


@settings(max_examples=120, deadline=None)
@given(value=_SURR_JSON)
def test_scrub_value_skips_the_copy_only_when_nothing_needs_scrubbing(value):
    from flux.canonical import _scrub_copy, scrub_value

    out = scrub_value(value)
    assert out == _scrub_copy(value)  # the rebuilding reference
    def has_surrogate(v):
        if isinstance(v, str):
            return any(0xD800 <= ord(ch) <= 0xDFFF for ch in v)
        if isinstance(v, dict):
            return any(has_surrogate(k) or has_surrogate(x) for k, x in v.items())
        return isinstance(v, list) and any(has_surrogate(x) for x in v)

    dirty = has_surrogate(value)
    if isinstance(value, (dict, list)):
        assert (out is value) == (not dirty)  # the input itself exactly when it holds no surrogate
