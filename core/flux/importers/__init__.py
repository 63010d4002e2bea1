"""Other agents' logs in the time machine: ATIF trajectories, Claude Code and Codex session logs and the
deepseek harness's session JSONL, each imported as sessions of a flux store — :func:`import_file`,
:func:`log_files` (the logs under a directory), :func:`detect_format`. One module per format parses a whole
file into an :class:`~flux.importers.model.ImportedRun` before the store is opened; :mod:`.writer` records it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Optional

from ..cassette.redactor import Redactor
from .atif import looks_like_atif, parse_atif
from .claude_code import looks_like_claude_code, parse_claude_code
from .codex import looks_like_codex, parse_codex
from .deepseek import OVERRIDE_FILE, looks_like_deepseek, override_text, parse_deepseek, parse_override
from .model import ImportedRun, ImportFormatError
from .writer import ImportResult, Source, file_hash, redact_source, secrets_in, write_run

__all__ = ["FORMATS", "MAX_FILE_BYTES", "import_file", "parse_file", "parse_text", "parse_kept", "detect_format", "log_files", "ImportFormatError",
           "ImportResult"]

FORMATS = ("atif", "claude-code", "codex", "deepseek")
MAX_FILE_BYTES = 256 * 1024 * 1024

_DETECT: tuple[tuple[str, Callable[[str], bool]], ...] = (
    ("atif", looks_like_atif), ("deepseek", looks_like_deepseek), ("codex", looks_like_codex),
    ("claude-code", looks_like_claude_code),
)


def _read(path: Path) -> tuple[bytes, str]:
    try:
        st = path.stat()
    except OSError as e:
        raise ImportFormatError(f"cannot read {path}: {e.strerror or e}") from None
    import stat

    if not stat.S_ISREG(st.st_mode):
        raise ImportFormatError(f"{path} is not a regular file — give a log file or a directory of them")
    if st.st_size > MAX_FILE_BYTES:
        raise ImportFormatError(f"{path} is {st.st_size} bytes, more than the {MAX_FILE_BYTES // (1024 * 1024)} MiB an "
                                "import reads — split the log")
    try:
        data = path.read_bytes()
    except OSError as e:
        raise ImportFormatError(f"cannot read {path}: {e.strerror or e}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise ImportFormatError(f"{path}: line {line} is not UTF-8 (byte {e.start}) — not a log this importer reads") from None
    return data, text


def detect_format(text: str) -> Optional[str]:
    """The format a log's text is in, or ``None``."""
    for fmt, looks in _DETECT:
        if looks(text):
            return fmt
    return None


def parse_file(path: str | os.PathLike[str], fmt: Optional[str] = None) -> tuple[ImportedRun, Source]:
    """Read and parse one log (nothing is written)."""
    p = Path(path)
    data, text = _read(p)
    found = detect_format(text)
    if fmt is None:
        if found is None:
            raise ImportFormatError(f"{p}: not a log this importer knows (ATIF JSON, Claude Code, Codex or deepseek "
                                    "session JSONL) — pass --format if it is one")
        fmt = found
    side: dict[str, str] = {}
    if fmt == "deepseek":
        over = override_text(p)
        if over is not None:
            side[OVERRIDE_FILE] = over
    return parse_text(text, p.name, fmt, data=data, path=p, side=side if fmt == "deepseek" else None)


def parse_text(text: str, name: str, fmt: str, *, data: Optional[bytes] = None, path: Optional[Path] = None,
               side: Optional[dict] = None) -> tuple[ImportedRun, Source]:
    """Parse a log's text. ``side``: the other files of the run by name (a Claude Code session's
    ``subagents/agent-<id>.jsonl``, a deepseek ``replay.override.json``) — instead of reading them
    beside ``path``."""
    if fmt not in FORMATS:
        raise ImportFormatError(f"unknown format {fmt!r} — one of {', '.join(FORMATS)}")
    if fmt == "atif":
        run = parse_atif(text, name)
    elif fmt == "claude-code":
        run = parse_claude_code(text, name, path, side=side)
    elif fmt == "codex":
        run = parse_codex(text, name)
    else:
        over = (side or {}).get(OVERRIDE_FILE)
        run = parse_deepseek(text, name, parse_override(over) if isinstance(over, str) else None)
        if isinstance(over, str):
            run.files[OVERRIDE_FILE] = over
    if not run.turns:
        raise ImportFormatError(f"{name}: the {fmt} log holds no turn (no user message, no model call) — nothing to import")
    redactor = Redactor()
    found = secrets_in(run, redactor)
    raw = data if data is not None else text.encode("utf-8")
    src = Source(format=fmt, file_hash=file_hash(raw), name=name, size=len(raw), text=redact_source(text, redactor, found),
                 files={k: redact_source(v, redactor, found) for k, v in run.files.items()})
    return run, src


def parse_kept(payload: dict) -> tuple[ImportedRun, Source]:
    """The run of an ``import_source`` payload (the redacted source and files a root session keeps)."""
    text, fmt = payload.get("source"), payload.get("format")
    files = payload.get("files") if isinstance(payload.get("files"), dict) else {}
    if not isinstance(text, str) or fmt not in FORMATS:
        raise ImportFormatError("this session keeps no import source (it is a sub-agent, or not an import)")
    return parse_text(text, str(payload.get("file") or "source"), fmt, side={k: v for k, v in files.items()
                                                                             if isinstance(v, str)})


def import_file(path: str | os.PathLike[str], store: str | os.PathLike[str], fmt: Optional[str] = None) -> ImportResult:
    """Import one log into the store (see the module doc)."""
    run, src = parse_file(path, fmt)
    return write_run(Path(store), run, src)


def log_files(directory: str | os.PathLike[str]) -> list[Path]:
    """Every ``*.json`` / ``*.jsonl`` file under ``directory`` (sorted), less the ones a session
    owns: Claude Code's ``<session>/subagents/*.jsonl`` and deepseek's ``replay.override.json``."""
    root = Path(directory)
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        here = Path(dirpath)
        if here.name == "subagents" and (here.parent.with_suffix(".jsonl")).is_file():
            continue
        for f in sorted(filenames):
            if not f.endswith((".json", ".jsonl")) or f == "replay.override.json":
                continue
            out.append(here / f)
    return out
