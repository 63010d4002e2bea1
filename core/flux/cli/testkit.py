"""Test-kit verbs: ``flux record NAME PROMPT`` (a scenario, live), ``flux test [NAME]`` (scenarios, offline),
``flux export S --format atif`` and ``flux golden check|update S GOLDEN.json``.

``flux test`` exits 0 only when every scenario is clean (a scenario recorded by another runtime
counts when its replay is faithful: it is reported as *replay only*, never as a passed check),
1 when any fails, and prints ``error: …`` (exit 1) for bad arguments.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Optional

import click

from ..errors import FluxError
from . import main
from .common import fail, handle_errors, json_out, open_reader, redacted_message, store_option


SCENARIOS_DIR = Path("tests/scenarios")


def plain_name(name: str) -> bool:
    """One plain path segment: not empty, not ``.``/``..``, no separator — a scenario name that
    cannot write outside its scenarios directory."""
    return bool(name) and name not in (".", "..") and "/" not in name and "\\" not in name and "\x00" not in name


def _name_hint(name: str, input_text: str) -> str:
    p = Path(name)
    if name and p.name not in ("", ".", ".."):
        return (f"a scenario NAME is one plain path segment, not {name!r} — write: flux record {p.name} "
                f"{_quote(redacted_message(input_text))} --dir {p.parent}")  # (redacted before it is quoted)
    return f"a scenario NAME must be a single plain path segment, not {name!r} — e.g. flux record triage \"PROMPT\""


def _quote(s: str) -> str:
    import shlex

    return shlex.quote(s)


@main.command("record")
@click.argument("name")
@click.argument("input_text", metavar="PROMPT", required=False)
@click.option("--dir", "scenarios_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Scenarios directory the scenario NAME is written into (default: tests/scenarios).")
@click.option("-m", "--model", default=None, envvar="FLUX_MODEL",
              help="provider:model to record against — mock, scripted:PATH, openai:NAME, ollama:NAME, anthropic:NAME.")
@click.option("--workspace", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Seed directory: copied to a scratch workspace the agent works in (the seed is never modified).")
@click.option("--base-url", default=None, help="Endpoint of an OpenAI- or Anthropic-compatible server.")
@click.option("--system", "instructions", default=None, help="Instructions (system prompt) for the model.")
@click.option("--max-iter", type=click.IntRange(min=1), default=20, show_default=True)
@click.option("--yes", "-y", "yes", is_flag=True, help="Approve every op (default: deny all).")
@click.option("--policy", type=click.Path(dir_okay=False, path_type=Path), default=None, help="Policy file for approvals.")
@click.option("--update", is_flag=True, help="Overwrite a recorded scenario (same as FLUX_GOLDEN=update).")
@click.option("--allow-error", is_flag=True,
              help="Keep exactly this turn as the scenario even if it ended in a provider error, the approver denied "
                   "every tool call, or it reached no model.")
@click.option("--ops", "ops_ref", default=None, metavar="MODULE:ATTR",
              help="Record with these ops instead of the built-in coding ops (written to scenario.toml as ops = …).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object: directory, session, model, outcome, tool calls, replay.")
@click.option("--from-import", "from_import", default=None, metavar="SESSION",
              help="Make NAME from a session `flux import` wrote to --store (no PROMPT, no model: replay only).")
@store_option
@handle_errors
def record_cmd(name: str, input_text: Optional[str], scenarios_dir: Optional[Path], model: Optional[str],
               workspace: Optional[Path], base_url: Optional[str], instructions: Optional[str], max_iter: int, yes: bool,
               policy: Optional[Path], update: bool, allow_error: bool, ops_ref: Optional[str], as_json: bool,
               from_import: Optional[str], store: Optional[Path]) -> None:
    """Record one live turn for PROMPT as the scenario NAME, written to --dir/NAME (commit it).

    With --from-import SESSION, the scenario is made from an imported run instead (docs/import.md)."""
    if from_import is not None:
        from .importing import record_from_import

        if not plain_name(name):
            fail(f"the scenario name {name!r} must be a plain directory name (letters, digits, - _ .)")
        return record_from_import(name, from_import, input_text,
                                  (scenarios_dir if scenarios_dir is not None else SCENARIOS_DIR) / name, store, update,
                                  as_json)
    if input_text is None:
        fail("missing argument 'PROMPT' (see `flux record --help`)")
    if model is None:
        fail("missing option '-m' / '--model' (see `flux record --help`)")
    import shutil
    import tempfile

    from ..agent.client import DEFAULT_INSTRUCTIONS, Client
    from ..testkit.golden import ENV
    from ..testkit.scenario import Scenario
    from .agent import approval_options

    if not plain_name(name):
        fail(_name_hint(name, input_text))
    if not input_text.strip():
        fail(f"the prompt is empty — say what the agent should do, e.g. flux record {name} \"write a note\"")
    if yes and policy is not None:
        fail("pass either --yes or --policy FILE, not both")
    if workspace is not None and not workspace.is_dir():
        fail(f"--workspace {workspace} is not a directory — give the seed directory the agent should start from")
    directory = (scenarios_dir if scenarios_dir is not None else SCENARIOS_DIR) / name
    if update:
        os.environ[ENV] = "update"
    kw = approval_options(yes, policy, False)
    scratch = Path(tempfile.mkdtemp(prefix="flux-record-ws-"))
    try:
        ws = scratch / "workspace"
        if workspace is not None:
            shutil.copytree(workspace, ws, symlinks=True)
        else:
            ws.mkdir()
        client = Client(model, workspace=ws, store=None, base_url=base_url, max_iter=max_iter,
                        instructions=instructions or DEFAULT_INSTRUCTIONS, ops=ops_ref, **kw)
        try:
            sc = Scenario.record(client, input_text, directory, name=name, allow_error=allow_error)
        finally:
            client.close()
        try:
            out = sc.replay() if sc.golden().cells else None
            turn = sc.golden().turns[-1] if sc.golden().turns else None
            calls = len(sc.golden().cells)
            if as_json:
                json_out({"directory": str(directory), "session": sc.manifest.session, "model": model,
                          "outcome": turn.outcome if turn else None, "tool_calls": calls,
                          "replay_faithful": out.faithful if out else None})
            else:
                click.echo(f"recorded {directory} · {sc.manifest.session} · {model} · turn {turn.outcome if turn else '?'} · "
                           f"{calls} tool call(s)" + (f" · replay {'faithful' if out.faithful else 'NOT faithful'}" if out else ""))
            if turn is not None and turn.outcome != "ok":
                if not allow_error:
                    click.echo(f"error: the recorded turn ended {turn.outcome}: {turn.answer}", err=True)
                    sys.exit(1)
                if not as_json:
                    click.echo(f"kept the {turn.outcome} turn as the scenario (--allow-error): {turn.answer}")
        finally:
            sc.close()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _table(results: list[Any]) -> list[str]:
    if not results:
        return []
    w1 = max(8, *(len(r.name) for r in results))
    w2 = max(6, *(len(r.replay) for r in results))
    w3 = max(5, *(len(r.check) for r in results))
    out = [f"{'scenario':<{w1}}  {'replay':<{w2}}  {'check':<{w3}}  first divergence"]
    for r in results:
        fd = r.first_divergence or ""
        if len(fd) > 100:
            fd = fd[:99] + "…"
        out.append(f"{r.name:<{w1}}  {r.replay or '-':<{w2}}  {r.check or '-':<{w3}}  {fd}")
    return out


def _junit(results: list[Any], orphans: list[Path], path: Path, seconds: float) -> None:
    import xml.etree.ElementTree as ET

    failures = sum(1 for r in results if not r.ok and not r.error)
    errors = sum(1 for r in results if r.error) + len(orphans)
    suite = ET.Element("testsuite", name="flux test", tests=str(len(results) + len(orphans)), failures=str(failures),
                       errors=str(errors), skipped="0", time=f"{seconds:.3f}")
    for r in results:
        case = ET.SubElement(suite, "testcase", classname="flux.scenarios", name=r.name, file=str(r.path),
                             time=f"{r.seconds:.3f}")
        props = ET.SubElement(case, "properties")
        ET.SubElement(props, "property", name="replay", value=r.replay)
        ET.SubElement(props, "property", name="check", value=r.check)
        if r.error:
            el = ET.SubElement(case, "error", message=r.error)
            el.text = r.detail or r.error
        elif not r.ok:
            el = ET.SubElement(case, "failure", message=r.first_divergence or "failed")
            el.text = r.detail
    for o in orphans:
        case = ET.SubElement(suite, "testcase", classname="flux.goldens", name=f"orphan {o}", time="0")
        el = ET.SubElement(case, "error", message=f"orphan golden {o}: no scenario owns it")
        el.text = el.get("message")
    root = ET.Element("testsuites")
    root.append(suite)
    path.parent.mkdir(parents=True, exist_ok=True)
    ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)


def _targets(names: tuple[str, ...], scenarios_dir: Optional[Path]) -> list[Path]:
    """What ``flux test`` runs: the scenarios directory (``--dir``, default ``tests/scenarios``,
    else ``.``) or, per argument, the scenario NAME in it. An argument that is a path rather than a
    name (``tests/scenarios``, ``./s``) keeps working without ``--dir``; with ``--dir`` it is
    refused, like flux, so a name can never reach outside the scenarios directory."""
    root = scenarios_dir if scenarios_dir is not None else SCENARIOS_DIR
    if not names:
        if scenarios_dir is None and not root.is_dir():
            return [Path(".")]
        return [root]
    out = []
    for n in names:
        if plain_name(n):
            if (root / n).is_dir():
                out.append(root / n)
            elif scenarios_dir is None and Path(n).is_dir():
                out.append(Path(n))  # a directory name in the current directory (the older PATH form)
            else:
                raise FluxError(f"no scenario {n!r} under {root} — record it: flux record {n} \"PROMPT\" -m MODEL"
                                + ("" if scenarios_dir is not None else " (or give its directory: --dir DIR)"))
        elif scenarios_dir is not None:
            raise FluxError(f"{n!r} is not a scenario name: with --dir, a NAME must be a single plain path segment "
                            f"(the directory of a scenario under {scenarios_dir})")
        else:
            out.append(Path(n))
    return out


@main.command("test")
@click.argument("names", nargs=-1, metavar="[NAME|PATH]...")
@click.option("--dir", "scenarios_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Scenarios directory (default: tests/scenarios, else .); NAME is a scenario in it.")
@click.option("--update", is_flag=True, help="Re-baseline goldens (plan.flux.snap, trajectory goldens) and report what changed.")
@click.option("--replay-only", is_flag=True, help="Replay only; do not re-drive the agent loop (check).")
@click.option("-k", "keyword", default=None, help="Only scenarios whose name matches (pytest -k syntax: words, and/or/not).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object with every result.")
@click.option("--junit-xml", "junit", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write a JUnit XML report to this file.")
@click.option("-v", "--verbose", is_flag=True, help="Print the full failure text (trajectory diff) of every failing scenario.")
@click.option("--report", "report_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write a self-contained HTML report: every scenario, and each failure's golden ↔ this run.")
@click.option("--summary", "summary_fmt", type=click.Choice(["md"]), default=None,
              help="Also print a short Markdown summary for CI (appended to $GITHUB_STEP_SUMMARY when it is set).")
@click.option("--live-misses", is_flag=True,
              help="A model call the recording cannot answer goes to the live provider (it spends) and is counted "
                   "in model_live, instead of failing the check at once. Default: strict, offline.")
@click.option("-m", "--model", "live_model", default=None,
              help="With --live-misses: the provider:model misses go to (default: each scenario's recorded model).")
@click.option("--base-url", "live_base_url", default=None,
              help="With --live-misses: the endpoint of that provider (keys come from the environment).")
@click.option("--ops", "ops_ref", default=None, metavar="MODULE:ATTR",
              help="Re-drive every scenario with these ops instead of the ones its scenario.toml names.")
@handle_errors
def test_cmd(names: tuple[str, ...], scenarios_dir: Optional[Path], update: bool, replay_only: bool,
             keyword: Optional[str], as_json: bool, junit: Optional[Path], verbose: bool, report_file: Optional[Path],
             summary_fmt: Optional[str], live_misses: bool, live_model: Optional[str],
             live_base_url: Optional[str], ops_ref: Optional[str]) -> None:
    """Replay and check every scenario under --dir (default: tests/scenarios, else .), or the scenarios NAME — offline."""
    import time

    from ..testkit.golden import ENV
    from ..testkit.verdict import run_all

    if (live_model or live_base_url) and not live_misses:
        fail("-m/--base-url choose where --live-misses sends a miss — add --live-misses, or drop them")
    if live_misses and replay_only:
        fail("--live-misses changes the check, which --replay-only skips — pass one of them")
    if update:
        os.environ[ENV] = "update"
    paths = tuple(_targets(names, scenarios_dir))
    factory = None
    if live_misses:
        from ..testkit.runner import live_client

        def factory(sc: Any) -> Any:
            return live_client(sc, model=live_model, base_url=live_base_url, ops=ops_ref)
    t0 = time.perf_counter()
    from ..agent.ops import OPS_REF

    if ops_ref is not None and not OPS_REF.fullmatch(ops_ref):
        fail(f"--ops {ops_ref!r}: name the ops as module:attr (e.g. myproject.tools:OPS)")
    results, orphans = run_all(paths, replay_only=replay_only, keyword=keyword, client_factory=factory,
                               on_miss="live" if live_misses else "strict", ops=ops_ref)
    seconds = time.perf_counter() - t0
    if not results and not orphans:
        where = ", ".join(map(str, paths))
        raise FluxError(f"no scenario fixtures under {where}" + (f" match -k {keyword!r}" if keyword else "")
                        + " — record one: flux record NAME \"PROMPT\" -m MODEL")
    if junit is not None:
        _junit(results, orphans, junit, seconds)
    if report_file is not None or summary_fmt is not None:
        _ci_reports(results, orphans, seconds, report_file, summary_fmt)
    ok = sum(1 for r in results if r.ok)
    failed = len(results) - ok
    if as_json:
        json_out({"scenarios": [r.to_json() for r in results], "orphans": [str(o) for o in orphans],
                  "passed": ok, "failed": failed, "total": len(results), "seconds": round(seconds, 3),
                  "ok": failed == 0 and not orphans,
                  "fixtures": [{"name": r.name, "ok": r.ok, "failure": None if r.ok else (r.first_divergence or r.error
                                                                                          or "failed")}
                               for r in results]})
    else:
        for line in _table(results):
            click.echo(line)
        for r in results:
            for rb in r.rebaselined:
                click.echo(f"{rb.line()}")
                if rb.diff:
                    click.echo(rb.diff)
        if update and not any(r.rebaselined for r in results):
            click.echo("--update: nothing to re-baseline — every plan snapshot and trajectory golden already matches")
        for o in orphans:
            click.echo(f"✗ orphan golden {o}: no scenario owns it — delete it, or move it into its scenario "
                       f"directory as trajectory.golden.json")
        if verbose:
            for r in results:
                if not r.ok and r.detail:
                    click.echo("")
                    click.echo(f"── {r.name} ──")
                    click.echo(r.detail)
        elif failed:
            click.echo("(-v prints each failure's trajectory diff)")
        click.echo(f"{len(results)} scenario(s): {ok} clean, {failed} failed"
                   + (f", {len(orphans)} orphan golden(s)" if orphans else "") + f" · {seconds:.2f}s")
    if failed or orphans:
        sys.exit(1)


def _ci_reports(results: list[Any], orphans: list[Path], seconds: float, report_file: Optional[Path],
               summary_fmt: Optional[str]) -> None:
    """The HTML report and the Markdown summary of one run (before the verdict's exit code)."""
    from ..pages.html import Scrub
    from ..pages.test_report import markdown_summary, render_test_report
    from .pages import write_atomically

    scrub = Scrub()
    if report_file is not None:
        write_atomically(report_file, render_test_report(results, orphans, seconds, scrub))
        click.echo(f"wrote {report_file}", err=True)
    if summary_fmt == "md":
        text = markdown_summary(results, orphans, seconds, scrub=scrub,
                                report_link=report_file.name if report_file is not None else None)
        target = os.environ.get("GITHUB_STEP_SUMMARY")
        if target:
            try:
                with open(target, "a", encoding="utf-8") as f:
                    f.write(text)
            except OSError as e:
                raise FluxError(f"cannot append the summary to $GITHUB_STEP_SUMMARY ({target}): {e.strerror or e}") from None
            click.echo(f"appended the summary to {target}", err=True)
        else:
            click.echo(text, err=True)


def _trajectory(target: str, store: Optional[Path]) -> tuple[str, dict]:
    """S — a scenario directory (its recorded session) or a session id in the store — as its ATIF
    trajectory with its sub-agents embedded: ``(session id, trajectory)``."""
    from ..model.session import load_session
    from ..store.store import StoreReader
    from ..testkit import atif

    p = Path(target)
    if p.is_dir() and (p / "scenario.toml").is_file():
        from ..testkit.scenario import Scenario

        sc = Scenario.load(p)
        try:
            with StoreReader(sc.work) as reader:
                detail = sc.golden()
                return detail.id, atif.export(detail, reader)
        finally:
            sc.close()
    reader = open_reader(store)
    try:
        detail = load_session(reader, target)
        return detail.id, atif.export(detail, reader)
    finally:
        reader.close()


@main.command("export")
@click.argument("session")
@click.option("--format", "fmt", type=click.Choice(["atif", "html", "otel"]), default=None,
              help="Output format (default: from -o's suffix, .html or .json; otel with --endpoint).")
@click.option("--normalize", is_flag=True, help="Replace volatile values with placeholders (the golden form).")
@click.option("-o", "--output", type=click.Path(path_type=Path), default=None, help="Write to FILE (a folder with --family).")
@click.option("--family", is_flag=True, help="html: one page per session of SESSION's family, into the folder -o DIR.")
@click.option("--endpoint", default=None, metavar="URL",
              help="otel: send the spans to this OTLP/HTTP collector instead of writing OTLP/JSON.")
@click.option("--json", "as_json", is_flag=True,
              help="One JSON object: session, format, normalized, file, and the trajectory (unless -o wrote it).")
@store_option
@handle_errors
def export_cmd(session: str, fmt: Optional[str], normalize: bool, output: Optional[Path], family: bool,
               endpoint: Optional[str], as_json: bool, store: Optional[Path]) -> None:
    """Export SESSION (s_<n>, last, or a scenario directory) as an ATIF trajectory or an HTML page.

    `-o run.html` (or --format html) writes one self-contained page for a reviewer: plans, cells,
    cost, timeline, family; every string redacted again; no script, nothing fetched. `--format
    otel` writes the session as OpenTelemetry spans (OTLP/JSON), or sends them with `--endpoint`."""
    from ..testkit import atif
    from . import pages

    fmt = pages.export_format(fmt, output, family, endpoint)
    if fmt == "html":
        _export_html(session, output, family, as_json, store)
        return
    if fmt == "otel":
        _export_otel(session, output, endpoint, as_json, store)
        return

    sid, doc = _trajectory(session, store)
    if normalize:
        doc = atif.normalize(doc)
    text = atif.dumps(doc)
    if output is not None:
        output.write_text(text, encoding="utf-8")
    if as_json:
        report = {"session": sid, "format": fmt, "normalized": normalize,
                  "file": None if output is None else str(output)}
        if output is None:
            report["trajectory"] = doc
        json_out(report)
    elif output is None:
        click.echo(text, nl=False)


def _export_otel(session: str, output: Optional[Path], endpoint: Optional[str], as_json: bool,
                 store: Optional[Path]) -> None:
    import json

    from ..pages.html import Scrub
    from ..telemetry import otlp_json, send_otlp, session_spans
    from . import pages

    if endpoint is not None and output is not None:
        raise FluxError("--endpoint sends the spans, -o writes them: give one of the two")
    from ..model.session import load_session

    with open_reader(store) as reader:
        detail = load_session(reader, session)
        spans = session_spans(detail, Scrub(), store_key=str(reader.dir))
    if endpoint is not None:
        send_otlp(spans, endpoint)
        if as_json:
            json_out({"session": detail.id, "format": "otel", "spans": len(spans), "endpoint": endpoint})
        else:
            click.echo(f"sent {len(spans)} span(s) of {detail.id} to {endpoint}", err=True)
        return
    text = json.dumps(otlp_json(spans), ensure_ascii=False, indent=1) + "\n"
    if output is not None:
        pages.write_atomically(output, text)
    if as_json:
        json_out({"session": detail.id, "format": "otel", "spans": len(spans),
                  "file": None if output is None else str(output)})
    elif output is None:
        click.echo(text, nl=False)


def _export_html(session: str, output: Optional[Path], family: bool, as_json: bool, store: Optional[Path]) -> None:
    from . import pages

    with open_reader(store) as reader:
        store_dir = reader.dir
        if family:
            written = pages.write_family_pages(reader, session, output, store_dir)
        else:
            text = pages.run_page_text(reader, session, store_dir)
            if output is None and not as_json:
                click.echo(text, nl=False)
                return
            written = []
            if output is not None:
                pages.write_atomically(output, text)
                written = [output]
    if as_json:
        json_out({"session": session, "format": "html", "files": [str(p) for p in written]})
    else:
        for p in written:
            click.echo(f"wrote {p}", err=True)


@main.group("golden")
def golden_group() -> None:
    """Golden trajectories: compare a session's normalised ATIF trajectory with a committed file."""


def _golden(session: str, golden: Path, store: Optional[Path], update: bool, tolerance: float,
            as_json: bool = False, compare_content: bool = True, sort_subagents: bool = True) -> None:
    from ..testkit import atif

    actual = atif.normalize(_trajectory(session, store)[1], sort_subagents=sort_subagents)
    problem, rb = atif.check_golden(golden, actual, update=update, token_tolerance=tolerance,
                                    compare_content=compare_content)
    if as_json:
        json_out({"session": session, "golden": str(golden), "matches": problem is None,
                  "written": None if rb is None else ("created" if rb.created else "updated"),
                  "diff": rb.diff if rb is not None else None, "problem": problem})
        if problem is not None:
            sys.exit(1)
        return
    if rb is not None:
        click.echo(rb.line())
        if rb.diff:
            click.echo(rb.diff)
    elif update:
        click.echo(f"{golden} is up to date")
    if problem is not None:
        if "\n" not in problem:
            fail(problem)
        click.echo(problem)
        sys.exit(1)
    if not update:
        click.echo(f"✓ {session} matches {golden}")


@golden_group.command("check")
@click.argument("session")
@click.argument("golden", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--token-tolerance", type=click.FloatRange(min=0.0), default=0.0, show_default=True,
              help="Relative band for prompt/completion tokens (e.g. 0.15 against a live model).")
@click.option("--no-content", is_flag=True,
              help="Leave the content hash out: compare only the shape (steps, tools, sub-agents, tokens, crashed).")
@click.option("--keep-subagent-order", is_flag=True,
              help="Compare sub-agent trajectories in arrival order instead of sorted by content.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object: matches, problem (the failure text), diff.")
@store_option
@handle_errors
def golden_check(session: str, golden: Path, token_tolerance: float, no_content: bool, keep_subagent_order: bool,
                 as_json: bool, store: Optional[Path]) -> None:
    """Compare SESSION's trajectory with GOLDEN (exit 1 and a unified diff when it differs)."""
    _golden(session, golden, store, False, token_tolerance, as_json, compare_content=not no_content,
            sort_subagents=not keep_subagent_order)


@golden_group.command("update")
@click.argument("session")
@click.argument("golden", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--keep-subagent-order", is_flag=True,
              help="Write sub-agent trajectories in arrival order instead of sorted by content.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object: written (created/updated/null) and the diff.")
@store_option
@handle_errors
def golden_update(session: str, golden: Path, keep_subagent_order: bool, as_json: bool, store: Optional[Path]) -> None:
    """Write (or re-baseline) GOLDEN from SESSION's trajectory, printing what changed."""
    _golden(session, golden, store, True, 0.0, as_json, sort_subagents=not keep_subagent_order)
