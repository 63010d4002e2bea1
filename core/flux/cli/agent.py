"""Agent verbs: ``flux run PROMPT`` (one live, recorded adaptive turn) and ``flux flow run FILE`` (an
authored Flux-Lang flow as one recorded, resumable turn).

Both record into the store, in a new session unless ``--session`` / ``--continue``, with file ops
confined to ``--workspace`` and every op put to the approver. Exit 0 for ``ok``/``completed``, 1 for
an error or a halt, 130 when cancelled with Ctrl-C (docs/agent.md).
"""

from __future__ import annotations

import asyncio
import re
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Optional

import click
from rich.markup import escape

from ..errors import FluxError
from ..store.lease import SessionLease
from . import main
from .common import fail, handle_errors, json_out, resolve_store_dir, store_option

_EXIT = {"ok": 0, "completed": 0, "cancelled": 130}


def _console(stderr: bool = False):
    from rich.console import Console

    return Console(stderr=stderr, highlight=False, soft_wrap=True)


def _one_line(text: str, width: int = 100) -> str:
    s = " ".join(str(text).split())
    return s if len(s) <= width else s[: width - 1] + "…"


_BEARER_AT_END = re.compile(r"(?i)bearer\s*\Z")


class TurnRenderer:
    """Streams a turn as it happens: model text, one line per tool call, retries — redacted as the
    store keeps them (``redactor``: the client's). Model text is shown a line at a time, so a secret
    streamed in two deltas is redacted whole; a line that a secret may continue past (an open
    private-key block, a ``Bearer`` at its end, a registered secret holding a line break) waits."""

    def __init__(self, quiet: bool):
        self.quiet = quiet
        self.out = _console()
        self.err = _console(stderr=True)
        self.in_text = False
        self.redactor: Any = None
        self.pending = ""  # model text not shown yet

    def _red(self, text: str) -> str:
        return text if self.redactor is None else self.redactor.redact(text)

    def _shown_upto(self, text: str) -> int:
        cut = text.rfind("\n") + 1
        if cut and self.redactor is not None and any("\n" in s for s in self.redactor.secrets):
            return 0
        head = text[:cut]
        if "PRIVATE KEY-----" in head and head.count("-----BEGIN") > head.count("-----END"):
            return 0
        while cut and _BEARER_AT_END.search(text, 0, cut):
            cut = text.rfind("\n", 0, cut - 1) + 1
        return cut

    def _show_text(self, final: bool) -> None:
        cut = len(self.pending) if final else self._shown_upto(self.pending)
        if cut:
            self.out.print(self._red(self.pending[:cut]), end="", markup=False, highlight=False)
            self.pending = self.pending[cut:]

    def __call__(self, ev: dict) -> None:
        if self.quiet:
            return
        kind = ev.get("kind")
        if kind == "text":
            self.pending += str(ev["text"])
            self._show_text(final=False)
            self.in_text = True
            return
        if self.in_text:
            self._show_text(final=True)
            self.out.print()
            self.in_text = False
        if kind == "tool_start":
            from ..canonical import compact_json

            arg = ev.get("input")
            shown = self._red(arg) if isinstance(arg, str) else (
                compact_json(arg) if self.redactor is None else self.redactor.redact_json_text(compact_json(arg), sort=False))
            self.err.print(f"[cyan]▸ {escape(str(ev['name']))}[/cyan] [dim]{escape(_one_line(shown, 90))}[/dim]", markup=True)
        elif kind == "tool_end":
            status = ev.get("status")
            style = {"ok": "green", "denied": "red", "error": "yellow", "invalid": "yellow"}.get(status, "white")
            content = self._red(ev.get("content") or "")
            first = _one_line(content.splitlines()[0] if content else "", 90)
            self.err.print(f"  [{style}]{status}[/{style}] [dim]{escape(first)}[/dim]", markup=True)
        elif kind == "retry":
            self.err.print(f"[yellow]retrying in {ev['delay_s']:.1f}s (attempt {ev['attempt']}): "
                           f"{escape(self._red(str(ev['error'])))}[/yellow]")
        elif kind == "max_iter":
            self.err.print(f"[yellow]stopped at the iteration cap ({ev['iterations']})[/yellow]")

    def finish(self) -> None:
        if self.in_text and not self.quiet:
            self._show_text(final=True)
            self.out.print()
            self.in_text = False


def _usage_line(out: Any) -> str:
    u = out.usage
    cost = "cost unknown" if out.cost is None else f"${out.cost:.4f}"
    cache = f" · {u.cache_read_input_tokens} cache-read" if u.cache_read_input_tokens else ""
    return (f"{out.session} · turn {out.number} · {out.outcome} · {out.model_calls} model call(s), "
            f"{len(out.tool_calls)} tool call(s) · {u.input_tokens} in / {u.output_tokens} out{cache} tokens · {cost}")


def _ask_fn(enabled: bool):
    if not enabled:
        return None

    def ask(req) -> bool:
        from ..canonical import compact_json

        what = req.message if req.kind == "confirm" else f"{req.op} {_one_line(compact_json(req.input), 120)}"
        return click.confirm(f"allow {what} (effect {req.effect})?", default=False, err=True)

    return ask


def approval_options(yes: bool, policy: Optional[Path], interactive: bool) -> dict:
    """The Client options ``--yes`` / ``--policy FILE`` choose (neither: none, and the client denies
    every effectful call); a policy's ``ask`` rules prompt at the terminal when ``interactive``."""
    if yes and policy is not None:
        raise FluxError("pass either --yes or --policy FILE, not both")
    if yes:
        return {"auto_approve": True}
    if policy is not None:
        from ..agent.approver import load_policy

        return {"approver": load_policy(policy, ask_fn=_ask_fn(interactive))}
    return {}


def _resurrect_kw(quiet: bool) -> dict:
    """Auto-resurrect on open: on unless ``FLUX_AUTO_RESURRECT=0``; the stderr lines are flux's."""
    import os

    def hook(kind: str, x: Any) -> None:
        if quiet:
            return
        if kind == "plan":
            from ..timemachine.resurrect import resurrect_lines

            click.echo(click.style(resurrect_lines(x), dim=True), err=True)
        elif kind == "report":
            click.echo(click.style(x.summary_line(), dim=True), err=True)
            if x.outcome == "halted":
                why = x.halt["error"] if x.halt else x.answer
                click.echo(click.style(f"resurrect halted: {_one_line(why, 200)}", fg="red"), err=True)
            if x.diverged:
                click.echo(click.style(f"resurrect diverged: {x.diverged}", fg="red"), err=True)
        else:
            click.echo(click.style(f"resurrect: {x}", fg="red"), err=True)

    return {"auto_resurrect": os.environ.get("FLUX_AUTO_RESURRECT") != "0", "on_resurrect": hook}


def _open_session(client: Any, session: Optional[str], cont: bool):
    if session and cont:
        raise FluxError("pass either --session S or --continue, not both")
    if cont or session:
        from ..model.provenance import refuse_redrive
        from ..store.store import StoreReader

        opened = client.open_session("last" if cont else session)
        with StoreReader(client.store_dir) as reader:
            refuse_redrive(reader, opened.id, "a new turn of this runtime's agent")
        return opened
    return client.session()


def _agent_options(fn):
    for deco in reversed([
        click.option("--workspace", type=click.Path(file_okay=False, path_type=Path), default=None,
                     help="Directory the file ops are confined to (default: the current directory)."),
        click.option("--session", "session", default=None, help="Continue session s_<n> (or last)."),
        click.option("--continue", "cont", is_flag=True, help="Continue the latest session."),
        click.option("--yes", "-y", "yes", is_flag=True, help="Approve every op (default: deny all)."),
        click.option("--policy", type=click.Path(dir_okay=False, path_type=Path), default=None,
                     help="Policy file (TOML/JSON): allow / deny / ask lists of op names or effect:<effect>."),
        click.option("--json", "as_json", is_flag=True, help="Print one JSON object with the turn's result."),
        store_option,
    ]):
        fn = deco(fn)
    return fn


@main.command("run")
@click.argument("prompt", nargs=-1, required=True)
@click.option("-m", "--model", default=None, envvar="FLUX_MODEL",
              help="provider:model — mock (default), scripted:PATH, null, openai:NAME, ollama:NAME, anthropic:NAME.")
@click.option("--base-url", default=None, help="Endpoint of an OpenAI- or Anthropic-compatible server.")
@click.option("--max-iter", type=click.IntRange(min=1), default=20, show_default=True, help="Model calls per turn at most.")
@click.option("--system", "instructions", default=None, help="Instructions (system prompt) for the model.")
@click.option("--model-cassette", "model_cassette", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also tee every model call (redacted) to this model.jsonl.")
@click.option("--entry", default=None, metavar="FLOW",
              help="Run the flow named FLOW of the .flux program PROMPT names (no model call), as `flux flow run` does.")
@click.option("--inputs", default=None, metavar="JSON", help="With --entry: the flow's parameters as one JSON object.")
@click.option("--arg", "args", multiple=True, metavar="NAME=VALUE",
              help="With --entry: one parameter (repeatable; the last value of a name wins).")
@_agent_options
@handle_errors
def run_cmd(prompt: tuple[str, ...], model: Optional[str], base_url: Optional[str], max_iter: int,
            instructions: Optional[str], model_cassette: Optional[Path], entry: Optional[str], inputs: Optional[str],
            args: tuple[str, ...], workspace: Optional[Path], session: Optional[str], cont: bool, yes: bool,
            policy: Optional[Path], as_json: bool, store: Optional[Path]) -> None:
    """Run one agent turn for PROMPT and record it in the store.

    With --entry FLOW, PROMPT is a .flux program and its flow FLOW runs instead (no model call)."""
    from ..sdk import DEFAULT_INSTRUCTIONS, Client

    if entry is None and (inputs is not None or args):
        fail("--inputs/--arg need --entry FLOW: `flux run PROGRAM.flux --entry FLOW --arg NAME=VALUE` "
             "(or `flux flow run FILE --arg …`)")
    if entry is not None:
        from ..agent.flows import load_flow_entry

        if len(prompt) != 1:
            fail("`flux run <file.flux> --entry <flow>` accepts exactly one program path; pass flow values with "
                 "--inputs or --arg")
        _run_authored(load_flow_entry(prompt[0], entry), prompt[0], inputs, args, model=model or "mock",
                      workspace=workspace, session=session, cont=cont, yes=yes, policy=policy, as_json=as_json,
                      store=store)
        return
    text = " ".join(prompt).strip()
    if not text:
        fail("the prompt is empty — say what the agent should do, e.g. flux run \"write a quick note\"")
    renderer, turn_options = _turn_options(yes, policy, as_json)
    store_dir = resolve_store_dir(store)
    client = Client(model or "mock", store=store_dir, workspace=workspace or Path.cwd(), base_url=base_url,
                    max_iter=max_iter, instructions=instructions or DEFAULT_INSTRUCTIONS,
                    model_cassette=model_cassette, **turn_options)
    with _recording(client, renderer, session, cont) as sess:
        if not as_json:
            click.echo(click.style(f"run · {sess.id} · {client.model} · store {store_dir}", dim=True), err=True)
        out = asyncio.run(sess.send(text))
    renderer.finish()
    _report(out, as_json, store_dir, client.redactor)


def _turn_options(yes: bool, policy: Optional[Path], as_json: bool) -> tuple["TurnRenderer", dict]:
    """The renderer a recorded turn prints through, and the Client options every recorded turn
    shares: the approver (a policy's ``ask`` prompts on a terminal), the renderer as the event
    sink, and resurrect-on-open."""
    kw = approval_options(yes, policy, sys.stdin.isatty() and not as_json)
    renderer = TurnRenderer(quiet=as_json)
    return renderer, {"on_event": renderer, **_resurrect_kw(as_json), **kw}


@contextmanager
def _recording(client: Any, renderer: "TurnRenderer", session: Optional[str], cont: bool) -> Iterator[Any]:
    """The session a turn records into (``--session`` / ``--continue`` / a new one), held under
    Ctrl-C cancellation and the session's lease for the block; the client is closed after."""
    renderer.redactor = client.redactor
    try:
        with _cancellable(client, renderer) as ran:
            sess = ran.session = _open_session(client, session, cont)
            with SessionLease.acquire(client.store_dir, sess.id):  # a live writer's session: refused before any output
                yield sess
    finally:
        client.close()


class _Ran:
    session: Any = None


@contextmanager
def _cancellable(client: Any, renderer: "TurnRenderer") -> Iterator[_Ran]:
    """Ctrl-C cancels the block (:func:`~flux.agent.cancel.sigint_cancels`); the CLI then says what
    the store holds — read back, not assumed — and exits 130."""
    from ..agent.cancel import sigint_cancels

    ran = _Ran()
    before = _max_seq(client)
    try:
        with sigint_cancels():
            yield ran
    except KeyboardInterrupt:
        renderer.finish()
        sid = ran.session.id if ran.session is not None else None
        click.echo(_cancel_note(client, sid, before), err=True)
        client.close()
        sys.exit(130)


def _max_seq(client: Any) -> int:
    row = client.writer.conn.execute("SELECT MAX(global_seq) FROM events").fetchone()
    return row[0] or 0


def _cancel_note(client: Any, sid: Optional[str], before: int) -> str:
    """What a Ctrl-C left in the store for session ``sid``: the newest turn's outcome, an open turn, or nothing."""
    if sid is None:
        return "cancelled — nothing was recorded"
    conn = client.writer.conn
    row = conn.execute("SELECT global_seq FROM events WHERE stream = ? AND kind = 'turn_started' ORDER BY global_seq DESC"
                       " LIMIT 1", (sid,)).fetchone()
    if row is None:
        return "cancelled — nothing was recorded"
    tid = row[0]
    ended = conn.execute("SELECT global_seq, json_extract(payload, '$.data.outcome') FROM events WHERE stream = ?"
                         " AND turn_id = ? AND kind = 'turn_ended' ORDER BY global_seq DESC LIMIT 1", (sid, tid)).fetchone()
    if tid > before:
        if ended is None:
            return (f"cancelled — the turn was left open (interrupted): `flux resurrect {sid}` finishes it")
        return f"cancelled — the turn is recorded as `{ended[1]}`"
    if ended is not None and ended[0] > before:
        return f"cancelled before the new turn started — the resurrected turn is recorded as `{ended[1]}`"
    return "cancelled before the new turn started — nothing was recorded"


def _report(out: Any, as_json: bool, store_dir: Path, redactor: Any) -> None:
    """The turn's result — its answer and error redacted as the store keeps them."""
    if as_json:
        data = out.to_json()
        data["answer"] = redactor.redact(data["answer"]) if isinstance(data.get("answer"), str) else data.get("answer")
        data["error"] = redactor.redact(data["error"]) if isinstance(data.get("error"), str) else data.get("error")
        data["store"] = str(store_dir)
        json_out(data)
    else:
        click.echo(click.style(_usage_line(out), dim=True), err=True)
    code = _EXIT.get(out.outcome, 1)
    if out.outcome == "cancelled" and not as_json:
        click.echo("cancelled — the turn is recorded as `cancelled`", err=True)
    if code == 1 and not as_json:
        why = out.error or ("no final answer within the iteration cap — raise --max-iter" if out.outcome == "max_iter"
                            else out.answer)
        click.echo(f"error: turn ended {out.outcome}: {redactor.redact(str(why))}", err=True)
    if code:
        sys.exit(code)


@main.group("flow")
def flow_group() -> None:
    """Authored Flux-Lang flows."""


@flow_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="One JSON object: every entry with its kind, parameters and file.")
@handle_errors
def flow_list(as_json: bool) -> None:
    """List the saved flows and composite ops: .flux/flows (here), ~/.flux/flows, then the legacy
    .flux/ops and ~/.flux/ops (alias: ls)."""
    from ..agent.flows import FlowCatalog

    catalog = FlowCatalog.load()
    if as_json:
        json_out({"flows": [{"name": e.name, "kind": e.kind, "description": e.description,
                             "params": [{"name": p.name, "type": p.ty.label() if p.ty is not None else "Any"}
                                        for p in e.params], "path": e.path} for e in catalog.entries]})
        return
    click.echo(catalog.render())


flow_group.add_command(flow_list, "ls")


@flow_group.command("run")
@click.argument("target")
@click.option("--inputs", default=None, metavar="JSON", help="The flow's declared parameters as one JSON object.")
@click.option("--arg", "args", multiple=True, metavar="NAME=VALUE",
              help="One declared parameter (repeatable; the last value of a name wins; over --inputs).")
@click.option("--resumable", is_flag=True,
              help="On a halt, print the halt report (the statements marked ✓/✗/·, the failure as JSON, the session "
                   "to resume) and exit 1.")
@click.option("--resume", "resume", default=None, metavar="SESSION|last",
              help="Continue a halted run of this flow on its session: the unchanged statements fast-forward, "
                   "the rest runs (implies --resumable; last: this flow's newest halted session).")
@click.option("--resume-value", "resume_value", default=None, metavar="JSON",
              help="With --resume: the value a halted `$x = await …` binds (a bare word is a string).")
@click.option("-m", "--model", default="mock", show_default=True,
              help="Model name recorded on a new session (a flow run never calls a model).")
@_agent_options
@handle_errors
def flow_run(target: str, inputs: Optional[str], args: tuple[str, ...], resumable: bool, resume: Optional[str],
             resume_value: Optional[str], model: str, workspace: Optional[Path], session: Optional[str], cont: bool,
             yes: bool, policy: Optional[Path], as_json: bool, store: Optional[Path]) -> None:
    """Run TARGET — a .flux file, or a saved flow's name (flux flow list) — as one recorded turn
    (resumable: a statement ledger is written)."""
    from ..agent.flows import load_flow_target

    if resume_value is not None and resume is None:
        fail("--resume-value needs --resume SESSION|last (a fresh run has no halted `await` to bind)")
    if resume is not None and (session or cont):
        fail("--resume names the session to continue — drop --session/--continue")
    loaded = load_flow_target(target)
    _run_authored(loaded, target, inputs, args, model=model, workspace=workspace, session=session, cont=cont,
                  yes=yes, policy=policy, as_json=as_json, store=store, resumable=resumable or resume is not None,
                  resume=resume, resume_value=resume_value)


def _run_authored(loaded: Any, label: str, inputs: Optional[str], args: tuple[str, ...], *, model: str,
                  workspace: Optional[Path], session: Optional[str], cont: bool, yes: bool, policy: Optional[Path],
                  as_json: bool, store: Optional[Path], resumable: bool = False, resume: Optional[str] = None,
                  resume_value: Optional[str] = None) -> None:
    """An authored flow as one recorded turn: its inputs checked and bound, an optional resume of
    its halted session prepared — all before anything is written — then run."""
    from ..agent.flow_resume import halt_report, prepare_resume, resolve_resume_session, session_halt
    from ..agent.flows import apply_flow_inputs, refuse_composite_calls
    from ..agent.loop import flow_ops
    from ..agent.providers.null import NullProvider
    from ..sdk import Client
    from ..store.store import StoreReader

    refuse_composite_calls(loaded, flow_ops(loaded.draft))
    draft = apply_flow_inputs(loaded.draft, inputs, args)
    store_dir = resolve_store_dir(store)
    plan = None
    if resume is not None:
        with StoreReader(store_dir) as reader:
            sid = resolve_resume_session(reader, draft, resume)
            plan = prepare_resume(reader, sid, draft, resume_value)
        draft, session = plan.draft, sid
    renderer, turn_options = _turn_options(yes, policy, as_json)
    client = Client(NullProvider(model=model), model=model, store=store_dir, workspace=workspace or Path.cwd(),
                    **turn_options)
    with _recording(client, renderer, session, cont) as sess:
        if not as_json:
            click.echo(click.style(f"flow run · {sess.id} · {label} · store {store_dir}", dim=True), err=True)
            if plan is not None:
                ff = len(plan.ledger.completed) if plan.ledger is not None else 0
                bound = f" · bound ${plan.bound} = {resume_value}" if plan.bound else ""
                click.echo(click.style(f"resume · {sess.id} · {ff} statement(s) fast-forwarded · "
                                       f"{len(plan.cells)} recorded cell(s) to serve{bound}", dim=True), err=True)
        out = asyncio.run(sess.run_flow(draft, resume=plan))
    if resumable and out.outcome == "halted" and not as_json:
        with StoreReader(store_dir) as reader:
            halt = session_halt(reader, out.session)  # read back: the report says what the store holds
        if halt is not None:
            click.echo(client.redactor.redact(halt_report(draft, halt, out.session, label)), err=True)
            sys.exit(1)
    if not as_json:  # each op was shown as it started and ended
        click.echo(client.redactor.redact(out.answer))
    _report(out, as_json, store_dir, client.redactor)
