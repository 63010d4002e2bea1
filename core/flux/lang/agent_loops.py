"""The agent-loop programs a store records: ``agent-loops/<sha256>.flux``.

Newer flux engines write the exact admitted outer-loop source beside the store, named by the sha256
of its text, and record which one a turn ran in ``turn_started.loop_binding.source_sha256``. This
module finds and parses that file for a turn — read-only and hostile-input safe: only a regular
file is opened, its size is capped, and a missing, oversized, non-UTF-8, tampered (content hash ≠
name) or unparsable file is reported as such, never raised.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from . import ast as A
from .parser import ParseError, parse

__all__ = ["LOOPS_DIR", "AgentLoop", "load_agent_loop", "loop_sha", "MAX_LOOP_BYTES"]

LOOPS_DIR = "agent-loops"
MAX_LOOP_BYTES = 1 << 20
_SHA = re.compile(r"[0-9a-f]{64}\Z")


@dataclass(frozen=True)
class AgentLoop:
    """One turn's agent-loop program. ``draft`` is None when the file is absent or unusable;
    ``problem`` then says why in one line."""

    sha256: str
    path: Path
    source: Optional[str] = None
    draft: Optional[A.DraftAst] = None
    problem: Optional[str] = None
    binding: Optional[dict] = None

    @property
    def name(self) -> str:
        """The flow's name (``agent-loop``), else the binding's entry point, else ``?``."""
        if self.draft is not None and self.draft.name:
            return self.draft.name
        entry = (self.binding or {}).get("entry_point")
        return entry if isinstance(entry, str) and entry else "?"

    def summary(self) -> str:
        """One line: what ran, where its source is, and whether it reads."""
        ref = (self.binding or {}).get("source_ref")
        where = f"{LOOPS_DIR}/{self.sha256[:12]}….flux"
        head = f"{self.name}" + (f" ({ref})" if isinstance(ref, str) and ref else "")
        if self.problem is not None:
            return f"{head} · {where}: {self.problem}"
        n = len(self.draft.body) if self.draft is not None else 0
        return f"{head} · {where} · {n} statement(s)"

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "sha256": self.sha256, "file": f"{LOOPS_DIR}/{self.sha256}.flux",
                "source_ref": (self.binding or {}).get("source_ref"),
                "statements": len(self.draft.body) if self.draft is not None else None,
                "problem": self.problem}


def loop_sha(binding: Any) -> Optional[str]:
    """The ``source_sha256`` of a ``loop_binding``, when it is a well-formed hex digest."""
    if not isinstance(binding, dict):
        return None
    sha = binding.get("source_sha256")
    return sha if isinstance(sha, str) and _SHA.match(sha) else None


def load_agent_loop(store_dir: Path, binding: Any) -> Optional[AgentLoop]:
    """The agent-loop program a turn's ``loop_binding`` names; None when the turn has no binding."""
    sha = loop_sha(binding)
    if sha is None:
        return None
    path = Path(store_dir) / LOOPS_DIR / f"{sha}.flux"
    b = binding if isinstance(binding, dict) else None

    def bad(problem: str, source: Optional[str] = None) -> AgentLoop:
        return AgentLoop(sha, path, source, None, problem, b)

    try:
        st = os.stat(path)
    except FileNotFoundError:
        return bad("not in this store")
    except OSError as exc:
        return bad(f"cannot read it ({exc.strerror or exc})")
    if not stat.S_ISREG(st.st_mode):
        return bad("not a regular file")
    if st.st_size > MAX_LOOP_BYTES:
        return bad(f"larger than {MAX_LOOP_BYTES} bytes")
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_LOOP_BYTES + 1)
    except OSError as exc:
        return bad(f"cannot read it ({exc.strerror or exc})")
    if hashlib.sha256(raw).hexdigest() != sha:
        return bad("its content does not match its sha256 name")
    try:
        source = raw.decode("utf-8")
    except UnicodeDecodeError:
        return bad("not UTF-8 text")
    try:
        draft = parse(source)
    except ParseError as exc:
        return bad(f"does not parse: {exc}", source)
    return AgentLoop(sha, path, source, draft, None, b)
