"""No planted secret, in any shape or spelling, leaves the process — on any surface.

Secrets of every shape (registered ones holding quotes, backslashes, tabs and non-ASCII;
``AKIA…``, ``ghp_…``, ``AIza…``, ``sk-…``, ``api_key: VALUE``, ``DB_PASSWORD='…'``,
``password = "…"``) are planted in the prompt, a tool input (streamed in ``tool_input_delta``
pieces cut inside the secret), a tool output and the model's text (``text_delta`` pieces cut inside
it), at line starts, after tabs and mid-sentence. A real run (``flux run``), a scenario
(``flux record``), ``show`` / ``show --json``, ``export``, ``replay``, ``flux test`` and a judge
verdict are recorded; every file under the store and the scenario directory and every
stdout/stderr is grepped in UTF-8, JSON-escaped (``\\uXXXX`` too), doubly escaped and TOML forms, and
for fragments of each secret (tests/hostile/planting.py).
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flux.agent.model_cassette import redact_chunks, resplit
from flux.cassette.redactor import Redactor
from tests.hostile.planting import SHAPES, Planted, make_planting, needles, oracle_misses, run_planting


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(seed=st.integers(min_value=0, max_value=2**31 - 1), n=st.integers(min_value=1, max_value=40))
def test_planted_secrets_leave_no_byte_on_any_surface(tmp_path_factory, seed, n):
    planting = make_planting(seed, n)
    assert oracle_misses(planting) == []  # every planted text is one the redactor catches as plain text
    findings = run_planting(planting, tmp_path_factory.mktemp("planted"))
    assert findings.errors == []
    assert findings.leaked == set(), findings.examples


def test_the_battery_sees_a_leak(tmp_path, monkeypatch):
    """The grep is no check that cannot fail: with redaction switched off, every planted secret
    is found — in the store, the cassette, the scenario and the output."""
    monkeypatch.setattr(Redactor, "redact", lambda self, text: text)
    monkeypatch.setattr(Redactor, "redact_value", lambda self, value: value)
    monkeypatch.setattr(Redactor, "redact_json_text", lambda self, text, sort=True: text)
    planting = make_planting(7, 2 * len(SHAPES) * 4)
    findings = run_planting(planting, tmp_path)
    assert findings.leaked == set(range(len(planting.planted)))
    surfaces = set(findings.by_surface)
    for must in ("file: store/events.db", "file: written/model.jsonl", "file: scenarios/scenario.toml",
                 "file: scenarios/plan.flux.snap", "file: scenarios/judge.jsonl", "stdout: show --json", "stdout: export"):
        assert must in surfaces, (must, sorted(surfaces))


@pytest.mark.parametrize("shape_text, secret", [
    ("api_key:\tPq7tabValue01xx", "Pq7tabValue01xx"),  # a tab after the separator: \t in JSON text
    ("DB_PASSWORD='pl\"anted02xyzw'", 'pl"anted02xyzw'),  # a quote inside: \" in JSON text
    ("password = \"pl\\\"anted03xyz\"", 'pl\\"anted03xyz'),  # an escaped quote inside: \\\" in JSON text
    ("x\nAIzaSyA1234567890abcdefghijklmnopqrstu", "AIzaSyA1234567890abcdefghijklmnopqrstu"),  # after \n
    ("x\nghp_abcdefghijklmnopqrstuvwxyz0123456789", "ghp_abcdefghijklmnopqrstuvwxyz0123456789"),
    ("api_key: Pq7nonAsciiébß04", "Pq7nonAsciiébß04"),
])
def test_json_texts_are_redacted_on_their_decoded_values(shape_text, secret):
    """The S3/S4/S5 reproductions: a JSON text holding the value loses it, in every spelling."""
    r = Redactor()
    for text in (json.dumps({"content": shape_text}), json.dumps({"content": shape_text}, ensure_ascii=False),
                 json.dumps({"a": [{"content": shape_text}]})):
        out = r.redact_json_text(text)
        json.loads(out)
        for nd in needles(Planted("", "", "", shape_text, secret, "")):
            assert nd.decode() not in out, (text, out)


def test_a_registered_secret_in_its_json_spelling_is_found_in_plain_text():
    secret = 'ab"c\\d\tée12345'
    r = Redactor([secret])
    for spelled in (secret, json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1],
                    json.dumps(json.dumps(secret)[1:-1])[1:-1]):
        assert r.redact(f"x {spelled} y") == "x [redacted] y"


def test_a_registered_secret_split_across_tool_input_deltas_is_caught():
    """S2: a registered secret streamed in two ``tool_input_delta`` pieces left model.jsonl verbatim."""
    secret = "Pq7registered\"Split05"
    r = Redactor([secret])
    partial = json.dumps({"path": "a.txt", "content": f"deploy with {secret} now"})
    cut = partial.index("Split05")
    chunks = [{"t": "tool_input_delta", "c": {"name": "write", "partial_json": partial[:cut]}},
              {"t": "tool_input_delta", "c": {"name": "write", "partial_json": partial[cut:]}},
              {"t": "block", "c": {"type": "tool_use", "id": "t1", "name": "write", "input": json.loads(partial)}}]
    out = redact_chunks(r, chunks)
    text = json.dumps(out)
    assert "Split05" not in text and "Pq7registered" not in text
    pieces = [c["c"]["partial_json"] for c in out if c["t"] == "tool_input_delta"]
    assert json.loads("".join(pieces)) == {"path": "a.txt", "content": "deploy with [redacted] now"}
    assert len(pieces) >= 1 and all(c["c"]["name"] == "write" for c in out[:len(pieces)])
    # nothing to hide: the pieces stay as they were streamed
    clean = [{"t": "tool_input_delta", "c": {"name": "write", "partial_json": p}} for p in ('{"pa', 'th":"a"}')]
    assert redact_chunks(r, clean) == clean


def test_a_tool_input_cut_off_mid_stream_is_redacted_too():
    r = Redactor()
    chunks = [{"t": "tool_input_delta", "c": {"name": "bash", "partial_json": '{"command":"export API_KEY=Pq7cut'}},
              {"t": "tool_input_delta", "c": {"name": "bash", "partial_json": 'Off06xyz'}}]
    joined = "".join(c["c"]["partial_json"] for c in redact_chunks(r, chunks))
    assert "Pq7cut" not in joined and "Off06" not in joined and joined.startswith('{"command":"export API_KEY=')


@settings(max_examples=200, deadline=None)
@given(pieces=st.lists(st.text(max_size=12), min_size=1, max_size=6), data=st.data())
def test_resplit_keeps_the_text_and_the_cuts_in_unchanged_regions(pieces, data):
    joined = "".join(pieces)
    a = data.draw(st.integers(min_value=0, max_value=len(joined)))
    b = data.draw(st.integers(min_value=a, max_value=len(joined)))
    redacted = joined[:a] + "[redacted]" + joined[b:]
    out = resplit(pieces, redacted)
    assert "".join(out) == redacted and all(out)
    pos = 0
    for p in pieces[:-1]:
        pos += len(p)
        if pos <= a and p:  # a cut in the unchanged head keeps its place
            assert any(sum(len(x) for x in out[:k]) == pos for k in range(len(out) + 1))


@settings(max_examples=200, deadline=None)
@given(pieces=st.lists(st.text(min_size=1, max_size=12), min_size=1, max_size=6), data=st.data())
def test_resplit_keeps_the_number_of_pieces(pieces, data):
    """A stream re-cut after redaction has as many pieces as it was streamed in — a re-drive served
    from the cassette then counts the same chunks as the recording did — whenever the marker's
    span can hold the cuts that fell inside the secret."""
    joined = "".join(pieces)
    a = data.draw(st.integers(min_value=0, max_value=len(joined)))
    b = data.draw(st.integers(min_value=a, max_value=len(joined)))
    redacted = joined[:a] + "[redacted]" + joined[b:]
    out = resplit(pieces, redacted)
    inside = sum(1 for k in range(1, len(pieces)) if a < sum(map(len, pieces[:k])) < b)
    if inside < len("[redacted]") and redacted != joined:
        assert len(out) == len(pieces), (pieces, redacted, out)


@pytest.mark.parametrize("content, secret", [
    ("export API_KEY=Pq7plainValue07\n", "Pq7plainValue07"),  # the text passes alone caught it
    ("api_key:\tPq7tabValue08\n", "Pq7tabValue08"),  # hidden by \t in the JSON text
    ("x\nAIzaSyA1234567890abcdefghijklmnopqrs08\n", "AIzaSyA1234567890abcdefghijklmnopqrs08"),  # after a \n
    ("token = 'Pq7quote\"Value09'\n", 'Pq7quote"Value09'),  # a quote inside
])
def test_a_recording_with_a_secret_in_a_tool_input_replays_from_its_redacted_plan(tmp_path, content, secret):
    """The stored plan is formatted from the redacted input and the cell's second hash is of that
    same redacted input, so replay of the redacted stand-in serves every cell — and nothing in the
    store holds the secret."""
    from flux.agent.client import Client
    from flux.agent.providers.scripted import ScriptedProvider
    from flux.canonical import canonical_json, sha256_hex
    from flux.model.session import load_session
    from flux.store.store import StoreReader
    from flux.timemachine.replay import replay_session

    ws = tmp_path / "ws"
    ws.mkdir()
    store = tmp_path / "store"
    inp = {"path": "out.txt", "content": content}
    prov = ScriptedProvider(responses=[{"tool_calls": [{"name": "write", "input": inp}]}, {"text": "done"}])
    c = Client(prov, model="scripted", store=store, workspace=ws, auto_approve=True, env_secrets=False)
    try:
        assert c.session().send_sync("write it").outcome == "ok"
    finally:
        c.close()
    for f in store.iterdir():
        assert secret.encode() not in f.read_bytes() and json.dumps(secret)[1:-1].encode() not in f.read_bytes(), f
    with StoreReader(store) as reader:
        detail = load_session(reader, "s_1")
        (cell,) = [c.rec for c in detail.cells]
        redacted_input = Redactor().redact_value(inp)
        assert redacted_input != inp
        assert cell.input_hash == sha256_hex(canonical_json(inp))
        assert cell.input_hash_redacted == sha256_hex(canonical_json(redacted_input))
        assert secret not in (detail.turns[0].plan_attempts[0].plan_source or "x")
        report = replay_session(reader, "s_1")
    assert report.diverged is None and report.cells_consumed == report.cells_total == 1
    assert report.missing_sources == 0


def test_a_quote_in_prose_does_not_pair_into_a_literal_that_hides_a_value():
    """benchmarks/fuzz.py's find: a stray quote before an escape paired with the quote of a grep
    line's value; redacting that span alone took the value's name, and the value stayed."""
    text = 'O9K/0me\r<"WY\nFR^2h(+xL\\\\v1\nsecret.txt:3:x-api-key="vTOGZ7ldZwhAF6TVOZv" # note\n1v\\\\L\nYW"<\rem0'
    out = Redactor().redact(text)
    assert "vTOGZ7ldZwhAF6TVOZv" not in out and Redactor().redact(out) == out
    # while a real JSON string value with an escape is decoded: the value in it goes
    verdict = '{"passed": true, "rationale": "it says password = \\"pl\\\\\\"anted10xyz\\"\\nok"}'
    assert "anted10xyz" not in Redactor().redact(verdict)


def test_flux_record_writes_the_prompt_redacted_into_scenario_toml(tmp_path):
    """S1: ``flux record`` copied the prompt verbatim into scenario.toml (``input = "deploy with tok…
    and AKIA…"``) while events.db said [redacted]; now the manifest holds what events.db holds."""
    import tomllib

    from click.testing import CliRunner

    from flux.cli import main
    from flux.model.session import load_session
    from flux.store.store import StoreReader

    token, akia = "Pq7registeredToken11", "AKIAABCDEFGHIJ012345"
    prompt = f"deploy with {token} and {akia}\nDB_PASSWORD='pl\"anted\tvalue11'"
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"text": "ok"}]))
    res = CliRunner().invoke(main, ["record", "--dir", str(tmp_path / "sc"), "deploy", prompt, "-m", f"scripted:{script}"],
                             env={"DEPLOY_TOKEN": token, "FLUX_GOLDEN": None})
    assert res.exit_code == 0, res.stderr
    toml = (tmp_path / "sc" / "deploy" / "scenario.toml").read_bytes()
    for s in (token, akia, "anted", 'pl\\"anted'):
        assert s.encode() not in toml
    manifest = tomllib.loads(toml.decode())
    with StoreReader(tmp_path / "sc" / "deploy") as reader:
        stored = load_session(reader, manifest["session"]).turns[0].user_input
    assert manifest["input"] == stored == "deploy with [redacted] and [redacted]\nDB_PASSWORD='[redacted]'"
