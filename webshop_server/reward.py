"""WebShop's task score: ``get_reward`` of the original's web_agent_site/engine/goal.py, reimplemented.

``score = r_type * (attribute hits + goal options hit + price ok) / (n_attributes + n_goal_options + 1)``

- ``r_type`` (type match): 1.0 when the purchased product matches the goal's type; 0.5 when
  neither the search query, nor two category-path levels, nor more than 20% of the goal title's
  nouns match; 0.1 when under 10% of the nouns match; 0.0 when none do. A goal title without
  nouns counts as a 0.2 noun overlap.
- attributes: a goal attribute is hit when some product attribute has a token-set ratio above 85
  with it, or when it appears verbatim in the lowercased title, bullet points or description.
- goal options: each goal option (a list of values; a dict is read as its values) is hit once
  when some chosen option's value, both colour-normalised, has a token-set ratio above 85 with
  it. There is no size rule and no credit through product text.
- price: 1 when the product's price is at most the goal's bound.

Every part is at most its count, so the score is in [0, 1]; a purchase succeeds when it is 1.
The token-set ratio is ``thefuzz`` 0.19.0's with its difflib backend (``webshop_server.fuzzy``),
which is what the original's pinned requirements install.

Title nouns: with spaCy and an English pipeline installed (``en_core_web_lg``, else
``en_core_web_sm``), the tokens tagged NOUN or PROPN, as the original. Otherwise a deterministic
fallback: lowercase alphabetic tokens of three or more letters that are neither English stop
words nor in ``DESCRIPTIVE_WORDS`` (colours, sizes, common adjectives). Scores can differ
slightly between the two; ``info["title_nouns"]`` says which one was used.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from webshop_server.fuzzy import token_set_ratio

FUZZY_THRESHOLD = 85

COLOR_SET = (
    "alabaster", "apricot", "aqua", "ash", "asphalt", "azure", "banana", "beige", "black", "blue", "blush",
    "bordeaux", "bronze", "brown", "burgundy", "camel", "camo", "caramel", "champagne", "charcoal", "cheetah",
    "chestnut", "chocolate", "christmas", "coffee", "cognac", "copper", "coral", "cranberry", "cream", "crystal",
    "dark", "denim", "eggplant", "elephant", "espresso", "fuchsia", "gold", "granite", "grape", "graphite", "grass",
    "gray", "green", "grey", "heather", "indigo", "ivory", "ivy", "khaki", "lavender", "lemon", "leopard", "light",
    "lilac", "lime", "magenta", "maroon", "mauve", "merlot", "midnight", "mint", "mocha", "multicolor", "mushroom",
    "mustard", "natural", "navy", "nude", "olive", "orange", "peach", "pewter", "pink", "plum", "purple", "rainbow",
    "red", "rose", "royal", "rust", "sand", "sapphire", "seashell", "silver", "skull", "slate", "steel", "stone",
    "stonewash", "sunflower", "tan", "taupe", "teal", "tiger", "turquoise", "violet", "walnut", "wheat", "white",
    "wine", "yellow",
)  # fmt: skip

STOP_WORDS = frozenset(
    """
    a about above after again against all also am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further had
    has have having he her here hers herself him himself his how i if in into is it its itself just
    me more most my myself no nor not now of off on once only or other our ours ourselves out over
    own same she should so some such than that the their theirs them themselves then there these
    they this those through to too under until up very was we were what when where which while who
    whom why will with you your yours yourself yourselves
    """.split()  # noqa: SIM905 - a word list reads best as text
)
DESCRIPTIVE_WORDS = frozenset(COLOR_SET) | frozenset(
    """
    new best premium classic deluxe professional ultra essential modern everyday free small medium
    large big extra mini soft hard high low long short light heavy slim thin thick wide narrow fast
    quick easy portable adjustable compatible durable waterproof wireless rechargeable organic
    natural pure fresh original great perfect super cute comfortable breathable lightweight non anti
    multi inch inches pack count ounce ounces pound pounds size sizes set pcs piece pieces women
    womens men mens kids unisex
    """.split()  # noqa: SIM905 - a word list reads best as text
)
_WORD = re.compile(r"[a-z]+(?:'[a-z]+)?")


def normalize_color(value: str) -> str:
    """The first colour of ``COLOR_SET`` contained in ``value``, else ``value`` unchanged (as the original)."""
    for color in COLOR_SET:
        if color in value:
            return color
    return value


def fallback_title_nouns(title: str) -> list[str]:
    """Deterministic stand-in for spaCy's noun tagging (see the module docstring)."""
    return [
        w for w in _WORD.findall(title.lower()) if len(w) >= 3 and w not in STOP_WORDS and w not in DESCRIPTIVE_WORDS
    ]


class TitleNouns:
    """Extracts the nouns of a product title, with spaCy when a pipeline is available.

    Args:
        nlp: a spaCy ``Language`` (anything callable returning tokens with ``.text`` and
            ``.pos_``). ``None`` loads ``en_core_web_lg`` or ``en_core_web_sm`` if installed,
            else uses ``fallback_title_nouns``. ``False`` forces the fallback.
    """

    def __init__(self, nlp: Any = None) -> None:
        if nlp is None:
            nlp = _load_spacy_pipeline()
        self.nlp = nlp or None
        self.method = "spacy" if self.nlp is not None else "fallback"

    def __call__(self, title: str) -> list[str]:
        if self.nlp is None:
            return fallback_title_nouns(title)
        return [t.text.lower() for t in self.nlp(title) if t.pos_ in ("PNOUN", "NOUN", "PROPN")]


def _load_spacy_pipeline() -> Any:
    if importlib.util.find_spec("spacy") is None:
        return None
    import spacy

    for name in ("en_core_web_lg", "en_core_web_sm"):
        if importlib.util.find_spec(name) is not None:
            return spacy.load(name)
    return None


def fuzzy_ratio(a: str, b: str) -> int:
    """Token-set ratio in 0-100 as the original's ``thefuzz.fuzz.token_set_ratio`` computes it (difflib backend)."""
    return token_set_ratio(a, b)


def type_reward(purchased: dict, goal: dict, nouns: Callable[[str], list[str]]) -> dict:
    """The type-match factor ``r_type`` and the evidence it was computed from."""
    query_match = purchased["query"] == goal["query"]
    purchased_path = {x.strip() for x in purchased["product_category"].split("›")}
    goal_path = {x.strip() for x in goal["product_category"].split("›")}
    category_match = len(purchased_path & goal_path) >= 2
    purchased_nouns = nouns(purchased["name"])
    desired_nouns = nouns(goal["name"])
    overlap = len(set(purchased_nouns) & set(desired_nouns))
    title_score = overlap / len(desired_nouns) if desired_nouns else 0.2
    r_type = 1.0
    if not (query_match or category_match or title_score > 0.2):
        r_type = 0.5
    if title_score < 0.1:
        r_type = 0.1
    if title_score == 0.0:
        r_type = 0.0
    return {"r_type": r_type, "query_match": query_match, "category_match": category_match, "title_score": title_score}


def _in_product_text(value: str, product: dict) -> bool:
    return (
        value in product["Title"].lower()
        or value in " ".join(product["BulletPoints"]).lower()
        or value in product["Description"].lower()
    )


def attribute_reward(purchased: dict, goal: dict) -> tuple[float, int]:
    """Fraction and number of goal attributes the purchased product has (fuzzily, or verbatim in its text)."""
    matches = 0
    for goal_attr in goal["attributes"]:
        fuzzy = any(fuzzy_ratio(p_attr, goal_attr) > FUZZY_THRESHOLD for p_attr in purchased["Attributes"])
        if fuzzy or _in_product_text(goal_attr, purchased):
            matches += 1
    return matches / len(goal["attributes"]), matches


def goal_option_values(goal_options: Sequence[str] | Mapping[str, str]) -> list[str]:
    """The goal's option values: a list as it is, a dict (synthetic goals) as its values."""
    return list(goal_options.values()) if isinstance(goal_options, Mapping) else list(goal_options)


def option_reward(goal_options: Sequence[str], chosen: Mapping[str, str]) -> tuple[float | None, int]:
    """Fraction (``None`` without goal options) and number of goal options hit by the chosen options.

    A goal option is hit once when some chosen value has a token-set ratio above 85 with it, both
    colour-normalised; extra chosen options neither add nor take away.
    """
    chosen_values = [normalize_color(v) for v in chosen.values()]
    wanted = [normalize_color(o) for o in goal_options]
    hits = sum(any(fuzzy_ratio(value, g) > FUZZY_THRESHOLD for value in chosen_values) for g in wanted)
    return (hits / len(wanted) if wanted else None), hits


def score_purchase(
    purchased: dict, goal: dict, price: float, options: dict[str, str], nouns: Callable[[str], list[str]]
) -> tuple[float, dict]:
    """The task score of buying ``purchased`` with ``options`` at ``price`` for ``goal``.

    Returns:
        ``(score, info)``: the score in [0, 1] and its breakdown (``r_type``, ``r_att``,
        ``w_att``, ``query_match``, ``category_match``, ``title_score``, and when they apply
        ``r_option``/``w_option`` and ``r_price``/``w_price``; ``title_nouns`` names the noun
        extractor).
    """
    type_info = type_reward(purchased, goal, nouns)
    wanted = goal_option_values(goal["goal_options"])
    r_price = price <= goal["price_upper"] if goal["price_upper"] > 0 else None
    r_att, n_att = attribute_reward(purchased, goal)
    r_option, n_option = option_reward(wanted, options)
    denominator = len(goal["attributes"]) + len(wanted) + 1
    # The original's order of operations (sum / denominator, then times r_type), so floats agree bit for bit.
    score = (n_att + n_option + bool(r_price)) / denominator * type_info["r_type"]
    info: dict[str, Any] = {
        "r_type": type_info["r_type"],
        "r_att": r_att,
        "w_att": len(goal["attributes"]) / denominator,
        "query_match": type_info["query_match"],
        "category_match": type_info["category_match"],
        "title_score": type_info["title_score"],
        "title_nouns": getattr(nouns, "method", "custom"),
    }
    if r_option is not None:
        info["r_option"] = r_option
        info["w_option"] = len(wanted) / denominator
    if r_price is not None:
        info["r_price"] = bool(r_price)
        info["w_price"] = 1 / denominator
    return score, info
