"""A long-lived worker for cross-version comparisons: reads JSON requests on stdin, answers
one JSON line each. Run it with PYTHONPATH pointing at the core/ of the version under test."""
import json
import sys
import traceback

from click.testing import CliRunner

from flux.cli import main
from flux.errors import FluxError
from flux.store import StoreReader
from flux.timemachine.replay import replay_session


def api(store, sid, detail, turn):
    try:
        with StoreReader(store) as r:
            rep = replay_session(r, sid, turn=turn, detail=detail)
    except FluxError as e:
        return ["error", type(e).__name__, str(e)]
    except Exception:  # noqa: BLE001
        return ["crash", traceback.format_exc().splitlines()[-1]]
    out = [rep.to_json(), rep.summary_lines(), list(rep.served), rep.cell_status, list(rep.plans), rep.redacted_standins,
           rep.tape_end]
    if detail:
        out += [rep.statement_results, rep.requests, rep.scratch_events]
    return repr(out)


for line in sys.stdin:
    req = json.loads(line)
    if req["op"] == "cli":
        r = CliRunner().invoke(main, req["args"])
        exc = None
        if r.exception is not None and not isinstance(r.exception, SystemExit):
            exc = "".join(traceback.format_exception(r.exception)).splitlines()[-1]
        ans = [r.output, r.exit_code, exc]
    else:
        ans = api(req["store"], req["sid"], req["detail"], req.get("turn"))
    sys.stdout.write(json.dumps(ans) + "\n")
    sys.stdout.flush()
