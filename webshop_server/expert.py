"""WebShop's expert: the actions that solve a goal, read from the shop's own catalog and index."""

from __future__ import annotations

from webshop_server.shop import Shop

__all__ = ["oracle_actions"]


def oracle_actions(shop: Shop, goal_index: int) -> list[str]:
    """Actions that buy the goal's target product with the goal's options.

    The expert searches the target's title, pages forward to the result page that lists it,
    clicks it, clicks each of the goal's options and buys: a purchase that scores 1.0.

    Args:
        shop: the shop that serves the goal.
        goal_index: index into ``shop.goals``.

    Returns:
        The actions, in the text env's syntax (``search[...]``, ``click[...]``).

    Raises:
        IndexError: if ``goal_index`` is not a goal of the shop.
        ValueError: if the search does not return the target (it does for every goal of the
            embedded catalog: a title finds its own product).
    """
    goal = shop.goals[goal_index]
    product = shop.catalog.by_asin[goal["asin"]]
    hits = shop.search(tuple(product["Title"].lower().split()))
    position = [p["asin"] for p in hits].index(goal["asin"])
    actions = [f"search[{product['Title'].lower()}]"]
    actions += ["click[next >]"] * (position // 10)
    actions.append(f"click[{goal['asin'].lower()}]")
    actions += [f"click[{v}]" for v in goal["goal_options"]]
    actions.append("click[buy now]")
    return actions
