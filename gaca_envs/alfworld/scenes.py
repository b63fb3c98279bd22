"""ALFRED-like scenes: receptacles from ALFRED's floor plans, objects placed by ALFRED's rules.

A scene is built from one ALFRED floor plan shipped in the installed ``alfworld`` package
(``alfworld/gen/layouts``): the receptacles listed there keep their ALFRED ids and interaction
poses, receptacle types present in the room but without a pose (stove burners, toasters, ...)
are added at free poses, and object types present in the room are instantiated one to three
times and put in receptacles that ALFRED allows to hold them (``VAL_RECEPTACLE_OBJECTS``).
Openable receptacles start closed, as in ALFWorld.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from gaca_envs.alfworld.alfred_data import AlfredData, Layout

# Receptacle types in a floor plan's pose list that ALFWorld exposes as their basin.
_BASINS = {"Sink": "SinkBasin", "Bathtub": "BathtubBasin"}
# How many instances of a receptacle type to add when the floor plan lists the type without poses.
_DEFAULT_COUNTS = {"StoveBurner": 4}
# Receptacle types a lamp (the toggle target of look_at_obj_in_light) can stand on.
LAMP_HOLDERS = frozenset(
    {"Desk", "SideTable", "Dresser", "Shelf", "CoffeeTable", "DiningTable", "TVStand", "Nightstand"}
)
LAMPS = ("DeskLamp", "FloorLamp")
MAX_OBJECTS = 40
MAX_RECEPTACLES = 40
# ``real`` rooms (issue 16): fixed scene objects as real ALFWorld rooms list them on surfaces (a
# houseplant or sink on a countertop, a television on a dresser: ReAct's transcripts), on these
# receptacle types; they have an ``objectType`` and a place but no ``pickupable`` fact.
FIXED_HOLDERS = {
    "HousePlant": ("CounterTop", "DiningTable", "SideTable", "CoffeeTable", "Desk", "Dresser", "Shelf"),
    "Television": ("Dresser", "TVStand"),
    "Sink": ("CounterTop",),
    "Mirror": ("CounterTop", "Dresser"),
}
# Surfaces that real rooms load with many objects (dining tables and countertops list 14-16).
DENSE_SURFACES = frozenset({"CounterTop", "DiningTable", "Desk", "Dresser", "SideTable", "CoffeeTable"})


@dataclass(frozen=True)
class Receptacle:
    """A static receptacle: ALFRED id (``Type|x|y|z``), type and the pose the agent goes to."""

    rid: str
    rtype: str
    location: tuple[int, int, int, int]
    openable: bool = True  # False: a cabinet or drawer that does not open (no ``openable`` fact)


@dataclass(frozen=True)
class SceneObject:
    """An object instance: ALFRED id, type and the receptacle id it starts in."""

    oid: str
    otype: str
    receptacle: str


@dataclass(frozen=True)
class Scene:
    """A room ready to be written as a PDDL problem."""

    scene_num: int
    room: str
    receptacles: tuple[Receptacle, ...]
    objects: tuple[SceneObject, ...]
    agent_location: tuple[int, int, int, int]

    def receptacle(self, rid: str) -> Receptacle:
        """The receptacle with id ``rid``."""
        return next(r for r in self.receptacles if r.rid == rid)


def _coord(value: float) -> str:
    return f"{value:+06.2f}"


def alfred_id(kind: str, rng: random.Random, suffix: str = "") -> str:
    """A fresh ALFRED-style id ``Kind|+x.xx|+y.yy|-z.zz`` with random coordinates."""
    xyz = "|".join(_coord(rng.uniform(-4.0, 4.0)) for _ in range(3))
    return f"{kind}|{xyz}" + (f"|{suffix}" if suffix else "")


def pose_location(pose: tuple[float, float, int, int]) -> tuple[int, int, int, int]:
    """The PDDL location of an ALFRED interaction pose ``(x, z, rotation, horizon)``."""
    # ALFRED's grid: 0.25 m steps, rotation in quarter turns, camera horizon in degrees.
    x, z, rotation, horizon = pose
    return (round(x / 0.25), round(z / 0.25), (rotation // 90) % 4, horizon)


def _free_location(rng: random.Random, taken: set[tuple[int, int, int, int]]) -> tuple[int, int, int, int]:
    while True:
        loc = (rng.randint(-20, 20), rng.randint(-20, 20), rng.randint(0, 3), rng.choice((0, 15, 30, 45, 60)))
        if loc not in taken:
            taken.add(loc)
            return loc


def static_receptacle_types(data: AlfredData) -> frozenset[str]:
    """Receptacle types that stay in place (ALFRED's receptacles minus the ones you can carry)."""
    return frozenset(data.receptacle_objects) - data.movable_receptacles


def build_receptacles(
    data: AlfredData,
    layout: Layout,
    rng: random.Random,
    max_receptacles: int = MAX_RECEPTACLES,
    colocate: bool = False,
) -> list[Receptacle]:
    """The static receptacles of a floor plan: posed ones first, then the types listed without pose.

    Rooms with more than ``max_receptacles`` lose receptacles of their most repeated types. With
    ``colocate``, receptacles whose ALFRED interaction poses coincide share one location, as in
    ALFWorld's own PDDL; otherwise each gets its own.
    """
    static = static_receptacle_types(data)
    receptacles: list[Receptacle] = []
    taken: set[tuple[int, int, int, int]] = set()
    for rid, pose in sorted(layout.receptacle_poses.items()):
        kind = rid.split("|", 1)[0]
        rtype = _BASINS.get(kind, kind)
        if rtype not in static:
            continue
        # A basin is ``Kind|x|y|z|<Basin type>``. The floor plans mostly spell it so already (one,
        # FloorPlan420, has ``Bathtub|...|SinkBasin``), so the suffix is replaced, never appended.
        full_id = "|".join(rid.split("|")[:4] + [rtype]) if kind in _BASINS else rid
        loc = pose_location(pose)
        while loc in taken and not colocate:  # one receptacle per pose keeps "go to" and "look" simple
            loc = (loc[0], loc[1], loc[2], loc[3] + 15)
        taken.add(loc)
        receptacles.append(Receptacle(full_id, rtype, loc))
    present = {r.rtype for r in receptacles}
    for rtype in sorted(layout.types & static - present):
        kind = {v: k for k, v in _BASINS.items()}.get(rtype, rtype)
        for _ in range(_DEFAULT_COUNTS.get(rtype, 1)):
            suffix = rtype if kind != rtype else ""
            rid = alfred_id(kind, rng, suffix)
            while any(r.rid == rid for r in receptacles):
                rid = alfred_id(kind, rng, suffix)
            receptacles.append(Receptacle(rid, rtype, _free_location(rng, taken)))
    while len(receptacles) > max_receptacles:  # large kitchens: drop some of the most repeated type
        counts = {t: sum(r.rtype == t for r in receptacles) for t in {r.rtype for r in receptacles}}
        most = max(sorted(counts), key=counts.__getitem__)
        receptacles.remove(rng.choice([r for r in receptacles if r.rtype == most]))
    return receptacles


def pickupable_types(data: AlfredData) -> frozenset[str]:
    """Object types some receptacle may hold, i.e. the ones the agent can carry."""
    return frozenset().union(*data.receptacle_objects.values()) - static_receptacle_types(data)


def holders_of(data: AlfredData, otype: str, receptacles: list[Receptacle]) -> list[Receptacle]:
    """Receptacles whose type may hold ``otype`` (lamps: the surfaces in ``LAMP_HOLDERS``)."""
    if otype in LAMPS:
        return [r for r in receptacles if r.rtype in LAMP_HOLDERS]
    return [r for r in receptacles if otype in data.receptacle_objects.get(r.rtype, ())]


def sample_object_counts(
    data: AlfredData,
    layout: Layout,
    receptacles: list[Receptacle],
    rng: random.Random,
    choices: tuple[int, ...] = (1, 1, 1, 2, 2, 3),
    max_objects: int = MAX_OBJECTS,
) -> dict[str, int]:
    """How many instances of each object type in the room: one of ``choices`` each, at most ``max_objects``."""
    candidates = sorted(t for t in layout.types & pickupable_types(data) if holders_of(data, t, receptacles))
    counts = {t: rng.choice(choices) for t in candidates}
    while sum(counts.values()) > max_objects:
        victim = rng.choice(sorted(t for t, n in counts.items() if n > 0))
        counts[victim] -= 1
    return {t: n for t, n in counts.items() if n > 0}


def place_objects(
    data: AlfredData,
    counts: dict[str, int],
    receptacles: list[Receptacle],
    rng: random.Random,
    forbidden: dict[str, frozenset[str]],
    dense_weight: int = 1,
    max_per_receptacle: int | None = None,
    closed_weight: dict[str, float] | None = None,
) -> list[SceneObject]:
    """Puts ``counts[t]`` instances of each type ``t`` into allowed receptacles.

    Args:
        forbidden: object type -> receptacle types its instances must not start in (so that a
            task's goal does not hold at the start).
        dense_weight: how many times likelier a ``DENSE_SURFACES`` receptacle is chosen (1: uniform).
        max_per_receptacle: no receptacle receives more objects than this (``None``: no limit);
            an instance that finds every allowed receptacle full is left out.
        closed_weight: object type -> factor on the weight of receptacles that start closed, for
            instances of that type (the task's object: real ALFWorld seldom hides it).
    """
    objects = []
    used = {r.rid for r in receptacles}
    held: dict[str, int] = {}
    weighted = dense_weight != 1 or max_per_receptacle is not None or closed_weight is not None
    for otype in sorted(counts):
        options = [r for r in holders_of(data, otype, receptacles) if r.rtype not in forbidden.get(otype, ())]
        if not options:
            continue
        for _ in range(counts[otype]):
            if max_per_receptacle is not None:
                options = [r for r in options if held.get(r.rid, 0) < max_per_receptacle]
                if not options:
                    break
            oid = alfred_id(otype, rng)
            while oid in used:  # ids name PDDL objects: they must be unique
                oid = alfred_id(otype, rng)
            used.add(oid)
            if not weighted:  # standard and easy keep their original draws
                holder = rng.choice(options)
            else:
                shut = (closed_weight or {}).get(otype, 1.0)
                weights = [
                    (dense_weight if r.rtype in DENSE_SURFACES else 1)
                    * (shut if r.openable and r.rtype in data.openable else 1.0)
                    for r in options
                ]
                holder = rng.choices(options, weights)[0]
            held[holder.rid] = held.get(holder.rid, 0) + 1
            objects.append(SceneObject(oid, otype, holder.rid))
    return objects


def place_fixed_objects(
    layout: Layout,
    receptacles: list[Receptacle],
    rng: random.Random,
    taken_ids: set[str],
    share: float = 1.0,
    full: frozenset[str] = frozenset(),
) -> list[SceneObject]:
    """Fixed scene objects on surfaces that may show them.

    Each ``FIXED_HOLDERS`` type the floor plan has is placed once with probability ``share``, on
    a receptacle of a holder type whose id is not in ``full``.
    """
    objects = []
    for otype, holder_types in sorted(FIXED_HOLDERS.items()):
        options = [r for r in receptacles if r.rtype in holder_types and r.rid not in full]
        if otype not in layout.types or not options or rng.random() >= share:
            continue
        oid = alfred_id(otype, rng)
        while oid in taken_ids:
            oid = alfred_id(otype, rng)
        taken_ids.add(oid)
        objects.append(SceneObject(oid, otype, rng.choice(options).rid))
    return objects


def fix_some_containers(
    receptacles: list[Receptacle], rng: random.Random, share: float, kinds: frozenset[str]
) -> list[Receptacle]:
    """``receptacles`` with about ``share`` of those of ``kinds`` (cabinets, drawers) made non-openable."""
    return [
        Receptacle(r.rid, r.rtype, r.location, openable=False) if r.rtype in kinds and rng.random() < share else r
        for r in receptacles
    ]


def agent_start(receptacles: list[Receptacle], rng: random.Random) -> tuple[int, int, int, int]:
    """A pose where no receptacle is, so the first observation is "in the middle of a room"."""
    return _free_location(rng, {r.location for r in receptacles})
