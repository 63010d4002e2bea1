"""The observation flush's encoder (flux.agent.observations.observation_texts) against the general path it
replaces: ``encode_observation(kind, phase, redactor.redact_value(data))`` per observation."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flux.agent.observations import observation_texts
from flux.cassette.redactor import Redactor
from flux.store.events import Observation
from flux.store.payload_encode import encode_observation

# Keys that redact (two of them to the same marker), name a secret, or are not strings.
_STR_KEYS = st.sampled_from(["tool", "status", "dispatch", "api_key", "password", "tokens", "sk-ant-aaaaaaaaaaaa",
                             "[redacted]", "ghp_aaaaaaaaaaaaaaaaaaaa", "hunter22", "subjects", "", "\ud83d"])
_KEYS = st.one_of(_STR_KEYS, _STR_KEYS, _STR_KEYS, st.text(max_size=6), st.integers(-3, 3))
_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.sampled_from([1234, 7, -1234, 2 ** 70]),
                     st.floats(allow_nan=True),
                     st.sampled_from(["local", "ok", "echo", "sk-abcdefghijklmnopqrstu", "hunter22", "a\ud83db",
                                      "Bearer abcdef", "key=v", "1234", ""]),
                     st.text(max_size=8))
_VALUES = st.recursive(_SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                         st.dictionaries(_KEYS, inner, max_size=3)), max_leaves=6)
_DATA = st.one_of(st.dictionaries(_STR_KEYS, _VALUES, max_size=5), st.dictionaries(_KEYS, _VALUES, max_size=5), _VALUES)
_OBS = st.builds(Observation, kind=st.one_of(st.sampled_from(["tool_call", "tool.ended", "model.call"]), st.text(max_size=4)),
                 phase=st.sampled_from(["turn", "plan", "\ud83d"]), data=_DATA)


@settings(max_examples=200, deadline=None)
@given(obs=st.lists(_OBS, max_size=6), secrets=st.lists(st.sampled_from(["hunter22", "1234", "local", "echo1"]), max_size=2))
def test_observation_texts_equal_the_general_path(obs, secrets):
    red = Redactor(secrets)
    want = [encode_observation(o.kind, o.phase, red.redact_value(o.data)) for o in obs]
    assert observation_texts(obs, red) == want


def test_the_turns_own_shapes_take_the_fast_path_with_a_secret_named_key():
    red = Redactor(["hunter22", "1234"])
    obs = [Observation("tool.ended", "turn", {"dispatch": 3, "elapsed_us": 1234, "execution_us": 5, "status": "ok",
                                              "tool": "echo"}),
           Observation("tool_call", "turn", {"caller": "local", "subjects": ["a/hunter22.txt"], "tool": "echo"}),
           Observation("x", "turn", {"password": 7, "api_key": ["kept as a list"], "n": 1234})]
    got = observation_texts(obs, red)
    assert got == [encode_observation(o.kind, o.phase, red.redact_value(o.data)) for o in obs]
    assert '"subjects":["a/[redacted].txt"]' in got[1] and '"password":"[redacted]"' in got[2]
    assert '"n":"[redacted]"' in got[2] and '"elapsed_us":"[redacted]"' in got[0]


# -- the same writer for the closing messages ----------------------------------------------------

_BLOCKS = st.lists(st.one_of(
    st.fixed_dictionaries({"type": st.just("tool_use"), "id": st.text(max_size=6), "name": st.sampled_from(["echo", "hunter22"]),
                           "input": st.dictionaries(_STR_KEYS, _VALUES, max_size=3)}),
    st.fixed_dictionaries({"type": st.just("tool_result"), "tool_use_id": st.text(max_size=4),
                           "content": st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": _SCALARS}), max_size=2),
                           "is_error": st.booleans()}),
    _VALUES), max_size=4)


@settings(max_examples=150, deadline=None)
@given(role=st.one_of(st.sampled_from(["user", "assistant", "a\ud83d"]), st.integers()), content=st.one_of(_BLOCKS, _VALUES),
       secrets=st.lists(st.sampled_from(["hunter22", "1234", "echo1", "text"]), max_size=2))
def test_message_text_equals_the_message_body_encoded(role, content, secrets):
    from flux.agent.observations import RedactedJson, message_text
    from flux.store.events import Message
    from flux.store.payload_encode import encode_payload

    red = Redactor(secrets)
    writer = RedactedJson(red)
    got = message_text(role, content, writer)
    if type(role) is not str or type(content) is not list:
        assert got is None
        return
    assert got == encode_payload(Message(role=role, content=red.redact_value(content)))
    assert writer.text(content) == message_text(role, content, RedactedJson(red)).split(',"content":', 1)[1][:-2]


def test_a_message_appended_as_text_is_the_row_and_registry_append_writes(tmp_path):
    import sqlite3

    from flux.agent.observations import RedactedJson, message_text
    from flux.store.events import Message
    from flux.store.store import StoreWriter

    red = Redactor(["hunter22"])
    content = [{"type": "tool_use", "id": "t1", "name": "echo", "input": {"password": "x", "i": 3}},
               {"type": "text", "text": "a hunter22 \ud83d"}]
    got = []
    for way in ("body", "text"):
        w = StoreWriter(tmp_path / way, clock=lambda: 5)
        sid = w.create_session("m", ts=1)
        for grouped in (False, True):
            if grouped:
                with w.grouped():
                    pass
            if way == "body":
                w.append(sid, Message(role="assistant", content=red.redact_value(content)))
            else:
                w.append_message_text(sid, message_text("assistant", content, RedactedJson(red)))
        with w.grouped():
            if way == "body":
                w.append(sid, Message(role="user", content=[]))
            else:
                w.append_message_text(sid, message_text("user", [], RedactedJson(red)))
        w.close()
        con = sqlite3.connect(tmp_path / way / "events.db")
        got.append((con.execute("SELECT stream, stream_seq, kind, ts, turn_id, payload FROM events").fetchall(),
                    con.execute("SELECT model, updated_at, last_seq, msg_count FROM streams").fetchall()))
        con.close()
    assert got[0] == got[1]
    assert got[1][1][0][3] == 3 and "hunter22" not in str(got[1][0]) and "\ud83d" not in str(got[1][0])


# One adaptive tool call's three observations in one entry (flux.agent.observations.ToolObservations, what
# the fused tool call appends): the texts of its three Observation objects, mixed with others.
_TOOL_NAMES = st.sampled_from(["echo", "hunter22", "sk-abcdefghijklmnopqrstu", "a\ud83db", "tool", "", "local", "%s%%"])
_NUMBERS = st.one_of(st.integers(0, 3), st.sampled_from([1234, 2 ** 70, -1]), st.floats(allow_nan=False))
_TOOL_OBS = st.builds(lambda d, name, subjects, ended: (d, name, subjects, ended),
                      st.one_of(st.integers(1, 3), st.just(1234)), _TOOL_NAMES,
                      st.one_of(st.just([]), st.lists(st.sampled_from(["a.txt", "hunter22", "key=v", "\ud83d"]),
                                                      min_size=1, max_size=1)),
                      st.one_of(st.none(), st.tuples(_NUMBERS, _NUMBERS,
                                                     st.sampled_from(["ok", "error", "denied", "hunter22", "%d"]))))


@settings(max_examples=150, deadline=None)
@given(entries=st.lists(st.one_of(_TOOL_OBS, _OBS), max_size=5),
       secrets=st.lists(st.sampled_from(["hunter22", "1234", "local", "echo", "tool", "status"]), max_size=2),
       marker=st.sampled_from(["[redacted]", "%s%d%%"]))  # (the texts are %-formats: a marker with "%" in them)
def test_tool_observations_write_the_texts_of_their_three_observations(entries, secrets, marker):
    from flux.agent.observations import ToolObservations

    red = Redactor(secrets, marker=marker)
    mixed, general = [], []
    for e in entries:
        if isinstance(e, Observation):
            mixed.append(e)
            general.append(e)
            continue
        d, name, subjects, ended = e
        ob = ToolObservations(d, name, subjects)
        if ended is not None:
            ob.end(*ended)
        mixed.append(ob)
        general.append(Observation("tool_call", "turn", {"caller": "local", "subjects": subjects, "tool": name}))
        general.append(Observation("tool.started", "turn", {"dispatch": d, "elapsed_us": 0, "tool": name}))
        if ended is not None:
            general.append(Observation("tool.ended", "turn", {"dispatch": d, "elapsed_us": ended[0],
                                                              "execution_us": ended[1], "status": ended[2], "tool": name}))
    want = [encode_observation(o.kind, o.phase, red.redact_value(o.data)) for o in general]
    assert observation_texts(mixed, red) == want


# The closing messages' common shape: plain blocks, most of them texts the redactor finds nothing
# in (flux.agent.observations.verbatim_json writes those in one encode), a few with a secret, a credential's
# look, a secret-naming key, an escape, a float, a tuple or a non-str key (the writer's path).
_PLAIN_TEXT = st.sampled_from(["0", "17", "ok", "done", "x y", "é ✓", "hunter22", "sk-abcdefghijklmnopqrstu", "a\nb",
                               'q"q', 'q"q!', "tokens", "", "1234"])
_PLAIN_LEAF = st.one_of(_PLAIN_TEXT, st.integers(-3, 1300), st.booleans(), st.none(), st.sampled_from([1.5, 1e22, -0.0]))
_PLAIN_BLOCKS = st.lists(st.one_of(
    st.builds(lambda i, name, inp: {"type": "tool_use", "id": i, "name": name, "input": inp},
              st.sampled_from(["toolu_1", "toolu_2"]), st.sampled_from(["echo", "note"]),
              st.dictionaries(st.sampled_from(["i", "path", "api_key", "n"]), _PLAIN_LEAF, max_size=2)),
    st.builds(lambda i, t, e: {"type": "tool_result", "tool_use_id": i, "content": [{"type": "text", "text": t}],
                               "is_error": e}, st.sampled_from(["toolu_1", "toolu_2"]), _PLAIN_TEXT, st.booleans()),
    st.just({"type": "text", "text": ("a", "b")}), st.just({1: "x"}), st.just({True: "x"})), min_size=2, max_size=5)


@settings(max_examples=150, deadline=None)
@given(content=_PLAIN_BLOCKS, secrets=st.lists(st.sampled_from(["hunter22", "1234", "toolu_2", 'q"q!']), max_size=2))
def test_plain_messages_are_written_as_the_general_path_writes_them(content, secrets):
    from flux.agent.observations import RedactedJson, message_text
    from flux.store.events import Message
    from flux.store.payload_encode import encode_payload

    red = Redactor(secrets)
    assert message_text("user", content, RedactedJson(red)) == encode_payload(Message(role="user",
                                                                                       content=red.redact_value(content)))


def test_a_turns_closing_message_is_written_verbatim():
    from flux.agent.observations import verbatim_json

    blocks = [{"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": [{"type": "text", "text": str(i)}],
               "is_error": False} for i in range(3)]
    assert verbatim_json(blocks, Redactor(["hunter22"])) is not None  # (the fast path is taken)
    assert verbatim_json(blocks + [{"type": "text", "text": "hunter22"}], Redactor(["hunter22"])) is None


@pytest.mark.parametrize("content,secrets", [
    ([{"type": "text", "text": 'q"q!'}, {"type": "text", "text": "x"}], ['q"q!']),  # a secret found only unescaped
    ([{"type": "tool_use", "id": "t", "name": "echo", "input": {True: "x"}}, {"type": "text", "text": "x"}], []),
    ([{"type": "tool_use", "id": "t", "name": "echo", "input": {"a": [{1.5: 2}]}}, {"type": "text", "text": "x"}], []),
])
def test_messages_the_verbatim_path_must_refuse(content, secrets):
    from flux.agent.observations import RedactedJson, message_text, verbatim_json
    from flux.store.events import Message
    from flux.store.payload_encode import encode_payload

    red = Redactor(secrets)
    assert verbatim_json(content, red) is None
    assert message_text("user", content, RedactedJson(red)) == encode_payload(Message(role="user",
                                                                                       content=red.redact_value(content)))
