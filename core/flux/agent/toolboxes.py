"""Named toolboxes: the live ops a store's sessions were recorded with.

A recording names its ops but not their code; whatever re-runs part of it live needs them, bound to a
workspace. The default is the built-in coding ops; a store recorded with another toolbox names it in
``toolbox.json`` beside ``events.db`` (docs/cli.md, "The toolbox a store was recorded with"); a bad
file is one :class:`~flux.errors.FluxError` line.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Optional

from ..errors import FluxError
from .builtin_ops import coding_ops
from .demo_ops import demo_ops

__all__ = ["TOOLBOX_FILE", "StoreToolbox", "toolbox_names", "toolbox_ops", "store_toolbox", "write_store_toolbox"]

TOOLBOX_FILE = "toolbox.json"
MAX_BYTES = 64 * 1024


def _coding(workspace: Path, secrets: Iterable[str]) -> list:
    return coding_ops(workspace, secrets=secrets)


def _demo(workspace: Path, secrets: Iterable[str]) -> list:
    return demo_ops(workspace, secrets=secrets)


_TOOLBOXES: dict[str, Callable[[Path, Iterable[str]], list]] = {"coding": _coding, "demo": _demo}


def toolbox_names() -> list[str]:
    return list(_TOOLBOXES)


def toolbox_ops(name: str, workspace: str | os.PathLike[str], *, secrets: Iterable[str] = ()) -> list:
    """The ops of toolbox ``name`` bound to ``workspace``."""
    make = _TOOLBOXES.get(name)
    if make is None:
        raise FluxError(f"unknown toolbox `{name}` — known: {', '.join(_TOOLBOXES)}")
    return make(Path(workspace), secrets)


@dataclass(frozen=True)
class StoreToolbox:
    """The toolbox a store was recorded with, and its default workspace (None: the caller's)."""

    name: str = "coding"
    workspace: Optional[Path] = None
    declared: bool = False  # a toolbox.json said so (False: the default)

    def ops(self, workspace: str | os.PathLike[str], *, secrets: Iterable[str] = ()) -> list:
        return toolbox_ops(self.name, workspace, secrets=secrets)


def store_toolbox(store_dir: str | os.PathLike[str]) -> StoreToolbox:
    """Read ``<store_dir>/toolbox.json`` (absent: the built-in coding ops, no default workspace)."""
    root = Path(store_dir)
    path = root / TOOLBOX_FILE
    try:
        with path.open("rb") as fh:
            raw = fh.read(MAX_BYTES + 1)
    except FileNotFoundError:
        return StoreToolbox()
    except OSError as e:
        raise FluxError(f"cannot read {path}: {e.strerror or e}") from None
    if len(raw) > MAX_BYTES:
        raise FluxError(f"{path} is larger than {MAX_BYTES // 1024} KiB — it should name a toolbox; fix or delete it")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise FluxError(f"{path} is not JSON ({e}) — fix or delete it") from None
    if not isinstance(data, dict) or not isinstance(data.get("toolbox"), str):
        raise FluxError(f'{path} must be an object like {{"toolbox": "demo", "workspace": "workspace"}} — fix or delete it')
    name = data["toolbox"]
    if name not in _TOOLBOXES:
        raise FluxError(f"{path} names an unknown toolbox `{name}` (known: {', '.join(_TOOLBOXES)}) — fix or delete it")
    ws = data.get("workspace")
    if ws is None:
        return StoreToolbox(name, None, True)
    if not isinstance(ws, str) or not ws or Path(ws).is_absolute() or "\x00" in ws:
        raise FluxError(f"{path}: `workspace` must be a directory relative to the store — fix or delete it")
    base = root.resolve()
    full = (base / ws).resolve()
    if full != base and base not in full.parents:
        raise FluxError(f"{path}: `workspace` {ws!r} leaves the store directory — fix or delete it")
    return StoreToolbox(name, full, True)


def write_store_toolbox(store_dir: str | os.PathLike[str], name: str, workspace: str | None = None) -> Path:
    """Record which toolbox (and default workspace, relative to the store) a store was made with."""
    if name not in _TOOLBOXES:
        raise FluxError(f"unknown toolbox `{name}` — known: {', '.join(_TOOLBOXES)}")
    data: dict = {"toolbox": name}
    if workspace is not None:
        data["workspace"] = workspace
    path = Path(store_dir) / TOOLBOX_FILE
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return path
