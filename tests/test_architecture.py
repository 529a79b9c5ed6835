"""Dependencies point one way (docs/architecture.md): each app imports only the apps below it, at module
level or inside functions, and no two modules import each other, directly or round a longer loop."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Each package and what it may import of Podium's own packages (itself always).
ALLOWED: dict[str, set[str]] = {
    "core": set(),
    "catalog": {"core"},
    "accounts": {"core", "catalog"},
    # podium_reference: the demo ships the reference benchmark's implementation and logs (ingest/demo/reference.py).
    "ingest": {"core", "catalog", "accounts", "podium_reference"},
    "reviews": {"core", "catalog", "accounts", "ingest"},
    "runners": {"core", "catalog", "accounts", "ingest"},
    "leaderboard": {"core", "catalog", "accounts", "ingest", "reviews", "runners"},
    # The project shell wires the apps together (URLs, the Celery app): it sits on top of all of them.
    "config": {"core", "catalog", "accounts", "ingest", "reviews", "runners", "leaderboard"},
    # Runs on GPU hosts without Django: it speaks HTTP only.
    "runner_agent": {"core"},
    "podium_reference": {"catalog"},
}
PACKAGES = set(ALLOWED)
# Pure domain code: no Django, and of Podium only itself and the catalog's plain data modules.
PURE = {
    "ingest.engine": {"ingest.engine", "catalog.extensions", "catalog.catalog_data"},
    "core.http": {"core.http"},
}


def _modules() -> Iterator[tuple[str, Path]]:
    for package in sorted(PACKAGES):
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).with_suffix("")
            parts = list(rel.parts)
            if parts[-1] == "__init__":
                parts.pop()
            yield ".".join(parts), path


def _imports(name: str, path: Path) -> Iterator[tuple[str, int]]:
    """Every module this file imports, wherever the import statement stands, as absolute names."""
    tree = ast.parse(path.read_text(), filename=str(path))
    is_package = path.name == "__init__.py"
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            yield module, node.lineno
            for alias in node.names:  # `from pkg import module` imports a module too
                yield f"{module}.{alias.name}", node.lineno


def _graph() -> tuple[dict[str, set[str]], list[str]]:
    modules = dict(_modules())
    graph: dict[str, set[str]] = {name: set() for name in modules}
    violations = []
    for name, path in modules.items():
        package = name.split(".")[0]
        in_migration = ".migrations." in f".{name}."
        for imported, line in _imports(name, path):
            top = imported.split(".")[0]
            if top in PACKAGES and top != package and top not in ALLOWED[package]:
                violations.append(f"{path.relative_to(ROOT)}:{line} imports {imported} ({package} → {top})")
            for pure, allowed in PURE.items():
                if name == pure or name.startswith(pure + "."):
                    podium = top in PACKAGES and not any(imported == a or imported.startswith(a + ".")
                                                         for a in allowed)
                    if top == "django" or podium:
                        violations.append(f"{path.relative_to(ROOT)}:{line} imports {imported} (pure {pure})")
            if imported in modules and imported != name and not in_migration:
                graph[name].add(imported)
    return graph, sorted(set(violations))


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _parent_packages(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """A package's __init__ importing its own submodules is how packages work, not a loop."""
    return {
        name: {dep for dep in deps if not dep.startswith(name + ".")}
        for name, deps in graph.items()
    }


def test_apps_import_only_the_apps_below_them():
    _, violations = _graph()
    assert violations == []


def test_no_module_imports_itself_round_a_loop():
    graph, _ = _graph()
    assert _cycles(_parent_packages(graph)) == []


def test_the_checker_finds_a_loop_and_an_upward_import():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == [["a", "b", "c"]]
    imports = dict(_imports("ingest.x", ROOT / "ingest" / "models.py"))
    assert "accounts.models" in imports
