"""The import graph of ``src/residentkv``: no circle between modules, no arrow that runs upward.

The graph is derived from the source with :mod:`ast` (never by importing it): every ``import``
and ``from ... import`` anywhere in a module counts — at module level, inside a function, under
``if TYPE_CHECKING:`` — so an import moved into a function to dodge a circle is still seen.
``from package import name`` is an arrow to ``package.name`` when that is a module, else to
``package``. Files under ``residentkv/data`` are data (test inputs), not modules.

:data:`LAYERS` is the one table of layers (docs/architecture.md draws it): a module may import
its own layer or any layer below it, never one above.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import residentkv

ROOT = Path(residentkv.__file__).parent

#: layers, lowest first; a module belongs to the layer of its longest listed prefix
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("base", ("residentkv", "residentkv.errors", "residentkv.codes", "residentkv.limits",
              "residentkv.findings", "residentkv.jsontext")),
    ("model", ("residentkv.model",)),
    ("trace", ("residentkv.trace",)),
    ("lowering", ("residentkv.lowering", "residentkv.trust", "residentkv.sources",
                  "residentkv.fleet")),
    ("harnesses and emitters", ("residentkv.suite", "residentkv.microruntime",
                                "residentkv.observe", "residentkv.adapters")),
    ("report", ("residentkv.report",)),
    ("jobs", ("residentkv.audit",)),
    ("cli", ("residentkv.commands", "residentkv.cli", "residentkv.__main__")),
)

def _module_files() -> dict[str, Path]:
    out = {}
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT.parent).with_suffix("")
        if rel.parts[1:2] == ("data",):
            continue
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        out[".".join(parts)] = path
    return out


def _imported(node: ast.Import | ast.ImportFrom, module: str, is_package: bool,
              known: dict[str, Path]) -> Iterator[str]:
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        base = node.module or ""
        if node.level:
            package = module.split(".") if is_package else module.split(".")[:-1]
            anchor = package[:len(package) - node.level + 1]
            base = ".".join([*anchor, base] if base else anchor)
        names = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base
                 for a in node.names]
    for name in names:
        while name and name not in known:  # ``import a.b.c`` of a function or class: its module
            name = name.rpartition(".")[0]
        if name and name != module:
            yield name


@cache
def import_graph() -> dict[str, frozenset[str]]:
    """Every module of residentkv and the residentkv modules it imports, anywhere in it."""
    known = _module_files()
    graph = {}
    for module, path in known.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        graph[module] = frozenset(
            target for node in ast.walk(tree) if isinstance(node, ast.Import | ast.ImportFrom)
            for target in _imported(node, module, path.name == "__init__.py", known))
    return graph


def layer_of(module: str) -> int:
    """The index in :data:`LAYERS` of *module*'s longest listed prefix."""
    matches = [(len(prefix), index) for index, (_name, prefixes) in enumerate(LAYERS)
               for prefix in prefixes if module == prefix or module.startswith(prefix + ".")]
    assert matches, f"{module} is in no layer: add it to LAYERS"
    return max(matches)[1]


def circles(graph: dict[str, frozenset[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            for nxt in successors:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
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


def test_the_graph_is_derived_from_the_source() -> None:
    graph = import_graph()
    assert "residentkv.lowering.check" in graph
    assert "residentkv.report.registry" in graph["residentkv.report.json_report"]
    assert not any(m.startswith("residentkv.data") for m in graph)


def test_every_module_has_a_layer() -> None:
    for module in import_graph():
        layer_of(module)


def test_no_circle_between_modules() -> None:
    found = [sorted(c) for c in circles(import_graph())]
    assert not found, f"import circles: {found}"


def test_no_arrow_runs_upward() -> None:
    upward = [f"{a} ({LAYERS[layer_of(a)][0]}) -> {b} ({LAYERS[layer_of(b)][0]})"
              for a, targets in sorted(import_graph().items()) for b in sorted(targets)
              if layer_of(b) > layer_of(a)]
    assert not upward, "imports that run upward:\n" + "\n".join(upward)


def test_the_report_layer_never_imports_the_audit_job() -> None:
    graph = import_graph()
    wrong = [(a, b) for a, targets in graph.items() if a.startswith("residentkv.report")
             for b in targets if b.startswith("residentkv.audit")]
    assert not wrong


def test_the_checks_see_a_circle_and_an_upward_arrow() -> None:
    graph = {"residentkv.model.a": frozenset({"residentkv.report.b"}),
             "residentkv.report.b": frozenset({"residentkv.model.a"}),
             "residentkv.model.c": frozenset()}
    assert circles(graph) == [frozenset({"residentkv.model.a", "residentkv.report.b"})]
    assert layer_of("residentkv.report.b") > layer_of("residentkv.model.a")
