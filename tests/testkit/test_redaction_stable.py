"""A recording whose ``read`` returned a file holding an API key is stored redacted, and stays
green: the re-drive serves the redacted cell from tape and compares equal to its recording (the
``redacted`` flag is the recorded cell's). A genuinely changed cell value is still red, and the
redaction marker pinned in scenario.toml is compared — a drifted one is its own one-line error."""

from __future__ import annotations

import dataclasses

import pytest
from click.testing import CliRunner

from flux.cli import main
from flux.store import Run
from flux.testkit import Scenario
from flux.testkit.errors import ScenarioError
from flux.testkit.runner import offline_client
from flux.testkit.verdict import judge as run_scenario

from tests.helpers import on_cell, rewrite
from tests.testkit.corpus import SECRET, record_secret


@pytest.fixture
def secret_dir(tmp_path, offline):
    return record_secret(tmp_path / "secret")


def test_the_secret_is_stored_redacted(secret_dir):
    for f in secret_dir.iterdir():
        assert SECRET.encode() not in f.read_bytes(), f.name
    with Scenario.load(secret_dir) as sc:
        cell = sc.golden().cells[0].rec
    assert cell.redacted and cell.content == "OPENAI_API_KEY=[redacted]\n"


def test_a_redacted_recording_is_green_under_flux_test(secret_dir):
    res = run_scenario(secret_dir)
    assert res.ok, res.detail
    assert res.replay == "✓ faithful" and res.check == "✓ faithful"
    out = CliRunner().invoke(main, ["test", str(secret_dir)])
    assert out.exit_code == 0, out.output


def test_the_design_idiom_is_clean_on_the_redacted_recording(secret_dir):
    with Scenario.load(secret_dir) as sc:
        client = offline_client(sc)
        try:
            report = sc.check(client)
        finally:
            client.close()
    assert not report.plan_changed and not report.left_world
    assert report.is_clean(), report.explain()
    assert report.events_diff == []


def test_a_genuinely_changed_cell_value_stays_red(secret_dir):
    rewrite(secret_dir, on_cell(lambda c: Run(dataclasses.replace(c, content="OPENAI_API_KEY=[redacted]\nDEBUG=1\n"))))
    res = run_scenario(secret_dir)
    assert not res.ok
    assert res.first_divergence.startswith("model call 2: the request differs")
    assert "DEBUG=1" in res.detail


def test_a_redactor_that_now_redacts_more_is_red(secret_dir):
    """A served cell is answered with the recorded text and re-recorded through today's redactor:
    one that now finds a secret in it (here a registered value) changes the stored cell."""
    with Scenario.load(secret_dir) as sc:
        client = offline_client(sc)
        client.redactor.register("OPENAI_API_KEY")
        try:
            report = sc.check(client)
        finally:
            client.close()
    assert not report.is_clean()
    assert report.first_divergence.startswith("model call 2: the request differs")
    assert "'[redacted]=[redacted]\\n'" in report.first_divergence


def test_a_drifted_redaction_marker_is_its_own_one_line_error(secret_dir):
    toml = secret_dir / "scenario.toml"
    toml.write_text(toml.read_text().replace('redaction_marker = "[redacted]"', 'redaction_marker = "[gone]"'))
    res = run_scenario(secret_dir)
    assert not res.ok
    assert res.error == res.first_divergence
    assert res.error.startswith("redaction marker drifted — scenario.toml pins '[gone]', this check's redactor "
                                "writes '[redacted]'")
    assert "\n" not in res.error
    with Scenario.load(secret_dir) as sc:
        client = offline_client(sc)
        try:
            with pytest.raises(ScenarioError, match="redaction marker drifted"):
                sc.check(client)
        finally:
            client.close()
    out = CliRunner().invoke(main, ["test", str(secret_dir)])
    assert out.exit_code == 1 and "redaction marker drifted" in out.output
