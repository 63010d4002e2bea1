"""The foundation's small shared helpers: lazy package exports and an optional extra's import."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from flux.errors import FluxError, StoreError, import_extra
from flux.lazy import lazy_exports
from tests.helpers import REPO


def test_lazy_exports_serves_a_name_from_its_submodule_and_refuses_an_unknown_one():
    getattr_ = lazy_exports("flux", {"canonical_json": ".canonical"})
    from flux.canonical import canonical_json

    assert getattr_("canonical_json") is canonical_json
    with pytest.raises(AttributeError, match=r"module 'flux' has no attribute 'nope'"):
        getattr_("nope")


def test_a_package_import_loads_no_submodule_until_a_name_is_asked_for():
    code = ("import json, sys, flux.agent, flux.testkit\n"
            "before = sorted(m for m in ('flux.agent.client', 'flux.testkit.scenario') if m in sys.modules)\n"
            "flux.agent.Client, flux.testkit.Scenario\n"
            "after = sorted(m for m in ('flux.agent.client', 'flux.testkit.scenario') if m in sys.modules)\n"
            "print(json.dumps([before, after]))")
    res = subprocess.run([sys.executable, "-c", code], env={"PYTHONPATH": str(REPO / "core")}, capture_output=True,
                         text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    before, after = json.loads(res.stdout)
    assert before == [] and after == ["flux.agent.client", "flux.testkit.scenario"]


def test_an_unknown_package_name_is_an_attribute_error_as_python_says_it():
    import flux.agent

    with pytest.raises(AttributeError, match=r"module 'flux.agent' has no attribute 'Clinet'"):
        flux.agent.Clinet  # noqa: B018


def test_import_extra_returns_the_module_when_it_is_installed():
    assert import_extra("json", "unused") is json


def test_import_extra_is_one_line_naming_the_extra_when_the_package_is_missing(monkeypatch):
    monkeypatch.setitem(sys.modules, "flux_no_such_extra", None)  # what an absent package looks like to import
    with pytest.raises(FluxError) as ei:
        import_extra("flux_no_such_extra", "this needs it — pip install 'flux-tui[x]'")
    assert str(ei.value) == "this needs it — pip install 'flux-tui[x]'" and ei.value.__cause__ is None
    with pytest.raises(StoreError):
        import_extra("flux_no_such_extra", "a store needs it", StoreError)


def test_import_extra_on_a_package_that_fails_inside_its_own_import_is_the_same_one_line(monkeypatch):
    class _Finder:
        def find_spec(self, name, path=None, target=None):
            if name == "flux_broken_extra":
                raise ImportError("libfoo.so: cannot open shared object file")
            return None

    monkeypatch.setattr(sys, "meta_path", [_Finder(), *sys.meta_path])
    monkeypatch.delitem(sys.modules, "flux_broken_extra", raising=False)
    with pytest.raises(FluxError, match=r"^needs libfoo$"):
        import_extra("flux_broken_extra", "needs libfoo")
