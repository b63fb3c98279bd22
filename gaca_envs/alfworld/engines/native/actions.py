"""ALFWorld's fifteen actions: which ground operators apply in a state, and what they change.

Preconditions and effects are those of ``alfworld/data/alfred.pddl`` as Fast Downward's
translator grounds them for TextWorld (see :mod:`.engine` for the quirks reproduced).
"""

from __future__ import annotations

from gaca_envs.alfworld.domain import APPLIANCES, KNIFE_TYPES

_KNIVES = tuple(f"{t.lower()}type" for t in KNIFE_TYPES)


def effects(action: str, args: tuple[str, ...]) -> tuple[list, list]:
    """The effect atoms Fast Downward lists for an operator (all of them, conditions ignored)."""
    if action == "gotolocation":
        a, start, end, _ = args
        return [("atlocation", a, end)], [("atlocation", a, start)]
    if action == "openobject":
        return [("opened", args[2]), ("checked", args[2])], []
    if action == "closeobject":
        return [], [("opened", args[2])]
    if action == "pickupobject":
        a, loc, o, r = args
        return [("holds", a, o), ("holdsany", a)], [("inreceptacle", o, r), ("objectatlocation", o, loc)]
    if action == "putobject":
        a, loc, o, r = args[:4]
        return [("inreceptacle", o, r), ("objectatlocation", o, loc)], [("holds", a, o), ("holdsany", a)]
    if action == "cleanobject":
        return [("isclean", args[3])], []
    if action == "heatobject":
        return [("ishot", args[3])], [("iscool", args[3])]
    if action == "coolobject":
        return [("iscool", args[3])], [("ishot", args[3])]
    if action == "toggleobject":
        o = args[2]
        return [("ison", o), ("istoggled", o)], [("ison", o)]
    if action == "sliceobject":
        return [("issliced", args[2])], []
    # look (?a ?l), examineReceptacle/examineObject (?a ?x): (checked ?l / ?x); inventory, help: (checked ?a)
    return [("checked", args[-1])], []


def operators(game, store) -> list[tuple[str, tuple[str, ...]]]:
    """Applicable ground operators of ALFWorld's domain in the current state."""
    dyn, static = store.dynamic, game.static
    inrec = dyn.get("inreceptacle", set())
    holds = dyn.get("holds", set())
    opened = dyn.get("opened", set())
    openable = static.get("openable", set())
    ops: list[tuple[str, tuple[str, ...]]] = []
    for a in game.agents:
        ops += [("help", (a,)), ("inventory", (a,))]
        held = sorted(o for ag, o in holds if ag == a)
        for ag, loc in sorted(dyn.get("atlocation", ())):
            if ag != a:
                continue
            ops.append(("look", (a, loc)))
            here = game.at_loc.get(loc, ())
            for r, rloc in game.loc_of.items():
                if rloc != loc:
                    ops.append(("gotolocation", (a, loc, rloc, r)))
            for r in here:
                ops.append(("examinereceptacle", (a, r)))
                is_open = (r,) not in openable or (r,) in opened
                if (r,) in openable:
                    ops.append(("closeobject" if (r,) in opened else "openobject", (a, loc, r)))
                contents = sorted(o for o, rr in inrec if rr == r)
                if is_open and (a,) not in dyn.get("holdsany", ()):
                    ops += [("pickupobject", (a, loc, o, r)) for o in contents if (o,) in static.get("pickupable", ())]
                for o in contents:
                    if (o,) in static.get("toggleable", ()):
                        ops.append(("toggleobject", (a, loc, o, r)))
                ops += _hand_ops(game, static, a, loc, r, held, is_open)
            ops += _slice_ops(game, static, dyn, a, loc, held)
        # Fast Downward's translator keeps only the `holds` branch of examineObject's disjunctive
        # precondition (TextWorld never lists "examine X" for an object lying in a receptacle).
        ops += [("examineobject", (a, o)) for o in held]
    return ops


def _hand_ops(game, static, a, loc, r, held, is_open) -> list:
    ops = []
    rtypes = [t for rr, t in static.get("receptacletype", ()) if rr == r]
    for o in held:
        if is_open:
            for ot in sorted(t for oo, t in static.get("objecttype", ()) if oo == o):
                for rt in rtypes:
                    if (rt, ot) in static.get("cancontain", ()):
                        ops.append(("putobject", (a, loc, o, r, ot, rt)))
        for appliance in APPLIANCES:
            if appliance.pddl_type in rtypes and (o,) in static.get(appliance.capability_predicate, ()):
                ops.append((appliance.action, (a, loc, r, o)))
    return ops


def _slice_ops(game, static, dyn, a, loc, held) -> list:
    knives = [k for k in held if any((k, t) in static.get("objecttype", ()) for t in _KNIVES)]
    if not knives:
        return []
    here = sorted(o for o, ll in dyn.get("objectatlocation", ()) if ll == loc and (o,) in static.get("sliceable", ()))
    return [("sliceobject", (a, loc, co, ko)) for co in here for ko in knives if co != ko]
