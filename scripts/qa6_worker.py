"""A long-lived worker for qa6's cross-version comparisons: JSON requests on stdin, one JSON line
each (output incl. stderr, exit code, the last line of an uncaught exception). Run it with
PYTHONPATH pointing at the core/ of the version under test."""
import json
import sys
import traceback

from click.testing import CliRunner

from flux.cli import main

for line in sys.stdin:
    req = json.loads(line)
    r = CliRunner().invoke(main, req["args"])
    exc = None
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        exc = "".join(traceback.format_exception(r.exception)).splitlines()[-1]
    sys.stdout.write(json.dumps([r.output, r.exit_code, exc, getattr(sys.modules.get("flux"), "__file__", "")]) + "\n")
    sys.stdout.flush()
