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


def test_expert_finds_a_target_that_its_title_search_does_not_list(tmp_path):
    """60 products with one title: the title search lists 50, so some targets need the longer queries."""
    from webshop_server.catalog import Catalog, generate_product
    from webshop_server.goals import build_goals
    from webshop_server.reward import TitleNouns
    from webshop_server.search import SearchIndex
    from webshop_server.shop import Shop

    products = []
    for i in range(60):
        p = generate_product(i % 3, seed=0)  # three products, twenty copies each, under one title
        p = {**p, "asin": f"B{i:09d}", "Title": "Acme Thing", "name": "Acme Thing"}
        products.append(p)
    catalog = Catalog(products, source="test:same-title")
    shop = Shop(catalog, SearchIndex.build(catalog.documents()), build_goals(catalog), TitleNouns(False))
    listed = {p["asin"] for p in shop.search(("acme", "thing"))}
    unlisted = [n for n, g in enumerate(shop.goals) if g["asin"] not in listed]
    assert unlisted, "the title search lists every product: the test builds no crowded title"
    for n in unlisted:
        actions = oracle_actions(shop, n)
        assert actions[0] != "search[acme thing]"
        query = tuple(actions[0][len("search[") : -1].split())
        asin = next(a[6:-1] for a in actions if a.startswith("click[b"))
        hits = [p["asin"].lower() for p in shop.search(query)]
        assert asin in hits and hits.index(asin) // 10 == actions.count("click[next >]")
        chosen = {name: v for v in shop.goals[n]["goal_options"] for name, vs in
                  shop.catalog.by_asin[asin.upper()]["options"].items() if v in vs}  # fmt: skip
        assert shop.score(shop.goals[n], asin.upper(), chosen)[0] == 1.0


def test_expert_plans_every_test_goal_at_100k_products_and_its_plans_win(tmp_path):
    """At 100,000 products titles crowd each other out of the top 50: every reset still has a plan."""
    import gymnasium as gym

    import gaca_envs  # noqa: F401
    from webshop_server import Shop, ShopConfig, create_app

    shop = Shop.from_config(ShopConfig(n_products=100_000, cache_dir=str(tmp_path), title_nouns="fallback"))
    crowded = 0
    for n in range(500):
        goal = shop.goals[n]
        title = shop.catalog.by_asin[goal["asin"]]["Title"].lower()
        crowded += goal["asin"] not in {p["asin"] for p in shop.search(tuple(title.split()))}
        assert oracle_actions(shop, n)[-1] == "click[buy now]"
    assert crowded > 0  # the title search misses some targets: the longer queries are exercised
    env = gym.make("GACA-WebShop-v0", app=create_app({"title_nouns": "fallback"}, shop=shop), split="test",
                   expert=True)  # fmt: skip
    for n in range(0, 500, 25):
        obs, info = env.reset(options={"task_id": n})
        done = False
        while not done:
            obs, reward, terminated, truncated, info = env.step(info["expert_action"])
            done = terminated or truncated
        assert info["won"], n
