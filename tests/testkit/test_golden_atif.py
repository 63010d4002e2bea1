"""Golden trajectories: sub-agents embedded and content-sorted, the Shape's ``subagents``, a
``--token-tolerance`` that works (the content hash no longer covers the tokens), ``--no-content``,
and a golden in another JSON formatting diffed on its content, not its layout."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from flux.cli import main
from flux.model.session import load_session
from flux.store.store import StoreReader, StoreWriter
from flux.testkit import atif

from tests.helpers import write_turn

pytest.importorskip("atif")


def run(*args, **kw):
    return CliRunner().invoke(main, [str(a) for a in args], **kw)


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("golden") / "demo"
    assert run("demo", "--store", d).exit_code == 0
    return d


def _golden(demo: Path, tmp_path: Path, session: str = "s_1") -> tuple[Path, dict]:
    g = tmp_path / f"{session}.golden.json"
    assert run("golden", "update", session, g, "--store", demo).exit_code == 0
    return g, json.loads(g.read_text())


def test_export_embeds_the_sub_agent_and_the_shape_counts_it(demo, tmp_path):
    """Reproduction: the export dropped sub-agent trajectories and the Shape had no subagents."""
    g, norm = _golden(demo, tmp_path)
    subs = norm["subagent_trajectories"]
    assert [s["agent"]["name"] for s in subs] == ["explorer"] and subs[0]["trajectory_id"] == "subagent_1"
    assert subs[0]["session_id"] == "<session_id>" and subs[0]["steps"]
    assert atif.shape(norm).subagents == ("explorer",)
    # the sub-agent disappearing is a named behaviour change
    del norm["subagent_trajectories"]
    g.write_text(atif.dumps(norm))
    res = run("golden", "check", "s_1", g, "--store", demo)
    assert res.exit_code == 1 and "subagents: () -> ('explorer',)" in res.output


def _fanout(root: Path, order: list[str]) -> tuple[Path, str]:
    store = root / "-".join(order)
    w = StoreWriter(store)
    try:
        parent = w.create_session("mock")
        write_turn(w, parent, "fan out")
        for role in order:
            child = w.create_session("mock", context={"correlation_id": parent, "agent_id": f"subagent:{role}"})
            write_turn(w, child, f"classify {role}")
    finally:
        w.close()
    return store, parent


def _norm(store: Path, sid: str, **kw) -> dict:
    with StoreReader(store) as r:
        return atif.normalize(atif.export(load_session(r, sid), r), **kw)


def test_sub_agents_are_sorted_by_content_unless_asked_not_to(tmp_path):
    a_store, a = _fanout(tmp_path, ["alpha", "beta", "gamma"])
    b_store, b = _fanout(tmp_path, ["gamma", "alpha", "beta"])
    assert atif.dumps(_norm(a_store, a)) == atif.dumps(_norm(b_store, b))  # arrival order does not leak
    assert atif.shape(_norm(a_store, a)).subagents == ("alpha", "beta", "gamma")
    unsorted_a = _norm(a_store, a, sort_subagents=False)
    unsorted_b = _norm(b_store, b, sort_subagents=False)
    assert [s["agent"]["name"] for s in unsorted_b["subagent_trajectories"]] == ["gamma", "alpha", "beta"]
    assert atif.dumps(unsorted_a) != atif.dumps(unsorted_b)
    # the CLI switch: a golden of one order checks against the other order only when sorted
    g = tmp_path / "fan.golden.json"
    assert run("golden", "update", a, g, "--store", a_store).exit_code == 0
    assert run("golden", "check", b, g, "--store", b_store).exit_code == 0
    g2 = tmp_path / "fan-ordered.golden.json"
    assert run("golden", "update", a, g2, "--store", a_store, "--keep-subagent-order").exit_code == 0
    res = run("golden", "check", b, g2, "--store", b_store, "--keep-subagent-order")
    assert res.exit_code == 1 and "content_hash" in res.output


def _bump_tokens(norm: dict, factor: float) -> dict:
    out = json.loads(json.dumps(norm))
    fm = out["final_metrics"]
    fm["total_prompt_tokens"] = int(fm["total_prompt_tokens"] * factor)
    for s in out["steps"]:
        if "metrics" in s:
            s["metrics"]["prompt_tokens"] = int(s["metrics"]["prompt_tokens"] * factor)
    return out


def test_token_tolerance_works_because_the_hash_leaves_tokens_out(demo, tmp_path):
    """Reproduction: ``--token-tolerance`` had no effect — the content hash covered the tokens, so
    any token change failed on content_hash whatever the band."""
    g, norm = _golden(demo, tmp_path)
    g.write_text(atif.dumps(_bump_tokens(norm, 1.10)))
    res = run("golden", "check", "s_1", g, "--store", demo)
    assert res.exit_code == 1 and "prompt_tokens:" in res.output and "content_hash" not in res.output.splitlines()[0]
    assert run("golden", "check", "s_1", g, "--store", demo, "--token-tolerance", "0.15").exit_code == 0
    res = run("golden", "check", "s_1", g, "--store", demo, "--token-tolerance", "0.05")
    assert res.exit_code == 1 and "prompt_tokens:" in res.output
    assert run("golden", "check", "s_1", g, "--store", demo, "--token-tolerance", "-1").exit_code == 1


def test_no_content_compares_the_shape_only(demo, tmp_path):
    g, norm = _golden(demo, tmp_path)
    changed = json.loads(json.dumps(norm))
    step = next(s for s in changed["steps"] if s["source"] == "agent" and s.get("message"))
    step["message"] = step["message"] + " (reworded)"
    g.write_text(atif.dumps(changed))
    res = run("golden", "check", "s_1", g, "--store", demo)
    assert res.exit_code == 1 and "content_hash:" in res.output
    assert run("golden", "check", "s_1", g, "--store", demo, "--no-content").exit_code == 0
    # a structural change still fails with --no-content
    call = next(tc for s in changed["steps"] for tc in s.get("tool_calls") or [])
    call["function_name"] = "something_else"
    g.write_text(atif.dumps(changed))
    res = run("golden", "check", "s_1", g, "--store", demo, "--no-content")
    assert res.exit_code == 1 and "functions:" in res.output


def test_a_compact_golden_is_diffed_on_content_not_formatting(demo, tmp_path):
    """Reproduction: a golden with other formatting (compact JSON) printed the whole file as the
    diff. Now an equal compact golden matches, and one changed message shows as that line."""
    g, norm = _golden(demo, tmp_path)
    g.write_text(json.dumps(norm, separators=(",", ":")))
    res = run("golden", "check", "s_1", g, "--store", demo)
    assert res.exit_code == 0, res.output
    changed = json.loads(json.dumps(norm))
    changed["steps"][0]["message"] = "a different question"
    g.write_text(json.dumps(changed, separators=(",", ":")))
    res = run("golden", "check", "s_1", g, "--store", demo)
    assert res.exit_code == 1
    removed = [ln for ln in res.output.splitlines() if ln.startswith("-") and not ln.startswith("---")]
    added = [ln for ln in res.output.splitlines() if ln.startswith("+") and not ln.startswith("+++")]
    assert removed == ['-      "message": "a different question",'] and len(added) == 1
    # update rewrites it in the one pretty form only when the content changed
    g.write_text(json.dumps(norm, separators=(",", ":")))
    res = run("golden", "update", "s_1", g, "--store", demo)
    assert res.exit_code == 0 and "is up to date" in res.output


def test_hash_ignores_tokens_but_not_text():
    base = {"schema_version": "ATIF-v1.8", "steps": [{"source": "agent", "message": "hi",
                                                        "metrics": {"prompt_tokens": 10, "completion_tokens": 2}}],
            "final_metrics": {"total_prompt_tokens": 10, "total_completion_tokens": 2}}
    more = json.loads(json.dumps(base))
    more["steps"][0]["metrics"]["prompt_tokens"] = 99
    more["final_metrics"]["total_prompt_tokens"] = 99
    other = json.loads(json.dumps(base))
    other["steps"][0]["message"] = "ho"
    assert atif.shape(base).content_hash == atif.shape(more).content_hash
    assert atif.shape(base).content_hash != atif.shape(other).content_hash
    assert atif.shape_deltas(atif.shape(base), atif.shape(more), token_tolerance=0.0) == ["prompt_tokens: 10 -> 99"]


from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from flux.errors import FluxError  # noqa: E402

_json = st.recursive(st.none() | st.booleans() | st.integers(-3, 3) | st.floats(allow_nan=False) | st.text(max_size=5),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
                         st.sampled_from(["steps", "source", "tool_calls", "function_name", "metrics", "prompt_tokens",
                                          "final_metrics", "total_prompt_tokens", "subagent_trajectories", "agent",
                                          "name", "extra", "crashed", "llm_call_count", "schema_version", "x"]),
                         inner, max_size=4), max_leaves=12)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(doc=_json)
def test_a_hostile_golden_file_is_a_failure_text_never_a_crash(tmp_path, doc):
    """Whatever JSON a golden file holds, the check returns a verdict (a failure text) or one
    FluxError line — never a traceback from the shape code."""
    actual = {"schema_version": "ATIF-v1.8", "steps": [{"source": "user", "message": "hi"}]}
    g = tmp_path / "g.golden.json"
    if isinstance(doc, dict):
        doc = {"schema_version": "ATIF-v1.8", **doc}
    g.write_text(json.dumps(doc))
    try:
        problem, _rb = atif.check_golden(g, actual)
    except FluxError as e:
        assert "\n" not in str(e)
        return
    if doc != actual:
        assert problem is None or isinstance(problem, str)
    normalized = atif.normalize(doc) if isinstance(doc, dict) else None
    if normalized is not None:
        atif.shape(normalized)
