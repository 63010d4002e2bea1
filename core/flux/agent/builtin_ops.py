"""The built-in ops of a coding agent, confined to one workspace directory: ``read``, ``read_many``,
``glob``, ``grep`` (effect ``read``); ``write``, ``append``, ``edit`` (``write``); ``bash`` (``exec``).

Every path (and every file a walk yields) resolves inside the workspace with symlinks followed, or is
refused; FIFOs and devices are never opened and a file over 64 MiB is refused. ``bash`` runs in the
workspace with a timeout, an output cap and no secret-bearing variables; the approver gates it.
"""

from __future__ import annotations

import errno
import fnmatch
import os
import re
import stat
import subprocess
from pathlib import Path
from typing import Iterable, Iterator, Mapping, Optional

from ..cassette.redactor import secret_name
from .cancel import cancel_requested, kill_group, tracked
from .ops import Op, OpError, op

__all__ = ["Workspace", "coding_ops", "scrubbed_env", "BASH_TIMEOUT_S", "OUTPUT_CAP"]

BASH_TIMEOUT_S = 120
BASH_MAX_TIMEOUT_S = 600
OUTPUT_CAP = 64 * 1024  # bytes of command output handed back to the model
READ_CAP = 512 * 1024  # bytes one read returns
LIST_CAP = 1000
GREP_CAP = 500
MAX_FILE_BYTES = 64 * 1024 * 1024  # a file larger than this is refused by read/grep/edit
_SKIP_DIRS = {".git", "node_modules", "__pycache__", ".venv", ".mypy_cache", ".pytest_cache"}


class Workspace:
    """A root directory and the confinement rule for paths inside it."""

    def __init__(self, root: str | os.PathLike[str]):
        p = Path(root).expanduser()
        if not p.exists():
            raise OpError(f"workspace {p} does not exist")
        if not p.is_dir():
            raise OpError(f"workspace {p} is not a directory")
        self.root = p.resolve()

    def resolve(self, path: str, *, must_exist: bool = False) -> Path:
        """``path`` (relative to the root, or absolute inside it) → an absolute path, or OpError."""
        if not isinstance(path, str) or not path.strip():
            raise OpError("path must be a non-empty string")
        if "\x00" in path:
            raise OpError("path contains a NUL byte")
        try:
            raw = Path(path).expanduser() if path.startswith("~") else Path(path)
            cand = raw if raw.is_absolute() else self.root / raw
            resolved = Path(os.path.realpath(cand))
            # realpath stops at a symlink loop and returns the rest joined and normalized unresolved:
            # "loop/../link-out/x" came back as "<root>/link-out/x", a symlink out left in it. A
            # resolved path is its own realpath; one that is not cannot be confined.
            looped = os.path.realpath(resolved) != str(resolved)
        except (OSError, RuntimeError, ValueError) as e:  # ~nosuchuser, a name too long, …
            raise OpError(f"path {path!r} cannot be resolved ({e}) — use a path inside the workspace") from None
        if looped:
            raise OpError(f"path {path!r} cannot be resolved (it runs through a symlink loop) — use a path inside the workspace")
        if not self.contains(resolved):
            via = " (through a symlink)" if _lexically_inside(cand, self.root) else ""
            raise OpError(f"path {path!r} escapes the workspace {self.root}{via} — only paths inside it are allowed")
        try:
            missing = must_exist and not resolved.exists()
        except OSError as e:  # a name too long for the file system, …
            raise OpError(f"path {path[:80]!r}… cannot be used ({e.strerror or e})") from None
        if missing:
            raise OpError(f"{path}: no such file in the workspace")
        return resolved

    def contains(self, resolved: Path) -> bool:
        """Whether an already resolved (symlink-free) path is the root or lies under it."""
        return resolved == self.root or self.root in resolved.parents

    def walk(self, base: Path) -> Iterator[tuple[Path, Path]]:
        """Every regular file under ``base`` (already resolved), in a stable order, each one itself
        resolved and confined: a symlink (file or directory) that leads out of the workspace, a FIFO,
        a socket or a device is never yielded, so no op reads through a walk what it could not read by
        naming it. Symlinked directories are not descended (``os.walk`` default). Yields
        ``(path as walked, resolved path)``: show the first, open the second."""
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS)
            for f in sorted(filenames):
                p = Path(dirpath) / f
                try:
                    real = Path(os.path.realpath(p))
                except (OSError, ValueError):
                    continue
                if not self.contains(real):
                    continue
                try:
                    if not stat.S_ISREG(os.stat(real).st_mode):
                        continue
                except OSError:
                    continue
                yield p, real

    def rel(self, p: Path) -> str:
        try:
            r = p.relative_to(self.root)
        except ValueError:
            return str(p)
        return str(r) if str(r) != "." else "."


def _lexically_inside(p: Path, root: Path) -> bool:
    norm = Path(os.path.normpath(p))
    return norm == root or root in norm.parents


def scrubbed_env(secrets: Iterable[str] = (), base: Optional[Mapping[str, str]] = None) -> dict[str, str]:
    """The environment minus every variable that names a secret or holds a registered secret."""
    env = dict(os.environ if base is None else base)
    vals = [s for s in secrets if s and len(s) >= 4]
    out = {}
    for k, v in env.items():
        if secret_name(k) or any(s in v for s in vals):
            continue
        out[k] = v
    return out


def _cap(text: str, cap: int, what: str) -> str:
    data = text.encode("utf-8", "replace")
    if len(data) <= cap:
        return text
    return data[:cap].decode("utf-8", "ignore") + f"\n[{what} cut at {cap} bytes of {len(data)}]"


def _read_bytes(p: Path, shown: str, cap: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of a regular file, opened without blocking and without following a last-component
    symlink (so a FIFO, a device or a symlink swapped in after resolve() cannot hang or escape)."""
    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0))
    except OSError as e:
        if e.errno == errno.ENOENT:
            raise OpError(f"{shown}: no such file in the workspace") from None
        raise OpError(f"cannot read {shown}: {e.strerror}") from None
    st = os.fstat(fd)
    problem = None
    if stat.S_ISDIR(st.st_mode):
        problem = f"{shown} is a directory — use glob to list it"
    elif not stat.S_ISREG(st.st_mode):
        problem = f"{shown} is not a regular file (a FIFO, socket or device) — not read"
    elif st.st_size > cap:
        problem = f"{shown} is {st.st_size} bytes, over the {cap}-byte limit — read a part with bash (head/sed)"
    if problem is not None:
        os.close(fd)
        raise OpError(problem)
    os.set_blocking(fd, True)
    with os.fdopen(fd, "rb") as fh:
        return fh.read(cap + 1)[:cap]


def _read_text(p: Path, shown: str) -> str:
    data = _read_bytes(p, shown)
    if b"\x00" in data[:8192]:
        raise OpError(f"{shown} is a binary file ({len(data)} bytes) — not shown")
    return data.decode("utf-8", "replace")


def coding_ops(workspace: str | os.PathLike[str] | Workspace, *, secrets: Iterable[str] = (),
               bash_timeout_s: float = BASH_TIMEOUT_S, output_cap: int = OUTPUT_CAP) -> list[Op]:
    """The eight coding ops bound to ``workspace`` (in this order: the catalog the model is shown)."""
    ws = workspace if isinstance(workspace, Workspace) else Workspace(workspace)
    return _reading_ops(ws) + _writing_ops(ws) + [_bash_op(ws, list(secrets), bash_timeout_s, output_cap)]


def _reading_ops(ws: Workspace) -> list[Op]:
    """``read``, ``read_many``, ``glob`` and ``grep``: they look, never change."""

    @op(effect="read")
    def read(path: str, offset: int = 0, limit: Optional[int] = None) -> str:
        """Read a text file in the workspace.

        Args:
            path: file path relative to the workspace root
            offset: first line to return (0-based)
            limit: number of lines to return (default: all)
        """
        p = ws.resolve(path)
        text = _read_text(p, path)
        if offset or limit is not None:
            lines = text.splitlines(keepends=True)
            end = None if limit is None else offset + max(limit, 0)
            text = "".join(lines[max(offset, 0):end])
        return _cap(text, READ_CAP, "file")

    @op(effect="read")
    def read_many(paths: list[str]) -> str:
        """Read several text files at once; each is headed by `==> path <==`.

        Args:
            paths: file paths relative to the workspace root
        """
        if not paths:
            raise OpError("read_many needs at least one path")
        parts = []
        for path in paths:
            try:
                parts.append(f"==> {path} <==\n{_read_text(ws.resolve(path), path)}")
            except OpError as e:
                if "escapes the workspace" in str(e):
                    raise
                parts.append(f"==> {path} <==\n[error: {e}]")
        return _cap("\n".join(parts), READ_CAP, "output")

    @op(effect="read")
    def glob(pattern: str, path: str = ".") -> str:
        """List files matching a glob pattern (`**` crosses directories), one per line.

        Args:
            pattern: glob pattern such as `*.py` or `src/**/*.rs`
            path: directory to search from, relative to the workspace root
        """
        base = ws.resolve(path, must_exist=True)
        if not base.is_dir():
            raise OpError(f"{path} is not a directory")
        out = []
        for f, _real in ws.walk(base):
            rel = str(f.relative_to(base))
            if fnmatch.fnmatch(rel, pattern) or fnmatch.fnmatch(f.name, pattern) and "/" not in pattern:
                out.append(ws.rel(f))
                if len(out) >= LIST_CAP:
                    out.append(f"[listing cut at {LIST_CAP} files]")
                    break
        return "\n".join(out) if out else f"no files match {pattern}"

    @op(effect="read")
    def grep(pattern: str, path: str = ".", glob: Optional[str] = None, ignore_case: bool = False) -> str:
        """Search file contents with a regular expression; prints `file:line:text` per match.

        Args:
            pattern: a Python regular expression
            path: file or directory to search, relative to the workspace root
            glob: only search files whose name matches this glob
            ignore_case: match case-insensitively
        """
        try:
            rx = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
        except re.error as e:
            raise OpError(f"bad regular expression {pattern!r}: {e}") from None
        base = ws.resolve(path, must_exist=True)
        if not base.is_dir() and not base.is_file():
            raise OpError(f"{path} is not a regular file or a directory — not searched")
        files = [(base, base)] if base.is_file() else ws.walk(base)
        out = []
        for f, real in files:
            if glob and not fnmatch.fnmatch(f.name, glob):
                continue
            try:
                data = _read_bytes(real, ws.rel(f))
            except OpError:
                if f is base:
                    raise
                continue
            if b"\x00" in data[:8192]:
                continue
            for i, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
                if rx.search(line):
                    out.append(f"{ws.rel(f)}:{i}:{line[:400]}")
                    if len(out) >= GREP_CAP:
                        out.append(f"[matches cut at {GREP_CAP}]")
                        return "\n".join(out)
        return "\n".join(out) if out else f"no matches for {pattern}"

    return [read, read_many, glob, grep]


def _writing_ops(ws: Workspace) -> list[Op]:
    """``write``, ``append`` and ``edit``: text files in the workspace, never through a symlink."""

    @op(effect="write")
    def write(path: str, content: str) -> str:
        """Create or overwrite a text file in the workspace (parent directories are created).

        Args:
            path: file path relative to the workspace root
            content: the full new content
        """
        return f"wrote {_write_text(ws, path, content, append=False)} bytes to {path}"

    @op(effect="write")
    def append(path: str, content: str) -> str:
        """Append text to a file in the workspace (created if missing).

        Args:
            path: file path relative to the workspace root
            content: text to append
        """
        return f"appended {_write_text(ws, path, content, append=True)} bytes to {path}"

    @op(effect="write")
    def edit(path: str, old: str, new: str, replace_all: bool = False) -> str:
        """Replace an exact string in a file. `old` must occur exactly once unless replace_all.

        Args:
            path: file path relative to the workspace root
            old: the exact text to replace
            new: the replacement text
            replace_all: replace every occurrence
        """
        if old == "":
            raise OpError("`old` must not be empty — use write to create a file")
        p = ws.resolve(path)
        text = _read_text(p, path)
        n = text.count(old)
        if n == 0:
            raise OpError(f"`old` text not found in {path} — read the file and copy the text exactly")
        if n > 1 and not replace_all:
            raise OpError(f"`old` text occurs {n} times in {path} — add context to make it unique, or set replace_all")
        text = text.replace(old, new) if replace_all else text.replace(old, new, 1)
        _write_nofollow(p, text.encode("utf-8"), append=False)
        k = n if replace_all else 1
        return f"edited {path} ({k} replacement{'s' if k != 1 else ''})"

    return [write, append, edit]


def _bash_op(ws: Workspace, secret_values: list[str], bash_timeout_s: float, output_cap: int) -> Op:
    """``bash``: a command in the workspace with the secrets scrubbed from its environment."""

    @op(effect="exec")
    def bash(command: str, cwd: str = ".", timeout: Optional[int] = None) -> str:
        """Run a shell command in the workspace; prints its output and `[exit N]`.

        Args:
            command: the command line, run with `bash -c`
            cwd: working directory relative to the workspace root
            timeout: seconds before the command is killed (default 120, at most 600)
        """
        wd = ws.resolve(cwd, must_exist=True)
        if not wd.is_dir():
            raise OpError(f"{cwd} is not a directory")
        limit = bash_timeout_s if timeout is None else max(1, min(int(timeout), BASH_MAX_TIMEOUT_S))
        env = scrubbed_env(secret_values)
        env["PWD"] = str(wd)

        def start() -> subprocess.Popen:
            try:
                return subprocess.Popen(["bash", "-c", command], cwd=str(wd), env=env, stdin=subprocess.DEVNULL,
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
            except FileNotFoundError:
                raise OpError("bash is not installed on this machine") from None

        with tracked(start) as proc:  # a Ctrl-C kills its process group: its own session never sees the terminal's SIGINT
            try:
                out, _ = proc.communicate(timeout=limit)
            except subprocess.TimeoutExpired:
                kill_group(proc)
                out, _ = proc.communicate()
                text = _cap(out.decode("utf-8", "replace"), output_cap, "output")
                raise OpError(f"{text}\n[timed out after {limit}s — killed]".lstrip("\n"))
            except BaseException:  # interrupted (Ctrl-C): the command does not outlive the op
                kill_group(proc)
                proc.wait()
                raise
        text = _cap(out.decode("utf-8", "replace"), output_cap, "output")
        if proc.returncode < 0 and cancel_requested():
            raise OpError(f"{text}\n[killed — the turn was cancelled]".lstrip("\n"))
        text = f"{text}{'' if not text or text.endswith(chr(10)) else chr(10)}[exit {proc.returncode}]"
        if proc.returncode != 0:
            raise OpError(text)
        return text

    return bash


def _write_text(ws: Workspace, path: str, content: str, *, append: bool) -> int:
    """Write (or append) ``content`` to the workspace file ``path``; the number of bytes written."""
    p = ws.resolve(path)
    _prepare_write(p, path)
    data = content.encode("utf-8")
    _write_nofollow(p, data, append=append)
    return len(data)


def _prepare_write(p: Path, shown: str) -> None:
    """Refuse a directory; create the parent directories (each inside the workspace: ``p`` is resolved)."""
    try:
        if p.is_dir():
            raise OpError(f"{shown} is a directory")
        p.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise OpError(f"cannot write {shown}: {e.strerror or e}") from None


def _write_nofollow(p: Path, data: bytes, *, append: bool) -> None:
    """Write without following a symlink at the last component (a race after resolve())."""
    # O_NONBLOCK: opening a FIFO for writing with no reader fails (ENXIO) instead of hanging; the
    # fstat check refuses any other non-regular file before a byte is written (O_TRUNC on a device
    # or FIFO is a no-op).
    flags = (os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else os.O_TRUNC) | getattr(os, "O_NOFOLLOW", 0)
             | getattr(os, "O_NONBLOCK", 0))
    try:
        fd = os.open(p, flags, 0o644)
    except OSError as e:
        raise OpError(f"cannot write {p.name}: {e.strerror}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OpError(f"cannot write {p.name}: not a regular file (a FIFO, socket or device)")
    os.set_blocking(fd, True)
    with os.fdopen(fd, "ab" if append else "wb") as fh:
        fh.write(data)
