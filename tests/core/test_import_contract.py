"""The engine never imports the UI: importing every module of `flux` leaves textual unloaded."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

CORE = Path(__file__).resolve().parents[2] / "core" / "flux"


def test_core_never_imports_textual():
    modules = sorted(
        "flux." + ".".join(p.relative_to(CORE).with_suffix("").parts).removesuffix(".__init__")
        for p in CORE.rglob("*.py")
    )
    modules = [m.removesuffix(".__init__") if m != "flux.__init__" else "flux" for m in modules]
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}:\n"
        "    importlib.import_module(m)\n"
        "bad = sorted(k for k in sys.modules if k == 'textual' or k.startswith('textual.') or k.startswith('flux_tui'))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"core imported UI modules: {out.stdout}"
    assert len(modules) > 10


def test_no_core_source_mentions_textual_imports():
    offenders = [p for p in CORE.rglob("*.py") if "import textual" in p.read_text() or "from textual" in p.read_text()]
    assert offenders == []
