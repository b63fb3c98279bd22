"""The task contract every env shares (gaca_envs.task_env): splits, task_ids, episode bookkeeping, snapshots."""

from __future__ import annotations

import gymnasium as gym
import pytest

import gaca_envs  # noqa: F401  (registers the ids)
from gaca_envs.task_env import NOTHING_HAPPENS, TaskEnv, TaskIds
from tests.webshop_server.helpers import build_test_shop


@pytest.fixture(scope="module")
def shop_app(tmp_path_factory):
    from webshop_server import create_app

    return create_app({"title_nouns": "fallback"}, shop=build_test_shop(str(tmp_path_factory.mktemp("index"))))


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


def test_task_ids_is_a_list_of_the_own_split_and_callable_for_any():
    bound = TaskIds(["a/1", "a/2"], "valid_seen", ("train", "valid_seen", "valid_unseen"))
    assert bound == ["a/1", "a/2"] and bound[0] == "a/1" and len(bound) == 2
    assert bound() == bound("valid_seen") == ["a/1", "a/2"]
    with pytest.raises(ValueError, match="this env was built for split 'valid_seen' and plays only its tasks, not "):
        bound("train")
    with pytest.raises(ValueError, match="split must be one of train, valid_seen, valid_unseen, got 'dev'"):
        bound("dev")
    free = TaskIds(["t-0"], "train", ("train", "test"), lambda split: [f"{split}-0", f"{split}-1"])
    assert free("test") == ["test-0", "test-1"] and free() == ["t-0"]
    with pytest.raises(ValueError, match="split must be one of train, test, got 'dev'"):
        free("dev")


def test_task_ids_is_the_same_kind_of_attribute_on_every_env(shop_app):
    # README's `env.unwrapped.task_ids[0]` works on each env, and so does the contract's task_ids(split).
    envs = [
        gym.make("GACA-CriticalChain-v0", num_tasks=4, split="valid"),
        gym.make("GACA-WebShop-v0", app=shop_app, split="eval"),
    ]
    for env in envs:
        ids = env.unwrapped.task_ids
        assert isinstance(ids, TaskIds) and isinstance(ids, list) and ids == ids() == ids(env.unwrapped.split)
        assert env.reset(options={"task_id": ids[0]})[1]["task_id"] == ids[0]
        env.close()
    assert envs[0].unwrapped.task_ids[0] == "valid-0" and envs[0].unwrapped.task_ids("test")[-1] == "test-3"
    assert envs[1].unwrapped.task_ids[0] == "fixed_500" and envs[1].unwrapped.task_ids("train")[0] == "fixed_1500"


def test_step_counter_done_guard_and_truncation():
    class Counting(TaskEnv):
        splits, split, max_env_steps, action_hint = ("train",), "train", 2, " (a word)"

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
    with pytest.raises(NotImplementedError, match="Counting must implement _task_ids_of\\(split\\) for task_ids"):
        env.task_ids()
    with pytest.raises(RuntimeError, match="Counting does not support snapshots"):
        env.save_state()


def test_every_env_takes_max_env_steps_and_its_old_spelling_with_a_warning():
    from gaca_envs.criticalchain.env import CriticalChainEnv

    env = gym.make("GACA-CriticalChain-v0", max_env_steps=3)
    assert env.unwrapped.max_env_steps == 3
    with pytest.warns(FutureWarning, match="`max_steps` is deprecated, use `max_env_steps`; it will be removed"):
        assert env.unwrapped.max_steps == 3
    with pytest.warns(FutureWarning, match="`max_steps` is deprecated, use `max_env_steps`"):
        old = CriticalChainEnv(max_steps=3)
    assert old.max_env_steps == 3 and CriticalChainEnv(horizon=4).max_env_steps == 8
    # The old spelling truncates where the new one does.
    old.reset(options={"task_id": "train-0"})
    assert [old.step("wait")[3] for _ in range(3)] == [False, False, True]
    with pytest.raises(
        ValueError, match="max_env_steps=3 and max_steps=4 were both given; .* pass max_env_steps only"
    ):
        CriticalChainEnv(max_env_steps=3, max_steps=4)
    with pytest.raises(ValueError, match="max_env_steps must be >= 1 or None, got 0"):
        CriticalChainEnv(max_env_steps=0)


@pytest.mark.parametrize(
    ("env_id", "message"),
    [
        ("GACA-ALFWorld-v0", "max_env_steps must be an int >= 1, got 0"),
        ("GACA-WebShop-v0", "max_env_steps must be >= 1, got 0"),
        ("GACA-WebShop-Browser-v0", "max_env_steps must be >= 1, got 0"),
        ("GACA-CriticalChain-v0", "max_env_steps must be >= 1 or None, got 0"),
    ],
)
def test_each_env_constructor_resolves_the_old_spelling_and_names_max_env_steps_in_errors(env_id, message):
    # A bad value fails before the env loads anything, so every constructor is checked cheaply.
    with pytest.raises(ValueError, match=message):
        gym.make(env_id, max_env_steps=0)
    with pytest.warns(FutureWarning, match="use `max_env_steps`"), pytest.raises(ValueError, match=message):
        gym.make(env_id, max_steps=0)
    with pytest.raises(ValueError, match="were both given"):
        gym.make(env_id, max_env_steps=5, max_steps=5)
