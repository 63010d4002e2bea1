"""``python -m flux_tui``: the same as the ``flux-tui`` command (the served app runs this way)."""

from .app import main

main()
