"""Writes a scene and a goal as a PDDL problem in the format of ALFWorld's ``initial_state.pddl``.

The writer side of ALFWorld's PDDL (the native engine reads it back with
:mod:`gaca_envs.alfworld.engines.native.pddl_reader`). Names follow ALFRED: ids such as
``Apple|-01.75|+00.88|+00.24`` are mangled the way ALFRED's generator does
(:func:`~gaca_envs.alfworld.domain.mangle`), which ALFWorld's ``Demangler`` turns back into
``apple 1``, ``sinkbasin 2``, ...
"""

from __future__ import annotations

from collections.abc import Iterable

from gaca_envs.alfworld.alfred_data import AlfredData
from gaca_envs.alfworld.domain import APPLIANCES, TaskParams, mangle
from gaca_envs.alfworld.scenes import LAMPS, Scene, pickupable_types, static_receptacle_types


def location_name(loc: tuple[int, int, int, int]) -> str:
    """``loc|x|z|rotation|horizon`` mangled."""
    return mangle("loc|{}|{}|{}|{}".format(*loc))


def goal_pddl(data: AlfredData, task: TaskParams) -> str:
    """The ``(:goal ...)`` block (closing the problem) from ALFWorld's goal library."""
    template = data.goal_pddl[task.task_type]
    text = template.format(
        obj=task.object_target, recep=task.parent_target, toggle=task.toggle_target, mrecep=task.mrecep_target
    )
    return text.replace("#", "-")


def _block(lines: Iterable[str]) -> str:
    return "\n".join(f"        {line}" for line in lines)


def _init_facts(data: AlfredData, scene: Scene) -> list[str]:
    objs = [(mangle(o.oid), o) for o in scene.objects]
    recs = [(mangle(r.rid), r) for r in scene.receptacles]
    rec_types = sorted({r.rtype for r in scene.receptacles})
    obj_types = sorted({o.otype for o in scene.objects})
    pickup = pickupable_types(data)
    facts = [f"(receptacleType {n} {r.rtype}Type)" for n, r in recs]
    facts += [f"(objectType {n} {o.otype}Type)" for n, o in objs]
    facts += [
        f"(canContain {rt}Type {ot}Type)"
        for rt in rec_types
        for ot in obj_types
        if ot in data.receptacle_objects.get(rt, ())
    ]
    facts += [f"(pickupable {n})" for n, o in objs if o.otype in pickup]
    facts += [f"(isReceptacleObject {n})" for n, o in objs if o.otype in data.movable_receptacles]
    facts += [f"(openable {n})" for n, r in recs if r.rtype in data.openable and r.openable]
    facts.append(f"(atLocation agent1 {location_name(scene.agent_location)})")
    for appliance in APPLIANCES:
        capable = data.action_objects[appliance.capability]
        facts += [f"({appliance.capability_predicate} {n})" for n, o in objs if o.otype in capable]
    facts += [f"(toggleable {n})" for n, o in objs if o.otype in LAMPS]
    facts += [f"(sliceable {n})" for n, o in objs if o.otype in data.action_objects["Sliceable"]]
    facts += [f"(inReceptacle {n} {mangle(o.receptacle)})" for n, o in objs]
    facts += [f"(receptacleAtLocation {n} {location_name(r.location)})" for n, r in recs]
    facts += [f"(objectAtLocation {n} {location_name(scene.receptacle(o.receptacle).location)})" for n, o in objs]
    return facts


def problem_pddl(data: AlfredData, scene: Scene, task: TaskParams, problem_name: str) -> str:
    """The full PDDL problem for ``scene`` with the goal of ``task``.

    Types are declared for every ALFRED object and receptacle type, as ALFWorld's problems do,
    since the domain's actions name some of them (``SinkBasinType``, ``KnifeType``, ...).
    """
    rtypes = sorted(static_receptacle_types(data))
    otypes = sorted(set(data.objects) - set(rtypes))
    locations = sorted({location_name(r.location) for r in scene.receptacles} | {location_name(scene.agent_location)})
    objects = ["agent1 - agent"]
    objects += [f"{t}Type - otype" for t in otypes]
    objects += [f"{t}Type - rtype" for t in rtypes]
    objects += [f"{mangle(o.oid)} - object" for o in sorted(scene.objects, key=lambda o: o.oid)]
    objects += [f"{mangle(r.rid)} - receptacle" for r in sorted(scene.receptacles, key=lambda r: r.rid)]
    objects += [f"{loc} - location" for loc in locations]
    return (
        f"\n(define (problem plan_{mangle(problem_name)})\n(:domain alfred)\n(:objects\n"
        f"{_block(objects)}\n        )\n\n(:init\n{_block(_init_facts(data, scene))}\n        )\n\n"
        f"{goal_pddl(data, task)}"
    )
