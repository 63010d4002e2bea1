"""flux-tui: the Textual app that browses a flux store (sessions, turns, plans, cassette cells)."""

__all__ = ["FluxApp", "main"]


def __getattr__(name: str):
    if name in ("FluxApp", "main"):
        from . import app

        return getattr(app, name)
    raise AttributeError(name)
