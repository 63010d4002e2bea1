"""A module's ``_private`` names stay in the module: no import of one from another module of the house, and
no ``module._name`` / ``Class._name`` read through a name imported from another module.

Read with ``ast`` (function-body imports included). Allowed: a package-private module (``_fast.py``)
imported by the modules of its own package; the public API of named tuples (``_fields``, ``_replace``,
``_asdict``, ``_make``, ``_field_defaults``); private names of the standard library or a third party
(``sys._getframe``), which this house does not own.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.module_graph import absolute_module, module_files

REPO = Path(__file__).resolve().parents[2]
PACKAGES = {"flux": REPO / "core" / "flux", "flux_tui": REPO / "tui" / "flux_tui"}

NAMEDTUPLE_API = frozenset({"_fields", "_replace", "_asdict", "_make", "_field_defaults"})

def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _package_of(module: str, modules: dict[str, Path]) -> str:
    """The package a module sits in (a package's ``__init__`` sits in the package itself)."""
    return module if modules[module].name == "__init__.py" else module.rpartition(".")[0]


def _private_module_part(target: str, importer: str, modules: dict[str, Path]) -> str | None:
    """The first private segment of a dotted module path that ``importer`` may not reach: a private
    module is the business of its own package's modules only."""
    parts = target.split(".")
    for i, part in enumerate(parts):
        if _is_private(part):
            owner = ".".join(parts[:i])  # the package holding the private module
            inside = importer == owner or importer.startswith(owner + ".")
            return None if inside else ".".join(parts[: i + 1])
    return None


def private_crossings(packages: dict[str, Path]) -> list[str]:
    """Every use of another module's private name, one line each: ``<file>:<line>: <what>``."""
    modules = module_files(packages)
    roots = tuple(packages)
    problems: list[str] = []

    def ours(dotted: str) -> bool:
        return dotted.split(".")[0] in roots

    for importer, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        rel = path.relative_to(REPO) if path.is_relative_to(REPO) else path
        imported: dict[str, str] = {}  # local name -> what it names ("pkg.mod" or "pkg.mod.Name")

        def report(line: int, what: str) -> None:
            problems.append(f"{rel}:{line}: {what}")

        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                source = absolute_module(importer, path.name == "__init__.py", node)
                if not ours(source):
                    continue
                bad_module = _private_module_part(source, importer, modules)
                if bad_module:
                    report(node.lineno, f"imports from the private module {bad_module}")
                for alias in node.names:
                    full = f"{source}.{alias.name}"
                    imported[alias.asname or alias.name] = full
                    if not _is_private(alias.name):
                        continue
                    if full in modules:  # a private submodule
                        if _private_module_part(full, importer, modules):
                            report(node.lineno, f"imports the private module {full}")
                    elif source != importer:
                        report(node.lineno, f"imports the private name {alias.name} from {source}")
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if not ours(alias.name):
                        continue
                    bad_module = _private_module_part(alias.name, importer, modules)
                    if bad_module:
                        report(node.lineno, f"imports the private module {bad_module}")
                    if alias.asname:
                        imported[alias.asname] = alias.name
                    else:
                        imported[alias.name.split(".")[0]] = alias.name.split(".")[0]
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Attribute) and _is_private(node.attr)) or node.attr in NAMEDTUPLE_API:
                continue
            chain = [node.attr]
            base = node.value
            while isinstance(base, ast.Attribute):
                chain.append(base.attr)
                base = base.value
            if not isinstance(base, ast.Name) or base.id not in imported:
                continue
            origin = imported[base.id]
            if origin == importer:
                continue
            dotted = ".".join([origin, *reversed(chain)])
            report(node.lineno, f"reads the private name {ast.unparse(node)} ({dotted})")
    return problems


def test_no_module_uses_another_modules_private_names():
    problems = private_crossings(PACKAGES)
    assert problems == [], "\n".join(problems)


def test_the_walk_reads_the_whole_house():
    modules = module_files(PACKAGES)
    assert len(modules) > 150 and "flux.lang.parser" in modules and "flux_tui.app" in modules


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def test_a_synthetic_package_that_crosses_private_names_is_reported(tmp_path):
    _write(tmp_path / "toy", {
        "__init__.py": "",
        "low.py": "import re\n_RULE = re.compile('x')\nclass Thing:\n    @staticmethod\n    def _helper():\n        return 1\n",
        "a.py": "from .low import _RULE\n",
        "b.py": "def f():\n    from toy.low import Thing\n    return Thing._helper()\n",
        "c.py": "from . import low as L\nX = L._RULE\n",
        "d.py": "import toy.low\nY = toy.low._RULE\n",
        "inner/__init__.py": "",
        "inner/_fast.py": "def go():\n    return 1\n",
        "inner/user.py": "from ._fast import go\n",
        "outside.py": "from .inner._fast import go\n",
    })
    problems = [p.split(": ", 1)[1] for p in private_crossings({"toy": tmp_path / "toy"})]
    assert sorted(problems) == sorted([
        "imports the private name _RULE from toy.low",
        "reads the private name Thing._helper (toy.low.Thing._helper)",
        "reads the private name L._RULE (toy.low._RULE)",
        "reads the private name toy.low._RULE (toy.low._RULE)",
        "imports from the private module toy.inner._fast",
    ])


def test_what_is_allowed_is_not_reported(tmp_path):
    _write(tmp_path / "toy", {
        "__init__.py": "",
        "low.py": "from collections import namedtuple\nCell = namedtuple('Cell', 'a b')\nPUBLIC = 1\n_OWN = 2\n"
                  "def use():\n    return _OWN, Cell._fields\n",
        "a.py": "import sys\nfrom json.encoder import encode_basestring as _json_str\nfrom .low import PUBLIC as _public, Cell\n"
                "F = sys._getframe\nG = Cell._fields, Cell(1, 2)._replace(a=3)\n",
        "inner/__init__.py": "from ._fast import go\n",
        "inner/_fast.py": "def go():\n    return 1\n",
    })
    assert private_crossings({"toy": tmp_path / "toy"}) == []
