"""Snapshot fuzzing in-process: 240 tampered, truncated, inconsistent and foreign snapshots per env, none taken.

Each env restores mutations of good snapshots (tests/gaca_envs/snapshot_fuzz.py: field deletions, type
swaps, truncated and extended lists and strings, out-of-range numbers, flipped ``done``, ``steps`` past
the cap, edited observations, another task's id, other envs' snapshots and states, other versions)
while it plays a live episode. Every one is refused with a clear error that leaves the env needing a
reset, or restores a state the env saves back exactly (a consistent snapshot, e.g. another valid
generator state); none is taken silently. The good snapshots still restore exactly afterwards.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

import gaca_envs  # noqa: F401  (registers the ids)
from gaca_envs.task_env import EnvSnapshot
from tests.gaca_envs.snapshot_fuzz import Pool, Tally, canonical, clear_refusal, mutations, needs_reset, saves_back
from tests.webshop_server.helpers import build_test_shop

MUTATIONS_PER_ENV = 240
QUERIES = ("bar stool", "red shoes", "hair oil", "x")


@pytest.fixture(scope="module")
def alfworld_root(tmp_path_factory) -> Path:
    from gaca_envs.alfworld.generate import generate

    root = tmp_path_factory.mktemp("alfworld_fuzz")
    generate(root, 4, seed=6, split="train")
    return root


@pytest.fixture(scope="module")
def shop_app(tmp_path_factory):
    from webshop_server import create_app

    return create_app({"title_nouns": "fallback"}, shop=build_test_shop(str(tmp_path_factory.mktemp("index"))))


def _action(info: dict[str, Any], rng: random.Random) -> str:
    if rng.random() < 0.15 or not info["admissible_actions"]:
        return rng.choice(("do a dance", "click[nothing]"))
    action = rng.choice(info["admissible_actions"])
    return f"search[{rng.choice(QUERIES)}]" if action == "search[<query>]" else action


def good_snapshots(env: gym.Env, task_ids: list[str], seed: int) -> list[dict[str, Any]]:
    """Snapshots of an env with ``expert=True``: at reset, mid-episode, won (the expert's way) and truncated."""
    rng = random.Random(seed)
    out = []
    for task_id in task_ids[:3]:
        _, info = env.reset(options={"task_id": task_id})
        out.append(env.unwrapped.save_state().to_dict())
        for _ in range(rng.randrange(2, 8)):
            _, _, terminated, truncated, info = env.step(_action(info, rng))
            if terminated or truncated:
                break
        out.append(env.unwrapped.save_state().to_dict())
    _, info = env.reset(options={"task_id": task_ids[0]})
    while not info.get("won"):
        _, _, terminated, truncated, info = env.step(info["expert_action"])
        if terminated or truncated:
            break
    assert info["won"], "the expert wins the first task"
    out.append(env.unwrapped.save_state().to_dict())
    env.reset(options={"task_id": task_ids[1]})
    truncated = False
    while not truncated:
        _, _, _, truncated, _ = env.step("do a dance")
    out.append(env.unwrapped.save_state().to_dict())
    return out


def restore_in_process(
    env: gym.Env, kind: str, mutated: dict[str, Any], tally: Tally, forbidden: tuple[str, ...], live: str
) -> None:
    """Restores one mutation into ``env`` (playing ``live`` first) and counts the outcome."""
    env.reset(options={"task_id": live})
    try:
        snapshot: Any = EnvSnapshot.from_dict(mutated)
    except (ValueError, TypeError) as e:  # refused as JSON; the env must refuse the raw dict too
        if (problem := clear_refusal(e, forbidden)) is not None:
            tally.count("silent", kind, f"from_dict: {problem}")
            return
        snapshot = mutated
    try:
        observation, _ = env.reset(options={"snapshot": snapshot})
    except Exception as e:  # noqa: BLE001 - every refusal is sorted below
        problem = clear_refusal(e, forbidden) or needs_reset(lambda: env.step("look"))
        tally.count("refused" if problem is None else "silent", kind, problem or "")
        return
    saved = env.unwrapped.save_state().to_dict()
    if saves_back(saved, mutated) and observation == mutated["observation"]:
        tally.count("valid", kind)
    else:
        tally.count("silent", kind, f"restored {canonical(saved)[:300]} from {canonical(mutated)[:300]}")


def fuzz(make, task_ids: list[str], foreign: list[dict[str, Any]], forbidden: tuple[str, ...], seed: int) -> Tally:
    """Fuzzes ``make()`` envs with :data:`MUTATIONS_PER_ENV` mutations; good snapshots must still restore exactly."""
    source, target = make(expert=True), make(expert=True)
    bases = good_snapshots(source, task_ids, seed)
    pool = Pool(source.unwrapped.max_env_steps, task_ids, bases, foreign)
    tally = Tally()
    for kind, _, mutated in mutations(bases, pool, MUTATIONS_PER_ENV, seed):
        restore_in_process(target, kind, mutated, tally, forbidden, task_ids[-1])
    for base in bases:
        observation, _ = target.reset(options={"snapshot": EnvSnapshot.from_dict(base)})
        assert observation == base["observation"]
        assert saves_back(target.unwrapped.save_state().to_dict(), base)
    source.close()
    target.close()
    return tally


def _foreign(env_id: str, **kwargs: Any) -> list[dict[str, Any]]:
    env = gym.make(env_id, **kwargs)
    snapshots = []
    for task_id in env.unwrapped.task_ids[:2]:
        _, info = env.reset(options={"task_id": task_id})
        env.step(info["admissible_actions"][0].replace("<query>", "x"))
        snapshots.append(env.unwrapped.save_state().to_dict())
    env.close()
    return snapshots


def _report(name: str, tally: Tally) -> None:
    assert tally.total == MUTATIONS_PER_ENV
    assert not tally.silent, f"{name}: {len(tally.silent)} taken silently, e.g. {tally.silent[:3]}"
    # Most mutations contradict the state; the few valid ones are consistent states (e.g. another generator state).
    assert sum(tally.refused.values()) >= 0.9 * MUTATIONS_PER_ENV, (name, tally.refused, tally.valid)


def test_alfworld_refuses_every_bad_snapshot(alfworld_root, shop_app):
    def make(**kwargs):
        return gym.make("GACA-ALFWorld-v0", data_path=alfworld_root, **kwargs)

    task_ids = list(make().unwrapped.task_ids)
    foreign = _foreign("GACA-CriticalChain-v0") + _foreign("GACA-WebShop-v0", app=shop_app)
    tally = fuzz(make, task_ids, foreign, (str(alfworld_root), "/tmp"), seed=1)
    _report("ALFWorld", tally)
    assert set(tally.refused) >= {"done_flip", "steps_over_cap", "observation", "task_swap", "foreign", "truncate"}


def test_webshop_refuses_every_bad_snapshot(shop_app, alfworld_root):
    def make(**kwargs):
        return gym.make("GACA-WebShop-v0", app=shop_app, observation_mode="text_rich", **kwargs)

    task_ids = list(make().unwrapped.task_ids[:6])
    foreign = _foreign("GACA-CriticalChain-v0") + _foreign("GACA-ALFWorld-v0", data_path=alfworld_root)
    tally = fuzz(make, task_ids, foreign, (str(alfworld_root),), seed=2)
    _report("WebShop", tally)
    assert set(tally.refused) >= {"done_flip", "steps_over_cap", "observation", "task_swap", "foreign", "truncate"}


def test_criticalchain_refuses_every_bad_snapshot(shop_app, alfworld_root):
    def make(**kwargs):
        return gym.make("GACA-CriticalChain-v0", noise=0.2, **kwargs)

    task_ids = [f"train-{i}" for i in range(6)]
    foreign = _foreign("GACA-WebShop-v0", app=shop_app) + _foreign("GACA-ALFWorld-v0", data_path=alfworld_root)
    tally = fuzz(make, task_ids, foreign, (str(alfworld_root),), seed=3)
    _report("CriticalChain", tally)
    assert set(tally.refused) >= {"done_flip", "steps_over_cap", "observation", "task_swap", "foreign", "truncate"}
