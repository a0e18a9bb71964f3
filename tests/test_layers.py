"""The package's layers point down only, and no modules import each other in a cycle.

Read from the source with `ast` (no import is executed), so the test sees every
import, including the lazy ones inside functions.
"""

import ast
import pathlib

import pytest


ROOT = pathlib.Path(__file__).resolve().parent.parent

LAYERS = (
    ("costmodel._core", 0),  # pure physics: pytrees in, pytrees out
    ("costmodel.io", 1),  # the only code that reads files: schema, presets, loaders, errors
    ("costmodel.evaluation", 2),  # the applications, pure functions returning results
    ("costmodel.api", 2),
    ("costmodel.codesign", 2),
    ("costmodel.explain", 2),
    ("costmodel.validate", 2),
    ("costmodel.sweep", 2),
    ("costmodel.report", 3),  # records, plots, provenance, the main job
    ("costmodel", 3),  # the public API (`costmodel/__init__.py`) re-exports the layers below
    ("calibration", 4),  # measures traces and fits the core to them
    ("costmodel.cli", 5),  # argparse and printing only; the one place that imports calibration
)
"""Module prefix -> layer; the longest matching prefix wins. A module may import its
own layer or any below it, never one above."""


def layer(module: str) -> int:
    best = max((p for p, _ in LAYERS if module == p or module.startswith(p + ".")), key=len, default=None)
    if best is None:
        raise AssertionError(f"{module}: in no layer of LAYERS; add it")
    return dict(LAYERS)[best]


def modules() -> dict[str, pathlib.Path]:
    out = {}
    for package in ("costmodel", "calibration"):
        for f in (ROOT / package).rglob("*.py"):
            name = ".".join(f.relative_to(ROOT).with_suffix("").parts)
            out[name.removesuffix(".__init__")] = f
    return out


def imports(name: str, path: pathlib.Path, known: set[str]) -> set[str]:
    """The project modules `name` imports (the module itself if it is in `known`,
    else its package: `from . import x` names the module `x` where there is one)."""
    is_package = path.name == "__init__.py"
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                parts = name.split(".")
                base = parts[: len(parts) - node.level + (1 if is_package else 0)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            candidates = [f"{target}.{a.name}" for a in node.names] + [target]
        elif isinstance(node, ast.Import):
            candidates = [a.name for a in node.names]
        else:
            continue
        for c in candidates:
            if c in known and c != name:
                out.add(c)
                break
    return out


GRAPH = {n: imports(n, p, set(modules())) for n, p in modules().items()}


@pytest.mark.parametrize("module", sorted(GRAPH))
def test_imports_point_down(module):
    up = sorted(t for t in GRAPH[module] if layer(t) > layer(module))
    assert not up, f"{module} (layer {layer(module)}) imports a layer above it: {up}"


def test_no_import_cycles():
    """Tarjan's strongly connected components over module imports. A package's
    `__init__` is left out: it re-exports its own modules by design."""
    graph = {n: {t for t in ts if not (modules()[t].name == "__init__.py")} for n, ts in GRAPH.items()}
    graph = {n: ts for n, ts in graph.items() if modules()[n].name != "__init__.py"}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    cycles = []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    assert not cycles, f"import cycles: {cycles}"


def test_the_check_sees_an_upward_import(tmp_path):
    """The checker itself can fail: a core module that imports the CLI is flagged."""
    f = tmp_path / "bad.py"
    f.write_text("from ..cli import main\n")
    found = imports("costmodel._core.bad", f, {"costmodel.cli"})
    assert found == {"costmodel.cli"} and layer("costmodel.cli") > layer("costmodel._core.bad")


CORE_ORDER = (
    "types",
    "numerics",
    "workload",
    "traffic",
    "chip",
    "channels",
    "placement",
    "cost",
    "power",
    "economics",
    "area",
)
"""The core's modules in the order data flows through them (`costmodel/_core/__init__.py`)."""


def test_core_modules_import_only_earlier_ones():
    core = {n.removeprefix("costmodel._core."): ts for n, ts in GRAPH.items() if n.startswith("costmodel._core.")}
    assert set(core) == set(CORE_ORDER), "a core module is missing from CORE_ORDER (and from _core/__init__'s list)"
    for module, targets in core.items():
        for t in targets:
            name = t.removeprefix("costmodel._core.")
            assert CORE_ORDER.index(name) < CORE_ORDER.index(module), f"_core.{module} imports later _core.{name}"
