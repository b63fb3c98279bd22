"""The one map of moved modules, and the lazy exports of gaca_train's packages.

gaca_train is six rooms, each a package, stacked from the ground up (docs/design.md, "gaca_train's rooms"):
``estimators`` < ``rollout`` < ``oracle`` < ``training``, with ``evaluation`` beside ``training``
(on ``rollout``) and ``experiments`` on top. The flat modules of earlier versions moved into them;
:data:`MOVED` maps each old dotted name to the module it became. An import of an old name gets the
**same module object** as the new name (so a pickled ``gaca_train.config.GACAConfig`` loads, and
monkeypatching the old name patches the real module), with a :class:`DeprecationWarning` that names
the new path. The aliases go in release :data:`ALIASES_REMOVED_IN`.

Three rooms took the names of modules they replace (``gaca_train.rollout``, ``gaca_train.oracle``,
``gaca_train.evaluation``): those packages re-export the old module's public names lazily
(:func:`lazy_exports`), with no warning, and import nothing heavy until a name is used.

This module imports only the standard library: ``import gaca_train`` stays torch-free.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from collections.abc import Callable
from types import ModuleType
from typing import Any

ALIASES_REMOVED_IN = "0.3.0"

# Old dotted name -> the module it is now.
MOVED: dict[str, str] = {
    "gaca_train.options": "gaca_train.estimators.options",
    "gaca_train.rows": "gaca_train.estimators.rows",
    "gaca_train.tree": "gaca_train.estimators.tree",
    "gaca_train.advantages": "gaca_train.estimators.advantages",
    "gaca_train.reference": "gaca_train.estimators.reference",
    "gaca_train.vector": "gaca_train.rollout.vector",
    "gaca_train.episodes": "gaca_train.rollout.episodes",
    "gaca_train.branching": "gaca_train.rollout.branching",
    "gaca_train.sampling": "gaca_train.rollout.sampling",
    "gaca_train.oracle_exact": "gaca_train.oracle.exact",
    "gaca_train.oracle_metrics": "gaca_train.oracle.metrics",
    "gaca_train.config": "gaca_train.training.config",
    "gaca_train.trainer": "gaca_train.training.trainer",
    "gaca_train.startup": "gaca_train.training.startup",
    "gaca_train.batching": "gaca_train.training.batching",
    "gaca_train.packing": "gaca_train.training.packing",
    "gaca_train.precision": "gaca_train.training.precision",
    "gaca_train.memory": "gaca_train.training.memory",
    "gaca_train.flops": "gaca_train.training.flops",
    "gaca_train.endpoint": "gaca_train.evaluation.endpoint",
    "gaca_train.eval_backends": "gaca_train.evaluation.backends",
    "gaca_train.eval_report": "gaca_train.evaluation.report",
    "gaca_train.tabular": "gaca_train.experiments.tabular",
    "gaca_train.tiny": "gaca_train.experiments.tiny",
    "gaca_train.cli_utils": "gaca_train.experiments.cli_utils",
}

# Old modules whose names are now packages: the package re-exports their public names from here.
REPLACED: dict[str, tuple[str, ...]] = {
    "gaca_train.rollout": ("gaca_train.rollout.prompts", "gaca_train.rollout.policy"),
    "gaca_train.oracle": ("gaca_train.oracle.monte_carlo",),
    "gaca_train.evaluation": ("gaca_train.evaluation.play",),
}


def moved_message(old: str) -> str:
    """The deprecation message of an old module name."""
    return (f"{old} moved to {MOVED[old]}: import it from there (the old name is an alias until "
            f"gaca_train {ALIASES_REMOVED_IN})")  # fmt: skip


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Resolves an old module name of :data:`MOVED` to the new module itself."""

    def __init__(self) -> None:
        self._specs: dict[str, importlib.machinery.ModuleSpec] = {}

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        warnings.warn(moved_message(spec.name), DeprecationWarning, stacklevel=2)  # warn skips importlib's frames
        module = importlib.import_module(MOVED[spec.name])
        self._specs[spec.name] = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        # The import system has just set the alias's spec on the real module: give it back its own.
        module.__spec__ = self._specs.pop(module.__spec__.name)


ALIAS = _Alias()


def install() -> None:
    """Puts the alias finder on ``sys.meta_path`` (once)."""
    if ALIAS not in sys.meta_path:
        sys.meta_path.append(ALIAS)


def old_attribute(name: str) -> ModuleType | None:
    """``gaca_train.<name>`` for an old module name (imported through the alias, so it warns); else None."""
    old = f"gaca_train.{name}"
    return importlib.import_module(old) if old in MOVED else None


def lazy_exports(package: str, exports: dict[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A package's ``__getattr__`` and ``__dir__`` that import ``exports`` (name -> module) on first use.

    A name that is not exported raises AttributeError, so ``from package import submodule`` still
    imports the submodule.
    """
    namespace = sys.modules[package].__dict__

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(exports))

    return __getattr__, __dir__
