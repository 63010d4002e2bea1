"""How the app writes: the store is opened for writing only for the one action the user confirmed,
through a client built for it and closed right after; offline actions run with every live dispatch
denied, live ones only with what the side-effect gate showed."""

from __future__ import annotations

from pathlib import Path

from flux.errors import FluxError

from .fmt import display_path

__all__ = ["check_writable", "write_client", "run_write", "within_gate", "op_catalog", "default_workspace", "refuse_unimplemented",
           "store_ops", "check_model"]


def default_workspace(store_dir=None) -> str:
    """Where live ops act unless the user says otherwise: the workspace the store's toolbox.json
    names (the demo's project), else the directory flux-tui was started in — as the dialogs show
    it (``~/…`` under the home directory; :func:`_workspace_dir` expands it back)."""
    if store_dir is not None:
        from flux.agent.toolboxes import store_toolbox

        try:
            ws = store_toolbox(store_dir).workspace
        except FluxError:
            ws = None  # said when the action plans (op_catalog reads it again)
        if ws is not None:
            return display_path(ws)
    return display_path(Path.cwd())


def _workspace_dir(workspace: str) -> Path:
    ws = Path(workspace).expanduser()
    if not ws.is_dir():
        raise FluxError(f"workspace {ws} is not a directory — type an existing directory")
    return ws.resolve()


def store_ops(store_dir, workspace: str) -> list:
    """The live ops a write on ``store_dir`` runs with: the toolbox the store was recorded with
    (``toolbox.json``; default: the built-in coding ops), bound to ``workspace``."""
    from flux.agent.toolboxes import StoreToolbox, store_toolbox

    tb = store_toolbox(store_dir) if store_dir is not None else StoreToolbox()
    return tb.ops(_workspace_dir(workspace))


def op_catalog(workspace: str, store_dir=None):
    """The op signatures a write would run with, for the preview and for static analysis —
    without opening anything for writing."""
    from flux.agent.ops import Toolbox

    return Toolbox.of(store_ops(store_dir, workspace)).catalog()


def refuse_unimplemented(preview, catalog) -> None:
    """Raise (one line) when the live part may dispatch an op this toolbox has no implementation
    of: refused before the gate, never run to a halt halfway."""
    refusal = preview.refusal(catalog)
    if refusal is not None:
        raise FluxError(refusal)


def check_model(name: str) -> None:
    """Raise (one line) when the model a re-plan would call cannot be used — an unknown provider, a
    missing key — the same check ``flux fork/what-if -m`` makes, before the gate and any write."""
    from flux.agent.registry import resolve_model

    resolve_model(name)


def write_client(store_dir, *, workspace: str, live: bool, model: str | None = None):
    """A client on ``store_dir`` (opens it for writing). Close it when the action ends."""
    from flux.agent import Client
    from flux.agent.approver import AutoApprove, DenyAll

    ops = store_ops(store_dir, workspace)
    approver = AutoApprove() if live else DenyAll()
    return Client(model or "mock", workspace=_workspace_dir(workspace), store=store_dir, approver=approver,
                  ops=ops)


def check_writable(app) -> None:
    """Raise (one line) when this app may not write: started ``--read-only``, or served to a browser
    without ``--allow-write``. Every write the app makes passes here before it opens anything."""
    if getattr(app, "read_only", None):
        raise FluxError(f"read-only: {app.read_only}")


def within_gate(confirmed, live: bool):
    """The engine's ``confirm=`` callback for a write the user saw at the gate: offline never goes
    live; live goes only as far as the confirmed preview covers."""
    return lambda now: live and confirmed.covers(now)


def run_write(app, action, *, workspace: str, live: bool, model: str | None = None):
    """Open the store for writing, run ``action(client)``, close it, and refresh the app's reader so
    the screens see what was written. Errors (``StoreError``/``FluxError``) propagate to the caller."""
    from flux.errors import StoreError

    check_writable(app)
    client = write_client(app.store_dir, workspace=workspace, live=live, model=model)
    try:
        result = action(client)
    finally:
        client.close()
    reader = app.reader
    if reader is not None:
        try:
            reader.refresh()
        except StoreError:
            pass
    return result
