from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap

import gymnasium as gym
import pytest

import gaca_envs  # noqa: F401  (registers the ids)
from gaca_envs.alfworld.data import cache_root, collect_games
from gaca_envs.alfworld.generate import GENERATOR_VERSION, task_type_of


def test_async_vector_env_of_eight_groups_and_plays(alfworld_root, games):
    small = min(games, key=lambda g: len(g["game"]["pddl_problem"]))
    # Gymnasium's default shared memory: the envs' TextSpace carries the real strings (a plain
    # Text space returned the ones read at construction, all "0").
    vec = gym.vector.AsyncVectorEnv(
        [lambda: gym.make("GACA-ALFWorld-v0", data_path=str(alfworld_root)) for _ in range(8)]
    )
    try:
        obs, info = vec.reset(options={"task_id": small["task_id"]})
        assert len(set(obs)) == 1 and obs[0].startswith("-= Welcome to TextWorld, ALFRED! =-")
        assert len(set(info["anchor_key"])) == 1 and set(info["task_id"]) == {small["task_id"]}
        # Half the group plays the walkthrough, half sends junk: keys split accordingly.
        walkthrough = small["game"]["walkthrough"]
        for command in walkthrough:
            actions = tuple(command if k < 4 else "xyzzy" for k in range(8))
            obs, reward, terminated, truncated, info = vec.step(actions)
            assert list(info["action_valid"]) == [True] * 4 + [False] * 4
            assert len(set(info["anchor_key"][:4])) == 1 and len(set(info["anchor_key"][4:])) == 1
        assert list(reward) == [10.0] * 4 + [0.0] * 4 and list(terminated) == [True] * 4 + [False] * 4
        # Groups by seed: the same seed draws the same task.
        obs, info = vec.reset(seed=[11, 11, 11, 11, 12, 12, 12, 12])
        assert len(set(info["task_id"][:4])) == 1 and len(set(info["task_id"][4:])) == 1
        assert len(set(obs[:4])) == 1 and isinstance(info["admissible_actions"][0], list)
    finally:
        vec.close()


def test_import_and_play_leave_home_argv_stdout_and_environment_alone(tmp_path, alfworld_root, games):
    home = tmp_path / "home"
    home.mkdir()
    code = textwrap.dedent(
        f"""
        import os, sys
        argv = list(sys.argv)
        import gymnasium as gym
        # The module-qualified id works without importing gaca_envs first.
        env = gym.make("gaca_envs:GACA-ALFWorld-v0", data_path={str(alfworld_root)!r}, expert=True)
        obs, info = env.reset(options={{"task_id": {games[0]["task_id"]!r}}})
        env.step(info["expert_action"])
        assert sys.argv == argv, sys.argv
        assert "ALFWORLD_DATA" not in os.environ
        sys.stderr.write("done")
        """
    )
    env = {k: v for k, v in os.environ.items() if k not in ("ALFWORLD_DATA", "XDG_CACHE_HOME", "GACA_CACHE_DIR")}
    env["HOME"] = str(home)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "" and out.stderr.endswith("done")
    assert list(home.iterdir()) == []


def test_cache_location_follows_environment(monkeypatch, tmp_path):
    monkeypatch.delenv("GACA_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root() == tmp_path / "xdg" / "gaca" / "alfworld"
    monkeypatch.setenv("GACA_CACHE_DIR", str(tmp_path / "mine"))
    assert cache_root() == tmp_path / "mine" / "alfworld"
    assert not (tmp_path / "mine").exists()  # resolving the path creates nothing


def test_real_data_collection_applies_alfworlds_filters(tmp_path, games):
    root = tmp_path / "json_2.1.1"
    by_type = {g["traj"]["task_type"]: g for g in games}

    def put(g, folder, trial="trial_T1", **changes):
        dst = root / "valid_seen" / folder / trial
        shutil.copytree(g["file"].parent, dst)
        if changes:
            data = {**g["game"], **changes}
            (dst / "game.tw-pddl").write_text(json.dumps(data))
        return dst

    put(by_type["pick_and_place_simple"], "pick_and_place_simple-A-None-B-1")
    put(by_type["look_at_obj_in_light"], "look_at_obj_in_light-A-None-DeskLamp-1")
    put(by_type["pick_and_place_simple"], "pick_and_place_simple-A-None-B-2", solvable=False)
    put(by_type["pick_and_place_simple"], "pick_and_place_with_movable_recep-A-Bowl-B-1")
    put(by_type["pick_and_place_simple"], "pick_and_place_simple-AppleSliced-None-B-1")
    (root / "valid_seen" / "pick_and_place_simple-A-None-B-3" / "trial_T1").mkdir(parents=True)
    (root / "valid_seen" / "pick_and_place_simple-A-None-B-3" / "trial_T1" / "traj_data.json").write_text("{}")
    found = collect_games(root, "valid_seen", task_types=[1, 2])
    assert [r.task_id for r in found] == [
        "valid_seen/look_at_obj_in_light-A-None-DeskLamp-1/trial_T1",
        "valid_seen/pick_and_place_simple-A-None-B-1/trial_T1",
    ]
    assert [r.task_id for r in collect_games(root, "valid_seen", task_types=[1])] == [found[1].task_id]
    broken = put(by_type["pick_and_place_simple"], "pick_and_place_simple-A-None-B-4", trial="trial_T2")
    (broken / "traj_data.json").write_text("{oops")
    with pytest.raises(ValueError, match=f"cannot read ALFWorld trajectory file {broken / 'traj_data.json'}"):
        collect_games(root, "valid_seen", task_types=[1])
    shutil.rmtree(broken)
    env = gym.make("GACA-ALFWorld-v0", data_path=str(tmp_path), split="valid_seen", task_types=[2])
    obs, info = env.reset(seed=0)
    assert info["task_id"] == found[0].task_id and info["task_type"] == "look_at_obj_in_light"
    env.close()


def test_collect_games_reuses_a_collection_until_the_folder_changes(tmp_path, games, monkeypatch):
    from gaca_envs.alfworld import data

    root = tmp_path / "json_2.1.1"
    g = next(g for g in games if g["traj"]["task_type"] == "pick_and_place_simple")
    for k in (1, 2):
        shutil.copytree(g["file"].parent, root / "valid_seen" / f"pick_and_place_simple-A-None-B-{k}" / "trial_T1")
    reads = []
    collect = data._collect
    monkeypatch.setattr(data, "_collect", lambda *a: reads.append(1) or collect(*a))
    first = collect_games(root, "valid_seen", task_types=[1])
    first.pop()  # callers get their own list
    assert len(collect_games(root, "valid_seen", task_types=[1])) == 2 and len(reads) == 1
    # Another split or task-type set is its own collection.
    assert collect_games(root, "valid_seen", task_types=[2]) == [] and len(reads) == 2
    # A game rewritten in place (now unsolvable), one added, one removed: each is seen.
    game_file = root / "valid_seen" / "pick_and_place_simple-A-None-B-1" / "trial_T1" / "game.tw-pddl"
    game_file.write_text(json.dumps({**g["game"], "solvable": False}))
    assert [r.task_id.split("/")[1] for r in collect_games(root, "valid_seen", task_types=[1])] == [
        "pick_and_place_simple-A-None-B-2"
    ]
    shutil.copytree(g["file"].parent, root / "valid_seen" / "pick_and_place_simple-A-None-B-3" / "trial_T1")
    assert len(collect_games(root, "valid_seen", task_types=[1])) == 2
    shutil.rmtree(root / "valid_seen" / "pick_and_place_simple-A-None-B-2")
    assert len(collect_games(root, "valid_seen", task_types=[1])) == 1 and len(reads) == 5


def test_env_without_data_generates_the_split_once_into_the_cache(monkeypatch, tmp_path):
    from gaca_envs.alfworld import data
    from gaca_envs.alfworld.env import ALFWorldEnv

    monkeypatch.delenv("ALFWORLD_DATA", raising=False)
    monkeypatch.setenv("GACA_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setitem(data.DEFAULT_CACHE_GAMES, "valid_unseen", 1)
    env = ALFWorldEnv(split="valid_unseen")
    assert not (tmp_path / "cache").exists()  # nothing is generated before the env needs games
    obs, info = env.reset(seed=0)
    assert info["task_id"].startswith("valid_unseen/") and "Your task is to: " in obs
    # First use poses ALFWorld's task mix for the split (game 0 of valid_unseen: its first type).
    assert info["task_type"] == task_type_of("valid_unseen", 0, "alfworld")
    done_marker = tmp_path / "cache" / "alfworld" / f"gen-v{GENERATOR_VERSION}-seed0" / ".valid_unseen.done"
    stamp = done_marker.stat().st_mtime_ns
    again = ALFWorldEnv(split="valid_unseen")
    assert again.task_ids == env.task_ids and done_marker.stat().st_mtime_ns == stamp
    for command in env.expert_plan():
        obs, reward, terminated, truncated, info = env.step(command)
    assert terminated and reward == 10.0
    env.close()


def test_first_use_cache_has_alfworlds_split_sizes_and_completes_a_smaller_one(monkeypatch, tmp_path):
    from gaca_envs.alfworld import data

    assert data.DEFAULT_CACHE_GAMES == {"train": 3553, "valid_seen": 140, "valid_unseen": 134}
    root = data.ensure_generated("valid_seen", root=tmp_path, num=1)
    first = sorted(p.parent.name for p in (root / "valid_seen").glob("*/*/game.tw-pddl"))
    marker = root.parent / ".valid_seen.done"
    assert json.loads(marker.read_text())["games"] == 1
    data.ensure_generated("valid_seen", root=tmp_path, num=2)  # a marker of fewer games is completed
    games = sorted(p.parent.name for p in (root / "valid_seen").glob("*/*/game.tw-pddl"))
    assert len(games) == 2 and set(first) < set(games)
    assert json.loads(marker.read_text())["games"] == 2
