"""Hostile logs, fuzzed: realistic logs of each format with a line cut short, a field of the wrong
type, a huge or deeply nested value, a lone surrogate, a line dropped. Each either imports or is
one `error:` line — never a traceback — and a failed import writes nothing."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flux.cli import main
from flux.importers import ImportFormatError, parse_file
from tests.importers.foreign_logs import atif_doc, claude_code_session, codex_rollout, deepseek_session

FORMATS = ("atif", "claude-code", "codex", "deepseek")

HOSTILE_VALUES = [
    None, 0, -1, 1.5, True, "", "x" * 200_000, "\ud800 lone", [], [[[[]]]], {}, {"type": 7},
    "not json {", 10 ** 30, ["\udfff"],
]


def _nested(depth: int):
    v: object = "deep"
    for _ in range(depth):
        v = [v]
    return v


def _paths(v, prefix=()):
    """Every (path) to a value inside a JSON value."""
    out = [prefix]
    if isinstance(v, dict):
        for k, x in v.items():
            out += _paths(x, prefix + (k,))
    elif isinstance(v, list):
        for i, x in enumerate(v):
            out += _paths(x, prefix + (i,))
    return out


def _set(v, path, new):
    if not path:
        return new
    v[path[0]] = _set(v[path[0]], path[1:], new)
    return v


def _log(fmt: str, root: Path) -> Path:
    if fmt == "atif":
        p = root / "run.json"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps(atif_doc()), encoding="utf-8")
        return p
    return {"claude-code": claude_code_session, "codex": codex_rollout, "deepseek": deepseek_session}[fmt](root)


def _mutate(text: str, fmt: str, rnd: random.Random, how: str) -> str:
    if fmt == "atif":
        units = [text]
    else:
        units = text.splitlines()
    i = rnd.randrange(len(units))
    if how == "truncate":
        units[i] = units[i][: rnd.randrange(max(1, len(units[i])))]
    elif how == "drop":
        del units[i]
    elif how == "surrogate":
        units[i] = units[i].replace('"', '"\\ud83d', 1) if rnd.random() < 0.5 else units[i].replace(
            '": "', '": "\\udc00', 1)
    else:
        obj = json.loads(units[i])
        paths = _paths(obj)[1:]
        if paths:
            path = paths[rnd.randrange(len(paths))]
            new = _nested(rnd.choice([70, 300, 800])) if how == "nest" else rnd.choice(HOSTILE_VALUES)
            obj = _set(obj, path, new)
        units[i] = json.dumps(obj)
    return "\n".join(units) + ("\n" if fmt != "atif" else "")


MUTATIONS = st.sampled_from(["truncate", "drop", "surrogate", "retype", "retype", "nest"])


@pytest.mark.parametrize("fmt", FORMATS)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(how=MUTATIONS, seed=st.integers(0, 2 ** 32 - 1))
def test_parsing_a_hostile_log_is_a_run_or_one_error_line(tmp_path, fmt, how, seed):
    log = _log(fmt, tmp_path / f"{fmt}-{how}-{seed}")
    log.write_text(_mutate(log.read_text(encoding="utf-8"), fmt, random.Random(seed), how), encoding="utf-8",
                   errors="surrogatepass")
    try:
        run, src = parse_file(log, fmt)
    except ImportFormatError as e:
        msg = str(e)
        assert msg and "\n" not in msg and "Traceback" not in msg
        return
    assert run.turns  # what parses is a run with turns
    json.dumps(src.text, ensure_ascii=False).encode("utf-8")  # the kept source is valid UTF-8 text


def flux(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


@pytest.mark.parametrize("fmt", FORMATS)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(how=MUTATIONS, seed=st.integers(0, 2 ** 32 - 1))
def test_importing_a_hostile_log_imports_whole_or_writes_nothing(tmp_path, fmt, how, seed):
    base = tmp_path / f"{fmt}-{how}-{seed}"
    store = base / "store"
    base.mkdir(parents=True, exist_ok=True)
    good = base / "good.json"
    good.write_text(json.dumps(atif_doc(with_subagent=False)), encoding="utf-8")
    assert flux("import", good, "--store", store).exit_code == 0
    log = _log(fmt, base / "log")
    log.write_text(_mutate(log.read_text(encoding="utf-8"), fmt, random.Random(seed), how), encoding="utf-8",
                   errors="surrogatepass")
    before = _sessions(store)
    res = flux("import", log, "--store", store, "--format", fmt)
    if res.exit_code == 0:
        assert "imported as" in res.output
        return
    assert res.exit_code == 1
    assert res.output.count("\n") == 1 and res.output.startswith("error: "), res.output
    assert _sessions(store) == before  # no session of the failed import is left (a parse failure writes no byte:
    #                                    test_import_formats checks the digest)


def _sessions(store: Path) -> list[tuple[str, int]]:
    from flux.store.store import StoreReader

    with StoreReader(store) as r:
        return [(s.id, r.count_events(s.id)) for s in r.list_sessions()]
