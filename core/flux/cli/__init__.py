"""``flux`` — the scriptable twin of the app: one click group, verbs in submodules."""

from __future__ import annotations

import click

from .. import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="flux")
def main() -> None:
    """A deterministic agent lab over flux store directories.

    Browse recorded sessions, replay them offline, diff two runs. The store is
    --store DIR, else $FLUX_STORE_DIR, else ~/.flux.
    """


from . import browse, timemachine  # noqa: E402,F401  (registers the verbs)
