"""Snapshots and copies of an ALFWorld env as a user meets them: through gym.make, JSON, pickle, other processes."""

from __future__ import annotations

import dataclasses
import pickle
import random

import gymnasium as gym
import pytest

import gaca_envs  # noqa: F401  (registers the ids)
from gaca_envs.alfworld.env import ALFWorldEnv
from tests.gaca_envs.snapshot_walks import as_json, check_restore_equals_continuing, replay_in_subprocess, walk


def _walk(env, info, rng: random.Random, steps: int) -> list:
    out = []
    for _ in range(steps):
        step = env.step(rng.choice(info["admissible_actions"] + ["do a dance"]))
        out.append(step)
        info = step[4]
        if step[2] or step[3]:
            break
    return out


def _snapshot_after(env, task_id: str, steps: int):
    obs, info = env.reset(options={"task_id": task_id})
    for step in _walk(env, info, random.Random(1), steps):
        info = step[4]
    return env.unwrapped.save_state(), info


@pytest.fixture
def files(game_files) -> list[str]:
    return [str(f) for f in game_files]


def test_restore_into_a_fresh_gym_make_env(files):
    source = gym.make("GACA-ALFWorld-v0", game_files=files)
    snapshot, info = _snapshot_after(source, source.unwrapped.task_ids[2], 4)
    expected = _walk(source, info, random.Random(7), 8)
    # The wrappers' way: a reset with the snapshot (restore_state alone left gym.make's order
    # enforcer and env checker waiting for a reset: ResetNeeded).
    fresh = gym.make("GACA-ALFWorld-v0", game_files=files)
    obs, restored_info = fresh.reset(options={"snapshot": snapshot})
    assert restored_info["anchor_key"] == info["anchor_key"] and restored_info["step"] == 4
    assert _walk(fresh, restored_info, random.Random(7), 8) == expected
    # Without wrappers, restore_state needs no reset either.
    bare = ALFWorldEnv(game_files=files)
    assert bare.restore_state(snapshot) == (obs, restored_info)
    assert _walk(bare, restored_info, random.Random(7), 8) == expected


def test_restore_through_reset_options_with_a_time_limit(files):
    # reset(options={"snapshot": ...}) goes through every wrapper, here a caller's TimeLimit.
    source = gym.make("GACA-ALFWorld-v0", game_files=files)
    snapshot, info = _snapshot_after(source, source.unwrapped.task_ids[3], 5)
    expected = _walk(source, info, random.Random(3), 10)
    fresh = gym.make("GACA-ALFWorld-v0", game_files=files, max_episode_steps=50)
    obs, restored_info = fresh.reset(options={"snapshot": snapshot})
    assert obs == snapshot.observation and restored_info["step"] == 5
    assert _walk(fresh, restored_info, random.Random(3), 10) == expected
    with pytest.raises(ValueError, match="reset options with 'snapshot' may contain nothing else, got"):
        fresh.reset(options={"snapshot": snapshot, "task_id": "x"})
    with pytest.raises(TypeError, match="snapshot must come from save_state\\(\\), got dict"):
        fresh.reset(options={"snapshot": {}})


def test_pickled_env_continues_with_the_same_observations(files):
    env = ALFWorldEnv(game_files=files)
    obs, info = env.reset(options={"task_id": env.task_ids[1]})
    info = _walk(env, info, random.Random(5), 6)[-1][4]
    copy = pickle.loads(pickle.dumps(env))  # used to fail: code objects in the engine's caches
    assert _walk(copy, info, random.Random(9), 10) == _walk(env, info, random.Random(9), 10)
    # A copy of a copy, and of an env that was never reset, work too.
    again = pickle.loads(pickle.dumps(copy))
    assert again.reset(options={"task_id": env.task_ids[0]})[0] == env.reset(options={"task_id": env.task_ids[0]})[0]
    unused = pickle.loads(pickle.dumps(ALFWorldEnv(game_files=files)))
    assert unused.reset(options={"task_id": env.task_ids[0]})[0] == env.reset(options={"task_id": env.task_ids[0]})[0]


def test_step_counts_through_gym_make_equal_the_envs_own(files):
    # Registration adds no TimeLimit: gym.make's env ends episodes exactly where the env does,
    # for the default limit and for a raised one.
    for kwargs in ({}, {"max_env_steps": 60}, {"max_env_steps": 7}):
        made = gym.make("GACA-ALFWorld-v0", game_files=files, **kwargs)
        direct = ALFWorldEnv(game_files=files, **kwargs)
        lengths = []
        for env in (made, direct):
            env.reset(options={"task_id": direct.task_ids[0]})
            steps, done = 0, False
            while not done:
                _, _, terminated, truncated, _ = env.step("xyzzy")
                steps, done = steps + 1, terminated or truncated
            lengths.append((steps, terminated, truncated))
        assert lengths[0] == lengths[1] == (kwargs.get("max_env_steps", 50), False, True)


def test_restore_then_act_equals_continuing_over_random_walks(files):
    source = gym.make("GACA-ALFWorld-v0", game_files=files)
    source.reset(seed=0)
    snapshots = check_restore_equals_continuing(
        source, lambda: gym.make("GACA-ALFWorld-v0", game_files=files), list(source.unwrapped.task_ids), walks=12
    )
    assert len(snapshots) >= 8 and all(s.env == "alfworld" and s.version == 2 for s in snapshots)
    assert max(len(pickle.dumps(s)) for s in snapshots) < 4_000  # small: the commands played, no facts or path


def test_restore_in_another_process(files):
    source = gym.make("GACA-ALFWorld-v0", game_files=files)
    obs, info = source.reset(options={"task_id": source.unwrapped.task_ids[1]})
    info = _walk(source, info, random.Random(4), 5)[-1][4]
    snapshot = source.unwrapped.save_state()
    played = walk(source, info, 6, 10)
    code = f"import gymnasium as gym\nenv = gym.make('GACA-ALFWorld-v0', game_files={files!r})"
    assert replay_in_subprocess(code, snapshot, [a for a, _ in played]) == as_json(played)


def test_bad_snapshots_give_clear_errors(files, tmp_path):
    source = gym.make("GACA-ALFWorld-v0", game_files=files)
    snapshot, _ = _snapshot_after(source, source.unwrapped.task_ids[0], 3)
    fresh = gym.make("GACA-ALFWorld-v0", game_files=files)
    state = snapshot.state
    cases = [
        ({**state, "game_file": str(tmp_path / "gone.tw-pddl")}, "ALFWorld snapshot state needs actions, last_action"),
        ({**state, "actions": 7}, r"snapshot state actions must be a list of commands \(str\), got 7"),
        (
            {k: v for k, v in state.items() if k != "actions"},
            "ALFWorld snapshot state needs actions, last_action_valid",
        ),
        ({**state, "actions": [*state["actions"][:-1], "fly away"]}, r"actions\[\d\] \('fly away'\) is not an admis"),
    ]
    for bad_state, message in cases:
        with pytest.raises(ValueError, match=message):
            fresh.reset(options={"snapshot": dataclasses.replace(snapshot, state=bad_state)})
        with pytest.raises(RuntimeError, match="after the episode ended"):  # nothing half-restored to step
            fresh.step("look")
    # A snapshot names a task of the env's own games, never a file: a path is an unknown task, and the
    # message says nothing about whether such a file exists.
    for task_id in ("/etc/hostname", str(tmp_path / "gone.tw-pddl"), "../../etc/passwd"):
        with pytest.raises(ValueError, match=r"is not one of this env's 6 tasks \(split 'train'") as refused:
            fresh.reset(options={"snapshot": dataclasses.replace(snapshot, task_id=task_id)})
        assert "No such file" not in str(refused.value) and "Expecting value" not in str(refused.value)
    with pytest.raises(
        ValueError, match="snapshot was saved by a 'criticalchain' env; this ALFWorldEnv restores only"
    ):
        fresh.reset(options={"snapshot": dataclasses.replace(snapshot, env="criticalchain")})
    with pytest.raises(ValueError, match=r"snapshot format version 1 is not the version this ALFWorldEnv reads \(2\)"):
        fresh.reset(options={"snapshot": dataclasses.replace(snapshot, version=1)})
    stock = gym.make("GACA-ALFWorld-v0", game_files=files[:1], engine="textworld")
    with pytest.raises(
        RuntimeError, match="restore_state\\(\\) needs engine='native'; this env uses engine='textworld'"
    ):
        stock.reset(options={"snapshot": snapshot})
    stock.close()
    assert fresh.reset(options={"snapshot": snapshot})[0] == snapshot.observation  # still restores
