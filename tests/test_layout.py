"""The layout's rules, read from the code itself: rooms in layers, no arrow upwards, no circle, small modules.

Every ``import`` of every module of extender/ and policy/ (at any depth: in a
function, under ``TYPE_CHECKING``) is parsed with :mod:`ast`. :data:`LAYERS` is
the one place the map lives (docs/ARCHITECTURE.md and each package's
docstring describe it):

* a module belongs to the room (package) of :data:`LAYERS` that holds it,
  the most specific one;
* it may import modules of its own room and of rooms in lower layers, never of
  another room of its own layer or of a higher one;
* :data:`ONLY` narrows what a room may take from a lower one;
* nothing in extender/ or policy/ imports benchmarks/, and no module imports
  itself through others (a circle), rooms or not;
* no module of extender/ or policy/ is over :data:`MAX_LINES` lines, and
  extender/'s top level holds at most :data:`MAX_TOP_LEVEL` entries.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("policy", "extender")  # what is checked; benchmarks/ and tests/ may import anything
FIRST_PARTY = ("policy", "extender", "benchmarks")

# Lowest first. A room may import its own modules and the rooms of lower layers only.
LAYERS = (
    ("policy",),  # the placement core: numpy in, decisions out
    ("extender", "extender.logs", "extender.periodic"),  # the package itself (a docstring), structured logs and
    # background rounds, used by every room
    ("extender.ledger",),  # which pod holds what, fed by the watch and changed by bind
    ("extender.cluster", "extender.views"),  # backends; operators' views (metrics, texts, plans, GPU map)
    ("extender.defrag", "extender.verbs"),  # the executor that evicts; the verbs' logic and wire format
    ("extender.serving",),  # HTTP: the Flask app (the composition root), the verbs' HTTP replies, gunicorn
    ("extender.cli",),  # the command lines
    ("extender.__main__",),  # python -m extender
)
# (room, lower room) → the only modules of the lower room it may import
ONLY = {("extender.verbs", "extender.cluster"): {"extender.cluster.base"}}  # the backend interface and errors
MAX_LINES = 500
MAX_TOP_LEVEL = 12


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict:
    """module name → path, for every module of :data:`PACKAGES`."""
    return {module_name(p): p for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py"))}


def imports(name: str, path: Path, known: set) -> set:
    """First-party modules ``name`` imports: ``from a import b`` is ``a.b`` when that is a module, else ``a``."""
    tree = ast.parse(path.read_text(), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from the package, up level - 1
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module
            for alias in node.names:
                found.add(f"{source}.{alias.name}" if f"{source}.{alias.name}" in known else source)
    return {m for m in found if m.split(".")[0] in FIRST_PARTY}


def graph() -> dict:
    """module → the first-party modules it imports."""
    found = modules()
    return {name: imports(name, path, set(found)) for name, path in found.items()}


def room_of(module: str) -> str | None:
    """The most specific room of :data:`LAYERS` holding ``module`` ("extender" holds only the package itself)."""
    rooms = [room for layer in LAYERS for room in layer
             if module == room or (module.startswith(room + ".") and room != "extender")]
    return max(rooms, key=len) if rooms else None


def layer_of(room: str) -> int:
    return next(i for i, layer in enumerate(LAYERS) if room in layer)


def wrong_arrows(edges: dict) -> list:
    """``(importer, imported, why)`` for every import the layers forbid."""
    wrong = []
    for importer, targets in sorted(edges.items()):
        room = room_of(importer)
        for target in sorted(targets):
            if target.split(".")[0] == "benchmarks":
                wrong.append((importer, target, "the service and the core never import the bench"))
                continue
            other = room_of(target)
            if room is None or other is None:
                wrong.append((importer, target, "a module in no room of LAYERS"))
            elif other == room:
                continue
            elif layer_of(other) > layer_of(room):
                wrong.append((importer, target, f"upwards: {room} (layer {layer_of(room)}) imports {other} "
                                                f"(layer {layer_of(other)})"))
            elif layer_of(other) == layer_of(room):
                wrong.append((importer, target, f"sideways: {room} and {other} share layer {layer_of(room)}"))
            elif (room, other) in ONLY and target not in ONLY[room, other]:
                wrong.append((importer, target, f"{room} may take only {sorted(ONLY[room, other])} of {other}"))
    return wrong


def circles(edges: dict) -> list:
    """The import circles among ``edges``' modules (Tarjan's strongly connected components, size > 1 or a
    module importing itself), each sorted."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []
    counter = [0]

    def visit(node):
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for target in edges.get(node, ()):
            if target not in edges:
                continue
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1 or node in edges.get(node, ()):
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_every_module_belongs_to_a_room():
    assert [m for m in modules() if room_of(m) is None] == []


def test_no_import_goes_upwards_sideways_or_into_the_bench():
    assert wrong_arrows(graph()) == []


def test_no_import_circles():
    assert circles(graph()) == []


def test_the_checks_catch_what_they_are_for():
    """The checks on made-up graphs: each kind of wrong arrow, and circles, are found."""
    edges = {"extender.ledger.a": {"extender.verbs.service", "benchmarks.replay", "policy.state"},
             "extender.views.v": {"extender.cluster.base"},
             "extender.verbs.service": {"extender.cluster.kube.backend", "extender.cluster.base",
                                        "extender.ledger.a"},
             "policy.x": {"policy.y"}, "policy.y": {"policy.x"}, "policy.z": {"policy.z"}}
    found = {(a, b): why.split(":")[0] for a, b, why in wrong_arrows(edges)}
    assert found == {("extender.ledger.a", "extender.verbs.service"): "upwards",
                     ("extender.ledger.a", "benchmarks.replay"): "the service and the core never import the bench",
                     ("extender.views.v", "extender.cluster.base"): "sideways",
                     ("extender.verbs.service", "extender.cluster.kube.backend"):
                         "extender.verbs may take only ['extender.cluster.base'] of extender.cluster"}
    assert circles(edges) == [["extender.ledger.a", "extender.verbs.service"], ["policy.x", "policy.y"],
                              ["policy.z"]]
    assert circles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_imports_are_resolved_as_python_resolves_them(tmp_path):
    path = tmp_path / "__init__.py"
    path.write_text("from . import wire\nfrom .service import Extender\nfrom extender.ledger import annotations\n"
                    "import policy.state\nfrom policy.defrag import DEFAULT_MAX_MOVES\nimport numpy\n"
                    "def f():\n    from benchmarks import replay\n")
    known = {"extender.verbs.wire", "extender.verbs.service", "extender.ledger.annotations", "policy.state",
             "policy.defrag"}
    assert imports("extender.verbs", path, known) == known | {"benchmarks"}


@pytest.mark.parametrize("package", PACKAGES)
def test_no_module_is_over_the_line_limit(package):
    sizes = {name: len(path.read_text().splitlines()) for name, path in modules().items()
             if name.split(".")[0] == package}
    assert sizes and {name: n for name, n in sizes.items() if n > MAX_LINES} == {}


def test_the_extender_top_level_is_small():
    entries = sorted(p.name for p in (ROOT / "extender").iterdir() if p.name != "__pycache__")
    assert len(entries) <= MAX_TOP_LEVEL, entries


def test_every_package_says_what_lives_there_and_what_it_may_import():
    for name, path in modules().items():
        if path.name != "__init__.py":
            continue
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
        assert doc, f"{name} has no docstring"
        if name.startswith("extender."):
            assert "may import" in doc.lower(), f"{name}'s docstring does not say what it may import"
