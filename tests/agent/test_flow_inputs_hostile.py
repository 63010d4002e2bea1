"""Hostile input to the authored-flow surface: any --inputs / --arg text against any declared
parameters, any bytes in a saved flow file — a FluxError (one line) or a correct binding, never
another exception; a bound value always fits its declared type."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flux.agent.flows import FlowCatalog, apply_flow_inputs, fits
from flux.errors import FluxError
from flux.lang import ast as A

_types = st.recursive(
    st.sampled_from([A.TypeRef.any(), A.TypeRef.bool(), A.TypeRef.number(), A.TypeRef.string(),
                     A.TypeRef.named("Ticket")]),
    lambda inner: inner.map(A.TypeRef.list_of), max_leaves=3)
_names = st.sampled_from(["version", "count", "flag", "items", "x"])
_json = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
                     lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=4), c, max_size=3),
                     max_leaves=6)
_arg = st.one_of(
    st.builds(lambda k, v: f"{k}={v}", _names, st.text(max_size=10)),
    st.builds(lambda k, v: f"{k}={json.dumps(v)}", _names, _json),
    st.text(max_size=12),
)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(_names, _types, max_size=4), st.one_of(st.none(), st.text(max_size=20),
                                                              _json.map(json.dumps)), st.lists(_arg, max_size=5))
def test_apply_flow_inputs_binds_or_refuses_in_one_line(params, inputs, args) -> None:
    draft = A.DraftAst(name="f", params=tuple(A.Param(n, t) for n, t in params.items()), body=())
    try:
        out = apply_flow_inputs(draft, inputs, args)
    except FluxError as e:
        assert "\n" not in str(e) and str(e)
        return
    assert len(out.body) == len(params)
    for node, p in zip(out.body, draft.params):
        assert isinstance(node, A.Bind) and node.name == p.name and node.ty == p.ty
        raw = node.value.value
        assert fits(_unescape(raw), p.ty)


def _unescape(v):
    if isinstance(v, str):
        return v.replace("{{", "{").replace("}}", "}")
    if isinstance(v, list):
        return [_unescape(x) for x in v]
    if isinstance(v, dict):
        return {k: _unescape(x) for k, x in v.items()}
    return v


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.binary(max_size=60) | st.text(max_size=60).map(str.encode), min_size=1, max_size=3))
def test_the_catalog_lists_any_files_without_raising(tmp_path_factory, blobs) -> None:
    root = tmp_path_factory.mktemp("cat")
    flows = root / ".flux" / "flows"
    flows.mkdir(parents=True)
    for i, b in enumerate(blobs):
        (flows / f"f{i}.flux").write_bytes(b)
    cat = FlowCatalog.load(cwd=root, home=root / "nohome")
    text = cat.render()
    assert text.count("\n") + 1 >= 1
    names = [e.name for e in cat.entries]
    assert len(names) == len(set(names))  # the first declaration of a name wins
    for e in cat.entries:
        if e.kind == "error":
            assert e.description.startswith("parse error: ")
        try:
            cat.resolve(e.name)
        except FluxError as err:
            assert "\n" not in str(err).strip() or e.kind == "error"


def test_a_catalog_directory_that_is_a_file_is_skipped(tmp_path: Path) -> None:
    (tmp_path / ".flux").mkdir()
    (tmp_path / ".flux" / "flows").write_text("not a directory")
    assert FlowCatalog.load(cwd=tmp_path, home=tmp_path / "h").render().startswith("no flows found")
