"""The README's and docs/cli.md's shell examples, run as written, in order, in an empty directory
against the installed ``flux`` — each must exit 0, or the exit status its comment says (``# … exit 1``).

What counts as an example: every line of a ```` ```sh ```` block (a line ending in ``\\`` continues
on the next; comment-only lines are skipped) and every ``$ `` line of another block (a transcript;
the lines after it are its output). Synopses are ```` ```text ```` blocks and are not run. Two kinds
of line are not executed: the installation commands (``python3 -m venv …``: the environment running
this test is their result) and ``flux-tui`` (it opens a full-screen app) — a ``flux-tui`` line is
still parsed by the app's own option parser, so a wrong flag or a missing ``--tests`` directory fails.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers import REPO

_FENCE = re.compile(r"^```(\w*)\s*$")
_EXIT = re.compile(r"\bexit (\d+)\b")


@dataclass(frozen=True)
class Example:
    line: int  # 1-based line of the doc where it starts
    command: str  # the shell text, comment removed
    expect: int  # the exit status it must end with
    kind: str  # run | app | install


def _split_comment(text: str) -> tuple[str, str]:
    """``command  # comment`` → (command, comment); a ``#`` inside quotes or a word is not one."""
    quote = None
    for i, ch in enumerate(text):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or text[i - 1].isspace()):
            return text[:i].rstrip(), text[i + 1:].strip()
    return text.rstrip(), ""


def shell_examples(markdown: str) -> list[Example]:
    out: list[Example] = []
    lang: str | None = None
    pending: list[str] = []
    start = 0
    for n, raw in enumerate(markdown.splitlines(), 1):
        fence = _FENCE.match(raw)
        if fence and not pending:
            lang = None if lang is not None else fence.group(1)
            continue
        if lang is None or lang in ("text", "json", "toml"):
            continue
        if lang == "sh" or pending:
            text = raw
        elif raw.startswith("$ "):
            text = raw[2:]
        else:
            continue  # a transcript's output line
        if not pending:
            start = n
        if text.rstrip().endswith("\\"):
            pending.append(text.rstrip()[:-1])
            continue
        command, comment = _split_comment(" ".join([*pending, text]))
        pending = []
        if not command.strip():
            continue
        m = _EXIT.search(comment)
        first = command.split()[0]
        kind = "install" if command.startswith("python3 -m venv") else "app" if first.endswith("flux-tui") else "run"
        out.append(Example(start, command, int(m.group(1)) if m else 0, kind))
    return out


def _env(home: Path) -> dict[str, str]:
    bin_dir = str(Path(sys.executable).parent)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("FLUX_", "OPENAI_", "ANTHROPIC_", "PYTEST_"))}
    env.update(PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", HOME=str(home), XDG_CACHE_HOME=str(home / ".cache"),
               NO_COLOR="1", TERM="dumb")
    return env


def run_examples(examples: list[Example], cwd: Path, timeout_s: float = 900) -> list[tuple[Example, int, str]]:
    """Run every ``run`` example in one bash session (so ``export`` and ``cd`` carry over), each
    with stdin closed; a ``flux-tui`` example is parsed, not run. Returns (example, status, output)."""
    home = cwd / ".home"
    home.mkdir()
    logs = cwd / ".examples"
    logs.mkdir()
    script = ["set +e"]
    for i, ex in enumerate(examples):
        if ex.kind == "run":
            script.append(f"{{ {ex.command}\n}} </dev/null >{logs}/{i}.out 2>&1; echo $? >{logs}/{i}.rc")
        elif ex.kind == "app":
            args = shlex.split(ex.command)[1:]
            script.append(f"{shlex.quote(sys.executable)} -c {shlex.quote(_PARSE_APP)} {shlex.join(args)} "
                          f"</dev/null >{logs}/{i}.out 2>&1; echo $? >{logs}/{i}.rc")
    proc = subprocess.run(["bash", "-c", "\n".join(script)], cwd=cwd, env=_env(home), timeout=timeout_s,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    results = []
    for i, ex in enumerate(examples):
        if ex.kind == "install":
            continue
        rc = int((logs / f"{i}.rc").read_text())
        results.append((ex, rc, (logs / f"{i}.out").read_text()))
    return results


# A flux-tui line's arguments through the app's own click parser, without starting the app.
_PARSE_APP = """
import sys
from flux_tui.app import main
ctx = main.make_context("flux-tui", sys.argv[1:])
print(sorted(k for k, v in ctx.params.items() if v))
"""


def _failures(results) -> list[str]:
    return [f"line {ex.line}: `{ex.command}` exited {rc}, the doc says {ex.expect}\n{out[-1500:]}"
            for ex, rc, out in results if rc != ex.expect]


@pytest.mark.parametrize("doc, at_least", [("README.md", 12), ("docs/cli.md", 4)])
def test_every_documented_example_runs_as_written(doc: str, at_least: int, tmp_path: Path) -> None:
    examples = shell_examples((REPO / doc).read_text(encoding="utf-8"))
    runnable = [e for e in examples if e.kind == "run"]
    assert len(runnable) >= at_least, [e.command for e in examples]  # the extractor found the examples
    results = run_examples(examples, tmp_path)
    assert _failures(results) == []
    assert any(ex.expect != 0 for ex, _, _ in results)  # the intended failures are marked, and fail


def test_the_readme_s_branching_examples_name_their_store():
    examples = shell_examples((REPO / "README.md").read_text(encoding="utf-8"))
    for ex in examples:
        verb = ex.command.split()[1] if ex.command.startswith("flux ") else None
        if verb in ("fork", "diff", "resurrect", "what-if", "replay", "sessions", "show"):
            assert "--store" in ex.command, ex.command  # never the user's own ~/.flux


def test_a_failing_or_unmarked_example_is_reported(tmp_path: Path) -> None:
    doc = """
```sh
flux demo --store ./d                       # builds
flux diff s_1 s_6 --store ./d               # the runs differ (exit 1)
flux diff s_1 s_6 --store ./d               # the same, not marked
flux resurrect s_1 --store ./d              # nothing to resurrect: fails
```

```text
flux show [SESSION|last]                    # a synopsis: not run
```

```
$ flux sessions --limit 0                   # exit 1
error: invalid value
$ flux sessions --store ./d \\
    --limit 2
```

```sh
flux-tui --store ./d --nosuchflag           # the app's parser refuses it
flux-tui --store ./d
python3 -m venv .venv                       # not run
```
"""
    examples = shell_examples(doc)
    assert [(e.command.split()[:2], e.expect, e.kind) for e in examples] == [
        (["flux", "demo"], 0, "run"), (["flux", "diff"], 1, "run"), (["flux", "diff"], 0, "run"),
        (["flux", "resurrect"], 0, "run"), (["flux", "sessions"], 1, "run"), (["flux", "sessions"], 0, "run"),
        (["flux-tui", "--store"], 0, "app"), (["flux-tui", "--store"], 0, "app"), (["python3", "-m"], 0, "install"),
    ]
    assert examples[5].command == "flux sessions --store ./d      --limit 2"  # a continued line is one command
    results = run_examples(examples, tmp_path)
    failed = [line.split("`")[1] for line in _failures(results)]
    assert failed == ["flux diff s_1 s_6 --store ./d", "flux resurrect s_1 --store ./d",
                      "flux-tui --store ./d --nosuchflag"]
    assert not (tmp_path / ".venv").exists()
