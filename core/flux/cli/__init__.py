"""``flux`` — the scriptable twin of the app: one click group, verbs in submodules.

Verb modules load on demand, so ``flux sessions`` does not import the interpreter, deepdiff or the
agent runtime, and ``flux --help`` imports no verb (it prints :data:`_SHORT_HELP`, which
``tests/cli/test_cli_imports.py`` keeps equal to each command's own help).
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path

import click

from .. import __version__
from .common import STORE_ENV, OneLineErrors, StoreLocation

# verb -> module that registers it on `main`
_VERBS = {
    "sessions": "browse", "show": "browse", "demo": "browse",
    "replay": "timemachine", "diff": "timemachine", "fork": "timemachine", "resurrect": "timemachine",
    "what-if": "timemachine", "sweep": "timemachine", "policy": "policy",
    "run": "agent", "flow": "agent",
    "record": "testkit", "test": "testkit", "export": "testkit", "golden": "testkit",
    "case": "cases", "db": "cases",
    "import": "importing", "proxy": "proxy",
    "store": "storeverbs",
    "fmt": "fmt",
}

# verb -> its help's first sentence, for `flux --help` without importing the verb
_SHORT_HELP = {
    "case": "Saved cases: a recorded turn frozen at a fork point, kept in a fixture store, re-run with a ladder.",
    "db": "The PostgreSQL fixture store's tables.",
    "demo": "Create a realistic demo store in --store DIR (several sessions, errors, an interrupted turn, a fork).",
    "diff": "Align two recorded runs statement by statement (A, B: s_<n> or last).",
    "export": "Export SESSION (s_<n>, last, or a scenario directory) as an ATIF trajectory or an HTML page.",
    "flow": "Authored Flux-Lang flows.",
    "fmt": "Format Flux-Lang FILEs: canonical spellings, every comment and the order of named arguments kept.",
    "fork": "Branch SESSION at statement --at into a new linked session: the prefix from tape (no model call, no side "
            "effect), then the tail diverges — inject a value, run an edited plan, or re-plan.",
    "import": "Import another agent's log (ATIF, Claude Code, Codex, deepseek) — FILE, or every log under DIR — as "
              "sessions.",
    "golden": "Golden trajectories: compare a session's normalised ATIF trajectory with a committed file.",
    "policy": "Permission policies: simulate a proposed policy over the store's recorded history.",
    "proxy": "Record any agent's model calls through an OpenAI- and Anthropic-compatible proxy (or replay them).",
    "record": "Record one live turn for PROMPT as the scenario NAME, written to --dir/NAME (commit it).",
    "replay": "Re-execute a recorded session offline (SESSION: s_<n> or last).",
    "resurrect": "Finish SESSION's interrupted turn from the crash point, with no model call: completed statements "
                 "fast-forward, recorded cells are served from tape, an op that has no cell runs again (after the "
                 "side-effect gate).",
    "run": "Run one agent turn for PROMPT and record it in the store.",
    "sessions": "List sessions, newest first, with interrupted turns flagged.",
    "show": "Show a session: turns, accepted plans, cassette cells, usage, cost, lineage.",
    "store": "Verbs on a store as a whole: copy sessions between a directory and a shared postgres:// store.",
    "sweep": "Run one what-if over many sessions, concurrently; one row per session (a session that fails is an "
             "error row, the sweep goes on).",
    "what-if": "Re-run SESSION with one thing changed, into a new linked session, and diff it against the source.",
    "test": "Replay and check every scenario under --dir (default: tests/scenarios, else .), or the scenarios NAME — "
            "offline.",
}


class _LazyGroup(OneLineErrors, click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(self.commands) | set(_VERBS))

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """Like click's, but a verb not loaded yet shows its :data:`_SHORT_HELP` instead of being imported."""
        names = self.list_commands(ctx)
        if not names:
            return
        limit = formatter.width - 6 - max(len(n) for n in names)
        rows = []
        for name in names:
            cmd = self.commands.get(name)
            if cmd is None and _SHORT_HELP.get(name) is not None:
                rows.append((name, click.Command(name, help=_SHORT_HELP[name]).get_short_help_str(limit)))
                continue
            cmd = cmd or self.get_command(ctx, name)
            if cmd is not None and not cmd.hidden:
                rows.append((name, cmd.get_short_help_str(limit)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in self.commands and name in _VERBS:
            importlib.import_module(f".{_VERBS[name]}", __name__)
        return self.commands.get(name)


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="flux")
@click.option("--store", "store", type=StoreLocation(), default=None,
              help="Store directory or postgres:// URL for every verb (a verb's own --store wins).")
@click.pass_context
def main(ctx: click.Context, store: Path | None) -> None:
    """A deterministic agent lab over flux store directories.

    Browse recorded sessions, replay them offline, diff two runs (these only read the store);
    record runs, fork, what-if and resurrect (these write a new session, or finish an interrupted
    turn, and never change a recorded one). The store is --store DIR (before or after the verb),
    else $FLUX_STORE_DIR, else ~/.flux. Every verb takes --json (flux case prints JSON lines). Shell completion:
    eval "$(_FLUX_COMPLETE=bash_source flux)" (zsh_source, fish_source; see docs/cli.md).
    """
    if store is not None:
        # Every verb reads its store from its own --store, falling back to $FLUX_STORE_DIR: the global
        # flag stands in for that variable for this invocation (a --store after the verb still wins).
        saved = os.environ.get(STORE_ENV)
        os.environ[STORE_ENV] = str(store)
        ctx.call_on_close(lambda: _restore_env(STORE_ENV, saved))


def _restore_env(key: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(key, None)
    else:
        os.environ[key] = value
