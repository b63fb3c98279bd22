from __future__ import annotations

import inspect
import json

import pytest

from gaca_envs.alfworld.alfred_data import ALFWORLD_SPLIT_TASK_COUNTS, TASK_TYPES, load_alfred_data
from gaca_envs.alfworld.domain import mangle
from gaca_envs.alfworld.generate import (
    DEFAULT_DIFFICULTY,
    REAL_MAX_PER_RECEPTACLE,
    REAL_TARGET_COUNTS,
    generate,
    is_held_out,
    main,
    sample_game,
    task_type_of,
)
from gaca_envs.alfworld.scenes import LAMPS, MAX_OBJECTS, MAX_RECEPTACLES


def _specs(split, n, seed=0, difficulty="standard"):
    data = load_alfred_data()
    specs = []
    for index in range(n):
        for attempt in range(30):
            spec = sample_game(data, split, seed, index, attempt, difficulty)
            if spec is not None:
                specs.append(spec)
                break
    assert len(specs) == n
    return specs


def test_fixture_covers_every_task_type_and_room_kind(games):
    assert {g["traj"]["task_type"] for g in games} == set(TASK_TYPES.values())
    assert {g["traj"]["scene"]["room_type"] for g in games} == {"Kitchen", "LivingRoom", "Bedroom", "Bathroom"}


def test_games_are_in_alfworlds_layout_solvable_with_stored_walkthrough(games):
    data = load_alfred_data()
    for g in games:
        game, traj = g["game"], g["traj"]
        assert game["pddl_domain"] == data.domain
        assert game["solvable"] is True and 0 < len(game["walkthrough"]) <= 40
        params = traj["pddl_params"]
        assert set(params) == {"object_target", "parent_target", "toggle_target", "mrecep_target", "object_sliced"}
        # The task phrase is one of ALFWorld's templates for the type, filled like ALFWorld fills it.
        phrases = {
            t.format(
                obj=params["object_target"].lower(),
                recep=params["parent_target"].lower(),
                toggle=params["toggle_target"].lower(),
                mrecep="",
            )
            for t in data.goal_templates[traj["task_type"]]
        }
        task = traj["turk_annotations"]["anns"][0]["task_desc"]
        assert task in phrases
        assert game["grammar"] == data.grammar.replace("UNKNOWN GOAL", task)
        target = params["parent_target"] or params["toggle_target"]
        assert f"{target}Type" in game["pddl_problem"].split("(:goal", 1)[1]
        assert g["file"].parent.parent.name.startswith(f"{traj['task_type']}-{params['object_target']}-None-{target}-")


def test_same_seed_gives_identical_files(tmp_path, game_files):
    again = generate(tmp_path, 2, seed=6, split="train")
    for new, old in zip(again, game_files[:2], strict=True):
        new_dir, old_dir = type(old)(new).parent, old.parent
        assert new_dir.name == old_dir.name
        for name in ("game.tw-pddl", "traj_data.json"):
            assert (new_dir / name).read_bytes() == (old_dir / name).read_bytes()
    seed6 = [s.relative_dir for s in _specs("train", 2, seed=6, difficulty=DEFAULT_DIFFICULTY)]
    assert seed6 == ["/".join(f.parent.parts[-3:]) for f in game_files[:2]]
    assert [s.relative_dir for s in _specs("train", 2, seed=7, difficulty=DEFAULT_DIFFICULTY)] != seed6


def test_default_difficulty_is_real():
    # Issue 16: the generator's and the first-use cache's games are real ALFWorld-like rooms by default.
    data = load_alfred_data()
    assert DEFAULT_DIFFICULTY == "real"
    assert sample_game(data, "train", 0, 5, 0) == sample_game(data, "train", 0, 5, 0, "real")
    assert inspect.signature(generate).parameters["difficulty"].default == "real"


def test_scenes_are_alfworld_sized_and_follow_alfreds_placement_rules():
    data = load_alfred_data()
    for spec in _specs("train", 36) + _specs("valid_unseen", 12):
        scene = spec.scene
        assert 3 <= len(scene.receptacles) <= MAX_RECEPTACLES
        assert 1 <= len(scene.objects) <= MAX_OBJECTS + 2
        types = {r.rid: r.rtype for r in scene.receptacles}
        for obj in scene.objects:
            if obj.otype in LAMPS:
                continue
            assert obj.otype in data.receptacle_objects[types[obj.receptacle]], (obj, types[obj.receptacle])
        # The goal does not hold at the start: no target object starts in a target receptacle.
        if spec.task.parent_target:
            for obj in scene.objects:
                if obj.otype == spec.task.object_target:
                    assert types[obj.receptacle] != spec.task.parent_target
        assert len({r.location for r in scene.receptacles}) == len(scene.receptacles)
        ids = [r.rid for r in scene.receptacles] + [o.oid for o in scene.objects]
        assert len(set(ids)) == len(ids)


def test_scenes_have_closed_containers_and_distractors():
    specs = _specs("train", 24)
    kitchens = [s for s in specs if s.scene.room == "Kitchen"]
    assert kitchens
    for spec in kitchens:
        assert any(r.rtype in ("Fridge", "Cabinet", "Drawer", "Microwave") for r in spec.scene.receptacles)
        assert len({o.otype for o in spec.scene.objects}) >= 8  # many objects besides the target
    # Openable receptacles start closed: the problem has no "opened" fact.
    data = load_alfred_data()
    from gaca_envs.alfworld.pddl_writer import problem_pddl

    text = problem_pddl(data, kitchens[0].scene, kitchens[0].task, "t")
    assert "(openable " in text and "(opened " not in text
    assert f"(objectType {mangle(kitchens[0].scene.objects[0].oid)} " in text


def test_valid_unseen_layouts_and_combinations_are_absent_from_train():
    data = load_alfred_data()
    train, seen, unseen = _specs("train", 60), _specs("valid_seen", 18), _specs("valid_unseen", 30)

    def combo(s):
        return (s.task.task_type, s.task.object_target, s.task.parent_target or s.task.toggle_target)

    assert {s.scene.scene_num for s in unseen} <= set(data.test_scenes)
    assert {s.scene.scene_num for s in train + seen} <= set(data.train_scenes)
    assert all(is_held_out(*combo(s)) for s in unseen)
    assert not any(is_held_out(*combo(s)) for s in train + seen)
    assert {s.scene.room for s in unseen} == {"Kitchen", "LivingRoom", "Bedroom", "Bathroom"}
    # valid_seen draws different games from train over the same layouts.
    assert {s.relative_dir.split("/", 1)[1] for s in seen}.isdisjoint({s.relative_dir.split("/", 1)[1] for s in train})


def test_generate_rejects_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="split must be one of train, valid_seen, valid_unseen, got 'test'"):
        generate(tmp_path, 1, split="test")
    with pytest.raises(ValueError, match="num must be >= 0, got -1"):
        generate(tmp_path, -1)
    with pytest.raises(ValueError, match="workers must be >= 1, got 0"):
        generate(tmp_path, 1, workers=0)


def test_cli_writes_games(tmp_path, capsys):
    assert main(["--out", str(tmp_path), "--num", "1", "--seed", "6", "--split", "train"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"wrote 1 train games to {tmp_path / 'json_2.1.1' / 'train'}")
    (game_file,) = (tmp_path / "json_2.1.1" / "train").glob("*/*/game.tw-pddl")
    assert json.loads(game_file.read_text())["solvable"] is True


def test_easy_difficulty_is_small_pick_and_place_and_native_matches_textworld(tmp_path):
    from gaca_envs.alfworld.generate import EASY_RECEPTACLES

    native = generate(tmp_path / "n", 3, seed=2, split="valid_seen", difficulty="easy", engine="native")
    reference = generate(tmp_path / "t", 3, seed=2, split="valid_seen", difficulty="easy", engine="textworld")
    for n, t in zip(native, reference, strict=True):
        n, t = type(tmp_path)(n), type(tmp_path)(t)
        assert n.read_text() == t.read_text()  # same games, same stored walkthrough from either engine
        game = json.loads(n.read_text())
        traj = json.loads((n.parent / "traj_data.json").read_text())
        assert traj["task_type"] == "pick_and_place_simple"
        problem_objects = game["pddl_problem"].split("(:init", 1)[0]
        assert 1 <= problem_objects.count("- receptacle") <= EASY_RECEPTACLES
    standard = [s.relative_dir for s in _specs("valid_seen", 3, seed=2)]
    assert standard != ["/".join(type(tmp_path)(f).parent.parts[-3:]) for f in native]


def test_generate_rejects_bad_difficulty_and_engine(tmp_path):
    with pytest.raises(ValueError, match="difficulty must be one of standard, easy, real, got 'hard'"):
        generate(tmp_path, 1, difficulty="hard")
    with pytest.raises(ValueError, match="engine must be one of native, textworld, got 'x'"):
        generate(tmp_path, 1, engine="x")


def test_basins_are_named_as_in_alfred_with_one_basin_suffix(games):
    # ALFRED spells a sink basin ``Sink|x|y|z|SinkBasin`` (mangled ``sink_bar_..._bar_sinkbasin``);
    # version 1 appended the suffix a second time.
    specs = _specs("train", 36)
    basins = [r for s in specs for r in s.scene.receptacles if r.rtype in ("SinkBasin", "BathtubBasin")]
    assert {r.rtype for r in basins} == {"SinkBasin", "BathtubBasin"}
    for r in basins:
        parts = r.rid.split("|")
        assert len(parts) == 5 and parts[-1] == r.rtype and parts[0] == r.rtype.removesuffix("Basin"), r.rid
    for r in (r for s in specs for r in s.scene.receptacles if r.rtype not in ("SinkBasin", "BathtubBasin")):
        assert len(r.rid.split("|")) == 4, r.rid
    for g in games:
        problem = g["game"]["pddl_problem"].lower()
        assert "_bar_sinkbasin_bar_sinkbasin" not in problem and "_bar_bathtubbasin_bar_bathtubbasin" not in problem
    assert any("_bar_sinkbasin " in g["game"]["pddl_problem"].lower() for g in games)


def test_real_difficulty_rooms_have_alfworlds_features_and_standard_is_unchanged():
    from gaca_envs.alfworld.pddl_writer import problem_pddl
    from gaca_envs.alfworld.scenes import FIXED_HOLDERS, pickupable_types

    data = load_alfred_data()
    real, standard = [], []
    for index in range(36):
        for attempt in range(30):
            spec = sample_game(data, "train", 0, index, attempt, "real")
            if spec is not None:
                real.append(spec)
                break
        standard.append(
            next(s for a in range(30) if (s := sample_game(data, "train", 0, index, a, "standard")) is not None)
        )
    assert {s.task.task_type for s in real} == set(TASK_TYPES.values())
    receptacles = [r for s in real for r in s.scene.receptacles]
    shut = [r for r in receptacles if not r.openable]
    assert shut and {r.rtype for r in shut} <= {"Cabinet", "Drawer"}
    assert any(len({r.location for r in s.scene.receptacles}) < len(s.scene.receptacles) for s in real)
    fixed = [o for s in real for o in s.scene.objects if o.otype in FIXED_HOLDERS]
    assert fixed and not {o.otype for o in fixed} & pickupable_types(data)
    for spec in real:
        types = {r.rid: r.rtype for r in spec.scene.receptacles}
        for obj in spec.scene.objects:
            if obj.otype in FIXED_HOLDERS:
                assert types[obj.receptacle] in FIXED_HOLDERS[obj.otype]
        ids = [r.rid for r in spec.scene.receptacles] + [o.oid for o in spec.scene.objects]
        assert len(set(ids)) == len(ids)
        text = problem_pddl(data, spec.scene, spec.task, "t")
        for r in spec.scene.receptacles:
            assert (f"(openable {mangle(r.rid)})" in text) == (r.openable and r.rtype in data.openable)
        for obj in spec.scene.objects:
            assert (f"(pickupable {mangle(obj.oid)})" in text) == (obj.otype in pickupable_types(data))
        # ALFRED's instance counts (the task's object 1-4, pick-two 2-4) and real ALFWorld's fullest list.
        wanted = sum(o.otype == spec.task.object_target for o in spec.scene.objects)
        low = 2 if spec.task.task_type == "pick_two_obj_and_place" else 1
        assert low <= wanted <= max(REAL_TARGET_COUNTS)
        held = [o.receptacle for o in spec.scene.objects]
        assert max(held.count(rid) for rid in set(held)) <= REAL_MAX_PER_RECEPTACLE
    # Each fixed kind a room could show appears with probability REAL_FIXED_SHARE (0.08 per real surface).
    possible = sum(
        otype in data.layouts[s.scene.scene_num].types and any(r.rtype in holders for r in s.scene.receptacles)
        for s in real
        for otype, holders in FIXED_HOLDERS.items()
    )
    assert 0 < len(fixed) < 0.6 * possible
    # Denser rooms than standard on the same indices; standard keeps one place per receptacle.
    # (ALFRED draws 1-3 instances per type uniformly, mean 2; standard 1-3 weighted to 1, mean 1.67.)
    assert sum(len(s.scene.objects) for s in real) > 1.15 * sum(len(s.scene.objects) for s in standard)
    for spec in standard:
        assert all(r.openable for r in spec.scene.receptacles)
        assert len({r.location for r in spec.scene.receptacles}) == len(spec.scene.receptacles)


def test_alfworld_task_mix_has_alfworlds_counts_per_split_and_spreads_them():
    from collections import Counter

    for split, counts in ALFWORLD_SPLIT_TASK_COUNTS.items():
        total = sum(counts.values())
        mix = [task_type_of(split, i, "alfworld") for i in range(total)]
        assert Counter(mix) == counts
        # Any prefix keeps the proportions: within one game of the exact share.
        for n in (10, total // 3, total - 1):
            prefix = Counter(mix[:n])
            assert all(abs(prefix[t] - n * c / total) < 1 + 1e-9 for t, c in counts.items()), (split, n)
        assert task_type_of(split, total, "alfworld") == mix[0]  # periodic beyond ALFWorld's size
    assert sum(ALFWORLD_SPLIT_TASK_COUNTS["train"].values()) == 3553
    assert [task_type_of("train", i) for i in range(7)] == [*TASK_TYPES.values(), TASK_TYPES[1]]  # uniform


def test_generate_replays_natively_by_default_and_rejects_a_bad_task_mix(tmp_path):
    assert inspect.signature(generate).parameters["engine"].default == "native"
    with pytest.raises(ValueError, match="task_mix must be one of uniform, alfworld, got 'x'"):
        generate(tmp_path, 1, task_mix="x")
