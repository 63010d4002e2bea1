"""The demo store: eleven sessions recorded by the real agent runtime (mock and scripted providers)
against a small throw-away project; with ``now_ms`` given every timestamp is a function of it.

Beside the store, ``workspace/`` holds the demo project and ``toolbox.json`` names the demo toolbox
(:mod:`flux.agent.demo_ops`), so live actions on the demo run the ops it was recorded with.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from .agent.approver import PolicyApprover
from .agent.demo_ops import DemoKilled, demo_ops
from .agent.ops import op
from .agent.providers.scripted import ScriptedProvider
from .agent.toolboxes import write_store_toolbox
from .errors import FluxError
from .sdk import Client
from .timefmt import now_ms as wall_clock_ms
from .timemachine.fork import fork_session
from .timemachine.resurrect import resurrect_session
from .timemachine.whatif import WhatIfSpec, run_what_if

__all__ = ["build_demo_store", "demo_ops", "DEMO_WORKSPACE"]

DEMO_WORKSPACE = "workspace"  # the demo project next to the store: what live actions on it act on

MINUTE = 60_000
HOUR = 60 * MINUTE
DAY = 24 * HOUR

SONNET = "anthropic:claude-sonnet-4-5"
HAIKU = "anthropic:claude-haiku-4-5"
GPT = "openai:gpt-4.1-mini"

RELEASE_FLOW = '''flow release
  version = read({"path":"VERSION"})
  parallel
    branch notes
      bash({"command":"grep -c '^- ' CHANGELOG.md"})
    branch tests
      run_tests({"path":"tests"})
  saga
    step
      write({"path":"VERSION","content":"0.4.1\\n"})
    undo
      write({"path":"VERSION","content":"0.4.0\\n"})
    step
      bash({"command":"echo tagged v0.4.1"})
'''

PUBLISH_FLOW = '''flow publish
  version = read({"path":"VERSION"})
  tests = run_tests({"path":"tests"})
  upload = publish({"repository":"pypi"})
  announce = append({"path":"CHANGELOG.md","content":"- published to pypi\\n"})
'''

TOKENIZER_BUGGY = '''import re

WORD = re.compile(r"\\w+|[^\\w\\s]")


def tokenize(text: str) -> list[str]:
    first = text[0]
    if first.isspace():
        text = text.lstrip()
    return WORD.findall(text)
'''

STAGING_ENV = ("DATABASE_URL=postgres://deploy:Zq7-staging-pw-41@db.internal:5432/app\n"
               "API_TOKEN=tok_live_9f8e7d6c5b4a39281706\nREGION=eu-west-1\n")


class _Clock:
    """Deterministic wall clock: each reading advances it a little."""

    def __init__(self, t: int, step: int = 37):
        self.t, self.step = t, step

    def at(self, t: int) -> None:
        self.t = t

    def __call__(self) -> int:
        self.t += self.step
        return self.t


class _Timer:
    """Deterministic microsecond timer for the observations' durations."""

    def __init__(self, step: int = 1_375):
        self.t, self.step = 0, step

    def __call__(self) -> int:
        self.t += self.step
        return self.t


def _project(root: Path) -> None:
    files = {
        "README.md": "# tokenizer\n\nA tiny word tokenizer.\n",
        "VERSION": "0.4.0\n",
        "CHANGELOG.md": "# Changelog\n\n## Unreleased\n\n- cli: --json everywhere\n- docs: usage examples\n",
        "pyproject.toml": '[project]\nname = "tokenizer"\nversion = "0.4.0"\n',
        "src/tokenizer.py": TOKENIZER_BUGGY,
        "src/parser.py": "from .tokenizer import tokenize\n\n\ndef parse(text):\n    return [t for t in tokenize(text)]\n",
        "tests/test_tokenizer.py": ("from src.tokenizer import tokenize\n\n\ndef test_words():\n    assert tokenize('a b') == ['a', 'b']\n\n\n"
                                    "def test_empty_input():\n    assert tokenize('') == []\n"),
        "build/lib/tokenizer/__init__.py": "",
        "build/lib/tokenizer/tokenizer.py": TOKENIZER_BUGGY,
        "deploy/staging.env": STAGING_ENV,
        "logs/api.log": "".join(f"2026-11-29T07:14:{i % 60:02d}Z worker-{i % 4} retrying connection to db.internal:5432 "
                                f"(attempt {i})\n" for i in range(1, 400)),
    }
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


def _usage(i: int, o: int, cache_read: int = 0, cache_write: int = 0) -> dict:
    return {"input_tokens": i, "output_tokens": o, "cache_read_input_tokens": cache_read,
            "cache_creation_input_tokens": cache_write}


def _turn(text: str | None, calls: list[tuple[str, dict]], usage: dict, ids: str) -> dict:
    out: dict[str, Any] = {"usage": usage}
    if text:
        out["text"] = text
    if calls:
        out["tool_calls"] = [{"name": n, "input": inp, "id": f"toolu_{ids}_{k}"} for k, (n, inp) in enumerate(calls, 1)]
    return out


def build_demo_store(path: str | Path, now_ms: int | None = None, overwrite: bool = False) -> Path:
    """Record the demo store into ``path`` (created; it must not hold a store unless ``overwrite``)."""
    path = Path(path)
    if overwrite and path.exists():
        for name in ("events.db", "events.db-wal", "events.db-shm", "flow.db", "flow.db-wal", "flow.db-shm", "model.jsonl"):
            (path / name).unlink(missing_ok=True)
    elif (path / "events.db").exists():
        raise FluxError(f"{path} already holds a store — pick an empty directory or pass overwrite=True")
    now = wall_clock_ms() if now_ms is None else now_ms
    ws = Path(tempfile.mkdtemp(prefix="flux-demo-ws-"))
    try:
        _project(ws)
        _record(path, ws, now)
    finally:
        shutil.rmtree(ws, ignore_errors=True)
    # What live actions on this store (a fork's tail, resurrecting s_9, a live what-if) run with:
    # the demo toolbox, acting on a fresh copy of the demo project next to the store.

    project = path / DEMO_WORKSPACE
    if project.exists():
        shutil.rmtree(project)
    _project(project)
    write_store_toolbox(path, "demo", DEMO_WORKSPACE)
    return path


def _record(store: Path, ws: Path, now: int) -> None:
    """Record every demo session, in the order that numbers them. Scripted models have realistic
    names (``anthropic:claude-sonnet-4-5``, ``openai:gpt-4.1-mini``) so the browser prices their usage.

    Sessions:

    * ``s_1`` — a two-turn bug fix (sonnet): grep, read, a failing test run (tool error), edit, a
      passing run; then a changelog entry. Turn 1 delegates exploration to a real sub-agent (``task``).
    * ``s_2`` — that sub-agent (``agent_id`` ``subagent:explorer``, correlated to ``s_1``).
    * ``s_3`` — a read-only policy (gpt-4.1-mini, two turns): ``rm -rf build`` and then a note
      write are denied (denied cells, tool errors back to the model).
    * ``s_4`` — a secret redacted out of a cell (URL password, ``API_TOKEN=``) and a huge log
      truncated at a 4 KiB cassette cap.
    * ``s_5`` — an authored release flow with ``parallel`` branches and a ``saga``, run resumably.
    * ``s_6`` — a fork of ``s_1`` at statement 3 (``agent_id`` ``fork:s_1@3``) made by ``fork_session``:
      the prefix (task, read, the failing test run) from tape, then a live re-planned turn that tries a
      wrong fix first — ``flux diff s_1 s_6`` shows ``=`` prefix rows, ``~`` and ``≠`` rows.
    * ``s_7`` — the offline ``mock`` agent writing a quick note, twice (the real fixture's shape).
    * ``s_8`` — killed mid-turn: an accepted ``publish`` plan dispatched, no cell, no ``turn_ended``.
    * ``s_9`` — an authored flow killed after two completed statements (a ledger to resume from).
    * ``s_10`` — a what-if of ``s_1`` made by ``run_what_if``: every ``run_tests`` returned "2 passed".
    * ``s_11`` — the ``s_9`` flow killed the same way and then resurrected by ``resurrect_session``
      (beside ``s_9``, still interrupted).
    """
    demo = _DemoRecording(store, ws, now)
    try:
        s1 = demo.bug_fix()
        demo.read_only_policy()
        demo.secret_and_truncation()
        demo.release_flow()
        demo.fork_of(s1)
        demo.mock_notes()
        demo.killed_turns()
        demo.what_if_and_resurrect(s1)
    finally:
        demo.close()


class _DemoRecording:
    """The clients that record the demo sessions on one deterministic clock and timer."""

    def __init__(self, store: Path, ws: Path, now: int):
        self.store, self.ws, self.now = store, ws, now
        self.clock = _Clock(now - 3 * DAY)
        self.timer = _Timer()
        self.ops = demo_ops(ws, kill_publish=True)
        self.clients: list[Client] = []
        self.flows: Client | None = None  # the authored flows' client (s_5, s_9, s_11, the what-if)

    def client(self, model: str, responses: list[dict] | None = None, **kw: Any) -> Client:
        provider: Any = ScriptedProvider(responses=responses, model=model) if responses is not None else "mock"
        c = Client(provider, model=model if responses is not None else None, store=self.store, workspace=self.ws,
                   ops=kw.pop("ops", self.ops), env_secrets=False, clock=self.clock, timer=self.timer, cassette=True,
                   concurrent_ops=False,  # a reproducible recording: op completions in dispatch order
                   **({"auto_approve": True} if "approver" not in kw and "policy" not in kw else {}), **kw)
        self.clients.append(c)
        return c

    def close(self) -> None:
        for c in self.clients:
            c.close()

    def bug_fix(self) -> Any:
        """s_1, the bug fix in two turns, and s_2, the sub-agent its ``task`` call starts."""
        clock, now = self.clock, self.now
        parent: dict[str, str] = {}
        # s_2 is created by s_1's `task` call: a real sub-agent on its own client and session.
        explorer = self.client(HAIKU, [
            _turn(None, [("grep", {"pattern": r"tokenize\(", "path": "."})], _usage(1_200, 30), "e1"),
            _turn("tokenize() is defined in src/tokenizer.py and used by src/parser.py and the tests.", [],
                  _usage(1_400, 70), "e2"),
        ])

        @op(effect="pure")
        async def task(role: str, prompt: str) -> str:
            """Delegate a sub-task to a sub-agent and return its answer."""
            child = explorer.session(context={"correlation_id": parent["id"], "agent_id": f"subagent:{role}"})
            out = await child.send(prompt)
            return f"[{child.id}] {out.answer}"

        clock.at(now - 3 * DAY)
        fix = self.client(SONNET, [
            _turn("Let me have a sub-agent map the tokenizer first.",
                  [("task", {"role": "explorer", "prompt": "map where tokenization happens"})],
                  _usage(2_410, 96, cache_read=11_200, cache_write=2_048), "f1"),
            _turn(None, [("read", {"path": "src/tokenizer.py"})], _usage(2_980, 64, cache_read=13_248), "f2"),
            _turn("Reproducing the failure before changing anything.", [("run_tests", {"path": "tests"})],
                  _usage(3_620, 180, cache_read=13_248), "f3"),
            _turn(None, [("edit", {"path": "src/tokenizer.py",
                                   "old": "    first = text[0]\n    if first.isspace():\n        text = text.lstrip()\n",
                                   "new": "    text = text.lstrip()\n"})], _usage(4_400, 210, cache_read=13_248), "f4"),
            _turn(None, [("run_tests", {"path": "tests"})], _usage(4_700, 60, cache_read=13_248), "f5"),
            _turn("Fixed: `tokenize` indexed `text[0]` before checking for empty input. It now strips leading "
                  "whitespace unconditionally, and both tokenizer tests pass.", [], _usage(4_900, 88, cache_read=13_248), "f6"),
            _turn(None, [("append", {"path": "CHANGELOG.md",
                                     "content": "- tokenizer: empty input no longer raises IndexError\n"})],
                  _usage(5_300, 120, cache_read=15_000), "f7"),
            _turn("Added the entry under Unreleased in CHANGELOG.md.", [], _usage(5_500, 40, cache_read=15_000), "f8"),
        ], ops=self.ops + [task])
        s1 = fix.session()
        parent["id"] = s1.id
        s1.send_sync("the tokenizer test fails on empty input — fix it")
        clock.at(clock.t + 4 * MINUTE)
        s1.send_sync("add a changelog entry for that")
        return s1

    def read_only_policy(self) -> None:
        """s_3: a read-only policy, an exec and a write denied across two turns."""
        clock, now = self.clock, self.now
        clock.at(now - 2 * DAY)
        ro = self.client(GPT, [
            _turn(None, [("glob", {"pattern": "build/**"})], _usage(1_800, 40), "c1"),
            _turn(None, [("bash", {"command": "rm -rf build"})], _usage(2_100, 52), "c2"),
            _turn("I could not delete build/: the policy denied `rm -rf build`. Re-run with --yes, or delete it yourself.",
                  [], _usage(2_400, 70), "c3"),
            _turn(None, [("write", {"path": "NOTES.md", "content": "build/ is stale and can be deleted\n"})],
                  _usage(2_700, 48), "c4"),
            _turn("The policy is read-only, so I could not write NOTES.md either.", [], _usage(2_900, 30), "c5"),
        ], approver=PolicyApprover(allow=["effect:read"], default="deny", source="readonly.toml"))
        s3 = ro.session()
        s3.send_sync("clean up the build directory")
        clock.at(clock.t + 2 * MINUTE)
        s3.send_sync("then at least leave a note about it in NOTES.md")

    def secret_and_truncation(self) -> None:
        """s_4: a secret redacted out of a cell, a big log truncated at the cassette cap."""
        clock, now = self.clock, self.now
        clock.at(now - 30 * HOUR)
        dbg = self.client(SONNET, [
            _turn(None, [("read", {"path": "deploy/staging.env"})], _usage(2_000, 50, cache_read=9_000), "d1"),
            _turn(None, [("bash", {"command": "cat logs/api.log"})], _usage(2_600, 44, cache_read=9_000), "d2"),
            _turn("The API cannot reach db.internal:5432 — every worker retries the connection. The staging "
                  "DATABASE_URL points at a host that is not resolvable from the cluster.", [],
                  _usage(3_900, 160, cache_read=9_000), "d3"),
        ], cassette_cap=4096)
        dbg.session().send_sync("why does the staging deploy fail?")

    def release_flow(self) -> None:
        """s_5: an authored release flow with parallel branches and a saga, run resumably."""
        clock, now = self.clock, self.now
        clock.at(now - 20 * HOUR)
        self.flows = self.client("mock", None)
        self.flows.session().run_flow_sync(RELEASE_FLOW)

    def fork_of(self, s1: Any) -> None:
        """s_6: a fork of s_1 at statement 3, re-planned live by ``fork_session``."""
        clock, now, ws = self.clock, self.now, self.ws
        # s_6 — a fork of s_1 at statement 3 (the edit), re-planned live by fork_session: the prefix
        # (task, read, the failing test run) comes from tape; the tail first tries a wrong fix.
        clock.at(now - 8 * HOUR)
        forker = self.client(SONNET, [
            _turn("Forking: this time I'll try trimming both ends.", [("edit", {
                "path": "src/tokenizer.py", "old": "    if first.isspace():\n        text = text.lstrip()\n",
                "new": "    if first.isspace():\n        text = text.strip()\n"})], _usage(3_100, 140, cache_read=13_248), "k1"),
            _turn(None, [("run_tests", {"path": "tests"})], _usage(3_400, 50, cache_read=13_248), "k2"),
            _turn("Still failing: the index happens before any trimming. Guarding the empty case instead.", [
                ("edit", {"path": "src/tokenizer.py", "old": "    first = text[0]\n",
                          "new": "    if not text:\n        return []\n    first = text[0]\n"})],
                  _usage(3_600, 120, cache_read=13_248), "k3"),
            _turn(None, [("run_tests", {"path": "tests"})], _usage(3_800, 50, cache_read=13_248), "k4"),
            _turn("In the fork I guarded the empty case explicitly instead of always stripping; tests pass.", [],
                  _usage(3_900, 70, cache_read=13_248), "k5"),
        ])
        (ws / "src" / "tokenizer.py").write_text(TOKENIZER_BUGGY)  # the world as it was at the fork point
        fork_session(forker, s1.id, 3)

    def mock_notes(self) -> None:
        """s_7: the offline mock agent, the fixture's shape, two turns."""
        clock, now = self.clock, self.now
        clock.at(now - 3 * HOUR)
        mock = self.client("mock", None)
        s7 = mock.session()
        s7.send_sync("write a quick note")
        clock.at(clock.t + 90_000)
        s7.send_sync("write another one")

    def killed_turns(self) -> None:
        """s_8 and s_9: killed while dispatching an accepted plan, and a flow killed after two statements."""
        # Killed in process: the op being dispatched raises DemoKilled (a BaseException the runtime does
        # not handle), so recording stops exactly where a SIGKILL during that dispatch stops it — the
        # plan and its step_started row are durable; the cell, the step result, turn_ended, the
        # observation flush and the answer are not. (tests/agent/test_agent_cli.py SIGKILLs for real.)
        clock, now = self.clock, self.now
        # s_8 — killed while dispatching an accepted plan.
        clock.at(now - 25 * MINUTE)
        pub = self.client(SONNET, [
            _turn(None, [("read", {"path": "pyproject.toml"})], _usage(2_200, 60, cache_read=8_000), "p1"),
            _turn(None, [("edit", {"path": "pyproject.toml", "old": 'version = "0.4.0"', "new": 'version = "0.4.1"'})],
                  _usage(2_500, 90, cache_read=8_000), "p2"),
            _turn(None, [("publish", {"repository": "pypi"})], _usage(2_700, 40, cache_read=8_000), "p3"),
            _turn("Published 0.4.1.", [], _usage(2_900, 20, cache_read=8_000), "p4"),
        ])
        try:
            pub.session().send_sync("bump the version and publish")
        except DemoKilled:
            pass

        # s_9 — an authored flow killed after two completed statements.
        clock.at(now - 12 * MINUTE)
        try:
            self.flows.session().run_flow_sync(PUBLISH_FLOW)
        except DemoKilled:
            pass

    def what_if_and_resurrect(self, s1: Any) -> None:
        """s_10, a what-if of s_1, and s_11, a killed flow finished by ``resurrect_session``."""
        clock, now, ws = self.clock, self.now, self.ws
        # s_10 — a what-if of s_1: every run_tests call returned "2 passed" (offline, hermetic).
        clock.at(now - 6 * MINUTE)
        run_what_if(self.flows, s1.id, WhatIfSpec(substitute={"run_tests": "2 passed in 0.03s"}))

        # s_11 — the same publish flow killed the same way, then resurrected by resurrect_session:
        # two statements fast-forwarded, the in-flight upload run again, the rest live.
        clock.at(now - 4 * MINUTE)
        try:
            self.flows.session().run_flow_sync(PUBLISH_FLOW)
        except DemoKilled:
            pass
        clock.at(now - 2 * MINUTE)
        healed = self.client("mock", None, ops=demo_ops(ws))
        resurrect_session(healed, healed.open_session("last").id)
