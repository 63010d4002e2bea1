"""flux — the engine of flux-tui: the flux store format, read models, Flux-Lang and the time machine.

This package never imports textual; the UI lives in ``flux_tui``.
"""

__version__ = "0.1.0"
