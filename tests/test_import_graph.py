"""The packages' import graph (DESIGN.md "Layout"): no circle among module-level imports, and
``gaca_envs`` (with its envs built) imports no torch.

The graph is read statically from the source (``ast``), so a circle is found even where the
import order happens to work today. Only module-level imports form circles that break an import;
imports inside functions and ``if TYPE_CHECKING:`` blocks are left out.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("gaca_envs", "gaca_train", "webshop_server")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _module_level_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """Import statements that run when the module is imported (not in functions or TYPE_CHECKING)."""
    found, pending = [], list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            pending += node.orelse
        elif isinstance(node, (ast.If, ast.Try, ast.With, ast.For, ast.While)):
            for field in ("body", "orelse", "finalbody", "handlers"):
                pending += getattr(node, field, [])
        elif isinstance(node, (ast.ExceptHandler, ast.ClassDef)):
            pending += node.body
    return found


def _targets(node: ast.Import | ast.ImportFrom, module: str, is_package: bool, modules: set[str]) -> set[str]:
    """The project modules an import statement names (``from p import m`` names ``p.m`` if it is a module)."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        base = node.module or ""
        if node.level:
            parent = module.split(".") if is_package else module.split(".")[:-1]
            parent = parent[: len(parent) - node.level + 1]
            base = ".".join([*parent, base] if base else parent)
        names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
    targets = set()
    for name in names:
        while name and name not in modules:  # `import a.b.c` of a non-project module, or an attribute
            name = name.rpartition(".")[0]
        if name and name != module:
            targets.add(name)
    return targets


def import_graph(inside_functions: bool = False) -> dict[str, set[str]]:
    """Project module -> project modules it imports at module level (or anywhere, ``inside_functions``)."""
    files = {_module_name(p): p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))}
    modules = set(files)
    graph = {}
    for module, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        if inside_functions:
            nodes = [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
        else:
            nodes = _module_level_imports(tree)
        graph[module] = set()
        for node in nodes:
            graph[module] |= _targets(node, module, path.name == "__init__.py", modules)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_graph_reader_finds_a_circle_and_ignores_function_level_imports():
    graph = {"p.a": {"p.b"}, "p.b": {"p.c"}, "p.c": {"p.a"}, "p.d": {"p.a"}}
    assert circles(graph) == [["p.a", "p.b", "p.c"]]
    tree = ast.parse(
        "import os\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import p.x\n"
        "try:\n    import p.y\nexcept ImportError:\n    pass\ndef f():\n    import p.z\n"
    )
    names = {alias.name for node in _module_level_imports(tree) for alias in node.names}
    assert names == {"os", "TYPE_CHECKING", "p.y"}


def test_the_graph_covers_the_packages_and_resolves_submodule_imports():
    graph = import_graph()
    assert {"gaca_envs", "gaca_train", "webshop_server"} <= graph.keys()
    assert "gaca_envs.alfworld.engines.base" in graph["gaca_envs.alfworld.engines.native.engine"]
    assert "gaca_envs.registration" in graph["gaca_envs"]


def test_no_circle_among_module_level_imports():
    assert circles(import_graph()) == []


def test_no_circle_even_through_imports_inside_functions():
    # Deferred imports break no import today, but a circle through them is still two modules
    # that each need the other (as the ALFWorld engine factory and the native engine once did).
    assert circles(import_graph(inside_functions=True)) == []


def test_alfworld_engine_base_imports_no_engine():
    graph = import_graph()
    base = graph["gaca_envs.alfworld.engines.base"]
    assert not {m for m in base if m.startswith("gaca_envs.alfworld.engines.")}, base
    # The env reaches the engines only through the package's factory, not the generator.
    assert "gaca_envs.alfworld.generate" not in graph["gaca_envs.alfworld.env"]
    assert "gaca_envs.alfworld.generate" not in graph["gaca_envs.alfworld.data"]


def test_gaca_envs_and_its_envs_import_no_torch():
    # A fresh interpreter: building each env (no reset, so no games are generated and no server
    # is asked) must not import torch, TRL or transformers.
    code = """
import importlib, json, sys
import gymnasium as gym
import gaca_envs
from gaca_envs.registration import ENV_SPECS
for env_id in ENV_SPECS:
    importlib.import_module(gym.spec(env_id).entry_point.split(":")[0])
for env_id in ("GACA-ALFWorld-v0", "GACA-CriticalChain-v0"):
    gym.make(env_id).close()
print(json.dumps(sorted(m for m in ("torch", "trl", "transformers") if m in sys.modules)))
"""
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


# gaca_train's rooms (DESIGN.md / docs/design.md "gaca_train's rooms") and the rooms each may import.
ROOMS_BELOW: dict[str, set[str]] = {
    "estimators": set(),
    "rollout": {"estimators"},
    "oracle": {"estimators", "rollout"},
    "training": {"estimators", "rollout", "oracle"},
    "evaluation": {"estimators", "rollout"},
    "experiments": {"estimators", "rollout", "oracle", "training", "evaluation"},
}
GROUND = {"gaca_train", "gaca_train._compat"}  # the package's lazy top level and the alias map


def room_of(module: str) -> str | None:
    """The room of a gaca_train module (``gaca_train.rollout.vector`` -> ``rollout``); None outside the rooms."""
    parts = module.split(".")
    return parts[1] if parts[0] == "gaca_train" and len(parts) > 1 and parts[1] in ROOMS_BELOW else None


def room_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """Room -> the other rooms its modules import (a module graph collapsed to packages)."""
    rooms: dict[str, set[str]] = {}
    for module, targets in graph.items():
        if (room := room_of(module)) is not None:
            rooms.setdefault(room, set()).update(r for t in targets if (r := room_of(t)) not in (None, room))
    return rooms


def test_gaca_train_top_level_holds_only_the_package_and_the_alias_map():
    top = sorted(p.name for p in (ROOT / "gaca_train").iterdir() if p.suffix == ".py")
    assert top == ["__init__.py", "_compat.py"]
    assert sorted(p.name for p in (ROOT / "gaca_train").iterdir() if p.is_dir() and p.name != "__pycache__") == sorted(
        ROOMS_BELOW
    )


def test_no_room_imports_a_higher_one_even_inside_functions():
    graph = import_graph(inside_functions=True)
    upward = []
    for module, targets in sorted(graph.items()):
        room = room_of(module)
        if room is None:
            continue
        for target in sorted(targets):
            other = room_of(target)
            if other not in (None, room) and other not in ROOMS_BELOW[room]:
                upward.append(f"{module} -> {target}")
            if other is None and target.startswith("gaca_train") and target not in GROUND:
                upward.append(f"{module} -> {target} (outside the rooms)")
    assert upward == []
    # The ground floor imports nothing else of gaca_train but the alias map.
    assert {
        t for m, ts in graph.items() if room_of(m) == "estimators" for t in ts if room_of(t) != "estimators"
    } <= GROUND


def test_no_circle_among_rooms():
    # A circle of packages breaks imports that a module-level circle check misses: importing
    # gaca_train.rollout.x runs gaca_train/rollout/__init__.py first, whatever x imports.
    rooms = room_graph(import_graph(inside_functions=True))
    assert circles(rooms) == []
    assert circles({"a": {"b"}, "b": {"a"}}) == [["a", "b"]]  # the reader finds one where there is one
    for room, imported in rooms.items():
        assert imported <= ROOMS_BELOW[room], room


def test_the_layering_check_catches_an_upward_import():
    graph = {"gaca_train.estimators.rows": {"gaca_train.training.config"}, "gaca_train.training.config": set()}
    rooms = room_graph(graph)
    assert rooms["estimators"] == {"training"} and not rooms["estimators"] <= ROOMS_BELOW["estimators"]


def test_gaca_envs_and_webshop_server_import_nothing_of_gaca_train():
    graph = import_graph(inside_functions=True)
    reached = {f"{m} -> {t}" for m, ts in graph.items() if not m.startswith("gaca_train") for t in ts
               if t.startswith("gaca_train")}  # fmt: skip
    assert reached == set()


def _from_imports(module: str) -> list[tuple[str, str]]:
    """(source module, name) of the module-level ``from gaca_train... import name`` statements of ``module``."""
    path = ROOT / (module.replace(".", "/") + ".py")
    if not path.is_file():
        path = ROOT / module.replace(".", "/") / "__init__.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [(node.module, alias.name) for node in _module_level_imports(tree)
            if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("gaca_train.")
            for alias in node.names]  # fmt: skip


def test_gaca_train_imports_each_name_from_the_module_that_defines_it_and_no_private_name_across_rooms():
    modules = [m for m in import_graph() if room_of(m) is not None and not m.endswith("__init__")]
    reexported, private = [], []
    for module in sorted(modules):
        for source, name in _from_imports(module):
            if room_of(source) is None or source.count(".") < 2:  # a room's package: its lazy exports
                continue
            if any(name == again for _, again in _from_imports(source)):
                reexported.append(f"{module}: {name} through {source}")
            if name.startswith("_") and room_of(source) != room_of(module):
                private.append(f"{module}: {source}.{name}")
    assert reexported == [] and private == []
