"""`flux test --report FILE --summary md`: the HTML report and the Markdown summary say the same
verdict as the table and the exit code, list each failure, and carry no secret."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from flux.cli import main

SECRET = "sk-ant-REPORTSECRET0123456789"


@pytest.fixture(scope="module")
def scenarios(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("report")
    runner = CliRunner()
    for name in ("note", "other"):
        res = runner.invoke(main, ["record", name, "write a quick note", "-m", "mock", "--dir", str(root / "sc"),
                                   "--yes", "--workspace", str(root)])
        assert res.exit_code == 0, res.output
    return root / "sc"


def _run(scenarios: Path, tmp_path: Path, monkeypatch, *extra: str):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    report = tmp_path / "report.html"
    res = CliRunner().invoke(main, ["test", "--dir", str(scenarios), "--report", str(report), "--summary", "md", *extra])
    return res, report


def test_a_clean_run_reports_clean(scenarios, tmp_path, monkeypatch):
    res, report = _run(scenarios, tmp_path, monkeypatch)
    assert res.exit_code == 0, res.output
    page = report.read_text(encoding="utf-8")
    assert "All 2 scenario(s) clean." in page and "Failures" not in page
    assert "### flux test: ✅ 2 scenario(s) clean" in res.output
    assert "[report.html](report.html)" in res.output


def test_a_failure_is_in_the_report_the_summary_and_the_exit_code(scenarios, tmp_path, monkeypatch):
    import shutil

    broken = tmp_path / "sc"
    shutil.copytree(scenarios, broken)
    snap = broken / "other" / "plan.flux.snap"
    snap.write_text(snap.read_text(encoding="utf-8") + f"tamper {SECRET}\n", encoding="utf-8")
    summary = tmp_path / "step-summary.md"
    summary.write_text("earlier step\n", encoding="utf-8")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    report = tmp_path / "report.html"
    res = CliRunner().invoke(main, ["test", "--dir", str(broken), "--report", str(report), "--summary", "md"])
    assert res.exit_code == 1
    page = report.read_text(encoding="utf-8")
    assert "1 failed, 1 clean." in page
    assert re.search(r'<a href="#f(\d+)">other</a>', page)
    fid = re.search(r'<a href="#f(\d+)">other</a>', page).group(1)
    assert f'<section id="f{fid}"><h3>✗ other</h3>' in page and "plan snapshot mismatch" in page
    md = summary.read_text(encoding="utf-8")
    assert md.startswith("earlier step\n### flux test: ❌ 1 failed, 1 clean")  # appended, not overwritten
    assert "| other |" in md and "plan snapshot mismatch" in md and "| note |" not in md
    assert SECRET not in page and SECRET not in md and "[redacted]" in page


def test_the_report_secret_check_can_fail(scenarios, tmp_path, monkeypatch):
    """With the scrub off the planted secret is on the page: the assertion above is not vacuous."""
    import shutil

    from flux.pages.html import Scrub

    broken = tmp_path / "sc"
    shutil.copytree(scenarios, broken)
    snap = broken / "other" / "plan.flux.snap"
    snap.write_text(snap.read_text(encoding="utf-8") + f"tamper {SECRET}\n", encoding="utf-8")
    monkeypatch.setattr(Scrub, "__call__", lambda self, text: text if isinstance(text, str) else str(text))
    res, report = _run(broken, tmp_path, monkeypatch)
    assert res.exit_code == 1 and SECRET in report.read_text(encoding="utf-8")


def test_an_unwritable_step_summary_is_one_error_line(scenarios, tmp_path, monkeypatch):
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "no" / "such" / "dir" / "summary.md"))
    res = CliRunner().invoke(main, ["test", "--dir", str(scenarios), "--summary", "md"])
    assert res.exit_code == 1
    assert [ln for ln in res.output.splitlines() if ln.startswith("error:")] == [
        ln for ln in res.output.splitlines() if "GITHUB_STEP_SUMMARY" in ln]
