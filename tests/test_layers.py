"""The layering of the package (docs/architecture.md): each layer imports only the layers below it, and
no two files import each other, directly or through others. The checker reads the import statements of
every module (also imports inside functions and those under ``if TYPE_CHECKING:``: a type a module
needs only for its annotations still ties it to the module defining it) and names every offending
import, and every cycle, saying which of its imports are type-only; it is shown to fail on a
deliberately bad tree."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import networkx as nx

PACKAGE = Path(__file__).resolve().parents[1] / "optsched"

#: layer -> layers it may import (besides itself). ``top`` is optsched/__init__.py and the optsched/cli/ package.
ALLOWED: dict[str, frozenset[str]] = {
    "core": frozenset({"schemas"}),
    "schemas": frozenset({"core"}),
    "perf": frozenset({"core", "schemas"}),
    "rounds": frozenset({"core", "perf", "schemas"}),
    "heuristics": frozenset({"core", "perf", "rounds"}),
    "formulations": frozenset({"core", "perf", "rounds"}),
    "policies": frozenset({"core", "perf", "rounds", "heuristics", "formulations", "schemas"}),
    "sim": frozenset({"core", "perf", "rounds", "schemas"}),
    "experiments": frozenset({"core", "perf", "rounds", "heuristics", "formulations", "policies", "sim", "schemas"}),
    "service": frozenset({"core", "perf", "rounds", "policies", "schemas", "top"}),
    "integrations": frozenset({"core", "perf", "rounds", "policies", "schemas"}),
    "top": frozenset({"core", "perf", "rounds", "heuristics", "formulations", "policies", "sim", "experiments",
                      "schemas", "top", "service", "integrations"}),
}


def _module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _layer(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1 or parts[1] in ("cli", "__main__"):
        return "top"
    return parts[1]


def _type_checking_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                for sub in ast.walk(child):
                    if hasattr(sub, "lineno"):
                        lines.add(sub.lineno)
    return lines


def imports_of(root: Path, path: Path) -> list[tuple[int, str, bool]]:
    """(line, imported module, whether the import is type-only, under ``if TYPE_CHECKING:``) of every
    import of ``path`` inside the package rooted at ``root``; ``from a.b import c`` names ``a.b.c`` when
    that is a module of the package, else ``a.b``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    type_only = _type_checking_lines(tree)
    here = _module_name(root, path).split(".")
    package = here if path.name == "__init__.py" else here[:-1]
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend((node.lineno, a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
            for a in node.names:
                full = f"{base}.{a.name}"
                sub = root.parent.joinpath(*full.split("."))
                out.append((node.lineno, full if sub.with_suffix(".py").is_file() or sub.is_dir() else base))
    return [(line, m, line in type_only) for line, m in out if m == root.name or m.startswith(root.name + ".")]


def check_layers(root: Path) -> list[str]:
    """Every import of the package at ``root`` that breaks :data:`ALLOWED`, and every import cycle
    between its files (naming the steps of it that only type-only imports make), as messages naming
    the file, line and module."""
    problems: list[str] = []
    graph = nx.DiGraph()
    for path in sorted(root.rglob("*.py")):
        module = _module_name(root, path)
        layer = _layer(module)
        graph.add_node(module)
        for line, target, type_only in imports_of(root, path):
            if graph.has_edge(module, target):
                graph[module][target]["type_only"] &= type_only
            else:
                graph.add_edge(module, target, type_only=type_only)
            other = _layer(target)
            if other != layer and other not in ALLOWED.get(layer, frozenset()):
                problems.append(f"{path.relative_to(root.parent)}:{line} imports {target} "
                                f"({layer} may import only {', '.join(sorted(ALLOWED.get(layer, ()))) or 'itself'})")
    for cycle in nx.simple_cycles(graph):
        if len(cycle) > 1:
            steps = list(zip(cycle, cycle[1:] + cycle[:1]))
            typed = [f"{a} -> {b}" for a, b in steps if graph[a][b]["type_only"]]
            problems.append("import cycle: " + " -> ".join(cycle + cycle[:1])
                            + (f" (type-only: {', '.join(typed)})" if typed else ""))
    return problems


def test_package_keeps_its_layers() -> None:
    assert check_layers(PACKAGE) == []


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "optsched"
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text), encoding="utf-8")
    return root


def test_a_bad_import_is_named(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "__init__.py": "", "core/__init__.py": "", "core/vocab.py": "X = 1\n",
        "perf/__init__.py": "", "perf/model.py": "from optsched.core.vocab import X\nfrom optsched.rounds.kind import Y\n",
        "rounds/__init__.py": "", "rounds/kind.py": "from optsched.perf import model\nY = 2\n",
        "sim/__init__.py": "", "sim/engine.py": "def f():\n    from optsched.policies.registry import solve\n",
        "policies/__init__.py": "", "policies/registry.py": "def solve():\n    pass\n",
    })
    problems = check_layers(root)
    assert any(p.startswith("optsched/perf/model.py:2 imports optsched.rounds.kind (perf may import only")
               for p in problems), problems
    assert any("optsched/sim/engine.py:2 imports optsched.policies.registry" in p for p in problems), problems
    assert any(p.startswith("import cycle:") and "optsched.perf.model" in p and "optsched.rounds.kind" in p
               for p in problems), problems
    assert not any("core/vocab" in p for p in problems)


def test_type_checking_imports_and_relative_imports(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "__init__.py": "", "core/__init__.py": "",
        "core/a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from optsched.core.b import B\nA = 1\n",
        "core/b.py": "from .a import A\nB = 2\n",
        "core/c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from optsched.perf.p import P\n",
        "perf/__init__.py": "", "perf/p.py": "from ..rounds import r\n",
        "rounds/__init__.py": "", "rounds/r.py": "R = 1\n",
    })
    problems = check_layers(root)
    assert sorted(problems) == sorted([
        "optsched/core/c.py:3 imports optsched.perf.p (core may import only schemas)",
        "optsched/perf/p.py:1 imports optsched.rounds.r (perf may import only core, schemas)",
        next(p for p in problems if p.startswith("import cycle:")),
    ]), problems
    cycle = next(p for p in problems if p.startswith("import cycle:"))
    assert "optsched.core.a" in cycle and "optsched.core.b" in cycle, cycle
    assert cycle.endswith("(type-only: optsched.core.a -> optsched.core.b)"), cycle
