"""Issue 7 item 1: no planted secret, in any shape, reaches events.db, its -wal or model.jsonl.

Each value below is planted once, never registered as a secret: only the redactor's patterns can
catch it. The run greps and reads them, echoes them through bash in ripgrep's ``path:line:col:``
form, the model repeats them in its answer with the key split across stream chunks, and writes one
back through a tool input. Every file of the store is checked while the writer is still open (so
the ``-wal`` is there) and again after it closed.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from flux.agent.client import Client
from flux.agent.model_cassette import redact_chunks
from flux.agent.providers.scripted import ScriptedProvider
from flux.cassette.redactor import Redactor

M = "[redacted]"

# shape -> (file name, file text template, value)
PLANTED = {
    "grep key = value": ("secret.txt", 'line one\nline two\napi_key = "{v}"\n', "Pq7plainGrepValue01"),
    "env": (".env", "HOME_DIR=/x\nSTRIPE_API_KEY={v}\n", "Pq7envStyleValue02"),
    "export quoted": ("deploy.sh", "#!/bin/sh\nexport DB_PASSWORD='{v}'\n", "Pq7exportValue03"),
    "yaml key: value": ("conf.yaml", "db:\n  password: {v}\n", "Pq7yamlValue04"),
    "json": ("conf.json", '{{"user": "bob", "client_secret": "{v}"}}\n', "Pq7jsonValue05"),
    "toml": ("app.toml", '[auth]\nsecret_token = "{v}"\n', "Pq7tomlValue06"),
}
RG_VALUE = "Pq7ripgrepValue07"  # printed by bash as a ripgrep `path:line:col:` line
SPLIT_VALUE = "Pq7splitChunkValue08"  # the model streams `access_token = "<v>"` in two chunks
INPUT_VALUE = "Pq7toolInputValue09"  # the model writes it through a tool input


def _chunks_answer() -> dict:
    text = f'Found it: access_token = "{SPLIT_VALUE}" in the config.'
    cut = text.index(SPLIT_VALUE) + 5  # the key and the first 5 characters in one chunk, the rest in the next
    return {"chunks": [
        {"t": "message_start", "c": {"model": "scripted"}},
        {"t": "text_delta", "c": text[:cut]},
        {"t": "text_delta", "c": text[cut:]},
        {"t": "usage", "c": {"input_tokens": 3, "output_tokens": 4}},
        {"t": "done", "c": {"stop_reason": "end_turn"}},
    ]}


def _all_values() -> list[str]:
    return [v for _, _, v in PLANTED.values()] + [RG_VALUE, SPLIT_VALUE, INPUT_VALUE]


def _assert_no_secret_bytes(files: list[Path]) -> None:
    assert files
    for f in files:
        data = f.read_bytes()
        for v in _all_values():
            assert v.encode() not in data, (f.name, v)


def test_every_planted_shape_leaves_zero_bytes_on_disk(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    for name, text, value in PLANTED.values():
        (ws / name).write_text(text.format(v=value))
    store = tmp_path / "store"
    cassette = tmp_path / "model.jsonl"
    prov = ScriptedProvider(responses=[
        {"tool_calls": [
            {"name": "grep", "input": {"pattern": "key|secret|password|token|KEY", "path": "."}},
            {"name": "read", "input": {"path": ".env"}},
            {"name": "read_many", "input": {"paths": ["deploy.sh", "conf.yaml", "conf.json", "app.toml"]}},
            {"name": "bash", "input": {"command": f"printf 'cfg/app.toml:12:5:auth_token = \"{RG_VALUE}\"\\n'"}},
            {"name": "write", "input": {"path": "out.yaml", "content": f"password: {INPUT_VALUE}\n"}},
        ]},
        _chunks_answer(),
    ])
    c = Client(prov, model="scripted", store=store, workspace=ws, auto_approve=True, env_secrets=False,
               model_cassette=cassette)
    try:
        out = c.session().send_sync("find the credentials")
        assert out.outcome == "ok"
        # the model itself saw every value (redaction is only for what is written down)
        grep_out = out.tool_calls[0].content
        assert f'secret.txt:3:api_key = "{PLANTED["grep key = value"][2]}"' in grep_out
        assert RG_VALUE in out.tool_calls[3].content
        assert SPLIT_VALUE in out.answer
        live = sorted(p for p in store.iterdir() if p.is_file())
        assert any(p.name.endswith("-wal") for p in live), [p.name for p in live]
        _assert_no_secret_bytes(live + [cassette])
    finally:
        c.close()
    _assert_no_secret_bytes(sorted(p for p in store.iterdir() if p.is_file()) + [cassette])
    assert b"[redacted]" in cassette.read_bytes()


@pytest.mark.parametrize("line, value", [
    ('secret.txt:3:api_key = "plainvalue1"', "plainvalue1"),  # the reproducer
    ("src/conf.py:12:API_KEY='plainvalue2'", "plainvalue2"),
    ("src/conf.py:12:7:password: plainvalue3", "plainvalue3"),  # ripgrep --column
    ('notes/token.md:4:  "secret": "plainvalue4",', "plainvalue4"),
    ("a/secret.env-5-DB_PASSWD=plainvalue5", "plainvalue5"),  # grep -C context line
    ("password:3:plainvalue6", "plainvalue6"),  # a grep prefix that is also a NAME: the safe reading wins
    ("token=abc:password=plainvalue7", "plainvalue7"),
])
def test_grep_prefixed_lines(line, value):
    r = Redactor()
    out = r.redact(line)
    assert value not in out and M in out
    assert r.redact(out) == out


def test_grep_prefix_of_an_innocent_path_is_kept():
    assert Redactor().redact('src/conf.py:12:API_KEY = "v"') == 'src/conf.py:12:API_KEY = "[redacted]"'


def test_secret_split_across_chunks_is_redacted_as_one_text():
    r = Redactor(["registeredSecret42"])
    chunks = [{"t": "message_start", "c": {}}, {"t": "text_delta", "c": "x registered"},
              {"t": "text_delta", "c": "Secret42 y api_"}, {"t": "text_delta", "c": "key=zzzzzzz"},
              {"t": "done", "c": {"stop_reason": "end_turn"}}]
    out = redact_chunks(r, chunks)
    joined = "".join(c["c"] for c in out if c["t"] == "text_delta")
    assert "Secret42" not in joined and "zzzzzzz" not in joined
    assert joined == "x [redacted] y api_key=[redacted]"
    assert out[0] == chunks[0] and out[-1] == chunks[-1]
    # chunks with nothing to hide keep their boundaries
    clean = [{"t": "text_delta", "c": "hel"}, {"t": "text_delta", "c": "lo"}]
    assert redact_chunks(r, clean) == clean


NAMES = st.sampled_from(["api_key", "API_KEY", "password", "client_secret", "GITHUB_TOKEN", "db.passwd", "apiKey",
                         "x-api-key", "AWS_SECRET_ACCESS_KEY"])
FORMS = st.sampled_from(["{n}={v}", "{n} = {v}", "{n}: {v}", '"{n}": "{v}"', "{n}='{v}'", 'export {n}="{v}"',
                         '{n} = "{v}"', "  {n}:{v}"])
PREFIXES = st.sampled_from(["", "secret.txt:3:", "src/a.py:12:", "src/a.py:12:40:", "a/b-c.txt-7-", "password:1:",
                            "token.json:2:4:", "12:"])
VALUES = st.text(alphabet="abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789", min_size=10, max_size=30)


@settings(max_examples=300, deadline=None)
@given(prefix=PREFIXES, name=NAMES, form=FORMS, value=VALUES, before=st.text(max_size=40), after=st.text(max_size=40),
       cuts=st.lists(st.integers(min_value=0, max_value=200), max_size=4))
def test_planted_assignment_never_survives_prefix_or_chunking(prefix, name, form, value, before, after, cuts):
    assume(value not in before and value not in after)
    line = prefix + form.format(n=name, v=value)
    text = before + "\n" + line + "\n" + after
    r = Redactor()
    assert value not in r.redact(text)
    # the same text streamed in arbitrary pieces
    points = sorted({min(c, len(text)) for c in cuts})
    pieces = [text[a:b] for a, b in zip([0, *points], [*points, len(text)]) if b > a]
    out = redact_chunks(r, [{"t": "text_delta", "c": p} for p in pieces])
    assert value not in "".join(c["c"] for c in out)
