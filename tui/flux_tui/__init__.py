"""flux-tui: the Textual app that browses a flux store (sessions, turns, plans, cassette cells).
The app is :class:`flux_tui.app.FluxApp`; the ``flux-tui`` command is :func:`flux_tui.app.main`."""
