"""The modules of a package tree and where a relative import points: what the layering and the
private-names tests both read the code with."""

from __future__ import annotations

import ast
from pathlib import Path


def module_files(packages: dict[str, Path]) -> dict[str, Path]:
    """Every module of the packages by dotted name (a package's ``__init__`` under the package's own name)."""
    found: dict[str, Path] = {}
    for name, root in packages.items():
        for path in sorted(root.rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join([name, *parts])] = path
    return found


def absolute_module(importer: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The dotted module a ``from … import`` in ``importer`` names, its dots resolved."""
    if not node.level:
        return node.module or ""
    base = importer.split(".")
    if not is_package:
        base.pop()
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))
