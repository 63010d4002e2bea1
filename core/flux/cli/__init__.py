"""``flux`` — the scriptable twin of the app: one click group, verbs in submodules.

Verb modules load on demand, so ``flux sessions`` does not import the interpreter, deepdiff or the
agent runtime.
"""

from __future__ import annotations

import importlib

import click

from .. import __version__
from .common import OneLineErrors

# verb -> module that registers it on `main`
_VERBS = {
    "sessions": "browse", "show": "browse", "demo": "browse",
    "replay": "timemachine", "diff": "timemachine", "fork": "timemachine", "resurrect": "timemachine",
    "what-if": "timemachine", "sweep": "timemachine",
    "run": "agent", "flow": "agent",
    "record": "testkit", "test": "testkit", "export": "testkit", "golden": "testkit",
}


class _LazyGroup(OneLineErrors, click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(self.commands) | set(_VERBS))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in self.commands and name in _VERBS:
            importlib.import_module(f".{_VERBS[name]}", __name__)
        return self.commands.get(name)


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="flux")
def main() -> None:
    """A deterministic agent lab over flux store directories.

    Browse recorded sessions, replay them offline, diff two runs. The store is
    --store DIR, else $FLUX_STORE_DIR, else ~/.flux.
    """
