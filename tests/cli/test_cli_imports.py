"""A fast CLI (issue 10 item 3): each verb imports only what it uses. Checked in fresh interpreters,
by the modules loaded — not by timing."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import click

from flux.cli import _SHORT_HELP, _VERBS, main
from flux.demo import build_demo_store
from tests.helpers import REPO

_LOADED = r"""
import json, sys
from flux.cli import main
try:
    main(sys.argv[1:], prog_name="flux")
except SystemExit:
    pass
mods = sorted(m for m in sys.modules if m.split(".")[0] in ("flux", "deepdiff", "rich", "textual") or m == "hashlib")
dataclass_homes = sorted({m for m in mods if m.startswith("flux") and any(
    hasattr(v, "__dataclass_fields__") and getattr(v, "__module__", None) == m for v in vars(sys.modules[m]).values())})
print("\n" + json.dumps([mods, dataclass_homes]))
"""


def _run(*argv: str) -> list:
    env = dict(os.environ, PYTHONPATH=str(REPO / "core"))
    res = subprocess.run([sys.executable, "-c", _LOADED, *argv], env=env, capture_output=True, text=True, timeout=60)
    return json.loads(res.stdout.strip().splitlines()[-1])


def loaded_by(*argv: str) -> set[str]:
    return set(_run(*argv)[0])


def test_flux_sessions_does_not_load_the_interpreter_even_with_interrupted_turns(tmp_path):
    store = build_demo_store(tmp_path / "demo", now_ms=1_785_193_560_000)  # two interrupted sessions
    mods = loaded_by("sessions", "--store", str(store))
    assert "flux.cli.browse" in mods and "flux.model.listing" in mods  # it did list
    assert "flux.lang.parser" in mods  # the interrupted check parses the open turn's plan …
    assert "flux.lang.interpreter" not in mods  # … but never runs anything
    # plain rows are read as JSON: no event decoder, no session model (their ~90 dataclasses cost
    # more start-up than the whole listing); the decoder is only for rows that need it
    assert not mods & {"flux.store.events", "flux.model.session", "flux.model.ledger"}
    assert not {m for m in mods if m.split(".")[0] in ("deepdiff", "rich", "textual")}
    assert not {m for m in mods if m.startswith(("flux.agent", "flux.timemachine", "flux.cassette"))}


def test_flux_sessions_on_a_closed_store_loads_no_language_at_all(fixture_store):
    mods, dataclass_homes = _run("sessions", "--store", str(fixture_store))
    assert "flux.model.listing" in mods and not {m for m in mods if m.startswith("flux.lang")}
    assert not set(mods) & {"flux.store.events", "flux.model.session"}
    assert "hashlib" not in mods  # nothing is hashed: canonical imports it on the first hash (OpenSSL costs ~2 ms)
    # @dataclass compiles each class's methods at import (~0.6 ms a class): the listing's own value
    # classes are flux.records ones; only the price table's (which the bare-script floor loads too) remain
    assert set(dataclass_homes) <= {"flux.store.usage", "flux.model.pricing"}, dataclass_homes


def test_flux_help_imports_no_verb():
    mods = loaded_by("--help")
    assert not {m for m in mods if m.startswith("flux.cli.") and m != "flux.cli.common"}


def test_the_static_verb_help_is_each_commands_own():
    ctx = click.Context(main)
    assert set(_SHORT_HELP) == set(_VERBS)
    for verb in _VERBS:
        cmd = main.get_command(ctx, verb)
        assert cmd is not None, verb
        assert cmd.get_short_help_str(10_000) == _SHORT_HELP[verb], verb


def test_every_registered_verb_is_reachable_through_the_lazy_group():
    import flux.cli.agent, flux.cli.browse, flux.cli.testkit, flux.cli.timemachine  # noqa: F401,E401  register all

    assert set(main.commands) <= set(_VERBS), "a verb module registers a command flux cannot find lazily"
