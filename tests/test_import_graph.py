"""The package's import graph has no circles (every import counts, also those inside functions), and no module
imports another module's private name."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).parents[1] / "src"
PACKAGE = SRC / "warpforge"


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(SRC).with_suffix("").parts
        if "templates" in parts[:-1] or "recordings" in parts[:-1]:
            continue  # candidate code (variant files), not the package's own modules
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


MODULES = _modules()


def _imports(name: str, path: Path) -> list[tuple[str, str | None]]:
    """(module imported, name taken from it or None) for every import in the file, at any depth."""
    tree = ast.parse(path.read_text())
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: list[tuple[str, str | None]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, None) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            for a in node.names:
                sub = f"{base}.{a.name}"
                out.append((sub, None) if sub in MODULES else (base, a.name))
    return [(m, n) for m, n in out if m.split(".")[0] == "warpforge"]


def _target(module: str) -> str | None:
    while module and module not in MODULES:
        module = module.rpartition(".")[0]
    return module or None


def graph() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {m: set() for m in MODULES}
    for name, path in MODULES.items():
        for module, _ in _imports(name, path):
            target = _target(module)
            if target is not None and target != name and target != "warpforge":
                edges[name].add(target)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_the_checker_finds_a_planted_circle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_circles() -> None:
    found = cycles(graph())
    assert not found, "import circles (make the registry import its implementations, never the reverse): " + "; ".join(
        " <-> ".join(c) for c in found
    )


def test_no_cross_module_imports_of_private_names() -> None:
    bad = {
        f"{name} imports {n} from {module}"
        for name, path in MODULES.items()
        for module, n in _imports(name, path)
        if n is not None and n.startswith("_") and not n.startswith("__") and _target(module) != name
    }
    assert not bad, "make the name public in the module that owns it, or move it: " + "; ".join(sorted(bad))


def _package(module: str) -> str:
    """The top-level package (``warpforge.search.engine.taskrun`` -> ``warpforge.search``); a top-level module
    (``warpforge.errors``) is its own package."""
    return ".".join(module.split(".")[:2])


def package_graph(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for src, targets in edges.items():
        out.setdefault(_package(src), set())
        for t in targets:
            if _package(t) != _package(src):
                out[_package(src)].add(_package(t))
    for targets in list(out.values()):
        for t in targets:
            out.setdefault(t, set())
    return out


def test_the_package_checker_sees_a_circle_between_packages() -> None:
    # Two modules each fine on their own, but their packages import each other (agent <-> parallel, once).
    edges = {
        "warpforge.agent.plans": {"warpforge.parallel.specs"},
        "warpforge.parallel.specs": set(),
        "warpforge.parallel.cli": {"warpforge.agent.plans"},
    }
    assert cycles(edges) == []
    assert cycles(package_graph(edges)) == [["warpforge.agent", "warpforge.parallel"]]


def test_no_package_circles() -> None:
    found = cycles(package_graph(graph()))
    assert not found, (
        "package circles (dependencies point down: cli -> search/parallel -> agent, evaluator -> "
        + "kernels, db): "
        + "; ".join(" <-> ".join(c) for c in found)
    )
