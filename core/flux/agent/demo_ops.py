"""The demo toolbox: the coding ops plus the demo project's ``run_tests`` and ``publish``.

``toolbox.json`` names it ``demo``; :mod:`flux.demo` records the demo store with it, and the toolbox
registry (:mod:`.toolboxes`) hands it to whatever re-runs a demo session's ops live.
"""

from __future__ import annotations

import gzip
import io
import re
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

from .builtin_ops import coding_ops
from .ops import OpError, op

__all__ = ["DemoKilled", "demo_ops", "publish_package", "run_demo_tests"]


class DemoKilled(BaseException):
    """Raised inside an op dispatch to stop recording exactly where a SIGKILL would."""


def demo_ops(ws: Path, *, secrets: Any = (), kill_publish: bool = False) -> list:
    """The demo toolbox (``toolbox.json`` names it ``demo``): the coding ops plus two project ops
    the scripted agents use, bound to a workspace holding the demo project.

    ``run_tests`` runs the project's two tokenizer tests (for real: it imports ``src/tokenizer.py``
    from the workspace). ``publish`` publishes the package to the demo's package index, which is
    the local directory ``index/<repository>/`` in the workspace: it writes
    ``tokenizer-<VERSION>.tar.gz`` (the project's sources) there — nothing leaves the machine.
    ``kill_publish`` makes ``publish`` stop the recording the way a SIGKILL would (the demo's
    killed sessions)."""

    @op(effect="exec")
    def run_tests(path: str = "tests") -> str:
        """Run the project's test suite and report the result."""
        return run_demo_tests(ws, path)

    @op(effect="write")
    def publish(repository: str) -> str:
        """Publish the built package to a package index (the demo's index is local: index/<repository>/)."""
        if kill_publish:
            raise DemoKilled()
        return publish_package(ws, repository)

    return coding_ops(ws, secrets=secrets) + [run_tests, publish]


_TEST_SCRIPT = r"""
import sys
scope = {}
src = open("src/tokenizer.py", encoding="utf-8").read()
try:
    exec(compile(src, "src/tokenizer.py", "exec"), scope)
    tokenize = scope["tokenize"]
except Exception as e:
    print(f"E   {type(e).__name__}: {e}")
    print("error collecting tests/test_tokenizer.py")
    sys.exit(2)
failed = []
for name, text, want in (("test_words", "a b", ["a", "b"]), ("test_empty_input", "", [])):
    try:
        got = tokenize(text)
    except Exception as e:
        failed.append((name, type(e).__name__, str(e)))
        continue
    if got != want:
        failed.append((name, "AssertionError", f"{got!r} != {want!r}"))
for f in failed:
    print("\t".join(f))
sys.exit(1 if failed else 0)
"""


def run_demo_tests(ws: Path, path: str) -> str:
    """The demo project's two tests, run for real (a ``python`` subprocess in the workspace, 10 s
    at most) against the workspace's ``src/tokenizer.py``."""
    if path.strip("/") != "tests":
        raise OpError(f"no test suite at {path!r} — the demo project's tests are in tests/\n[exit 4]")
    if not (ws / "src" / "tokenizer.py").is_file():
        raise OpError("src/tokenizer.py is missing — is this the demo project's workspace?\n[exit 4]")
    try:
        proc = subprocess.run([sys.executable, "-I", "-S", "-c", _TEST_SCRIPT], cwd=ws, capture_output=True,
                              text=True, timeout=10)
    except subprocess.TimeoutExpired:
        raise OpError("the tests did not finish within 10 s\n[exit 124]") from None
    if proc.returncode == 0:
        return "..\n2 passed in 0.03s\n[exit 0]"
    if proc.returncode != 1:
        raise OpError((proc.stdout or proc.stderr).strip()[-2000:] + f"\n[exit {proc.returncode}]")
    failed = [line.split("\t") for line in proc.stdout.splitlines() if line.count("\t") == 2]
    if [f[0] for f in failed] == ["test_empty_input"] and failed[0][1] == "IndexError":
        raise OpError(
            "F.\n=================================== FAILURES ===================================\n"
            "___________________________ test_empty_input ___________________________\n"
            "    def test_empty_input():\n>       assert tokenize(\"\") == []\n"
            "src/tokenizer.py:7: in tokenize\n    first = text[0]\nE   IndexError: string index out of range\n"
            "1 failed, 1 passed in 0.04s\n[exit 1]")
    lines = [f"FAILED tests/test_tokenizer.py::{name} — {kind}: {msg}" for name, kind, msg in failed]
    raise OpError("\n".join(lines) + f"\n{len(failed)} failed, {2 - len(failed)} passed in 0.04s\n[exit 1]")


def publish_package(ws: Path, repository: str) -> str:
    """Write the package into the local index ``index/<repository>/`` (deterministic bytes)."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}", repository or ""):
        raise OpError(f"cannot publish to {repository!r}: a repository is a name like pypi or testpypi")
    try:
        version = (ws / "VERSION").read_text().strip()
    except OSError:
        raise OpError("cannot publish: the project has no VERSION file") from None
    if not re.fullmatch(r"[0-9][0-9A-Za-z.+-]{0,31}", version):
        raise OpError(f"cannot publish: VERSION holds {version[:40]!r}, not a version")
    name = f"tokenizer-{version}"
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for rel in ("pyproject.toml", "VERSION", "README.md", "src/tokenizer.py", "src/parser.py"):
            p = ws / rel
            if not p.is_file():
                continue
            data = p.read_bytes()
            info = tarfile.TarInfo(f"{name}/{rel}")
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            tar.addfile(info, io.BytesIO(data))
    out = ws / "index" / repository / f"{name}.tar.gz"
    out.parent.mkdir(parents=True, exist_ok=True)
    try:  # created exclusively: of two publishes of one version racing (two sweep workers), one wins
        with out.open("xb") as f:
            f.write(gzip.compress(buf.getvalue(), mtime=0))
    except FileExistsError:
        raise OpError(f"{name} is already published to {repository} (index/{repository}/{name}.tar.gz) — bump VERSION first") from None
    return f"published {name} to {repository}: index/{repository}/{name}.tar.gz ({out.stat().st_size} bytes)"
