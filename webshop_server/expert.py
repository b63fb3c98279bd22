"""WebShop's expert: the actions that solve a goal, read from the shop's own catalog and index."""

from __future__ import annotations

import re

from webshop_server.app import MAX_KEYWORDS
from webshop_server.catalog import product_document
from webshop_server.search import SEARCH_RETURN_N
from webshop_server.shop import Shop

__all__ = ["oracle_actions"]

MAX_QUERY_CHARS = 256  # the text env's longest query
_NOT_IN_QUERY = re.compile(r"[^ -~]|[<>\[\]{}]")  # what the text env refuses in a query


def _query(text: str) -> str:
    """``text`` as a query the text env and the shop accept: printable ASCII, bounded, words as the shop splits."""
    words = _NOT_IN_QUERY.sub(" ", text.lower().replace("/", " ")).split()[:MAX_KEYWORDS]
    query = " ".join(words)
    return query[:MAX_QUERY_CHARS].rsplit(" ", 1)[0] if len(query) > MAX_QUERY_CHARS else query


def _queries(product: dict, goal: dict) -> list[str]:
    """Searches the expert tries, most specific last: the title, then with the options, then the document."""
    title = product["Title"]
    return [_query(q) for q in (title, " ".join([title, *goal["goal_options"]]), product_document(product))]


def oracle_actions(shop: Shop, goal_index: int) -> list[str]:
    """Actions that buy the goal's target product with the goal's options.

    The expert searches the target's title, pages forward to the result page that lists it,
    clicks it, clicks each of the goal's options and buys: a purchase that scores 1.0. In a large
    catalog other products can crowd a title out of the top results (identical titles in a
    product line, or thousands of similar ones); the expert then adds the goal's option values
    to the query, then searches with the product's whole search document. Where the target is
    still not listed it buys the first listed product whose purchase with the goal's options
    scores 1.0.

    Args:
        shop: the shop that serves the goal.
        goal_index: index into ``shop.goals``.

    Returns:
        The actions, in the text env's syntax (``search[...]``, ``click[...]``).

    Raises:
        IndexError: if ``goal_index`` is not a goal of the shop.
        ValueError: if no search lists the target or a product as good (a goal no search can solve).
    """
    goal = shop.goals[goal_index]
    product = shop.catalog.by_asin[goal["asin"]]
    queries = _queries(product, goal)
    choice = None
    for query in queries:
        asins = [p["asin"] for p in shop.search(tuple(query.split()))]
        if goal["asin"] in asins:
            choice = (query, asins.index(goal["asin"]), goal["asin"])
            break
    if choice is None:
        for query in queries:
            for position, hit in enumerate(shop.search(tuple(query.split()))[:SEARCH_RETURN_N]):
                options = _options_offered(hit, goal["goal_options"])
                if options is not None and shop.score(goal, hit["asin"], options)[0] == 1.0:
                    choice = (query, position, hit["asin"])
                    break
            if choice is not None:
                break
    if choice is None:
        raise ValueError(
            f"goal {goal_index}: no search lists its product {goal['asin']} or one as good; the goal cannot be "
            "solved from this shop's search"
        )
    query, position, asin = choice
    actions = [f"search[{query}]"]
    actions += ["click[next >]"] * (position // 10)
    actions.append(f"click[{asin.lower()}]")
    actions += [f"click[{v}]" for v in goal["goal_options"]]
    actions.append("click[buy now]")
    return actions


def _options_offered(product: dict, values: list[str]) -> dict[str, str] | None:
    """The option choice that picks each of ``values`` on ``product``, or None if one is not offered."""
    chosen: dict[str, str] = {}
    for value in values:
        name = next((n for n, vs in product["options"].items() if value in vs), None)
        if name is None:
            return None
        chosen[name] = value
    return chosen
