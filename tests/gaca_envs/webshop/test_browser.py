"""GACA-WebShop-Browser-v0 in real headless Chromium (Debian chromium + chromium-driver)."""

from __future__ import annotations

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import gaca_envs  # noqa: F401 - registers the ids
from gaca_envs.webshop.browser import WebShopBrowserEnv
from gaca_envs.webshop.env import WebShopEnv
from webshop_server.expert import oracle_actions

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def browser_env(shop):
    from webshop_server import create_app

    env = WebShopBrowserEnv(app=create_app({"title_nouns": "fallback"}, shop=shop), split="all")
    yield env
    env.close()


def test_search_item_option_buy_reaches_the_score_page(browser_env, app, shop):
    text_env = WebShopEnv(app=app, split="all")
    obs, info = browser_env.reset(options={"task_id": 2})
    text_obs, _ = text_env.reset(options={"task_id": 2})
    assert obs == text_obs and info["task"] == shop.goals[2]["instruction_text"]
    actions = oracle_actions(shop, 2)
    assert len(actions) >= 4  # search, product, at least one option, buy
    for action in actions:
        obs, reward, terminated, truncated, info = browser_env.step(action)
        text_obs, *_, text_info = text_env.step(action)
        assert info["action_valid"], action
        assert obs == text_obs  # the browser shows the same page as the text env
        assert info["anchor_key"] == text_info["anchor_key"]
        if action[6:-1] in shop.goals[2]["goal_options"]:  # an option: Chromium shows it chosen
            checked = browser_env._driver.find_elements("css selector", "input:checked")
            assert action[6:-1] in [e.get_attribute("value") for e in checked]
    assert terminated and info["page"] == "done" and info["score"] == 1.0 and reward == 10.0
    assert "Your score (min 0.0, max 1.0)" in browser_env._driver.find_element("id", "reward").text


def test_invalid_actions_in_the_browser(browser_env):
    obs, _ = browser_env.reset(options={"task_id": 0})
    for action in ("click[buy now]", "search[<script>x</script>]", "search[café]", ""):
        obs2, _, _, _, info = browser_env.step(action)
        assert obs2 == obs and info["action_valid"] is False


def test_browser_env_passes_the_checker(shop_cache):
    env = gym.make("GACA-WebShop-Browser-v0", shop_config={"cache_dir": shop_cache, "title_nouns": "fallback"})
    try:
        check_env(env.unwrapped, skip_render_check=True)
    finally:
        env.close()


def test_a_text_env_snapshot_restores_in_the_browser(browser_env, app, shop):
    # The browser env's own server is another app over the same shop: the snapshot is a value both read.
    text_env = WebShopEnv(app=app, split="all")
    text_env.reset(options={"task_id": 5})
    plan = oracle_actions(shop, 5)
    for action in plan[:3]:  # search, product, an option
        obs, *_, info = text_env.step(action)
    snapshot = text_env.save_state()
    browser_obs, browser_info = browser_env.reset(options={"snapshot": snapshot})
    assert browser_obs == obs and browser_info["anchor_key"] == info["anchor_key"]
    assert browser_info["url"] == info["url"]
    for action in plan[3:]:
        assert browser_env.step(action)[:4] == text_env.step(action)[:4]


def test_browser_v1_plays_the_hard_shop_as_the_text_env_does(tmp_path):
    from webshop_server import Shop, ShopConfig

    config = {"n_products": 300, "cache_dir": str(tmp_path), "title_nouns": "fallback"}
    shop = Shop.from_config(ShopConfig(catalog="embedded-v1", **config))
    env = gym.make("GACA-WebShop-Browser-v1", shop_config=config, split="all")
    try:
        obs, info = env.reset(options={"task_id": 4})
        assert info["task"] == shop.goals[4]["instruction_text"]
        for action in oracle_actions(shop, 4):
            obs, reward, terminated, truncated, info = env.step(action)
            assert info["action_valid"], action
        assert terminated and info["score"] == 1.0 and reward == 10.0
    finally:
        env.close()
