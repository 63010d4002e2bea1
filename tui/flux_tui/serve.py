"""``flux-tui --serve``: the time machine in a web browser, through textual-serve.

Each browser that opens the page gets its own ``flux-tui`` process on the server's machine (the same
store, the same arguments), drawn in the page by xterm.js. The page is our own template: everything
it loads comes from this server, nothing from the network. Served apps are read-only unless the
server was started with ``--allow-write``.
"""

from __future__ import annotations

import ipaddress
import os
import shlex
import sys
from pathlib import Path

import click

from flux.errors import FluxError

__all__ = ["serve_app", "is_loopback"]

PAGE_DIR = Path(__file__).parent / "serve_page"
SERVED_ENV = "FLUX_TUI_SERVED"


def is_loopback(host: str) -> bool:
    """True when only this machine can reach ``host`` (127.0.0.0/8, ::1, ``localhost``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_store(store: Path | None) -> None:
    """Open the store to read once, so a missing or unreadable store is one error line at start."""
    from flux.store.store import StoreReader, default_store_dir

    StoreReader(Path(store).expanduser() if store is not None else default_store_dir()).close()


def check_address(host: str, port: int) -> None:
    """Raise (one line) when HOST:PORT cannot be listened on (taken, or not this machine's)."""
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        with socket.socket(infos[0][0], socket.SOCK_STREAM) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(infos[0][4])
    except OSError as e:
        raise FluxError(f"cannot listen on {host}:{port}: {e.strerror or e} — pick another --port or --host") from None


def serve_app(app_args: list[str], *, store: Path | None, host: str, port: int, writes: bool) -> None:
    """Serve ``flux-tui APP_ARGS`` on http://HOST:PORT until Ctrl+C. Raises :class:`FluxError`
    (one line) when the ``serve`` extra is missing, the store cannot be opened (said once here,
    not to every browser) or the address cannot be listened on."""
    try:
        from textual_serve.server import Server
    except ImportError:
        raise FluxError("flux-tui --serve needs the serve extra: pip install 'flux-tui[serve]'") from None
    check_store(store)
    check_address(host, port)

    command = shlex.join([sys.executable, "-m", "flux_tui", *app_args])
    mode = "read-write" if writes else "read-only"
    where = ("loopback only — this machine alone can open it; --host 0.0.0.0 to share"
             if is_loopback(host) else f"on {host} — anyone who can reach this address can browse the store")

    class FluxServer(Server):
        def initialize_logging(self) -> None:
            """Quiet: one line per browser session is textual-serve's INFO noise; keep warnings."""
            import logging

            logging.basicConfig(level=logging.WARNING, format="flux-tui --serve: %(message)s")

        async def on_startup(self, app) -> None:
            click.echo(f"flux-tui: serving the time machine ({mode}) at http://{host}:{port}/ — {where}. "
                       "Ctrl+C stops it.", err=True)

    # Every browser's app process inherits this: it says "served" rather than "--read-only".
    os.environ[SERVED_ENV] = "1"
    server = FluxServer(command, host=host, port=port, title="flux-tui", templates_path=PAGE_DIR)
    server.serve()
