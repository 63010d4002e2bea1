"""Where the tests find flux's real fixture, reproduced in a fresh clone (no ``shared/`` beside it):
the README's test command must pass there, the tests that need the fixture skipping with one
reason; CI (``.ci/run``) points ``FLUX_FIXTURE_DIR`` at the shared copy and refuses to run without it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from tests.helpers import FIXTURE_ENV, FIXTURE_SKIP_REASON, REPO, fixture_dir, locate_fixture

# two files reading the fixture: one through the `fixture_store` fixture (conftest), one directly
FIXTURE_READERS = ["tests/core/test_lang_syntax.py", "tests/core/test_diff.py"]


def _clone(dst: Path) -> Path:
    """The repository's test tree and config in ``dst/flux-tui`` — no shared/ anywhere above it."""
    root = dst / "flux-tui"
    shutil.copytree(REPO / "tests", root / "tests", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.copy(REPO / "pyproject.toml", root / "pyproject.toml")
    shutil.copytree(REPO / ".ci", root / ".ci")
    return root


def _pytest(root: Path, env_fixture: str | None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != FIXTURE_ENV and not k.startswith("PYTEST")}
    if env_fixture is not None:
        env[FIXTURE_ENV] = env_fixture
    return subprocess.run([sys.executable, "-m", "pytest", "-o", "addopts=", "-q", "-rs", "-p", "no:cacheprovider", *FIXTURE_READERS],
                          cwd=root, env=env, capture_output=True, text=True, timeout=300)


def test_in_a_fresh_clone_the_fixture_tests_skip_with_one_reason(tmp_path):
    root = _clone(tmp_path)
    assert locate_fixture(root, environ={}) == (None, False)
    res = _pytest(root, None)
    out = res.stdout
    assert res.returncode == 0, out + res.stderr
    assert not re.search(r"\d+ (failed|errors?)\b", out), out
    skipped = [ln for ln in out.splitlines() if ln.startswith("SKIPPED")]
    assert {ln.split(": ", 1)[1] for ln in skipped} == {FIXTURE_SKIP_REASON}, skipped  # one reason, however many tests
    assert sum(int(re.match(r"SKIPPED \[(\d+)\]", ln).group(1)) for ln in skipped) >= 5
    assert re.search(r"\d+ passed", out), out  # what needs no fixture still runs


def test_a_fixture_dir_that_holds_no_store_fails_instead_of_skipping(tmp_path):
    root = _clone(tmp_path)
    res = _pytest(root, str(tmp_path / "nowhere"))
    assert res.returncode == 1, res.stdout
    assert f"{FIXTURE_ENV}={tmp_path / 'nowhere'} holds no flux store" in res.stdout
    assert not re.search(r"\d+ skipped", res.stdout), res.stdout


def test_the_fixture_from_flux_fixture_dir_runs_the_tests(tmp_path):
    root = _clone(tmp_path)
    res = _pytest(root, str(fixture_dir()))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "SKIPPED" not in res.stdout and not re.search(r"\d+ skipped", res.stdout), res.stdout


def _fake_python(bin_dir: Path, log: Path) -> None:
    """A ``python3`` whose ``-m venv DIR`` makes a venv whose pip succeeds and whose pytest logs
    the fixture variable it was run with — .ci/run's own logic, without a real install."""
    bin_dir.mkdir()
    script = bin_dir / "python3"
    script.write_text(f"""#!/bin/sh
venv="$3"
mkdir -p "$venv/bin"
printf '#!/bin/sh\\nexit 0\\n' > "$venv/bin/pip"
printf '#!/bin/sh\\necho "$FLUX_FIXTURE_DIR" > {log}\\n' > "$venv/bin/pytest"
chmod +x "$venv/bin/pip" "$venv/bin/pytest"
""")
    script.chmod(0o755)


def test_ci_run_points_the_tests_at_the_shared_copy_beside_the_checkout(tmp_path):
    root = _clone(tmp_path)
    shared = tmp_path / "shared" / "fixtures" / "flux" / "coding-agent-note"
    shutil.copytree(fixture_dir(), shared)
    log = tmp_path / "pytest-saw"
    _fake_python(tmp_path / "bin", log)
    env = {k: v for k, v in os.environ.items() if k != FIXTURE_ENV}
    env["PATH"] = f"{tmp_path / 'bin'}{os.pathsep}{env['PATH']}"
    res = subprocess.run(["bash", str(root / ".ci" / "run")], env=env, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert Path(log.read_text().strip()) == shared


def test_ci_run_fails_without_the_fixture(tmp_path):
    root = _clone(tmp_path)
    log = tmp_path / "pytest-saw"
    _fake_python(tmp_path / "bin", log)
    env = {k: v for k, v in os.environ.items() if k != FIXTURE_ENV}
    env["PATH"] = f"{tmp_path / 'bin'}{os.pathsep}{env['PATH']}"
    res = subprocess.run(["bash", str(root / ".ci" / "run")], env=env, capture_output=True, text=True, timeout=60)
    assert res.returncode == 1
    assert res.stderr.startswith("error: flux's real fixture is not at ") and len(res.stderr.splitlines()) == 1
    assert not log.exists() and not (root / ".venv").exists()  # stopped before installing or testing
