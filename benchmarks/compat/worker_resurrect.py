"""A long-lived worker for the cross-version resurrect comparisons: JSON requests on stdin, one JSON line
each (output incl. stderr, exit code, the last line of an uncaught exception). Run it with
PYTHONPATH pointing at the core/ of the version under test."""
import json
import sys
import traceback

from click.testing import CliRunner

from flux.cli import main

def sdk(store, ws, sid, approve):
    """Session.resurrect(confirm=…) through the SDK: a client that approves (or not) every live op,
    confirm answering the same; the report's JSON or the one-line error."""
    from flux.sdk import Client
    from flux.errors import FluxError

    try:
        c = Client("mock", store=store, workspace=ws, auto_resurrect=False, auto_approve=approve)
        try:
            rep = c.open_session(sid).resurrect(confirm=lambda preview: approve)
            return [json.dumps(rep.to_json() if rep is not None else None, sort_keys=True), 0, None]
        finally:
            c.close()
    except FluxError as e:
        return [f"{type(e).__name__}: {e}", 1, None]
    except Exception as e:  # noqa: BLE001
        return ["", 2, "".join(traceback.format_exception(e)).splitlines()[-1]]


for line in sys.stdin:
    req = json.loads(line)
    if req["args"][:1] == ["sdk"]:
        _, store, ws, sid, approve = req["args"]
        sys.stdout.write(json.dumps(sdk(store, ws, sid, approve == "yes") + [""]) + "\n")
        sys.stdout.flush()
        continue
    r = CliRunner().invoke(main, req["args"])
    exc = None
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        exc = "".join(traceback.format_exception(r.exception)).splitlines()[-1]
    sys.stdout.write(json.dumps([r.output, r.exit_code, exc, getattr(sys.modules.get("flux"), "__file__", "")]) + "\n")
    sys.stdout.flush()
