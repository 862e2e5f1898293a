"""No import cycle inside ``reference_impl``, counting every import a module can run.

Each module under ``reference_impl/`` is parsed with ``ast``; every ``import`` and
``from ... import`` naming a ``reference_impl`` module is an edge, relative or absolute,
at module level or inside a function (a lazy import still runs, so a cycle through it is
still a cycle: counting them is the stricter rule, and it holds). ``from pkg import name``
is an edge to ``pkg.name`` where that is a module, else to ``pkg``; importing a submodule
is not counted as importing each parent package's ``__init__`` (Python runs those first,
but they hold re-exports, not the code that depends on them). Only imports under
``if TYPE_CHECKING:`` are left out: they never run.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "reference_impl"
PACKAGE = "reference_impl"


def _modules() -> dict[str, Path]:
    mods = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        mods[".".join(parts)] = path
    return mods


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST):
    """Every Import/ImportFrom node, outside ``if TYPE_CHECKING:`` blocks."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node):
            stack.extend(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def import_graph() -> dict[str, set[str]]:
    mods = _modules()
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        is_pkg = path.name == "__init__.py"
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                if node.level:
                    base = mod.split(".")
                    base = base[: len(base) - node.level + (1 if is_pkg else 0)]
                    base_name = ".".join(base + ([node.module] if node.module else []))
                else:
                    base_name = node.module or ""
                targets = [
                    f"{base_name}.{a.name}" if f"{base_name}.{a.name}" in mods else base_name
                    for a in node.names
                ]
            for target in targets:
                if target.split(".")[0] != PACKAGE:
                    continue
                while target not in mods:  # ``import reference_impl.x.y`` of a name
                    target = target.rpartition(".")[0]
                if target != mod:
                    graph[mod].add(target)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as ``[a, b, ..., a]``, or None (iterative DFS, three colours)."""
    state: dict[str, int] = {}
    for start in sorted(graph):
        if state.get(start):
            continue
        path, stack = [start], [iter(sorted(graph[start]))]
        state[start] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            elif not state.get(nxt):
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(sorted(graph[nxt])))
    return None


def test_the_walker_sees_the_package():
    graph = import_graph()
    assert "reference_impl.device.sim" in graph and "reference_impl.table.table" in graph
    assert "reference_impl.table.column" in graph["reference_impl.table.table"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycle():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def _private_uses(path: Path) -> list[str]:
    """``path``'s imports of private ``reference_impl`` names (a ``_module`` or a ``_name``)
    and its ``Name._attr`` reads on names it imported from there."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    bound: set[str] = set()
    found: list[str] = []
    for node in _imports(tree):
        if isinstance(node, ast.Import):
            mods = [(a.name, a.asname or a.name.split(".")[0]) for a in node.names]
            names: list[str] = []
        else:
            mods = [(node.module or "", None)] if node.level == 0 else []
            names = [a.name for a in node.names]
        for mod, as_name in mods:
            if mod.split(".")[0] != PACKAGE:
                continue
            private = [p for p in mod.split(".") + names if p.startswith("_") and not p.startswith("__")]
            found += [f"{path.name}:{node.lineno}: imports {mod}:{p}" for p in private]
            bound.update([as_name] if as_name else [a.asname or a.name for a in node.names])
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in bound
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
        ):
            found.append(f"{path.name}:{node.lineno}: uses {node.value.id}.{node.attr}")
    return found


def test_the_suite_uses_no_private_reference_name():
    """The conformance suite judges any implementation: it may use the reference's public
    device and table API, never its private names (they may change under it)."""
    suite = ROOT.parent / "conformance"
    files = sorted(suite.rglob("*.py"))
    assert len(files) > 20
    found = [use for path in files for use in _private_uses(path)]
    assert not found, "\n".join(found)


def test_the_private_name_check_can_fail(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(
        "from reference_impl.device.cuda import _import_cupy\n"
        "from reference_impl.table import Table\n"
        "Table._from_frames\n"
    )
    assert len(_private_uses(bad)) == 2


def test_the_suite_uses_no_pytest_internals():
    """The runner uses pytest's public API only: ``_pytest`` changes without notice."""
    suite = ROOT.parent / "conformance"
    found = [
        f"{path.relative_to(suite)}:{node.lineno}"
        for path in sorted(suite.rglob("*.py"))
        for node in _imports(ast.parse(path.read_text(encoding="utf-8")))
        if any(
            name.split(".")[0] == "_pytest"
            for name in (
                [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            )
        )
    ]
    assert not found, found
