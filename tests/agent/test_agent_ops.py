"""@op schemas, input validation, and the workspace-confined coding ops."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal, Optional

import pytest

from flux.agent.builtin_ops import Workspace, coding_ops, scrubbed_env
from flux.errors import FluxError
from flux.agent.ops import Op, OpError, Toolbox, op, validate_input


def test_op_decorator_builds_schema_description_and_effect():
    @op(effect="write")
    def save(path: str, lines: list[str], mode: Literal["a", "w"] = "w", limit: Optional[int] = None,
             ratio: float = 0.5, force: bool = False) -> str:
        """Save lines to a file.

        More text that is not the description.

        Args:
            path: where to save
            lines: what to save
        """
        return "ok"

    assert isinstance(save, Op)
    assert save.name == "save" and save.effect == "write"
    assert save.description == "Save lines to a file."
    s = save.input_schema
    assert s["required"] == ["path", "lines"]
    assert s["properties"]["path"] == {"type": "string", "description": "where to save"}
    assert s["properties"]["lines"]["type"] == "array" and s["properties"]["lines"]["items"] == {"type": "string"}
    assert s["properties"]["mode"]["enum"] == ["a", "w"] and s["properties"]["mode"]["default"] == "w"
    assert s["properties"]["limit"] == {"type": "integer"}
    assert s["properties"]["ratio"]["type"] == "number" and s["properties"]["force"]["type"] == "boolean"
    assert save.spec().required == ("path", "lines") and "mode" in save.spec().optional
    assert save.tool() == {"name": "save", "description": "Save lines to a file.", "input_schema": s}
    assert save("p", ["x"]) == "ok"  # still callable


def test_op_named_and_unknown_effect():
    @op(name="Count", effect="pure", description="count it")
    def f(x: int) -> int:
        return x + 1

    assert f.name == "Count" and f.description == "count it"
    assert f.call({"x": 1}).content == "2"  # non-string results are JSON
    with pytest.raises(FluxError, match="unknown effect 'teleport'"):
        op(effect="teleport")


def test_op_raising_is_a_tool_error_not_a_crash():
    @op
    def boom(x: str) -> str:
        raise ValueError("bad value " + x)

    @op
    def refuse(x: str) -> str:
        raise OpError("exactly this message")

    out = boom.call({"x": "1"})
    assert out.is_error and out.content == "op `boom` raised ValueError: bad value 1"
    out = refuse.call({"x": "1"})
    assert out.is_error and out.content == "exactly this message"


def test_arguments_an_op_does_not_take_are_named_not_a_python_traceback_line():
    """An authored flow's call is not validated before dispatch (a model's is): when the function
    refuses its arguments, the tool error says which, as validate_input says it to a model — not
    `grep() got an unexpected keyword argument` with the function's qualified name."""
    @op
    def grep(pattern: str, path: str = ".") -> str:
        return "found"

    @op
    def typo(x: str) -> str:
        return len(x) + "!"  # a TypeError of the function's own: the arguments were fine

    out = grep.call({"q": "x", "pattern": "p"})
    assert out.is_error and out.content == "`grep` has no argument(s) q — it takes pattern, path"
    out = grep.call({"path": "src"})
    assert out.is_error and out.content == "`grep` is missing required argument(s): pattern"
    out = typo.call({"x": "1"})
    assert out.is_error and out.content.startswith("op `typo` raised TypeError: unsupported operand")


def test_async_op_runs():
    @op
    async def slow(x: str) -> str:
        return x * 2

    assert slow.call({"x": "ab"}).content == "abab"


def test_validate_input_explains_malformed_arguments():
    @op
    def put(path: str, n: int = 0) -> str:
        return ""

    assert validate_input(put, {"path": "a"}) is None
    assert "must be a JSON object" in validate_input(put, "a.txt")
    assert "missing required argument(s): path" in validate_input(put, {})
    assert "has no argument(s) size" in validate_input(put, {"path": "a", "size": 1})
    assert "`n` must be an integer" in validate_input(put, {"path": "a", "n": "3"})
    assert "`path` must be a string" in validate_input(put, {"path": 3})


def test_toolbox_catalog_and_tools():
    tb = Toolbox.of(coding_ops(Path.cwd()))
    assert sorted(tb.ops) == ["append", "bash", "edit", "glob", "grep", "read", "read_many", "write"]
    assert [t["name"] for t in tb.tools()] == sorted(tb.ops)
    cat = tb.catalog()
    assert cat.get("write").required == ("path", "content") and cat.get("bash").effect == "exec"


# ---- the coding ops ---------------------------------------------------------------------------

@pytest.fixture
def ops(ws):
    return {o.name: o for o in coding_ops(ws, secrets=["sekrit-value-123"], bash_timeout_s=2)}


def test_read_write_append_edit(ops, ws):
    assert ops["write"].call({"path": "notes/a.txt", "content": "one\ntwo\n"}).content == "wrote 8 bytes to notes/a.txt"
    assert ops["append"].call({"path": "notes/a.txt", "content": "three\n"}).content == "appended 6 bytes to notes/a.txt"
    assert ops["read"].call({"path": "notes/a.txt"}).content == "one\ntwo\nthree\n"
    assert ops["read"].call({"path": "notes/a.txt", "offset": 1, "limit": 1}).content == "two\n"
    assert ops["edit"].call({"path": "notes/a.txt", "old": "two", "new": "2"}).content == "edited notes/a.txt (1 replacement)"
    assert (ws / "notes/a.txt").read_text() == "one\n2\nthree\n"
    out = ops["edit"].call({"path": "notes/a.txt", "old": "zzz", "new": "y"})
    assert out.is_error and "not found" in out.content
    ops["write"].call({"path": "dup.txt", "content": "x x x"})
    out = ops["edit"].call({"path": "dup.txt", "old": "x", "new": "y"})
    assert out.is_error and "occurs 3 times" in out.content
    assert ops["edit"].call({"path": "dup.txt", "old": "x", "new": "y", "replace_all": True}).content == "edited dup.txt (3 replacements)"
    out = ops["read"].call({"path": "missing.txt"})
    assert out.is_error and "no such file" in out.content


def test_glob_grep_read_many(ops):
    assert ops["glob"].call({"pattern": "*.py"}).content == "src/app.py"
    assert "README.md" in ops["glob"].call({"pattern": "*"}).content.splitlines()
    assert ops["grep"].call({"pattern": "def main"}).content == "src/app.py:1:def main():"
    assert ops["grep"].call({"pattern": "nothing-here"}).content == "no matches for nothing-here"
    assert ops["grep"].call({"pattern": "("}).is_error
    many = ops["read_many"].call({"paths": ["README.md", "nope.txt"]}).content
    assert "==> README.md <==\n# demo project" in many and "==> nope.txt <==\n[error:" in many


@pytest.mark.parametrize("path", ["../outside.txt", "/etc/passwd", "src/../../x", "~/x"])
def test_traversal_and_absolute_escapes_are_refused(ops, path):
    for name, inp in (("read", {"path": path}), ("write", {"path": path, "content": "x"}),
                      ("append", {"path": path, "content": "x"})):
        out = ops[name].call(inp)
        assert out.is_error and "escapes the workspace" in out.content, (name, out.content)


def test_symlink_escapes_are_refused(ops, ws, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("top secret")
    os.symlink(outside / "secret.txt", ws / "link.txt")
    os.symlink(outside, ws / "linkdir")
    for name, inp in (("read", {"path": "link.txt"}), ("write", {"path": "link.txt", "content": "x"}),
                      ("write", {"path": "linkdir/new.txt", "content": "x"}), ("glob", {"pattern": "*", "path": "linkdir"}),
                      ("bash", {"command": "pwd", "cwd": "linkdir"})):
        out = ops[name].call(inp)
        assert out.is_error and "escapes the workspace" in out.content and "symlink" in out.content, (name, out.content)
    assert (outside / "secret.txt").read_text() == "top secret"
    assert not (outside / "new.txt").exists()


def test_absolute_path_inside_workspace_is_fine(ops, ws):
    assert ops["read"].call({"path": str(ws / "README.md")}).content == "# demo project\n"


def test_bash_cwd_exit_status_timeout_cap_and_scrubbed_env(ops, ws, monkeypatch):
    out = ops["bash"].call({"command": "pwd"})
    assert not out.is_error and out.content == f"{ws.resolve()}\n[exit 0]"
    assert ops["bash"].call({"command": "pwd", "cwd": "src"}).content.startswith(str(ws.resolve() / "src"))
    out = ops["bash"].call({"command": "echo oops >&2; exit 3"})
    assert out.is_error and out.content == "oops\n[exit 3]"
    out = ops["bash"].call({"command": "sleep 5", "timeout": 1})
    assert out.is_error and "timed out after 1s" in out.content
    big = ops["bash"].call({"command": "head -c 200000 /dev/zero | tr '\\0' 'a'"}).content
    assert "[output cut at 65536 bytes of 200000]" in big and len(big) < 70000
    monkeypatch.setenv("MY_API_TOKEN", "tok-should-not-leak-1")
    monkeypatch.setenv("HARMLESS", "holds sekrit-value-123 inside")
    monkeypatch.setenv("PLAIN_VAR", "visible")
    env_out = ops["bash"].call({"command": "env"}).content
    assert "PLAIN_VAR=visible" in env_out
    assert "tok-should-not-leak-1" not in env_out and "sekrit-value-123" not in env_out


def test_scrubbed_env_rules():
    env = scrubbed_env(["abcd1234"], base={"GITHUB_TOKEN": "x", "DB_PASSWORD": "y", "tokens": "ok", "K": "abcd1234",
                                          "PATH": "/bin"})
    assert env == {"tokens": "ok", "PATH": "/bin"}


def test_workspace_must_exist(tmp_path):
    with pytest.raises(OpError, match="does not exist"):
        Workspace(tmp_path / "nope")
