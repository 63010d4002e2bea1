"""``flux case …`` end to end on real recordings: save, export/import, list, show, delete, gc, and
``case run`` down its ladder — each reason code with the input that produces it, next to the
unchanged input that passes."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from flux.cli import main

from tests.helpers import copy_fixture


def flux(*args: str, env: dict | None = None):
    e = {"FLUX_FIXTURE_STORE": None, "FLUX_POSTGRES_DSN": None, "FLUX_GOLDEN": None}
    e.update(env or {})
    return CliRunner().invoke(main, list(args), env=e)


def lines(res) -> list[dict]:
    return [json.loads(x) for x in res.stdout.splitlines() if x.strip()]


@pytest.fixture
def cases_dir(tmp_path: Path) -> Path:
    return tmp_path / "cases"


def save(recorded: Path, cases_dir: Path, *extra: str) -> str:
    res = flux("case", "save", "s_1", "--store", str(recorded), "--fixture-store", str(cases_dir), *extra)
    assert res.exit_code == 0, res.output
    return lines(res)[0]["fixture_hash"]


def run(cases_dir: Path, h: str, *extra: str, env: dict | None = None):
    return flux("case", "run", h, "--fixture-store", str(cases_dir), *extra, env=env)


# -- save / export / import -----------------------------------------------------------------------


def test_real_fixture_bundle_round_trips_export_import_with_the_same_hash(tmp_path, cases_dir):
    src = copy_fixture(tmp_path / "fixture")
    h = save(src, cases_dir)
    for as_json in (True, False):
        out = tmp_path / ("b.json" if as_json else "b.case")
        res = flux("case", "export", h, "--out", str(out), "--fixture-store", str(cases_dir),
                   *(["--json"] if as_json else []))
        assert res.exit_code == 0, res.output
        assert "warning:" in res.stderr and "recorded values" in res.stderr
        if as_json:
            assert json.loads(out.read_text())["manifest"]["recorded_by"] == "flux 0.26.0"
        else:
            assert out.read_bytes()[:2] == b"\x1f\x8b"
        other = tmp_path / f"other-{as_json}"
        res = flux("case", "import", str(out), "--fixture-store", str(other))
        assert res.exit_code == 0, res.output
        assert lines(res)[0]["fixture_hash"] == h


def test_saving_twice_is_one_copy_and_list_shows_the_columns(recorded, cases_dir):
    h = save(recorded, cases_dir, "--at", "1")
    res = flux("case", "save", "s_1", "--store", str(recorded), "--fixture-store", str(cases_dir), "--at", "1")
    assert lines(res)[0]["fixture_hash"] == h and lines(res)[0]["stored"] is False
    assert len(list(cases_dir.glob("*.case"))) == 1
    res = flux("case", "list", "--fixture-store", str(cases_dir))
    assert res.exit_code == 0
    assert h in res.stdout and "agent" in res.stdout and "fork@1" in res.stdout and "complete" in res.stdout


def test_fork_after_seq_names_the_same_fork_as_at(recorded, cases_dir):
    h = save(recorded, cases_dir, "--at", "1")
    res = flux("case", "show", h, "--fixture-store", str(cases_dir))
    seq = json.loads(res.stdout)["manifest"]["fork"]["fork_after_seq"]
    assert save(recorded, cases_dir, "--fork-after-seq", str(seq)) == h
    # One row earlier the read is in flight (step_started without its cell): not replayable.
    res = flux("case", "save", "s_1", "--store", str(recorded), "--fixture-store", str(cases_dir),
               "--fork-after-seq", str(seq - 1))
    assert res.exit_code == 2
    assert json.loads(res.stdout)["code"] == "capture_incomplete" and "in flight" in json.loads(res.stdout)["message"]
    assert save(recorded, cases_dir, "--fork-after-seq", str(seq - 2)) != h


def test_show_values_warns_and_show_alone_does_not(recorded, cases_dir):
    h = save(recorded, cases_dir)
    plain = flux("case", "show", h, "--fixture-store", str(cases_dir))
    assert plain.exit_code == 0 and plain.stderr == ""
    full = flux("case", "show", h, "--fixture-store", str(cases_dir), "--values")
    assert full.exit_code == 0 and "warning:" in full.stderr
    assert "history" in json.loads(full.stdout) and "history" not in json.loads(plain.stdout)


def test_delete_then_the_hash_is_missing(recorded, cases_dir):
    h = save(recorded, cases_dir)
    assert flux("case", "delete", h, "--fixture-store", str(cases_dir)).exit_code == 0
    res = flux("case", "show", h, "--fixture-store", str(cases_dir))
    assert res.exit_code == 2 and json.loads(res.stdout)["code"] == "bundle_missing"


def test_gc_lists_then_deletes_only_what_is_not_kept(recorded, cases_dir, tmp_path):
    a, b, c = (save(recorded, cases_dir, "--at", str(n)) for n in (0, 1, 2))
    keep_file = tmp_path / "keep.txt"
    keep_file.write_text(f"# kept by the suite\n{c}\n")
    res = flux("case", "gc", "--keep", a, "--keep-file", str(keep_file), "--fixture-store", str(cases_dir))
    assert res.exit_code == 0
    assert lines(res) == [{"action": "candidate", "fixture_hash": b}]
    assert len(list(cases_dir.glob("*.case"))) == 3  # listing deletes nothing
    res = flux("case", "gc", "--keep", a, "--keep-file", str(keep_file), "--fixture-store", str(cases_dir), "--yes")
    assert lines(res) == [{"action": "deleted", "fixture_hash": b}]
    assert sorted(p.name[:64] for p in cases_dir.glob("*.case")) == sorted([a, c])


def test_gc_with_a_bad_keep_hash_refuses(recorded, cases_dir):
    save(recorded, cases_dir)
    res = flux("case", "gc", "--keep", "abc", "--fixture-store", str(cases_dir), "--yes")
    assert res.exit_code == 2 and json.loads(res.stdout)["code"] == "invalid_keep_hash"
    assert len(list(cases_dir.glob("*.case"))) == 1


def test_no_fixture_store_refuses_every_verb(recorded):
    for args in (["case", "list"], ["case", "save", "s_1", "--store", str(recorded)], ["case", "run", "0" * 64]):
        res = flux(*args)
        assert res.exit_code == 2, args
        assert json.loads(res.stdout)["code"] == "no_fixture_store"


def test_environment_names_the_store_when_the_flag_does_not(recorded, cases_dir, tmp_path):
    h = save(recorded, cases_dir)
    assert h in flux("case", "list", env={"FLUX_FIXTURE_STORE": str(cases_dir)}).stdout
    assert h in flux("case", "list", env={"FLUX_POSTGRES_DSN": str(cases_dir)}).stdout
    other = tmp_path / "other"
    res = flux("case", "list", "--fixture-store", str(other), env={"FLUX_FIXTURE_STORE": str(cases_dir)})
    assert h not in res.stdout  # the flag wins


def test_kind_mismatch_and_capture_incomplete(recorded, cases_dir):
    res = flux("case", "save", "s_1", "--store", str(recorded), "--fixture-store", str(cases_dir), "--kind", "flow")
    assert res.exit_code == 2 and json.loads(res.stdout)["code"] == "kind_mismatch"
    assert flux("case", "save", "s_1", "--store", str(recorded), "--fixture-store", str(cases_dir),
                "--kind", "agent").exit_code == 0
    (recorded / "model.jsonl").unlink()
    res = flux("case", "save", "s_1", "--store", str(recorded), "--fixture-store", str(cases_dir))
    assert res.exit_code == 2
    out = json.loads(res.stdout)
    assert out["code"] == "capture_incomplete" and "model.jsonl" in out["message"]


def test_corrupt_and_truncated_bundles_are_bundle_corrupt(recorded, cases_dir, tmp_path):
    h = save(recorded, cases_dir)
    blob = (cases_dir / f"{h}.case").read_bytes()
    bad = {
        "truncated.case": blob[: len(blob) // 2],
        "flipped.case": blob[:20] + bytes([blob[20] ^ 0xFF]) + blob[21:],
        "garbage.json": b"{\"manifest\": ",
        "not-a-bundle.json": b"[1, 2, 3]",
        "trailing.case": blob + b"junk",
        "surrogate.json": gzip.decompress(blob).replace(b'"write a note', b'"\\ud800 write a note'),
    }
    for name, data in bad.items():
        p = tmp_path / name
        p.write_bytes(data)
        for args in (["case", "import", str(p), "--fixture-store", str(tmp_path / "imp")],
                     ["case", "run", str(p), "--replay-only"]):
            res = flux(*args)
            assert res.exit_code == 2, (name, res.output)
            assert json.loads(res.stdout)["code"] == "bundle_corrupt", name
            assert "Traceback" not in res.output
    assert not list((tmp_path / "imp").glob("*.case")) if (tmp_path / "imp").exists() else True
    # Bytes changed inside the store: the hash no longer matches.
    (cases_dir / f"{h}.case").write_bytes(gzip.compress(gzip.decompress(blob).replace(b"write a note", b"write a NOTE")))
    res = run(cases_dir, h, "--replay-only")
    assert res.exit_code == 2 and json.loads(res.stdout)["code"] == "bundle_corrupt"


def test_format_unsupported(recorded, cases_dir, tmp_path):
    h = save(recorded, cases_dir)
    out = tmp_path / "b.json"
    flux("case", "export", h, "--out", str(out), "--json", "--fixture-store", str(cases_dir))
    obj = json.loads(out.read_text())
    obj["manifest"]["format"] = 2
    out.write_text(json.dumps(obj))
    res = flux("case", "import", str(out), "--fixture-store", str(cases_dir))
    assert res.exit_code == 2 and json.loads(res.stdout)["code"] == "format_unsupported"


def test_invalid_fixture_hash(cases_dir):
    for bad in ("XYZ", "0" * 65):
        res = flux("case", "show", bad, "--fixture-store", str(cases_dir))
        assert res.exit_code == 2 and json.loads(res.stdout)["code"] == "invalid_fixture_hash"


# -- case run ---------------------------------------------------------------------------------------


def test_replay_only_of_an_unchanged_case_is_complete_every_call_reused(recorded, cases_dir):
    for at in ("0", "1", "2"):
        h = save(recorded, cases_dir, "--at", at)
        res = run(cases_dir, h, "--replay-only")
        assert res.exit_code == 0, res.output
        out = lines(res)
        calls, outcome = out[:-1], out[-1]
        assert outcome["status"] == "complete" and outcome["code"] is None
        assert calls and all(c["provenance"] == "reused" for c in calls)
        assert outcome["provenance"]["reused"] == len(calls)
        assert outcome["prefix_calls"] + len(calls) == 5  # 2 op calls + 3 model calls in all
        assert outcome["fixture_hash"] == h and outcome["live_calls"] == 0


def test_a_changed_input_gives_replay_diverged_input_changed(recorded, cases_dir):
    h = save(recorded, cases_dir)
    res = run(cases_dir, h, "--replay-only", "--input", 'input="write something else"')
    assert res.exit_code == 3
    outcome = lines(res)[-1]
    assert (outcome["status"], outcome["code"], outcome["reason"]) == ("stopped", "replay_diverged", "input_changed")
    assert outcome["stop_key"] == "model:1"


def test_input_that_changes_the_prefix_is_invalid_overrides(recorded, cases_dir):
    h = save(recorded, cases_dir, "--at", "1")
    res = run(cases_dir, h, "--replay-only", "--input", 'input="x"')
    assert res.exit_code == 2 and json.loads(res.stdout)["code"] == "invalid_overrides"
    res = run(cases_dir, h, "--replay-only", "--input", 'other="x"')
    assert res.exit_code == 2 and json.loads(res.stdout)["code"] == "invalid_overrides"


@pytest.fixture
def new_prompt(tmp_path) -> Path:
    p = tmp_path / "prompt.txt"
    p.write_text("You are a terse agent.")
    return p


def supply(tmp_path: Path, obj: dict) -> Path:
    p = tmp_path / "supply.json"
    p.write_text(json.dumps(obj))
    return p


APPEND_OTHER = {"role": "assistant", "content": [
    {"type": "tool_use", "id": "call_x", "name": "append", "input": {"path": "note.txt", "content": "other\n"}}]}


def test_a_write_without_a_token_stops_write_not_allowed_naming_it(recorded, cases_dir, tmp_path, new_prompt):
    h = save(recorded, cases_dir, "--at", "1")
    s = supply(tmp_path, {"calls": {"model:2": APPEND_OTHER, "model:3": "Done."}})
    res = run(cases_dir, h, "--prompt-file", str(new_prompt), "--supply", str(s))
    assert res.exit_code == 3, res.output
    outcome = lines(res)[-1]
    assert outcome["code"] == "write_not_allowed" and outcome["stop_token"] == "tool:append"
    assert outcome["stop_key"] == "op:1" and "--allow-write tool:append" in outcome["message"]
    # With the token the write runs live (in a scratch workspace) and replaces the recorded call.
    ws = tmp_path / "ws"
    res = run(cases_dir, h, "--prompt-file", str(new_prompt), "--supply", str(s), "--allow-write", "tool:append",
              "--workspace", str(ws))
    assert res.exit_code == 0, res.output
    out = lines(res)
    assert [(c["key"], c["provenance"]) for c in out[:-1]] == [("model:2", "simulated"), ("op:1", "changed"),
                                                                 ("model:3", "simulated")]
    assert out[-1]["changed_calls"] == ["op:1"] and out[-1]["live_calls"] == 1
    assert (ws / "note.txt").read_text() == "other\n"


def test_a_live_budget_of_zero_stops_live_budget_exceeded(recorded, cases_dir, tmp_path, new_prompt):
    h = save(recorded, cases_dir, "--at", "1")
    s = supply(tmp_path, {"calls": {"model:2": APPEND_OTHER, "model:3": "Done."}})
    res = run(cases_dir, h, "--prompt-file", str(new_prompt), "--supply", str(s), "--allow-write", "tool:append",
              "--live-budget", "0")
    assert res.exit_code == 3
    outcome = lines(res)[-1]
    assert outcome["code"] == "live_budget_exceeded" and outcome["stop_key"] == "op:1"


def test_a_live_model_call_with_no_price_under_a_cost_limit_stops(recorded, cases_dir, new_prompt):
    h = save(recorded, cases_dir, "--at", "1")
    env = {"OPENAI_API_KEY": "sk-test-not-a-key", "OPENAI_BASE_URL": "http://127.0.0.1:9"}
    res = run(cases_dir, h, "--prompt-file", str(new_prompt), "-m", "openai:no-such-model-anywhere",
              "--max-cost-usd", "1", env=env)
    assert res.exit_code == 3, res.output
    outcome = lines(res)[-1]
    assert outcome["code"] == "live_budget_exceeded" and outcome["stop_key"] == "model:2"
    assert "no price" in outcome["message"]


def test_a_model_call_with_no_live_rung_is_missing_context(recorded, cases_dir, new_prompt, tmp_path):
    h = save(recorded, cases_dir, "--at", "1")
    res = run(cases_dir, h, "--prompt-file", str(new_prompt))
    assert res.exit_code == 3
    assert lines(res)[-1]["code"] == "missing_context" and lines(res)[-1]["stop_key"] == "model:2"
    s = supply(tmp_path, {"calls": {"model:2": {"role": "user", "content": "nope"}}})
    res = run(cases_dir, h, "--prompt-file", str(new_prompt), "--supply", str(s))
    assert lines(res)[-1]["code"] == "missing_context" and "supplied answer" in lines(res)[-1]["message"]


def test_live_model_calls_with_another_prompt_are_changed(recorded, cases_dir, tmp_path, new_prompt):
    h = save(recorded, cases_dir, "--at", "1")
    script = tmp_path / "live.json"
    script.write_text(json.dumps([{"text": "Nothing more to do."}]))
    # The same model id and prompt as recorded: the recording answers, nothing goes live.
    same = run(cases_dir, h, "-m", f"scripted:{script}")
    assert same.exit_code == 0 and lines(same)[-1]["live_calls"] == 0
    res = run(cases_dir, h, "-m", f"scripted:{script}", "--prompt-file", str(new_prompt), "--live-budget", "5")
    assert res.exit_code == 3  # the recorded append and model:3 were never made
    out = lines(res)
    assert out[0]["key"] == "model:2" and out[0]["provenance"] == "changed"
    assert out[-1]["status"] == "incomplete" and out[-1]["unconsumed_keys"] == ["op:1", "model:3"]


def test_bad_supply_file_and_bad_flags_are_one_error_line(recorded, cases_dir, tmp_path):
    h = save(recorded, cases_dir)
    p = tmp_path / "s.json"
    for text in ("not json", '{"calls": {"tool:x": 1}}', json.dumps({"calls": {f"op:{i}": "x" for i in range(201)}})):
        p.write_text(text)
        res = run(cases_dir, h, "--supply", str(p))
        assert res.exit_code == 1 and res.stderr.startswith("error: ") and "Traceback" not in res.output
    res = run(cases_dir, h, "--replay-only", "--supply", str(p))
    assert res.exit_code == 1
    res = run(cases_dir, h, "--allow-write", "append")
    assert res.exit_code == 1 and "tool:<op>" in res.stderr


def test_from_start_reruns_the_whole_turn_and_values_prints_the_values(recorded, cases_dir):
    h = save(recorded, cases_dir, "--at", "2")
    after_fork = lines(run(cases_dir, h, "--replay-only"))
    assert [c["key"] for c in after_fork[:-1]] == ["model:3"]
    whole = lines(run(cases_dir, h, "--replay-only", "--from-start", "--values"))
    assert [c["key"] for c in whole[:-1]] == ["model:1", "op:0", "model:2", "op:1", "model:3"]
    assert whole[-1]["status"] == "complete" and whole[-1]["prefix_calls"] == 0
    read = next(c for c in whole if c.get("key") == "op:0")
    assert read["value"] == "# demo\nhi\n"
    assert all("value" not in c for c in after_fork[:-1])
