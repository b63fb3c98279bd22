"""Goals (shopping instructions) and their splits, following WebShop's recipes.

A goal is a dict with ``asin``, ``category``, ``query``, ``name`` (the target's title),
``product_category``, ``instruction_text``, ``attributes``, ``goal_options`` and ``price_upper``.

Recipes:
- **synthetic** (the embedded catalog, or original data without human instructions): one goal per
  option combination of a product (at most ``max_goals_per_product`` of them, chosen by a seeded
  generator), worded from the product's instruction attributes and one value per option, plus
  a price bound;
- **human** (original data with ``items_human_ins.json``): one goal per human instruction.

The price bound is WebShop's: of the multiples of 10 dollars above the product's price, take the
first four, draw two and keep the larger; the instruction then ends with ``", and price lower
than X dollars"``. The draw uses a generator seeded by the goal (not the global ``random``), so
the same goal index always has the same text and bound. Goals are then shuffled with seed 233 as
in the original, and split: test = goals 0-499, eval = 500-1499, train = the rest.
"""

from __future__ import annotations

import itertools
import json
import random

from webshop_server import vocab
from webshop_server.catalog import Catalog

PRICE_RANGE = [10.0 * i for i in range(1, 100)]
SHUFFLE_SEED = 233
SPLITS: dict[str, tuple[int, int | None]] = {
    "test": (0, 500),
    "eval": (500, 1500),
    "train": (1500, None),
    "all": (0, None),
}
NO_PRICE_BOUND = 1_000_000.0


def price_bound(price: float, rng: random.Random) -> tuple[float, str]:
    """WebShop's price bound for a product of ``price``, and the instruction suffix that states it."""
    candidates = [p for p in PRICE_RANGE if p > price][:4]
    if len(candidates) < 2:
        return NO_PRICE_BOUND, ""
    upper = max(rng.sample(candidates, 2))
    return upper, f", and price lower than {upper:.2f} dollars"


def _embedded_instruction(product: dict, rng: random.Random) -> str:
    attrs = product["instruction_attributes"]
    opener = rng.choice(vocab.INSTRUCTION_OPENERS)
    described = attrs[0] if len(attrs) == 1 else f"{', '.join(attrs[:-1])} and {attrs[-1]}"
    return f"{opener} {described} {product['noun']}"


def _goal(product: dict, text: str, attributes: list, goal_options, price_upper: float) -> dict:
    return {
        "asin": product["asin"],
        "category": product["category"],
        "query": product["query"],
        "name": product["Title"],
        "product_category": product["product_category"],
        "instruction_text": text,
        "attributes": list(attributes),
        "price_upper": price_upper,
        "goal_options": goal_options,
    }


def synthetic_goals(catalog: Catalog, seed: int = 0, max_goals_per_product: int = 3) -> list[dict]:
    """Synthetic goals of every product that has instruction attributes, in catalog order (unshuffled)."""
    goals = []
    for product in catalog.products:
        attributes = product.get("instruction_attributes")
        if not attributes:
            continue
        rng = random.Random(f"goal:{seed}:{product['asin']}")
        if "noun" in product:
            instruction = _embedded_instruction(product, rng)
        elif product.get("instruction_text"):
            instruction = product["instruction_text"]
        else:
            continue
        names = sorted(product["options"])
        combos = list(itertools.product(*(product["options"][n] for n in names)))
        if len(combos) > max_goals_per_product:
            combos = [combos[i] for i in sorted(rng.sample(range(len(combos)), max_goals_per_product))]
        for combo in combos:
            goal_options = dict(zip(names, combo, strict=True))
            option_text = ", and ".join(f"{k}: {v}" for k, v in goal_options.items())
            option_text = f" with {option_text}" if option_text else ""
            upper, price_text = price_bound(catalog.prices[product["asin"]], rng)
            goals.append(_goal(product, f"{instruction}{option_text}{price_text}", attributes, goal_options, upper))
    return goals


def human_goals(catalog: Catalog) -> list[dict]:
    """Goals from human instructions (``product["instructions"]``), in catalog order (unshuffled).

    Instructions without attributes are skipped, as in the original.
    """
    goals = []
    for product in catalog.products:
        for i, ins in enumerate(product.get("instructions", [])):
            attributes = ins.get("instruction_attributes") or []
            if not attributes:
                continue
            rng = random.Random(f"human:{product['asin']}:{i}")
            upper, price_text = price_bound(catalog.prices[product["asin"]], rng)
            text = ins["instruction"].strip(".") + price_text
            goals.append(_goal(product, text, attributes, list(ins.get("instruction_options") or []), upper))
    return goals


def build_goals(catalog: Catalog, seed: int = 0) -> list[dict]:
    """The catalog's goals in their published order: human or synthetic, shuffled with seed 233."""
    goals = human_goals(catalog) if catalog.human_goals else synthetic_goals(catalog, seed)
    random.Random(SHUFFLE_SEED).shuffle(goals)
    return goals


def split_range(split: str, n_goals: int) -> range:
    """Goal indices of a split (``test``, ``eval``, ``train`` or ``all``) among ``n_goals`` goals.

    Raises:
        ValueError: for an unknown split, or a split with no goals in this catalog.
    """
    if split not in SPLITS:
        raise ValueError(f"split must be one of {sorted(SPLITS)}, got {split!r}")
    start, stop = SPLITS[split]
    stop = n_goals if stop is None else min(stop, n_goals)
    if start >= stop:
        raise ValueError(
            f"split {split!r} (goals {start}-{stop - 1}) is empty: the catalog has only {n_goals} goals; "
            "use a larger catalog or split='all'"
        )
    return range(start, stop)


def write_goals(path: str, goals: list[dict], source: str) -> None:
    """Writes the goal list as JSON (``{"source", "splits", "goals"}``) so it can be published."""
    splits = {name: [start, stop if stop is not None else len(goals)] for name, (start, stop) in SPLITS.items()}
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"source": source, "splits": splits, "goals": goals}, f, indent=1, ensure_ascii=False)


def read_goals(path: str) -> list[dict]:
    """Reads a goal list written by ``write_goals``.

    Raises:
        ValueError: if the file is not such a goal list.
    """
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    if not isinstance(data, dict) or not isinstance(data.get("goals"), list):
        raise ValueError(f"{path!r} is not a goal file written by write_goals (no 'goals' list)")
    return data["goals"]
