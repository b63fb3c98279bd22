"""Offline generator of ALFWorld-compatible games (``gaca-alfworld-generate``).

Each game is written in ALFWorld's own layout::

    <out>/json_2.1.1/<split>/<task_type>-<Object>-None-<Target>-<scene>/trial_gaca_s<seed>_<index>/
        traj_data.json   # task_type, pddl_params, scene, a templated task description
        game.tw-pddl     # PDDL domain + problem + grammar with the task, solvable, walkthrough

so ALFWorld's ``AlfredTWEnv`` and hand-coded expert load and play them like the real data.
Scenes come from ALFRED's floor plans (:mod:`gaca_envs.alfworld.scenes`); the goal PDDL and
the task phrasings from ALFWorld's goal library. Every game is solved by Fast Downward and the
plan is replayed before it is kept (walkthrough stored): in the native engine by default, or in
the TextWorld engine (``engine="textworld"``), which keeps the same games byte for byte.

Splits: ``train`` and ``valid_seen`` use ALFRED's training floor plans and task combinations
(task type, object type, receptacle or lamp type) outside a fixed held-out quarter;
``valid_unseen`` uses only ALFRED's test floor plans and only held-out combinations, so its
room layouts and combinations never occur in ``train``. Game ``i`` of a split depends only on
``(seed, split, i, difficulty)``: generation is deterministic and can run in parallel.

Difficulties: ``real`` (the default: rooms with real ALFWorld's statistics, docs/alfworld.md; ALFRED's
floor plans with receptacles sharing ALFRED's coinciding poses, some cabinets and drawers that do
not open, denser tables and countertops, ALFRED's instance counts per object type and fixed scene
objects such as a houseplant on a countertop, encoded as ALFWorld's own PDDL encodes them),
``standard`` (the default before version 3: ALFWorld's six task types in turn, rooms of up to 40
receptacles, one place per receptacle, every cabinet opens) and ``easy`` (pick-and-place only,
rooms cut to ``EASY_RECEPTACLES`` receptacles: short plans and short prompts, for tiny models and
quickstarts).
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import os
import random
import shutil
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from gaca_envs.alfworld.alfred_data import (
    ALFWORLD_SPLIT_TASK_COUNTS,
    SPLITS,
    TASK_TYPES,
    AlfredData,
    load_alfred_data,
)
from gaca_envs.alfworld.domain import APPLIANCE_OF_TASK, TaskParams
from gaca_envs.alfworld.engines import ENGINES, make_engine
from gaca_envs.alfworld.pddl_writer import problem_pddl
from gaca_envs.alfworld.scenes import (
    LAMPS,
    MAX_OBJECTS,
    MAX_RECEPTACLES,
    Receptacle,
    Scene,
    agent_start,
    build_receptacles,
    fix_some_containers,
    holders_of,
    place_fixed_objects,
    place_objects,
    sample_object_counts,
)
from gaca_envs.alfworld.solver import NoPlanError, solve

# Version of the written games (names the cache folder). Version 2: basins no longer spelled
# ``Sink|...|SinkBasin|SinkBasin``. Version 3: the default difficulty is ``real``. Version 4: the
# env's first-use cache holds ALFWorld's split sizes and task mix (``task_mix="alfworld"``), and
# plans are replayed natively by default (the same bytes). The random draws of ``standard`` stay
# those of version 1 (``_RNG_NAMESPACE``), so a ``standard`` game is the version 1 game with its
# names fixed.
GENERATOR_VERSION = 4
DEFAULT_DIFFICULTY = "real"
# Which task type game ``i`` poses: ``uniform`` (the six types in turn) or ``alfworld`` (ALFWorld's
# proportions for the split, ``ALFWORLD_SPLIT_TASK_COUNTS``; the env's first-use games).
TASK_MIXES = ("uniform", "alfworld")
_RNG_NAMESPACE = "gaca-alfworld-v1"
DIFFICULTIES = ("standard", "easy", "real")
# ``real`` rooms (issue 16; figures from docs/alfworld.md's room statistics): share of cabinets and
# drawers that do not open (16% of those seen in real transcripts); instances per object type as
# ALFRED's generator draws them (``gen/constants.py``: other types 1 to ``MAX_NUM_OF_OBJ_INSTANCES``
# = 3, the task's object 1 to ``PICKUP_REPEAT_MAX`` = 4, pick-two from 2); the object cap; how much
# likelier a table or countertop is to receive an object (real lists: 30% empty, 7% with 10 or
# more); the fullest real list (16); how much less likely the task's object starts in a closed
# receptacle (15% of real targets); the chance of each fixed scene object (0.08 per real surface).
REAL_NON_OPENABLE_SHARE = 0.15
REAL_OBJECT_CHOICES = (1, 2, 3)
REAL_TARGET_COUNTS = (1, 2, 3, 4)
REAL_MAX_OBJECTS = 60
REAL_DENSE_WEIGHT = 5
REAL_MAX_PER_RECEPTACLE = 16
REAL_TARGET_CLOSED_WEIGHT = 0.5
REAL_FIXED_SHARE = 0.35
EASY_RECEPTACLES = 5
MAX_WALKTHROUGH = 40  # keeps every game winnable well within ALFWorld's 50-step cap
MAX_ATTEMPTS = 30


@functools.cache
def _alfworld_task_sequence(split: str) -> tuple[str, ...]:
    # Smooth weighted round robin: each period of sum(counts) games holds exactly counts[t] games
    # of type t, spread evenly, so any prefix keeps ALFWorld's proportions closely.
    counts = ALFWORLD_SPLIT_TASK_COUNTS[split]
    total = sum(counts.values())
    current = dict.fromkeys(counts, 0)
    sequence = []
    for _ in range(total):
        for t, n in counts.items():
            current[t] += n
        chosen = max(counts, key=current.__getitem__)  # ties: the first in TASK_TYPES order
        current[chosen] -= total
        sequence.append(chosen)
    return tuple(sequence)


def task_type_of(split: str, index: int, task_mix: str = "uniform") -> str:
    """The task type of game ``index`` of ``split`` under ``task_mix`` (``TASK_MIXES``)."""
    if task_mix == "alfworld":
        sequence = _alfworld_task_sequence(split)
        return sequence[index % len(sequence)]
    return list(TASK_TYPES.values())[index % len(TASK_TYPES)]


def is_held_out(task_type: str, object_type: str, target_type: str) -> bool:
    """Whether a combination is reserved for ``valid_unseen`` (a fixed quarter, by digest)."""
    digest = hashlib.blake2b(f"{task_type}|{object_type}|{target_type}".encode(), digest_size=8).digest()
    return digest[0] % 4 == 0


@dataclass(frozen=True)
class GameSpec:
    """A sampled game before it is written and solved."""

    split: str
    seed: int
    index: int
    task: TaskParams
    scene: Scene
    task_desc: str

    @property
    def relative_dir(self) -> str:
        """``<split>/<task folder>/<trial>`` as in ALFWorld's ``json_2.1.1`` tree."""
        t = self.task
        target = t.parent_target or t.toggle_target
        folder = f"{t.task_type}-{t.object_target}-{t.mrecep_target or 'None'}-{target}-{self.scene.scene_num}"
        return f"{self.split}/{folder}/trial_gaca_s{self.seed}_{self.index:06d}"


def _task_options(
    data: AlfredData,
    task_type: str,
    counts: dict[str, int],
    receptacles: list[Receptacle],
    layout_types: frozenset[str],
) -> list[tuple[str, str]]:
    """(object type, target type) pairs the room supports for ``task_type``."""
    rtypes = {r.rtype for r in receptacles}
    options = []
    if task_type == "look_at_obj_in_light":
        lamps = [lamp for lamp in LAMPS if lamp in layout_types and holders_of(data, lamp, receptacles)]
        return [(o, lamp) for o in sorted(counts) for lamp in lamps]
    # A transforming task needs its appliance in the room, and never places the object on it.
    appliance_of_task = APPLIANCE_OF_TASK.get(task_type)
    prop = appliance_of_task.capability if appliance_of_task else None
    appliance = appliance_of_task.receptacle_type if appliance_of_task else None
    if appliance is not None and appliance not in rtypes:
        return []
    for o in sorted(counts):
        if prop is not None and o not in data.action_objects[prop]:
            continue
        holder_types = {r.rtype for r in holders_of(data, o, receptacles)}
        for p in sorted(holder_types - {appliance}):
            if holder_types - {p}:  # some other receptacle can hold it at the start
                options.append((o, p))
    return options


def sample_game(
    data: AlfredData,
    split: str,
    seed: int,
    index: int,
    attempt: int = 0,
    difficulty: str = DEFAULT_DIFFICULTY,
    task_mix: str = "uniform",
) -> GameSpec | None:
    """Samples game ``index`` of ``split`` (``None`` if this attempt's room cannot pose the task)."""
    easy, real = difficulty == "easy", difficulty == "real"
    suffix = "|easy" if easy else "|real" if real else ""  # standard keeps version 1's draws
    rng = random.Random(f"{_RNG_NAMESPACE}|{seed}|{split}|{index}|{attempt}{suffix}")
    task_type = TASK_TYPES[1] if easy else task_type_of(split, index, task_mix)
    scene_nums = data.test_scenes if split == "valid_unseen" else data.train_scenes
    rooms = sorted(data.goals_valid[task_type])
    room = rng.choice(rooms)
    layout = data.layouts[rng.choice([s for s in scene_nums if data.layouts[s].room == room])]
    receptacles = build_receptacles(data, layout, rng, EASY_RECEPTACLES if easy else MAX_RECEPTACLES, colocate=real)
    if real:
        receptacles = fix_some_containers(receptacles, rng, REAL_NON_OPENABLE_SHARE, frozenset({"Cabinet", "Drawer"}))
        counts = sample_object_counts(data, layout, receptacles, rng, REAL_OBJECT_CHOICES, REAL_MAX_OBJECTS)
    else:
        counts = sample_object_counts(data, layout, receptacles, rng, max_objects=MAX_OBJECTS)
    options = [
        (o, t)
        for o, t in _task_options(data, task_type, counts, receptacles, layout.types)
        if is_held_out(task_type, o, t) == (split == "valid_unseen")
    ]
    if not options:
        return None
    obj, target = rng.choice(options)
    if task_type == "look_at_obj_in_light":
        task = TaskParams(task_type, obj, toggle_target=target)
        counts[target] = 1
        forbidden = {}
    else:
        task = TaskParams(task_type, obj, parent_target=target)
        forbidden = {obj: frozenset({target})}
    if task_type == "pick_two_obj_and_place":
        counts[obj] = max(counts[obj], 2)
    if real:
        low = 2 if task_type == "pick_two_obj_and_place" else 1
        counts[obj] = rng.choice([n for n in REAL_TARGET_COUNTS if n >= low])
        objects = place_objects(
            data,
            counts,
            receptacles,
            rng,
            forbidden,
            REAL_DENSE_WEIGHT,
            REAL_MAX_PER_RECEPTACLE,
            {obj: REAL_TARGET_CLOSED_WEIGHT},
        )
        held = [o.receptacle for o in objects]
        full = frozenset(rid for rid in held if held.count(rid) >= REAL_MAX_PER_RECEPTACLE)
        objects += place_fixed_objects(layout, receptacles, rng, {o.oid for o in objects}, REAL_FIXED_SHARE, full)
    else:
        objects = place_objects(data, counts, receptacles, rng, forbidden)
    scene = Scene(layout.scene_num, layout.room, tuple(receptacles), tuple(objects), agent_start(receptacles, rng))
    template = rng.choice(data.goal_templates[task_type])
    desc = template.format(
        obj=obj.lower(), recep=task.parent_target.lower(), toggle=task.toggle_target.lower(), mrecep=""
    )
    return GameSpec(split, seed, index, task, scene, desc)


def _traj_data(spec: GameSpec) -> dict:
    return {
        "task_id": spec.relative_dir.split("/")[-1],
        "task_type": spec.task.task_type,
        "pddl_params": spec.task.as_pddl_params(),
        "scene": {
            "floor_plan": f"FloorPlan{spec.scene.scene_num}",
            "scene_num": spec.scene.scene_num,
            "room_type": spec.scene.room,
            "random_seed": spec.seed,
        },
        "turk_annotations": {"anns": [{"task_desc": spec.task_desc, "high_descs": [], "votes": []}]},
        "gaca": {"generator_version": GENERATOR_VERSION, "split": spec.split, "seed": spec.seed, "index": spec.index},
    }


def solve_game(engine, game_file: str, task: TaskParams) -> list[str]:
    """Plans a game with :func:`~gaca_envs.alfworld.solver.solve` and replays the plan in ``engine``.

    Returns:
        The plan if every command was admissible and the last one won the game, else ``[]``.
    """
    engine.load(game_file)
    state = engine.reset()
    try:
        plan = solve(engine.static_facts() + state.facts, engine.entity_names(), task)
    except NoPlanError:
        return []
    if not plan or len(plan) > MAX_WALKTHROUGH:
        return []
    for command in plan:
        if command not in state.admissible_commands:
            return []
        state = engine.step(command)
    return plan if state.won else []


def write_game(data: AlfredData, spec: GameSpec, json_root: Path, engine) -> Path | None:
    """Writes ``spec`` under ``json_root`` and keeps it only if solvable; returns the game file."""
    game_dir = json_root / spec.relative_dir
    game_dir.mkdir(parents=True, exist_ok=True)
    game_file = game_dir / "game.tw-pddl"
    (game_dir / "traj_data.json").write_text(json.dumps(_traj_data(spec), indent=2))
    game = {
        "pddl_domain": data.domain,
        "grammar": data.grammar.replace("UNKNOWN GOAL", spec.task_desc),
        "pddl_problem": problem_pddl(data, spec.scene, spec.task, spec.relative_dir.split("/")[-1]),
        "solvable": None,
        "walkthrough": None,
    }
    game_file.write_text(json.dumps(game))
    walkthrough = solve_game(engine, str(game_file), spec.task)
    if not walkthrough:
        shutil.rmtree(game_dir)
        return None
    game["solvable"], game["walkthrough"] = True, walkthrough
    game_file.write_text(json.dumps(game))
    return game_file


def _generate_range(args: tuple[str, str, int, Sequence[int], str, str, str]) -> list[str]:
    out, split, seed, indices, difficulty, engine_name, task_mix = args
    data = load_alfred_data()
    engine = make_engine(engine_name)
    json_root = Path(out) / "json_2.1.1"
    written = []
    for index in indices:
        for attempt in range(MAX_ATTEMPTS):
            spec = sample_game(data, split, seed, index, attempt, difficulty, task_mix)
            if spec is None:
                continue
            game_file = write_game(data, spec, json_root, engine)
            if game_file is not None:
                written.append(str(game_file))
                break
        else:
            raise RuntimeError(f"could not generate a solvable game for split={split} seed={seed} index={index}")
    return written


def generate(
    out: str | os.PathLike,
    num: int,
    seed: int = 0,
    split: str = "train",
    workers: int = 1,
    difficulty: str = DEFAULT_DIFFICULTY,
    engine: str = "native",
    task_mix: str = "uniform",
) -> list[str]:
    """Generates ``num`` solvable games of ``split`` under ``out/json_2.1.1/<split>``.

    Args:
        out: output folder (ALFWorld's ``$ALFWORLD_DATA`` layout).
        num: number of games (game indices ``0 .. num-1``).
        seed: generator seed; the same seed gives the same games, byte for byte.
        split: ``train``, ``valid_seen`` or ``valid_unseen``.
        workers: processes to use.
        difficulty: ``real`` (the default), ``standard`` or ``easy`` (see the module docstring).
        engine: engine that replays each plan before a game is kept: ``native`` (the default) or
            ``textworld`` (the reference: the same games, byte for byte, about 200 times slower).
        task_mix: ``uniform`` (the six task types in turn) or ``alfworld`` (ALFWorld's proportions
            for the split).

    Returns:
        The written ``game.tw-pddl`` paths, in index order.

    Raises:
        ValueError: for a bad split, count, worker number, difficulty, engine or task mix.
    """
    if split not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(SPLITS)}, got {split!r}")
    if difficulty not in DIFFICULTIES:
        raise ValueError(f"difficulty must be one of {', '.join(DIFFICULTIES)}, got {difficulty!r}")
    if task_mix not in TASK_MIXES:
        raise ValueError(f"task_mix must be one of {', '.join(TASK_MIXES)}, got {task_mix!r}")
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    if num < 0:
        raise ValueError(f"num must be >= 0, got {num}")
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    chunks = [list(range(num))[w::workers] for w in range(workers)]
    jobs = [(str(out), split, seed, chunk, difficulty, engine, task_mix) for chunk in chunks if chunk]
    if workers == 1 or len(jobs) <= 1:
        results = [_generate_range(job) for job in jobs]
    else:
        with ProcessPoolExecutor(max_workers=len(jobs)) as pool:
            results = list(pool.map(_generate_range, jobs))
    return sorted((f for chunk in results for f in chunk), key=lambda f: Path(f).parent.name)


def main(argv: Sequence[str] | None = None) -> int:
    """Command line entry point of ``gaca-alfworld-generate``."""
    parser = argparse.ArgumentParser(prog="gaca-alfworld-generate", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="output folder; games go to OUT/json_2.1.1/SPLIT/...")
    parser.add_argument("--num", type=int, default=500, help="number of games (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="generator seed (default: %(default)s)")
    parser.add_argument("--split", default="train", choices=SPLITS, help="split (default: %(default)s)")
    parser.add_argument("--workers", type=int, default=1, help="parallel processes (default: %(default)s)")
    parser.add_argument(
        "--difficulty", default=DEFAULT_DIFFICULTY, choices=DIFFICULTIES, help="(default: %(default)s)"
    )
    parser.add_argument("--engine", default="native", help="engine replaying the plans: native or textworld")
    parser.add_argument("--task-mix", default="uniform", choices=TASK_MIXES, help="(default: %(default)s)")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    files = generate(
        args.out,
        args.num,
        args.seed,
        args.split,
        args.workers,
        difficulty=args.difficulty,
        engine=args.engine,
        task_mix=args.task_mix,
    )
    elapsed = time.perf_counter() - start
    sys.stdout.write(
        f"wrote {len(files)} {args.split} games to {Path(args.out) / 'json_2.1.1' / args.split} "
        f"in {elapsed:.1f} s ({len(files) / max(elapsed, 1e-9):.2f} games/s)\n"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
