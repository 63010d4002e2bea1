"""``flux proxy``: record (or replay) any agent's model calls through an OpenAI- and Anthropic-compatible proxy."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import click

from ..canonical import canonical_json
from . import main
from .common import fail, handle_errors, redacted_error, resolve_store_dir, store_option


@main.command("proxy")
@store_option
@click.option("--upstream", default=None, metavar="URL", help="Record: forward every model call to this API (e.g. https://api.openai.com).")
@click.option("--replay", "replay", default=None, metavar="SESSION",
              help="Replay: serve SESSION's recorded answers, strictly in order; the upstream is never contacted.")
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True, help="Port (0: any free one).")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on (loopback unless you say).")
@click.option("--json", "as_json", is_flag=True,
              help="Machine-readable: one JSON line when listening (its address, for --port 0), one when stopped.")
@handle_errors
def proxy_cmd(store: Optional[Path], upstream: Optional[str], replay: Optional[str], port: int, host: str,
              as_json: bool) -> None:
    """Record any agent's model calls through an OpenAI- and Anthropic-compatible proxy (or replay them).

    Point the agent at it — OPENAI_BASE_URL=http://127.0.0.1:PORT/v1, ANTHROPIC_BASE_URL=http://127.0.0.1:PORT —
    and stop the proxy with Ctrl-C: the conversation is a session of --store, turn by turn (docs/import.md).
    """
    import signal
    import threading

    from ..importers.proxy import ProxyServer

    store_dir = resolve_store_dir(store)
    try:
        server = ProxyServer(str(store_dir), upstream=upstream, replay=replay, host=host, port=port,
                             log=lambda s: click.echo(redacted_error(s), err=True))
    except OSError as e:
        fail(f"cannot listen on {host}:{port} ({e.strerror or e}) — pick another --port")
    where = f"http://{server.server_address[0]}:{server.server_address[1]}"
    what = f"replaying {replay}" if replay else f"→ {upstream}, recording into {store_dir}"
    stop = threading.Event()

    def on_signal(signum, frame):  # (serve_forever runs in a thread: the main thread only waits)
        stop.set()

    # Installed before the address is printed: a script that reads it and sends Ctrl-C at once stops
    # the proxy cleanly instead of killing it with a traceback.
    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    if as_json:
        click.echo(canonical_json({"listening": where, "mode": "replay" if replay else "record",
                                   "openai_base_url": f"{where}/v1", "anthropic_base_url": where,
                                   "store": str(store_dir), "session" if replay else "upstream": replay or upstream}))
    else:
        click.echo(f"flux proxy on {where} ({what}) — OPENAI_BASE_URL={where}/v1 ANTHROPIC_BASE_URL={where}; "
                   "Ctrl-C stops")
    sys.stdout.flush()
    worker = threading.Thread(target=server.serve_forever, daemon=True)
    worker.start()
    try:
        while not stop.wait(0.2):
            pass
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        server.shutdown()
        worker.join()
        sessions = server.finish()
    if as_json:
        total = len(server.replay_records or [])
        click.echo(canonical_json({"served": min(server.served, total), "recorded": total, "session": replay}
                                  if replay else {"recorded_calls": server.calls, "sessions": list(sessions)}))
    elif replay:
        click.echo(f"served {min(server.served, len(server.replay_records or []))} of {len(server.replay_records or [])} "
                   f"recorded call(s) of {replay}")
    else:
        click.echo(f"recorded {server.calls} model call(s) into {', '.join(sessions) or 'no session (no turn finished)'}")
    if server.failure:
        fail(server.failure)
