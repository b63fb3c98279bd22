"""ALFWorld's PDDL domain as tables, each written once: predicates, appliances, task parameters, names.

The generator, the PDDL writer, the engines, the solver and the searching baseline all read
these tables from here, so a fact about ALFWorld's domain (``alfworld/data/alfred.pddl``) has
one place: which predicates change, which appliance cleans, heats or cools, how ALFRED's ids
are spelt in PDDL (:func:`mangle`) and how ALFWorld names them back (:func:`demangle`).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

# PDDL predicates that make up the true, changing state of an ALFWorld game (DESIGN.md
# contract 1): where the agent is, what it holds, where objects are, and object/receptacle
# status. ``checked``/``examined`` are left out: looking at something changes no state.
DYNAMIC_PREDICATES = frozenset(
    {
        "atlocation",
        "holds",
        "holdsany",
        "inreceptacle",
        "objectatlocation",
        "opened",
        "isclean",
        "ishot",
        "iscool",
        "issliced",
        "istoggled",
        "ison",
    }
)
# Predicates some action of ALFWorld's domain changes (the dynamic ones plus ``checked``); all
# others never change.
EFFECT_PREDICATES = DYNAMIC_PREDICATES | {"checked"}
# ALFRED object types that slice (the domain's ``sliceObject`` needs one held).
KNIFE_TYPES = ("Knife", "ButterKnife")


@dataclass(frozen=True)
class Appliance:
    """The appliance a transforming task type uses, in each spelling the code needs.

    Attributes:
        task_type: ALFWorld task type (``"pick_clean_then_place_in_recep"``).
        verb: the command's verb (``"clean"`` in ``clean apple 1 with sinkbasin 1``).
        action: the PDDL action (``"cleanobject"``).
        capability: ALFRED's object property key (``"Cleanable"``, a key of ``action_objects``).
        receptacle_type: ALFRED receptacle type (``"SinkBasin"``).
        state_predicate: the PDDL fact the action adds (``"isclean"``).
    """

    task_type: str
    verb: str
    action: str
    capability: str
    receptacle_type: str
    state_predicate: str

    @property
    def kind(self) -> str:
        """The receptacle kind as the game text and PDDL ids spell it (``"sinkbasin"``)."""
        return self.receptacle_type.lower()

    @property
    def pddl_type(self) -> str:
        """The receptacle's PDDL type constant, lower case as Fast Downward reads it (``"sinkbasintype"``)."""
        return f"{self.kind}type"

    @property
    def capability_predicate(self) -> str:
        """The PDDL predicate marking objects the appliance accepts (``"cleanable"``)."""
        return self.capability.lower()


# In the domain's order (clean, heat, cool): operators and problem facts are listed in it.
APPLIANCES = (
    Appliance("pick_clean_then_place_in_recep", "clean", "cleanobject", "Cleanable", "SinkBasin", "isclean"),
    Appliance("pick_heat_then_place_in_recep", "heat", "heatobject", "Heatable", "Microwave", "ishot"),
    Appliance("pick_cool_then_place_in_recep", "cool", "coolobject", "Coolable", "Fridge", "iscool"),
)
APPLIANCE_OF_TASK = {a.task_type: a for a in APPLIANCES}


@dataclass(frozen=True)
class TaskParams:
    """ALFWorld's ``pddl_params`` plus the task type.

    Empty strings mean "not used", as in ALFWorld's ``traj_data.json``.
    """

    task_type: str
    object_target: str
    parent_target: str = ""
    toggle_target: str = ""
    mrecep_target: str = ""
    object_sliced: bool = False

    def as_pddl_params(self) -> dict[str, object]:
        """The ``pddl_params`` entry of ``traj_data.json``."""
        return {
            "object_target": self.object_target,
            "parent_target": self.parent_target,
            "toggle_target": self.toggle_target,
            "mrecep_target": self.mrecep_target,
            "object_sliced": self.object_sliced,
        }


# ALFRED's PDDL-safe spelling of id characters (``PlannedGameState.fix_pddl_str_chars``), in the
# order ALFWorld's ``Demangler`` undoes them. ``#`` is written as ``-`` and not undone.
PDDL_SPELLINGS = (("|", "_bar_"), ("-", "_minus_"), ("+", "_plus_"), (".", "_dot_"), (",", "_comma_"))
_MANGLE = {**dict(PDDL_SPELLINGS), "#": "-"}
_MANGLE_RE = re.compile("|".join(re.escape(k) for k in _MANGLE))


def mangle(name: str) -> str:
    """ALFRED's PDDL-safe spelling of an id (``Apple|-01.75|...`` -> ``Apple_bar__minus_01_dot_75...``)."""
    return _MANGLE_RE.sub(lambda m: _MANGLE[m.group(0)], name)


def demangle(ids: list[str]) -> dict[str, str]:
    """ALFWorld's ``Demangler`` (``alfworld/agents/utils/misc.py``) without shuffling.

    Objects of a kind are numbered from the end of the sorted ids (``apple 2``, ``apple 1``);
    ids without ``_bar_`` (locations, types, the agent) are spelt back with a trailing space.

    Args:
        ids: PDDL ids (lower case, as Fast Downward reports them).

    Returns:
        PDDL id -> the name the game text uses.
    """
    ids = sorted(ids)
    kinds = {}
    for id_ in ids:
        head, sep, _ = id_.partition("_bar_")
        if sep:
            kinds[id_] = head + ("basin" if "basin" in id_ else "")
    next_number = dict(Counter(kinds.values()))
    names = {}
    for id_ in ids:
        if id_ not in kinds:
            text = id_
            for char, spelling in PDDL_SPELLINGS:
                text = text.replace(spelling, char)
            names[id_] = f"{text} "
        else:
            names[id_] = f"{kinds[id_]} {next_number[kinds[id_]]}"
            next_number[kinds[id_]] -= 1
    return names
