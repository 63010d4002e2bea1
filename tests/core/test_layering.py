"""The layers of the house, read from the code: no module imports a higher layer, no modules import each other in a loop.

Every import is read with ``ast`` — function-body and ``TYPE_CHECKING`` imports included, since an import
hidden in a function still ties the two modules together. The layers, low to high:

    foundation  flux, canonical, timefmt, documents, errors, records, lazy
    store       flux.store
    lang        flux.lang
    model       flux.model, flux.cassette, flux.telemetry   (read models of a stored session)
    runtime     flux.agent                                   (the recording agent)
    timemachine flux.timemachine                             (replay, diff, fork, resurrect, what-if)
    sdk         flux.sdk                                     (the runtime's client with the time machine on it)
    lab         flux.testkit, flux.cases, flux.pages, flux.demo, flux.importers
    front       flux.cli, flux_tui

A module may import its own layer or any lower one. Circles that other work still has to break are listed in
``KNOWN_CIRCLES``; the list may only shrink — a listed circle that no longer exists fails the test too, so whoever
breaks one deletes its entry.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from tests.module_graph import absolute_module, module_files

REPO = Path(__file__).resolve().parents[2]
PACKAGES = {"flux": REPO / "core" / "flux", "flux_tui": REPO / "tui" / "flux_tui"}

LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("foundation", ("flux", "flux.canonical", "flux.timefmt", "flux.documents", "flux.errors", "flux.records",
                    "flux.lazy")),
    ("store", ("flux.store",)),
    ("lang", ("flux.lang",)),
    ("model", ("flux.model", "flux.cassette", "flux.telemetry")),
    ("runtime", ("flux.agent",)),
    ("timemachine", ("flux.timemachine",)),
    ("sdk", ("flux.sdk",)),
    ("lab", ("flux.testkit", "flux.cases", "flux.pages", "flux.demo", "flux.importers")),
    ("front", ("flux.cli", "flux_tui")),
)

# Circles still to break, each owned by other work. Delete an entry when its circle is gone.
# (Empty: the house has no import circle. Keep it so.)
KNOWN_CIRCLES: frozenset[frozenset[str]] = frozenset()

# Upward imports still to remove: (importer, imported). The list may only shrink, like the circles.
KNOWN_UPWARD: frozenset[tuple[str, str]] = frozenset()


@dataclass(frozen=True)
class Import:
    importer: str
    imported: str
    line: int


def read_imports(modules: dict[str, Path]) -> list[Import]:
    """The imports between the given modules, wherever in a file they stand."""
    edges: set[Import] = set()
    for importer, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                source = absolute_module(importer, path.name == "__init__.py", node)
                for alias in node.names:
                    submodule = f"{source}.{alias.name}"
                    targets.append(submodule if submodule in modules else source)
            for target in targets:
                while target and target not in modules:  # `import flux.store.store as s` names the module itself
                    target = target.rpartition(".")[0]
                if target and target != importer:
                    edges.add(Import(importer, target, node.lineno))
    return sorted(edges, key=lambda e: (e.importer, e.imported, e.line))


def layer_of(module: str, layers=LAYERS) -> int:
    """The rank of the layer naming ``module`` or a package above it (-1: none). A package whose
    modules other entries place (``flux``) names only its own ``__init__``: each of its modules must
    be placed by name, so a new one cannot fall silently into the package's layer."""
    names = [prefix for _, prefixes in layers for prefix in prefixes]
    best, best_len = -1, -1
    for rank, (_, prefixes) in enumerate(layers):
        for prefix in prefixes:
            split = any(other.startswith(prefix + ".") for other in names)
            under = not split and module.startswith(prefix + ".")
            if (module == prefix or under) and len(prefix) > best_len:
                best, best_len = rank, len(prefix)
    return best


def unplaced(modules, layers=LAYERS) -> list[str]:
    return sorted(m for m in modules if layer_of(m, layers) < 0)


def upward_imports(edges: list[Import], layers=LAYERS) -> list[Import]:
    """Imports of a higher layer (a module in no layer is reported as such, not here)."""
    return [e for e in edges if layer_of(e.imported, layers) > layer_of(e.importer, layers) >= 0]


def circles(edges: list[Import]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    graph: dict[str, set[str]] = {}
    for e in edges:
        graph.setdefault(e.importer, set()).add(e.imported)
        graph.setdefault(e.imported, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[frozenset[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(frozenset(component))
    return found


def layering_problems(packages: dict[str, Path], layers=LAYERS, known_circles=frozenset(), known_upward=frozenset()) -> list[str]:
    """Every breach of the layering, one line each: unplaced modules, upward imports, circles, and stale KNOWN entries."""
    modules = module_files(packages)
    edges = read_imports(modules)
    problems = [f"{m}: in no layer (add it to LAYERS)" for m in unplaced(modules, layers)]
    names = {rank: name for rank, (name, _) in enumerate(layers)}
    seen_upward = set()
    for e in upward_imports(edges, layers):
        seen_upward.add((e.importer, e.imported))
        if (e.importer, e.imported) not in known_upward:
            problems.append(
                f"{e.importer} (layer {names[layer_of(e.importer, layers)]}) imports {e.imported} "
                f"(layer {names[layer_of(e.imported, layers)]}) at line {e.line}: an import of a higher layer"
            )
    problems += [f"KNOWN_UPWARD lists {a} -> {b}, which no longer exists: delete the entry" for a, b in sorted(known_upward - seen_upward)]
    found = circles(edges)
    for circle in found:
        if circle not in known_circles:
            ties = sorted(f"{e.importer} -> {e.imported} (line {e.line})" for e in edges if e.importer in circle and e.imported in circle)
            problems.append(f"import circle of {len(circle)} modules: " + "; ".join(ties))
    problems += [
        f"KNOWN_CIRCLES lists {sorted(c)}, which is no longer a circle: delete the entry"
        for c in sorted(known_circles - set(found), key=sorted)
    ]
    return problems


def test_the_house_keeps_its_layers():
    problems = layering_problems(PACKAGES, LAYERS, KNOWN_CIRCLES, KNOWN_UPWARD)
    assert problems == [], "\n".join(problems)


def test_the_reader_sees_the_whole_house():
    modules = module_files(PACKAGES)
    edges = read_imports(modules)
    assert len(modules) > 150
    assert len(edges) > 700
    # a function-body import is read too: the CLI imports the time machine inside its verbs
    assert any(e.importer.startswith("flux.cli") and e.imported.startswith("flux.timemachine") for e in edges)


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def test_a_synthetic_package_with_a_circle_and_an_upward_import_is_reported(tmp_path):
    _write(tmp_path / "toy", {
        "__init__.py": "",
        "low/__init__.py": "",
        "low/base.py": "def helper():\n    from toy.high.top import run  # hidden in a function body\n    return run\n",
        "high/__init__.py": "",
        "high/top.py": "from ..low.base import helper\n\ndef run():\n    return helper\n",
        "high/a.py": "from . import b\n",
        "high/b.py": "import toy.high.a\n",
        "stray.py": "",
    })
    layers = (("base", ("toy", "toy.low")), ("top", ("toy.high",)))
    problems = layering_problems({"toy": tmp_path / "toy"}, layers)
    # `toy` names the package's own __init__ only: a module no layer names is reported, not placed
    assert problems[0] == "toy.stray: in no layer (add it to LAYERS)"
    upward = [p for p in problems if "an import of a higher layer" in p]
    assert upward == ["toy.low.base (layer base) imports toy.high.top (layer top) at line 2: an import of a higher layer"]
    circle_lines = sorted(p for p in problems if p.startswith("import circle"))
    assert len(circle_lines) == 2
    assert "toy.high.a -> toy.high.b (line 1)" in circle_lines[0] and "toy.high.b -> toy.high.a (line 1)" in circle_lines[0]
    assert "toy.high.top -> toy.low.base" in circle_lines[1] and "toy.low.base -> toy.high.top" in circle_lines[1]
    assert len(problems) == 4


def test_known_entries_that_no_longer_hold_are_reported(tmp_path):
    _write(tmp_path / "toy", {"__init__.py": "", "a.py": "from . import b\n", "b.py": "X = 1\n"})
    layers = (("all", ("toy", "toy.a", "toy.b")),)
    gone_circle = frozenset({frozenset({"toy.a", "toy.b"})})
    gone_upward = frozenset({("toy.a", "toy.b")})
    problems = layering_problems({"toy": tmp_path / "toy"}, layers, gone_circle, gone_upward)
    assert problems == [
        "KNOWN_UPWARD lists toy.a -> toy.b, which no longer exists: delete the entry",
        "KNOWN_CIRCLES lists ['toy.a', 'toy.b'], which is no longer a circle: delete the entry",
    ]
    # and a listed circle that still exists is not reported
    _write(tmp_path / "toy", {"b.py": "from . import a\n"})
    assert layering_problems({"toy": tmp_path / "toy"}, layers, gone_circle) == []


def test_a_module_in_no_layer_is_reported(tmp_path):
    _write(tmp_path / "toy", {"__init__.py": "", "placed.py": "", "lost.py": ""})
    problems = layering_problems({"toy": tmp_path / "toy"}, (("one", ("toy.placed",)),))
    assert problems == ["toy: in no layer (add it to LAYERS)", "toy.lost: in no layer (add it to LAYERS)"]


# The event model's modules, low to high: the dataclass-to-body rules, the kinds (and decoding a body),
# then a payload's text each way. An import between them goes strictly down.
EVENT_MODULE_RANKS = {"flux.store.body_codec": 0, "flux.store.events": 1,
                      "flux.store.payload_decode": 2, "flux.store.payload_encode": 2}


def event_model_problems(edges: list[Import]) -> list[str]:
    ranks = EVENT_MODULE_RANKS
    return [f"{e.importer} imports {e.imported} at line {e.line}: the event model's modules import only downwards"
            for e in edges if e.importer in ranks and e.imported in ranks and ranks[e.importer] <= ranks[e.imported]]


def test_the_event_kinds_stand_below_their_payload_codecs():
    edges = read_imports(module_files(PACKAGES))
    assert event_model_problems(edges) == []
    between = {(e.importer, e.imported) for e in edges if e.importer in EVENT_MODULE_RANKS and e.imported in EVENT_MODULE_RANKS}
    assert between >= {("flux.store.events", "flux.store.body_codec"), ("flux.store.payload_decode", "flux.store.events"),
                       ("flux.store.payload_encode", "flux.store.events")}
    # the same check on an event model that imports its encoder, and a decoder that imports the encoder
    broken = [Import("flux.store.events", "flux.store.payload_encode", 3),
              Import("flux.store.payload_decode", "flux.store.payload_encode", 9),
              Import("flux.store.payload_encode", "flux.store.body_codec", 12)]
    assert event_model_problems(broken) == [
        "flux.store.events imports flux.store.payload_encode at line 3: the event model's modules import only downwards",
        "flux.store.payload_decode imports flux.store.payload_encode at line 9: the event model's modules import only downwards",
    ]
