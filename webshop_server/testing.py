"""Helpers for tests and sanity checks: a small shop, and an oracle that solves a goal."""

from __future__ import annotations

from webshop_server import Shop, ShopConfig


def build_test_shop(cache_dir: str, n_products: int = 1000) -> Shop:
    """The embedded 1k shop with its index cached under ``cache_dir``, title nouns by the fallback."""
    return Shop.from_config(ShopConfig(cache_dir=cache_dir, n_products=n_products, title_nouns="fallback"))


def oracle_actions(shop: Shop, goal_index: int) -> list[str]:
    """Actions that buy the goal's target product with the goal's options (it is on results page 1)."""
    goal = shop.goals[goal_index]
    product = shop.catalog.by_asin[goal["asin"]]
    hits = shop.search(tuple(product["Title"].lower().split()))
    position = [p["asin"] for p in hits].index(goal["asin"])
    actions = [f"search[{product['Title'].lower()}]"]
    actions += ["click[next >]"] * (position // 10)
    actions.append(f"click[{goal['asin'].lower()}]")
    options = goal["goal_options"]
    actions += [f"click[{v}]" for v in (options.values() if isinstance(options, dict) else options)]
    actions.append("click[buy now]")
    return actions
