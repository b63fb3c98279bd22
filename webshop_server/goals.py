"""Goals (shopping instructions) and their splits, following WebShop's recipes.

A goal is a dict with ``asin``, ``category``, ``query``, ``name`` (the target's title),
``product_category``, ``instruction_text``, ``attributes``, ``goal_options`` and ``price_upper``.

``goal_options`` is a list of option values, the form of the original's human goals, for which
the original's ``get_reward`` scores an exact purchase 1.0. Synthetic goals also carry
``goal_options_by_name`` (option name -> value, the dict the original's synthetic goals hold in
``goal_options``). The original passes such a dict to its option matcher as ``(name, value)``
pairs, so some exact purchases score below 1 there; goals read from files therefore turn a dict
into its values (``normalize_goal``).

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


def _goal(product: dict, text: str, attributes: list, goal_options: list[str], price_upper: float) -> dict:
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


def _option_combos(product: dict, rng: random.Random, most: int) -> list[tuple[tuple[str, ...], dict[str, str]]]:
    """The option combinations a product's goals ask for (at most ``most``, drawn by ``rng``), with names."""
    names = sorted(product["options"])
    combos = list(itertools.product(*(product["options"][n] for n in names)))
    if len(combos) > most:
        combos = [combos[i] for i in sorted(rng.sample(range(len(combos)), most))]
    return [(combo, dict(zip(names, combo, strict=True))) for combo in combos]


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
        for combo, by_name in _option_combos(product, rng, max_goals_per_product):
            option_text = ", and ".join(f"{k}: {v}" for k, v in by_name.items())
            option_text = f" with {option_text}" if option_text else ""
            upper, price_text = price_bound(catalog.prices[product["asin"]], rng)
            goal = _goal(product, f"{instruction}{option_text}{price_text}", attributes, list(combo), upper)
            goal["goal_options_by_name"] = by_name
            goals.append(goal)
    return goals


def attribute_forms(attribute: str) -> list[str]:
    """The wordings of an attribute that hard-shop goals use: itself first, then its rewordings.

    Rewordings come from ``vocab.ATTRIBUTE_PARAPHRASES`` and from rules: ``"X free"`` -> ``"free of X"``
    / ``"without X"`` / ``"X-free"``; ``"non X"`` -> ``"non-X"`` / ``"no X"``; other two-word
    attributes without a listed rewording may be hyphenated.
    """
    words = attribute.split()
    forms = [attribute, *vocab.ATTRIBUTE_PARAPHRASES.get(attribute, ())]
    if len(words) == 2 and words[1] == "free":
        forms += [f"free of {words[0]}", f"without {words[0]}", f"{words[0]}-free"]
    elif len(words) == 2 and words[0] == "non":
        forms += [f"non-{words[1]}", f"no {words[1]}"]
    elif len(words) == 2 and len(forms) == 1:
        forms.append("-".join(words))
    return forms


def paraphrase(attribute: str, rng: random.Random) -> str:
    """One wording of an attribute as a shopper might write it: one of :func:`attribute_forms`, drawn by ``rng``."""
    return rng.choice(attribute_forms(attribute))


def _option_phrase(name: str, value: str, rng: random.Random) -> str:
    """An option as shoppers name it: ``"color: red"`` (the synthetic form), ``"in red"``, ``"red flavor"``, ..."""
    natural = {
        "color": (f"in {value}", f"in the color {value}", f"{value} color"),
        "size": (f"size {value}", f"in size {value}", f"{value} size"),
        "flavor name": (f"{value} flavor", f"in {value} flavor", f"flavored {value}"),
        "scent": (f"{value} scent", f"scented {value}", f"with a {value} scent"),
    }.get(name, (f"{name} {value}",))
    return rng.choice((f"{name}: {value}", *natural))


def _instruction_v1(product: dict, attributes: list[str], by_name: dict[str, str], rng: random.Random) -> str:
    noun = rng.choice((product["noun"], *vocab.NOUN_SYNONYMS.get(product["noun"], ())))
    words = [paraphrase(a, rng) for a in attributes]
    described = words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"
    opener = rng.choice(vocab.INSTRUCTION_OPENERS)
    if rng.random() < 0.5:
        text = f"{opener} {described} {noun}"
    else:
        plural = noun.endswith("s") and not noun.endswith("ss")
        clause = f"{noun} that are" if plural else f"a {noun} that is"
        text = f"{opener} {clause} {described}" if rng.random() < 0.5 else f"{opener} {noun}, {described}"
    if by_name:
        if rng.random() < 0.4:  # the original's synthetic form
            text += " with " + ", and ".join(f"{k}: {v}" for k, v in by_name.items())
        else:
            text += ", " + ", ".join(_option_phrase(k, v, rng) for k, v in by_name.items())
    return text


def synthetic_goals_v1(catalog: Catalog, seed: int = 0, max_goals_per_product: int = 3) -> list[dict]:
    """Goals of the hard embedded catalog (``goal_wording="v1"``), in catalog order (unshuffled).

    As :func:`synthetic_goals` (option combinations, price bound), but worded as a shopper would:
    the product named by its noun or a synonym (``vocab.NOUN_SYNONYMS``), attributes paraphrased
    (:func:`paraphrase`) and mostly ones the title does not carry, options in the synthetic form
    (``"color: red"``) or as people write them (``"in red"``, ``"size large"``, ``"mint flavor"``).
    """
    goals = []
    for product in catalog.products:
        attributes = product["instruction_attributes"]
        rng = random.Random(f"goal-v1:{seed}:{product['asin']}")
        for combo, by_name in _option_combos(product, rng, max_goals_per_product):
            order = rng.sample(attributes, k=len(attributes))
            upper, price_text = price_bound(catalog.prices[product["asin"]], rng)
            text = _instruction_v1(product, order, by_name, rng) + price_text
            goal = _goal(product, text, attributes, list(combo), upper)
            goal["goal_options_by_name"] = by_name
            goals.append(goal)
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
    if catalog.human_goals:
        goals = human_goals(catalog)
    elif catalog.goal_wording == "v1":
        goals = synthetic_goals_v1(catalog, seed)
    else:
        goals = synthetic_goals(catalog, seed)
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


def normalize_goal(goal: dict, where: str = "goal") -> dict:
    """A goal with ``goal_options`` as a list of values, whichever form it was written in.

    A list (the original's human goals, and this project's) is kept. A dict (the original's
    synthetic goals: option name -> value) becomes its values, and the dict is kept as
    ``goal_options_by_name``. The original's ``get_reward`` would instead match the dict's
    ``(name, value)`` pairs, scoring some exact purchases below 1.

    Raises:
        ValueError: if ``goal_options`` is missing or not a list of strings or a dict of strings.
    """
    options = goal.get("goal_options")
    if isinstance(options, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in options.items()):
        return {**goal, "goal_options": list(options.values()), "goal_options_by_name": dict(options)}
    if isinstance(options, list) and all(isinstance(v, str) for v in options):
        return goal
    raise ValueError(
        f"{where}: goal_options must be a list of option values or a dict of option name -> value, got {options!r:.80}"
    )


def read_goals(path: str) -> list[dict]:
    """Reads a goal list: a file written by ``write_goals``, or a JSON list of goals in the original's form.

    Each goal's ``goal_options`` may be a list of values or a dict of option name -> value (see
    ``normalize_goal``); both load as a list of values.

    Raises:
        ValueError: if the file is not such a goal list.
    """
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    goals = data.get("goals") if isinstance(data, dict) else data
    if not isinstance(goals, list) or not all(isinstance(g, dict) for g in goals):
        raise ValueError(
            f"{path!r} is not a goal file: expected a JSON list of goals or a write_goals file (a 'goals' list)"
        )
    return [normalize_goal(g, f"{path!r} goal {i}") for i, g in enumerate(goals)]
