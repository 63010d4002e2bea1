"""``scenario.toml``: the manifest that marks a directory as a scenario fixture.

All nine of flux's keys are required on read and written in ``toml::to_string_pretty``'s shape; an
optional ``ops = "module:attr"`` follows them. ``flux_version`` names the recording runtime (ours writes
``"<version>+flux-tui"``); :attr:`Manifest.foreign` marks another runtime's fixture, which ``check``
cannot re-drive.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .. import __version__
import re

from ..agent.ops import OPS_REF
from ..canonical import scrub_text
from ..documents import read_text, short, toml_document
from ..errors import FluxError

__all__ = ["Manifest", "RUNTIME_VERSION", "MANIFEST_FILE", "record_command"]

MANIFEST_FILE = "scenario.toml"
MAX_MANIFEST_BYTES = 16 * 1024 * 1024
RUNTIME_SUFFIX = "+flux-tui"
RUNTIME_VERSION = f"{__version__}{RUNTIME_SUFFIX}"

_TOML_ESCAPE = re.compile(r'[\x00-\x1f"\\\x7f]')
_SHORT = {"\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r", '"': '\\"', "\\": "\\\\"}


def toml_string(s: str) -> str:
    """A TOML basic string: quote, backslash, C0 controls and DEL escaped; surrogates → U+FFFD."""
    return '"' + _TOML_ESCAPE.sub(lambda m: _SHORT.get(m.group(0)) or "\\u%04X" % ord(m.group(0)), scrub_text(s)) + '"'


def record_command(path: str | Path | None = None, prompt: str | None = None, model: str | None = None) -> str:
    """The ``flux record`` command line that writes the scenario at ``path`` (NAME, its scenarios
    directory as ``--dir``), for the hints that say how to record or re-record one."""
    import shlex

    p = Path(path) if path is not None else None
    name = p.name if p is not None and p.name not in ("", ".", "..") else "NAME"
    cmd = f"flux record {shlex.quote(name)} " + (shlex.quote(prompt) if prompt else '"PROMPT"')
    if p is not None and str(p.parent) not in ("", ".", "tests/scenarios"):
        cmd += f" --dir {shlex.quote(str(p.parent))}"
    return cmd + f" -m {shlex.quote(model) if model else 'MODEL'}"


_FIELDS = (("schema", int), ("name", str), ("flux_version", str), ("recorded_at_ms", int), ("session", str),
           ("input", str), ("model", str), ("cassette_max_bytes", int), ("redaction_marker", str))


@dataclass(frozen=True)
class Manifest:
    schema: int
    name: str
    flux_version: str
    recorded_at_ms: int
    session: str
    input: str
    model: str
    cassette_max_bytes: int
    redaction_marker: str
    ops: str | None = None  # "module:attr" of the recorded ops; None: the built-in coding ops

    @property
    def foreign(self) -> bool:
        """Recorded by another runtime (flux itself, or anything not this one)."""
        return not self.flux_version.endswith(RUNTIME_SUFFIX)

    @property
    def recorded_by(self) -> str:
        if self.flux_version.startswith("import:"):  # made by `flux record --from-import`
            return f"{self.flux_version[len('import:'):].replace(':', ' ', 1)} (imported)"
        if self.foreign:
            return f"flux {self.flux_version}"
        return f"flux-tui {self.flux_version[: -len(RUNTIME_SUFFIX)]}"

    @classmethod
    def read(cls, path: str | Path) -> "Manifest":
        p = Path(path)
        if not p.exists():
            raise FluxError(f"{p.parent} is not a scenario (no scenario.toml) — record one first: "
                            f"{record_command(p.parent)}")
        fix = "re-record the scenario"
        data = toml_document(read_text(p, "the scenario manifest", fix, max_bytes=MAX_MANIFEST_BYTES), str(p), fix)
        vals = {}
        for key, typ in _FIELDS:
            if key not in data:
                raise FluxError(f"{p}: missing key `{key}` — every scenario.toml key is required; re-record the scenario")
            v = data[key]
            if typ is int and (not isinstance(v, int) or isinstance(v, bool)):
                raise FluxError(f"{p}: `{key}` must be an integer, got {short(v)}")
            if typ is str and not isinstance(v, str):
                raise FluxError(f"{p}: `{key}` must be a string, got {short(v)}")
            vals[key] = v
        ops = data.get("ops")
        if ops is not None and (not isinstance(ops, str) or not OPS_REF.fullmatch(ops)):
            raise FluxError(f"{p}: `ops` must name the recorded ops as \"module:attr\" (e.g. \"myproject.tools:OPS\"), "
                            f"got {ops!r}")
        return cls(**vals, ops=ops)

    def text(self) -> str:
        lines = []
        for key, typ in _FIELDS:
            v = getattr(self, key)
            lines.append(f"{key} = {v}" if typ is int else f"{key} = {toml_string(v)}")
        if self.ops is not None:
            lines.append(f"ops = {toml_string(self.ops)}")
        return "\n".join(lines) + "\n"

    def write(self, path: str | Path) -> None:
        Path(path).write_text(self.text(), encoding="utf-8")
