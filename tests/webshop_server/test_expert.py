"""The WebShop expert (its purchases are scored end to end in tests/gaca_envs/webshop/test_env.py)."""

from __future__ import annotations

import pytest

from webshop_server.expert import oracle_actions


def test_expert_searches_the_title_pages_to_the_target_and_buys_with_the_goals_options(shop):
    for n in range(0, len(shop.goals), 97):
        goal = shop.goals[n]
        product = shop.catalog.by_asin[goal["asin"]]
        actions = oracle_actions(shop, n)
        assert actions[0] == f"search[{product['Title'].lower()}]" and actions[-1] == "click[buy now]"
        pages = actions.count("click[next >]")
        hits = [p["asin"] for p in shop.search(tuple(product["Title"].lower().split()))]
        assert hits.index(goal["asin"]) // 10 == pages
        assert actions[1 + pages] == f"click[{goal['asin'].lower()}]"
        assert actions[2 + pages : -1] == [f"click[{v}]" for v in goal["goal_options"]]


def test_unknown_goal_is_an_index_error(shop):
    with pytest.raises(IndexError):
        oracle_actions(shop, len(shop.goals))
