"""``flux fmt`` driven as a real process, flux's fmt_cli.rs cases ported: the golden on standard input,
files rewritten in place with canonical ones left untouched, ``--check`` exiting 1 with a diff summary,
a bad file reported without abandoning the rest of the batch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO

DATA = REPO / "tests" / "lang" / "data"
MIXED = (DATA / "fmt" / "mixed_dialect.flux").read_text()
CANONICAL = (DATA / "fmt" / "canonical.flux").read_text()
BROKEN = 'flow x\n  confirm "y\n'  # an unterminated string


def flux_fmt(*args: str, stdin: str = "", cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO / "core"))
    return subprocess.run([sys.executable, "-c", "from flux.cli import main; main(prog_name='flux')", "fmt", *args],
                          input=stdin, capture_output=True, text=True, env=env, cwd=cwd, timeout=60)


def test_fmt_prints_the_canonical_text_of_standard_input():
    res = flux_fmt("-", stdin=MIXED)
    assert (res.returncode, res.stdout, res.stderr) == (0, CANONICAL, "")
    again = flux_fmt("-", stdin=res.stdout)
    assert again.stdout == res.stdout  # idempotent


def test_fmt_write_rewrites_files_in_place_and_leaves_canonical_ones_untouched(tmp_path):
    legacy, canonical = tmp_path / "legacy.flux", tmp_path / "canonical.flux"
    legacy.write_text(MIXED)
    canonical.write_text(CANONICAL)
    before = canonical.stat().st_mtime_ns
    res = flux_fmt("--write", str(legacy), str(canonical))
    assert (res.returncode, res.stdout, res.stderr) == (0, "", "")
    assert legacy.read_text() == CANONICAL
    assert canonical.read_text() == CANONICAL and canonical.stat().st_mtime_ns == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["canonical.flux", "legacy.flux"]  # no temp file left


def test_fmt_check_exits_0_on_canonical_input_and_1_otherwise(tmp_path):
    (tmp_path / "ok.flux").write_text(CANONICAL)
    (tmp_path / "legacy.flux").write_text(MIXED)
    ok = flux_fmt("--check", "ok.flux", cwd=tmp_path)
    assert (ok.returncode, ok.stdout, ok.stderr) == (0, "", "")
    bad = flux_fmt("--check", "ok.flux", "legacy.flux", cwd=tmp_path)
    assert bad.returncode == 1 and bad.stdout == ""
    assert "legacy.flux: not canonical" in bad.stderr and "ok.flux" not in bad.stderr
    # the diff summary names what would change
    assert '-  $hits = grep({ pattern:' in bad.stderr and '+  hits = grep(pattern:' in bad.stderr
    assert (tmp_path / "legacy.flux").read_text() == MIXED  # --check writes nothing


def test_fmt_check_on_fluxs_formatter_checked_examples_reports_them_canonical():
    files = sorted(str(p) for p in (DATA / "website").glob("docs--language--examples.*.flux"))
    assert len(files) == 8
    res = flux_fmt("--check", *files, str(DATA / "fmt" / "canonical.flux"))
    assert (res.returncode, res.stderr) == (0, "")


def test_fmt_reports_a_bad_file_without_abandoning_the_rest_of_the_batch(tmp_path):
    broken, legacy = tmp_path / "a-broken.flux", tmp_path / "b-legacy.flux"
    broken.write_text(BROKEN)
    legacy.write_text(MIXED)
    res = flux_fmt("--write", str(broken), str(legacy))
    assert res.returncode == 1
    (line,) = res.stderr.splitlines()
    assert line.startswith(f"error: {broken}: line 2, col 11: unterminated string"), line
    assert legacy.read_text() == CANONICAL  # the file after the broken one was still formatted
    assert broken.read_text() == BROKEN


@pytest.mark.parametrize("args, stdin, what", [
    (["-"], BROKEN, "error: -: line 2"),
    (["--check", "--write", "x.flux"], "", "error: --check writes nothing and --write rewrites: choose one"),
    (["--write", "-"], "", "error: standard input (`-`) can be given once, and not with --write"),
    (["missing.flux"], "", "error: missing.flux: No such file or directory"),
    ([], "", "error: missing argument 'FILES...' (see `flux fmt --help`)"),
])
def test_bad_input_is_one_error_line_and_exit_1(tmp_path, args, stdin, what):
    res = flux_fmt(*args, stdin=stdin, cwd=tmp_path)
    assert res.returncode == 1 and res.stdout == ""
    assert len(res.stderr.splitlines()) == 1 and res.stderr.startswith(what), res.stderr
    assert "Traceback" not in res.stderr


def test_fmt_refuses_a_directory_and_text_that_is_not_utf8(tmp_path):
    (tmp_path / "bin.flux").write_bytes(b"flow\n  x = f(\xff)\n")
    res = flux_fmt("bin.flux", ".", cwd=tmp_path)
    assert res.returncode == 1
    assert res.stderr.splitlines() == ["error: bin.flux: is not UTF-8 text",
                                       "error: .: is a directory: give the .flux files in it"]


def test_fmt_json_says_which_files_are_canonical(tmp_path):
    (tmp_path / "ok.flux").write_text(CANONICAL)
    (tmp_path / "legacy.flux").write_text(MIXED)
    (tmp_path / "broken.flux").write_text(BROKEN)
    res = flux_fmt("--check", "--json", "ok.flux", "legacy.flux", "broken.flux", cwd=tmp_path)
    assert res.returncode == 1 and res.stderr == ""
    files = {f["path"]: f for f in json.loads(res.stdout)["files"]}
    assert files["ok.flux"]["canonical"] is True and files["legacy.flux"]["canonical"] is False
    assert files["broken.flux"]["canonical"] is None and "unterminated string" in files["broken.flux"]["error"]
