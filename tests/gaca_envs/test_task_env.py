"""The task contract every env shares (gaca_envs.task_env): splits, task_ids(split), episode bookkeeping."""

from __future__ import annotations

import gymnasium as gym
import pytest

import gaca_envs  # noqa: F401  (registers the ids)
from gaca_envs.task_env import NOTHING_HAPPENS, SplitTaskIds, TaskEnv


def test_every_env_class_is_a_task_env_with_its_splits():
    from gaca_envs.alfworld.env import ALFWorldEnv
    from gaca_envs.criticalchain.env import CriticalChainEnv
    from gaca_envs.webshop.env import WebShopEnv

    assert ALFWorldEnv.splits == ("train", "valid_seen", "valid_unseen")
    assert CriticalChainEnv.splits == ("train", "valid", "test")
    assert WebShopEnv.splits == ("train", "eval", "test", "all")
    assert all(issubclass(cls, TaskEnv) for cls in (ALFWorldEnv, CriticalChainEnv, WebShopEnv))


def test_nothing_happens_is_defined_once():
    from gaca_envs.alfworld import baseline, env
    from gaca_envs.alfworld.engines.native import engine
    from gaca_envs.criticalchain import env as chain_env

    assert NOTHING_HAPPENS == "Nothing happens."
    assert env.NOTHING_HAPPENS is engine.NOTHING_HAPPENS is chain_env.NOTHING_HAPPENS is baseline.NOTHING


def test_criticalchain_task_ids_per_split_reset_to_their_task():
    env = gym.make("GACA-CriticalChain-v0", num_tasks=3, split="valid")
    assert env.unwrapped.task_ids() == ["valid-0", "valid-1", "valid-2"]
    for split in env.unwrapped.splits:
        for task_id in env.unwrapped.task_ids(split):
            assert env.reset(options={"task_id": task_id})[1]["task_id"] == task_id
    with pytest.raises(ValueError, match="split must be one of train, valid, test, got 'dev'"):
        env.unwrapped.task_ids("dev")


def test_split_task_ids_is_a_list_and_callable_for_its_own_split():
    ids = SplitTaskIds(["a/1", "a/2"], "valid_seen", ("train", "valid_seen", "valid_unseen"))
    assert ids == ["a/1", "a/2"] and ids[0] == "a/1"
    assert ids() == ids("valid_seen") == ["a/1", "a/2"]
    with pytest.raises(ValueError, match="this env was built for split 'valid_seen' and plays only its tasks, not "):
        ids("train")
    with pytest.raises(ValueError, match="split must be one of train, valid_seen, valid_unseen, got 'dev'"):
        ids("dev")


def test_step_counter_done_guard_and_truncation():
    class Counting(TaskEnv):
        splits, split, max_steps, action_hint = ("train",), "train", 2, " (a word)"

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            self._start_episode()
            return "start", {}

        def step(self, action):
            self._begin_step(action)
            terminated = action == "win"
            return NOTHING_HAPPENS, 0.0, terminated, self._end_step(terminated), {}

    env = Counting()
    with pytest.raises(RuntimeError, match=r"step\(\) called before reset\(\) or after the episode ended"):
        env.step("x")
    env.reset()
    with pytest.raises(TypeError, match="action must be a str \\(a word\\), got int: 3"):
        env.step(3)
    assert env.step("x")[2:4] == (False, False) and env.step("x")[2:4] == (False, True)
    with pytest.raises(RuntimeError, match="after the episode ended"):
        env.step("x")
    env.reset()
    assert env.step("x")[2:4] == (False, False) and env.step("win")[2:4] == (True, False)  # won at the limit
    with pytest.raises(NotImplementedError, match="Counting must implement task_ids\\(split\\)"):
        env.task_ids()
