"""GACA-WebShop-v0 in-process: contract 1, observations, actions, anchors, vector env."""

from __future__ import annotations

import re

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import gaca_envs  # noqa: F401 - registers the ids
from gaca_envs.anchors import INFO_KEYS
from gaca_envs.webshop.env import WebShopEnv
from webshop_server.expert import oracle_actions

ENDED = r"step\(\) called before reset\(\) or after the episode ended; call env\.reset\(\) first"

ASIN_CLICK = re.compile(r"click\[b[0-9a-z]{9}\]")


@pytest.fixture
def env(app):
    env = WebShopEnv(app=app, split="all")
    yield env
    env.close()


def test_env_checker_passes(shop_cache):
    env = gym.make("GACA-WebShop-v0", shop_config={"cache_dir": shop_cache, "title_nouns": "fallback"})
    check_env(env.unwrapped, skip_render_check=True)
    env.close()


def test_oracle_solves_goals_with_reward_on_success(env, shop):
    for n in (0, 7, 512, 1600):
        obs, info = env.reset(options={"task_id": n})
        assert info["task"] == shop.goals[n]["instruction_text"] and info["task_id"] == f"fixed_{n}"
        assert set(INFO_KEYS) <= set(info)
        for action in oracle_actions(shop, n):
            assert action in info["admissible_actions"] or action.startswith("search[")
            obs, reward, terminated, truncated, info = env.step(action)
            assert info["action_valid"], action
        assert terminated and not truncated
        assert reward == 10.0 and info["won"] and info["score"] == 1.0
        assert info["score_breakdown"]["r_type"] == 1.0
        assert "Your score (min 0.0, max 1.0) [SEP] 1.0" in obs


def test_wrong_purchase_scores_below_one_with_zero_reward(env, shop):
    env.reset(options={"task_id": 3})
    env.step("search[ergonomic office chair]")
    _, _, _, _, info = env.step("click[buy now]")
    assert not info["action_valid"]  # no Buy Now on a results page
    first = next(a for a in info["admissible_actions"] if ASIN_CLICK.fullmatch(a))
    env.step(first)
    _, reward, terminated, _, info = env.step("click[buy now]")
    assert terminated and 0.0 <= info["score"] < 1.0 and reward == 0.0 and not info["won"]


def test_text_observation_matches_the_original_layout(env):
    obs, info = env.reset(options={"task_id": 0})
    assert obs == f"WebShop [SEP] Instruction: [SEP] {info['task']} [SEP] Search"
    assert info["admissible_actions"] == ["search[<query>]"]
    obs, *_, info = env.step("search[black shirt]")
    assert obs.startswith(f"Instruction: [SEP] {info['task']} [SEP] Back to Search [SEP] Page 1 (Total results: 50) ")
    assert info["admissible_actions"][:2] == ["click[back to search]", "click[next >]"]
    assert len([a for a in info["admissible_actions"] if ASIN_CLICK.fullmatch(a)]) == 10


def test_text_rich_keeps_the_original_spacing(app, shop):
    env = WebShopEnv(app=app, observation_mode="text_rich")
    obs, info = env.reset(options={"task_id": 0})
    # The original's start page says "Instruction: " (a space before <br>), the other pages "Instruction:".
    assert obs == f"WebShop\nInstruction: \n{info['task']}\n[button] Search [button_]\n"
    obs, *_ = env.step("search[black shirt]")
    assert obs.startswith(f"Instruction:\n{info['task']}\n[button] Back to Search [button_]\n")
    env.step("click[back to search]")
    actions = oracle_actions(shop, 0)
    for action in actions[: actions.index(f"click[{shop.goals[0]['asin'].lower()}]") + 1]:  # to the product
        env.step(action)
    obs, *_ = env.step("click[features]")
    product = shop.catalog.by_asin[shop.goals[0]["asin"]]
    for bullet in product["BulletPoints"]:  # the original writes a space before each bullet point
        assert f"\n {bullet}\n" in obs


def test_observation_modes(app, shop):
    rich = WebShopEnv(app=app, observation_mode="text_rich")
    html = WebShopEnv(app=app, observation_mode="html")
    for e in (rich, html):
        e.reset(options={"task_id": 0})
    actions = oracle_actions(shop, 0)[:-1]
    for action in actions:
        obs_rich, *_ = rich.step(action)
        obs_html, *_ = html.step(action)
    chosen = shop.goals[0]["goal_options"]
    assert f"[clicked button] {chosen[-1]} [clicked button_]" in obs_rich
    assert f"You have clicked {chosen[-1]}." in obs_rich and "[button] Buy Now [button_]" in obs_rich
    assert obs_html.startswith("<!DOCTYPE html>") and 'class="btn btn-lg purchase"' in obs_html


def test_same_state_by_different_paths_shares_anchor_key(env, shop):
    goal = shop.goals[0]
    values = goal["goal_options"]
    assert len(values) == 2
    env.reset(options={"task_id": 0})
    path = oracle_actions(shop, 0)
    for action in path[:2]:
        _, _, _, _, item_info = env.step(action)
    item_key = item_info["anchor_key"]
    # Options in one order, via the Description sub-page and back ...
    env.step(f"click[{values[0]}]")
    env.step("click[description]")
    _, _, _, _, back = env.step("click[< prev]")
    _, _, _, _, first = env.step(f"click[{values[1]}]")
    # ... and in the other order, in a second episode of the same task.
    env.reset(options={"task_id": 0})
    for action in path[:2]:
        env.step(action)
    _, _, _, _, one = env.step(f"click[{values[1]}]")
    _, _, _, _, second = env.step(f"click[{values[0]}]")
    assert first["anchor_key"] == second["anchor_key"]
    assert back["anchor_key"] != item_key and one["anchor_key"] not in (item_key, first["anchor_key"])
    # Going back from a product to the results page returns to the results page's key.
    env.reset(options={"task_id": 0})
    _, _, _, _, results = env.step(path[0])
    env.step(path[1])
    _, _, _, _, again = env.step("click[< prev]")
    assert again["anchor_key"] == results["anchor_key"] and again["anchor_text"] == results["anchor_text"]


INVALID_ACTIONS = [
    "",
    "search",
    "search[]",
    "click[]",
    "click[nothing like this]",
    "buy[now]",
    "search[" + "a" * 1_000_000 + "]",
    "x" * 1_000_000,
    "search[<script>alert(1)</script>]",
    "search[<img src=x onerror=alert(1)>]",
    "search[café crème]",
    "search[鞋子]",
    "click[搜索]",
    "click[search]",
]


@pytest.mark.parametrize("action", INVALID_ACTIONS, ids=lambda a: repr(a[:30]))
def test_bad_actions_are_invalid_steps(env, action):
    obs, info = env.reset(options={"task_id": 1})
    obs2, reward, terminated, truncated, info2 = env.step(action)
    assert obs2 == obs and reward == 0.0 and not terminated and not truncated
    assert info2["action_valid"] is False and info2["anchor_key"] == info["anchor_key"]


def test_contract_errors(env):
    with pytest.raises(RuntimeError, match=ENDED):
        env.step("search[x]")
    env.reset(options={"task_id": 0})
    with pytest.raises(
        TypeError, match="action must be a str such as 'search\\[red shoes\\]' or 'click\\[buy now\\]', got int: 3"
    ):
        env.step(3)
    with pytest.raises(ValueError, match="task_id must be a goal index"):
        env.reset(options={"task_id": 10**8})
    with pytest.raises(ValueError, match="observation_mode must be one of"):
        WebShopEnv(app=env.backend.app, observation_mode="pixels")


def test_truncates_after_max_steps(env):
    env.reset(options={"task_id": 0})
    for i in range(15):
        _, _, terminated, truncated, _ = env.step("click[nothing]")
        assert not terminated and truncated == (i == 14)
    with pytest.raises(RuntimeError):
        env.step("click[nothing]")


def test_seeded_resets_are_deterministic_side_by_side(app):
    a, b = WebShopEnv(app=app), WebShopEnv(app=app)
    obs_a, info_a = a.reset(seed=123)
    obs_b, info_b = b.reset(seed=123)
    assert obs_a == obs_b and info_a["task_id"] == info_b["task_id"]
    assert int(info_a["task_id"].split("_")[1]) >= 1500  # the train split
    for action in ("search[wireless earbuds]", "click[next >]", "click[nope]"):
        step_a, step_b = a.step(action), b.step(action)
        assert step_a[0] == step_b[0] and step_a[4]["anchor_key"] == step_b[4]["anchor_key"]


@pytest.mark.slow
def test_async_vector_env_of_8(shop_cache):
    kwargs = {"shop_config": {"cache_dir": shop_cache, "title_nouns": "fallback"}}
    envs = gym.make_vec("GACA-WebShop-v0", num_envs=8, vectorization_mode="async",
                        vector_kwargs={"shared_memory": False}, **kwargs)  # fmt: skip
    try:
        obs, infos = envs.reset(seed=0, options={"task_id": 5})
        assert len(obs) == 8 and len(set(obs)) == 1
        obs, rewards, terminated, truncated, infos = envs.step(["search[black shirt]"] * 4 + ["click[x]"] * 4)
        assert list(infos["action_valid"]) == [True] * 4 + [False] * 4
        assert all("Page 1 (Total results: 50)" in o for o in obs[:4])
        assert len(set(infos["anchor_key"][:4])) == 1 and infos["anchor_key"][0] != infos["anchor_key"][4]
    finally:
        envs.close()


def test_task_ids_of_every_split_from_the_shop(env):
    ranges = {split: env.unwrapped._split_ranges[split] for split in env.unwrapped.splits}
    for split, goals in ranges.items():
        assert env.unwrapped.task_ids(split) == [f"fixed_{g}" for g in goals]
    assert env.unwrapped.task_ids() == [f"fixed_{g}" for g in env.unwrapped.split_range]
    other = next(ids for split in ("eval", "test", "train") if (ids := env.unwrapped.task_ids(split)))
    assert env.reset(options={"task_id": other[-1]})[1]["task_id"] == other[-1]
    with pytest.raises(ValueError, match="split must be one of train, eval, test, all, got 'dev'"):
        env.unwrapped.task_ids("dev")


def test_expert_action_follows_the_oracle_and_wins(app, shop):
    env = WebShopEnv(app=app, split="all", expert=True)
    for n in range(0, len(shop.goals), max(1, len(shop.goals) // 12)):
        _, info = env.reset(options={"task_id": n})
        plan = oracle_actions(shop, n)
        played = []
        terminated = False
        while not terminated:
            played.append(info["expert_action"])
            _, reward, terminated, truncated, info = env.step(played[-1])
            assert not truncated
        assert played == plan and info["won"] and reward == 10.0
        assert "expert_action" not in info  # the episode is over


def test_expert_recovers_after_leaving_its_plan(app, shop):
    env = WebShopEnv(app=app, split="all", expert=True, max_env_steps=30)
    _, info = env.reset(options={"task_id": 3})
    plan = oracle_actions(shop, 3)
    _, _, _, _, info = env.step("search[zzz qqq]")  # off the plan: another search
    assert info["expert_action"] == "click[back to search]"
    _, _, _, _, info = env.step("click[nothing here]")  # a rejected action changes nothing
    assert not info["action_valid"] and info["expert_action"] == "click[back to search]"
    _, _, _, _, info = env.step(info["expert_action"])
    assert info["expert_action"] == plan[0]  # back on the search page: the plan starts again
    terminated = False
    while not terminated:
        _, reward, terminated, _, info = env.step(info["expert_action"])
    assert info["won"] and reward == 10.0


def test_expert_needs_the_in_process_shop_and_is_off_by_default(app):
    with pytest.raises(ValueError, match="expert=True reads each goal's solution from the shop itself"):
        WebShopEnv(server_url="http://127.0.0.1:9", expert=True)
    _, info = WebShopEnv(app=app).reset(options={"task_id": 0})
    assert "expert_action" not in info
