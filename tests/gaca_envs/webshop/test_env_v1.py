"""GACA-WebShop-v1: the text env on the hard embedded shop (the Gym API, snapshots, anchors, bad input)."""

from __future__ import annotations

import pickle

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import gaca_envs  # noqa: F401 - registers the ids
from webshop_server import create_app
from webshop_server.expert import oracle_actions


@pytest.fixture(scope="module")
def hard_config(tmp_path_factory):
    return {"n_products": 600, "cache_dir": str(tmp_path_factory.mktemp("v1-env")), "title_nouns": "fallback"}


@pytest.fixture(scope="module")
def hard_env(hard_config):
    env = gym.make("GACA-WebShop-v1", shop_config=hard_config, split="all", expert=True)
    yield env
    env.close()


def _shop(env):
    return env.unwrapped.backend.app.extensions["webshop"]


def test_v1_passes_the_checker_and_serves_the_hard_catalog(hard_env, hard_config):
    check_env(gym.make("GACA-WebShop-v1", shop_config=hard_config, split="all").unwrapped, skip_render_check=True)
    assert _shop(hard_env).catalog.source == "embedded-v1:n=600,seed=0"
    assert gym.spec("GACA-WebShop-v1").entry_point == "gaca_envs.webshop.env:WebShopV1Env"


def test_the_expert_wins_every_goal_it_is_asked(hard_env):
    for n in range(0, len(_shop(hard_env).goals), 97):
        obs, info = hard_env.reset(options={"task_id": n})
        assert info["expert_action"] == oracle_actions(_shop(hard_env), n)[0]
        done = False
        while not done:
            obs, reward, terminated, truncated, info = hard_env.step(info["expert_action"])
            done = terminated or truncated
        assert info["won"] and info["score"] == 1.0 and reward == 10.0, n


def test_a_v1_snapshot_restores_in_a_fresh_env_and_a_v0_one_is_refused(hard_env, hard_config):
    obs, info = hard_env.reset(options={"task_id": 5})
    for action in oracle_actions(_shop(hard_env), 5)[:2]:
        obs, *_, info = hard_env.step(action)
    snap = pickle.loads(pickle.dumps(hard_env.unwrapped.save_state()))
    fresh = gym.make("GACA-WebShop-v1", shop_config=hard_config, split="all")
    restored, rinfo = fresh.reset(options={"snapshot": snap})
    assert restored == obs and rinfo["anchor_key"] == info["anchor_key"] and rinfo["page"] == "item_page"
    easy = gym.make("GACA-WebShop-v0", shop_config={"title_nouns": "fallback"})
    easy.reset(options={"task_id": 5})
    easy.step("search[shoes]")
    with pytest.raises(ValueError, match="saved on another shop"):
        fresh.reset(options={"snapshot": easy.unwrapped.save_state()})


def test_bad_input_changes_nothing_and_anchors_follow_the_page_not_the_path(hard_env):
    shop = _shop(hard_env)
    n = next(i for i, g in enumerate(shop.goals) if len(g["goal_options"]) == 2)
    obs, info = hard_env.reset(options={"task_id": n})
    for action in ("click[buy now]", "search[<b>x</b>]", "search[caf\u00e9]", "", "x" * 5000, "search[]"):
        obs2, _, _, _, info2 = hard_env.step(action)
        assert obs2 == obs and info2["action_valid"] is False
    plan = oracle_actions(shop, n)
    keys = []
    for options in (plan[-3:-1], plan[-3:-1][::-1]):  # the two options in either order
        hard_env.reset(options={"task_id": n})
        for action in [*plan[:-3], *options]:
            *_, info = hard_env.step(action)
        keys.append(info["anchor_key"])
    assert keys[0] == keys[1]


def test_a_shop_config_object_is_used_as_given_and_the_server_shares_one_shop(hard_config):
    from gaca_envs.webshop.env import shop_config_for
    from webshop_server import ShopConfig

    given = ShopConfig(n_products=50, title_nouns="fallback", cache_dir=hard_config["cache_dir"])
    assert shop_config_for("GACA-WebShop-v1", given) is given  # the easy catalog, as asked
    assert shop_config_for("GACA-WebShop-v1", {"seed": 2}) == {"catalog": "embedded-v1", "seed": 2}
    assert shop_config_for("GACA-WebShop-v0", None) == {}
    app = create_app({**hard_config, "catalog": "embedded-v1"})
    env = gym.make("GACA-WebShop-v1", app=app, split="all")
    assert _shop(env) is app.extensions["webshop"]


def test_an_env_server_of_v1_loads_the_hard_shop_once_for_its_sessions(hard_config):
    from gaca_server.app import SessionKwargs

    kwargs = SessionKwargs("GACA-WebShop-v1", {"shop_config": hard_config, "split": "all"})
    first, second = kwargs(), kwargs()
    shop = first["app"].extensions["webshop"]
    assert shop.catalog.source == "embedded-v1:n=600,seed=0" and second["app"].extensions["webshop"] is shop
    assert first["app"] is not second["app"] and "shop_config" not in first


def test_option_groups_read_the_item_page_as_the_product_offers_them(hard_env):
    from gaca_envs.webshop.baselines import option_groups

    shop = _shop(hard_env)
    n = next(i for i, g in enumerate(shop.goals) if len(g["goal_options"]) == 2)
    obs, info = hard_env.reset(options={"task_id": n})
    for action in oracle_actions(shop, n)[:-3]:
        obs, *_, info = hard_env.step(action)
    clicks = [a[6:-1] for a in info["admissible_actions"] if a.startswith("click[")]
    assert option_groups(obs, clicks) == shop.catalog.by_asin[shop.goals[n]["asin"]]["options"]


def test_the_reader_knows_the_shops_words_for_features_and_products(hard_env):
    from gaca_envs.webshop.baselines import ReaderPolicy, asked_features

    shop, reader = _shop(hard_env), ReaderPolicy()
    goals = shop.goals[:200]
    found = sum(asked_features(g["instruction_text"], reader.forms) == set(g["attributes"]) for g in goals)
    assert found >= 170, found  # some wordings are ambiguous ("fast drying" is also "quick drying" reworded)
    nouns = sum(
        asked_features(g["instruction_text"], reader.nouns) >= {shop.catalog.by_asin[g["asin"]]["noun"]} for g in goals
    )
    assert nouns >= 190, nouns


def test_the_reader_reads_before_it_buys_and_what_it_passes_wins(hard_config):
    import random

    from gaca_envs.webshop.baselines import ReaderPolicy

    env = gym.make("GACA-WebShop-v1", shop_config=hard_config, split="all")  # no expert: only the pages
    passed = won_passed = read_more = 0
    for n in range(0, 300, 10):
        reader = ReaderPolicy()
        obs, info = env.reset(options={"task_id": n})
        reader.reset(info["task"], random.Random(n))
        done, actions = False, []
        while not done:
            actions.append(reader.act(obs, info))
            obs, _, terminated, truncated, info = env.step(actions[-1])
            done = terminated or truncated
        assert terminated and actions[-1] == "click[buy now]" and len(actions) <= 15, actions
        assert reader.target in reader.reads and set(reader.opened) == set(reader.reads)
        read_more += len(reader.reads) > 1
        if reader.reads[reader.target] == (True, 0):
            passed += 1
            won_passed += info["won"]
    assert read_more > 0 and passed > 5 and won_passed >= 0.8 * passed, (read_more, passed, won_passed)


def test_reward_score_pays_the_graded_score_and_success_only_a_win(hard_config):
    # The same purchases under both modes: WebShop's rule-with-options baseline on the first goals,
    # until it has bought a product that scores in (0, 1) and one that scores 1.0.
    import random

    from gaca_envs.webshop.baselines import RulePolicy

    envs = {mode: gym.make("GACA-WebShop-v1", shop_config=hard_config, split="all", reward=mode)
            for mode in ("success", "score")}  # fmt: skip
    seen = set()
    for goal in range(60):
        ends = {}
        for mode, env in envs.items():
            policy = RulePolicy(options=True)
            obs, info = env.reset(options={"task_id": goal})
            policy.reset(info["task"], random.Random(goal))
            rewards, done = [], False
            while not done:
                obs, reward, terminated, truncated, info = env.step(policy.act(obs, info))
                rewards.append(reward)
                done = terminated or truncated
            ends[mode] = (rewards, info["score"], info["won"])
        (success, score, won), (paid, score_again, _) = ends["success"], ends["score"]
        assert score == score_again and sum(success[:-1]) == sum(paid[:-1]) == 0.0
        assert success[-1] == (10.0 if won else 0.0)
        assert paid[-1] == pytest.approx(10.0 * score)
        seen.add("win" if won else "partial" if 0 < score < 1 else "zero")
        if {"win", "partial"} <= seen:
            break
    assert {"win", "partial"} <= seen
    with pytest.raises(ValueError, match=r"reward must be one of \('success', 'score'\), got 'money'"):
        gym.make("GACA-WebShop-v1", shop_config=hard_config, reward="money")
