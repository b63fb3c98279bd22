"""Read-only access to the ALFRED/ALFWorld data shipped inside the installed ``alfworld`` package.

The task generator takes its object and receptacle types, placement rules (which receptacle
type may hold which object type), action properties (heatable, coolable, ...), task goals and
phrasings, scene layouts and PDDL domain/grammar from the installed ``alfworld`` package, so
that generated games follow ALFWorld's own rules.

Importing ``alfworld`` itself creates ``~/.cache/alfworld`` and sets ``ALFWORLD_DATA`` in the
environment (``alfworld/info.py``). This module never imports it: it locates the package with
``importlib.util.find_spec`` (which does not run the package's ``__init__``) and reads its data
files, executing the two dependency-free modules it needs (``gen/constants.py`` and
``gen/goal_library.py``) in isolation.
"""

from __future__ import annotations

import functools
import importlib.util
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType, ModuleType

# ALFWorld's numbering of the six task types (alfworld/agents/environment/alfred_tw_env.py).
TASK_TYPES: Mapping[int, str] = MappingProxyType(
    {
        1: "pick_and_place_simple",
        2: "look_at_obj_in_light",
        3: "pick_clean_then_place_in_recep",
        4: "pick_heat_then_place_in_recep",
        5: "pick_cool_then_place_in_recep",
        6: "pick_two_obj_and_place",
    }
)

# ALFWorld's splits: the folders of ``json_2.1.1`` (valid_unseen uses rooms train never shows).
SPLITS: tuple[str, ...] = ("train", "valid_seen", "valid_unseen")

# ALFWorld's games per split and task type (ALFWorld paper, Shridhar et al., ICLR 2021, dataset
# table; the valid_unseen row matches the per-type counts ReAct reports for its 134 games,
# ysymyth/ReAct issue 11): 3,553 train, 140 valid_seen and 134 valid_unseen games.
ALFWORLD_SPLIT_TASK_COUNTS: Mapping[str, Mapping[str, int]] = MappingProxyType(
    {
        "train": MappingProxyType(
            {
                "pick_and_place_simple": 790,
                "look_at_obj_in_light": 308,
                "pick_clean_then_place_in_recep": 650,
                "pick_heat_then_place_in_recep": 459,
                "pick_cool_then_place_in_recep": 533,
                "pick_two_obj_and_place": 813,
            }
        ),
        "valid_seen": MappingProxyType(
            {
                "pick_and_place_simple": 35,
                "look_at_obj_in_light": 13,
                "pick_clean_then_place_in_recep": 27,
                "pick_heat_then_place_in_recep": 16,
                "pick_cool_then_place_in_recep": 25,
                "pick_two_obj_and_place": 24,
            }
        ),
        "valid_unseen": MappingProxyType(
            {
                "pick_and_place_simple": 24,
                "look_at_obj_in_light": 18,
                "pick_clean_then_place_in_recep": 31,
                "pick_heat_then_place_in_recep": 23,
                "pick_cool_then_place_in_recep": 21,
                "pick_two_obj_and_place": 17,
            }
        ),
    }
)

ROOM_KINDS: tuple[str, ...] = ("Kitchen", "LivingRoom", "Bedroom", "Bathroom")


@dataclass(frozen=True)
class Layout:
    """One ALFRED floor plan as shipped in ``alfworld/gen/layouts``.

    Attributes:
        scene_num: ALFRED scene number (1-30 kitchens, 201-230 living rooms, 301-330 bedrooms,
            401-430 bathrooms).
        room: the room kind.
        types: object and receptacle types present in the scene.
        receptacle_poses: ALFRED receptacle id -> agent pose ``(x, z, rotation, horizon)`` to
            interact with it (metres and degrees).
    """

    scene_num: int
    room: str
    types: frozenset[str]
    receptacle_poses: Mapping[str, tuple[float, float, int, int]]


@dataclass(frozen=True)
class AlfredData:
    """The parts of the installed ``alfworld`` package the generator uses.

    Attributes:
        package_dir: where ``alfworld`` is installed.
        version: ``alfworld.info.__version__`` read from the file.
        domain: the PDDL domain text (``alfworld/data/alfred.pddl``).
        grammar: the TextWorld grammar text (``alfworld/data/alfred.twl2``).
        objects: ALFRED object types (``constants.OBJECTS``).
        receptacle_objects: receptacle type -> object types it may hold
            (``constants.VAL_RECEPTACLE_OBJECTS``).
        action_objects: property (``Heatable``, ``Coolable``, ``Cleanable``, ``Toggleable``,
            ``Sliceable``) -> object types (``constants.VAL_ACTION_OBJECTS``).
        openable: receptacle types that open and close (``constants.OPENABLE_CLASS_LIST``).
        movable_receptacles: object types that are receptacles you can carry.
        goals_valid: task type -> room kinds it is posed in (``constants.GOALS_VALID``).
        train_scenes / test_scenes: ALFRED's scene split (``TRAIN_SCENE_NUMBERS`` /
            ``TEST_SCENE_NUMBERS``).
        goal_pddl / goal_templates: task type -> goal PDDL and task phrasings
            (``gen/goal_library.py``).
        layouts: scene number -> :class:`Layout`.
    """

    package_dir: Path
    version: str
    domain: str
    grammar: str
    objects: tuple[str, ...]
    receptacle_objects: Mapping[str, frozenset[str]]
    action_objects: Mapping[str, frozenset[str]]
    openable: frozenset[str]
    movable_receptacles: frozenset[str]
    goals_valid: Mapping[str, frozenset[str]]
    train_scenes: tuple[int, ...]
    test_scenes: tuple[int, ...]
    goal_pddl: Mapping[str, str]
    goal_templates: Mapping[str, tuple[str, ...]]
    layouts: Mapping[int, Layout]


def alfworld_package_dir() -> Path:
    """Where the ``alfworld`` package is installed, found without importing it.

    Raises:
        ImportError: if ``alfworld`` is not installed.
    """
    spec = importlib.util.find_spec("alfworld")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(
            "the ALFWorld env needs the 'alfworld' package; install it with: pip install 'gaca[alfworld]'"
        )
    return Path(next(iter(spec.submodule_search_locations)))


def _exec_isolated(path: Path, name: str) -> ModuleType:
    """Runs a dependency-free module file without importing its package."""
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _room_of(scene_num: int, scene_type: Mapping[str, range]) -> str:
    for room, numbers in scene_type.items():
        if scene_num in numbers:
            return room
    raise ValueError(f"scene number {scene_num} is in no ALFRED room kind")


def _read_layouts(layout_dir: Path, scene_type: Mapping[str, range]) -> dict[int, Layout]:
    layouts = {}
    for objects_file in sorted(layout_dir.glob("FloorPlan*-objects.json")):
        scene_num = int(objects_file.name[len("FloorPlan") :].split("-")[0])
        poses_file = layout_dir / f"FloorPlan{scene_num}-openable.json"
        types = frozenset(json.loads(objects_file.read_text()))
        poses = json.loads(poses_file.read_text()) if poses_file.exists() else {}
        layouts[scene_num] = Layout(
            scene_num=scene_num,
            room=_room_of(scene_num, scene_type),
            types=types,
            receptacle_poses=MappingProxyType(
                {k: (float(v[0]), float(v[1]), int(v[2]), int(v[3])) for k, v in poses.items()}
            ),
        )
    return layouts


@functools.lru_cache(maxsize=1)
def load_alfred_data() -> AlfredData:
    """Reads the installed ``alfworld`` package's ALFRED data (cached; the result is immutable).

    Raises:
        ImportError: if ``alfworld`` is not installed or its files are missing.
    """
    root = alfworld_package_dir()
    constants = _exec_isolated(root / "gen" / "constants.py", "_gaca_alfred_constants")
    goals = _exec_isolated(root / "gen" / "goal_library.py", "_gaca_alfred_goal_library")
    version_line = next(
        (line for line in (root / "info.py").read_text().splitlines() if line.startswith("__version__")), "= 'unknown'"
    )
    return AlfredData(
        package_dir=root,
        version=version_line.split("=", 1)[1].strip().strip("'\""),
        domain=(root / "data" / "alfred.pddl").read_text(),
        grammar=(root / "data" / "alfred.twl2").read_text(),
        objects=tuple(constants.OBJECTS),
        receptacle_objects=MappingProxyType({k: frozenset(v) for k, v in constants.VAL_RECEPTACLE_OBJECTS.items()}),
        action_objects=MappingProxyType({k: frozenset(v) for k, v in constants.VAL_ACTION_OBJECTS.items()}),
        openable=frozenset(constants.OPENABLE_CLASS_LIST),
        movable_receptacles=frozenset(constants.MOVABLE_RECEPTACLES),
        goals_valid=MappingProxyType({k: frozenset(v) for k, v in constants.GOALS_VALID.items()}),
        train_scenes=tuple(constants.TRAIN_SCENE_NUMBERS),
        test_scenes=tuple(constants.TEST_SCENE_NUMBERS),
        goal_pddl=MappingProxyType({k: v["pddl"] for k, v in goals.gdict.items()}),
        goal_templates=MappingProxyType({k: tuple(v["templates"]) for k, v in goals.gdict.items()}),
        layouts=MappingProxyType(_read_layouts(root / "gen" / "layouts", constants.SCENE_TYPE)),
    )
