"""Product catalogs: the embedded generated one, and the original WebShop data files.

A product is a dict with the keys the original WebShop pages and reward read: ``asin``,
``category``, ``query``, ``product_category``, ``name``, ``Title``, ``Description``,
``BulletPoints``, ``Reviews``, ``Rating``, ``pricing`` (one price or a ``[low, high]`` range),
``Price`` (the price tag shown), ``options`` (option name -> list of values), ``Attributes`` and
``MainImage``. Products of the embedded catalog also carry ``instruction_attributes`` (the
attributes a synthetic goal may ask for).
"""

from __future__ import annotations

import glob
import json
import os
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation

from webshop_server import vocab
from webshop_server.catalog_v1 import DEFAULT_PRODUCTS as V1_DEFAULT_PRODUCTS
from webshop_server.catalog_v1 import line_products
from webshop_server.products import embedded_product

ASIN_SPACE = 36**9  # nine base-36 digits after the leading "B", like Amazon's 10-character ASINs
_ASIN_STEP = 2654435761  # odd and not a multiple of 3, hence coprime to 36**9: i -> asin is one-to-one
_DIGITS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_V1_ASIN_SEED_OFFSET = 500_009  # v1 products get other asins than v0 products of the same index and seed


@dataclass
class Catalog:
    """Products plus the lookups the server needs.

    Attributes:
        products: the products, in catalog order.
        by_asin: asin -> product.
        prices: asin -> the price the reward compares with the goal's price bound.
        source: where the catalog came from, e.g. ``"embedded:n=1000,seed=0"`` or a folder.
        human_goals: whether the products carry human-written instructions (original data only).
        goal_wording: how synthetic goals word their instruction (``webshop_server.goals``):
            ``"v0"`` (the easy embedded catalog and original data) or ``"v1"`` (the hard one).
    """

    products: list[dict]
    source: str
    human_goals: bool = False
    goal_wording: str = "v0"
    by_asin: dict[str, dict] = field(init=False)
    prices: dict[str, float] = field(init=False)

    def __post_init__(self) -> None:
        self.by_asin = {p["asin"]: p for p in self.products}
        self.prices = {p["asin"]: product_price(p) for p in self.products}

    def __len__(self) -> int:
        return len(self.products)

    def documents(self) -> Iterator[str]:
        """Yields the search document of each product, in catalog order (see ``product_document``)."""
        for p in self.products:
            yield product_document(p)


def product_document(product: dict) -> str:
    """The text the search index holds for a product, built as the original WebShop builds it.

    Title, description, first bullet point and ``"name: v1, v2"`` option texts joined by
    ``", and "``, all lowercased.
    """
    option_text = ", and ".join(f"{name}: {', '.join(values)}" for name, values in product["options"].items())
    bullets = product["BulletPoints"]
    first_bullet = bullets[0] if bullets else ""
    return " ".join([product["Title"], product["Description"], first_bullet, option_text]).lower()


def product_price(product: dict) -> float:
    """The price used for scoring: the price itself, or for a range a point in it fixed by the asin.

    The original draws a uniform point of the range with the global ``random`` state, so its
    prices change between runs; here the point is drawn from a generator seeded by the asin.
    """
    pricing = product["pricing"]
    if not pricing:
        return 100.0
    if len(pricing) == 1:
        return float(pricing[0])
    return random.Random(f"price:{product['asin']}").uniform(pricing[0], pricing[1])


# ----------------------------------------------------------------------------------------------
# Embedded catalog
# ----------------------------------------------------------------------------------------------


def make_asin(index: int, seed: int) -> str:
    """A 10-character ASIN, distinct for every ``index < 36**9`` under one seed."""
    n = (index * _ASIN_STEP + seed * 7919 + 987_654_321_123) % ASIN_SPACE
    digits = []
    for _ in range(9):
        n, r = divmod(n, 36)
        digits.append(_DIGITS[r])
    return "B" + "".join(reversed(digits))


def _title_case(text: str) -> str:
    return " ".join(w[:1].upper() + w[1:] for w in text.split())


def generate_product(index: int, seed: int = 0) -> dict:
    """Generates product ``index`` of the embedded catalog of ``seed``; a pure function of both."""
    rng = random.Random(seed * 1_000_003 + index)
    category = rng.choice(sorted(vocab.CATEGORIES))
    ptype = rng.choice(vocab.CATEGORIES[category])
    brand = rng.choice(vocab.BRANDS[category])
    attrs = rng.sample(ptype.attributes, k=rng.randint(2, min(4, len(ptype.attributes))))
    options: dict[str, list[str]] = {}
    for name, values in ptype.options.items():
        if rng.random() < 0.85:
            keep = set(rng.sample(range(len(values)), k=rng.randint(2, min(5, len(values)))))
            options[name] = [v for i, v in enumerate(values) if i in keep]
    fill = {"brand": brand, "noun": ptype.noun, "a1": attrs[0], "a2": attrs[1], "A1": attrs[0].capitalize(),
            "A2": attrs[1].capitalize()}  # fmt: skip
    adjective = rng.choice(vocab.TITLE_ADJECTIVES)
    title = f"{brand} {_title_case(adjective)} {_title_case(ptype.noun)} with {_title_case(attrs[0])}"
    title += f" and {_title_case(attrs[1])}" if rng.random() < 0.6 else f", {_title_case(attrs[1])}"
    description = " ".join(
        [rng.choice(vocab.DESCRIPTION_OPENERS).format(**fill)]
        + [s.format(**fill) for s in rng.sample(vocab.DESCRIPTION_BODIES, k=rng.randint(1, 2))]
    )
    bullets = [b.format(**fill) for b in rng.sample(vocab.BULLETS, k=rng.randint(3, 5))]
    reviews = [
        {"title": rng.choice(vocab.REVIEW_TITLES), "score": rng.randint(1, 5),
         "body": rng.choice(vocab.REVIEW_BODIES).format(**fill)}
        for _ in range(rng.randint(0, 3))
    ]  # fmt: skip
    low = round(rng.uniform(*ptype.price), 2)
    pricing = [low, round(low * rng.uniform(1.1, 1.6), 2)] if options and rng.random() < 0.3 else [low]
    product = embedded_product(category, ptype, title, description, bullets, reviews, pricing, options, attrs,
                               attrs[: rng.randint(1, min(3, len(attrs)))])  # fmt: skip
    return {"asin": make_asin(index, seed), **product}


def generate_catalog(n_products: int = 1000, seed: int = 0) -> Catalog:
    """Generates the embedded catalog: ``n_products`` products over WebShop's five categories.

    Args:
        n_products: how many products (1 to 36**9); 1,000 by default, 1,000,000+ for benchmarks.
        seed: the catalog seed; the same seed and size always give the same catalog.

    Raises:
        ValueError: if ``n_products`` is out of range.
    """
    if not 1 <= n_products < ASIN_SPACE:
        raise ValueError(f"n_products must be between 1 and {ASIN_SPACE - 1}, got {n_products}")
    return Catalog(
        [generate_product(i, seed) for i in range(n_products)], source=f"embedded:n={n_products},seed={seed}"
    )


def generate_catalog_v1(n_products: int = V1_DEFAULT_PRODUCTS, seed: int = 0) -> Catalog:
    """Generates the hard embedded catalog (:mod:`webshop_server.catalog_v1`): products in lines of 3-8 siblings.

    Raises:
        ValueError: if ``n_products`` is out of range.
    """
    if not 1 <= n_products < ASIN_SPACE:
        raise ValueError(f"n_products must be between 1 and {ASIN_SPACE - 1}, got {n_products}")
    products = line_products(n_products, seed)
    for i, product in enumerate(products):
        product["asin"] = make_asin(i, seed + _V1_ASIN_SEED_OFFSET)
    return Catalog(products, source=f"embedded-v1:n={n_products},seed={seed}", goal_wording="v1")


# ----------------------------------------------------------------------------------------------
# Original WebShop data files
# ----------------------------------------------------------------------------------------------


CATALOG_FILES = ("auto", "full", "small")


def _pick(folder: str, pattern: str, required: bool, files: str = "auto") -> str | None:
    """The data file matching ``pattern``: the full file (shortest name) or the ``_1000`` subset.

    ``files``: ``"auto"`` takes the full file when present, else the subset; ``"full"`` / ``"small"``
    take only that one (the original's ``use_small`` set of 1,000 products: ``items_shuffle_1000.json``,
    ``items_ins_v2_1000.json``).
    """
    found = sorted(glob.glob(os.path.join(folder, pattern)), key=lambda p: (len(os.path.basename(p)), p))
    if files != "auto":
        found = [p for p in found if ("_1000" in os.path.basename(p)) == (files == "small")]
    if not found and required:
        which = {"auto": "", "full": " (the full file, not a _1000 subset)", "small": " (the _1000 subset)"}[files]
        raise FileNotFoundError(
            f"catalog folder {folder!r} has no file matching {pattern!r}{which}; expected the original WebShop data "
            "files (items_shuffle*.json, items_ins_v2*.json, optionally items_human_ins.json), or pass "
            "--catalog embedded"
        )
    return found[0] if found else None


def parse_pricing(pricing: str | None) -> tuple[list[float], str]:
    """Parses an original price text (``"$12.99"`` or ``"$10.99 - $25.99"``) to a price list and a tag."""
    if not pricing:
        return [100.0], "$100.0"
    values = []
    for part in pricing.split("$")[1:]:
        digits = re.sub(r"[^\d.]", "", part)
        try:
            values.append(float(Decimal(digits)))
        except InvalidOperation:
            continue
    if not values:
        return [100.0], "$100.0"
    if len(values) == 1:
        return values, f"${values[0]}"
    return values[:2], f"${values[0]} to ${values[1]}"


def _convert_original(raw: dict, reviews: dict, attributes: dict, human: dict | None) -> dict:
    asin = raw["asin"]
    small = raw.get("small_description") or []
    pricing, price_tag = parse_pricing(raw.get("pricing"))
    options: dict[str, list[str]] = {}
    option_to_image: dict[str, str | None] = {}
    for name, contents in (raw.get("customization_options") or {}).items():
        if contents is None:
            continue
        values = []
        for content in contents:
            value = content["value"].strip().replace("/", " | ").lower()
            values.append(value)
            option_to_image[value] = content.get("image")
        options[name.lower()] = values
    product = {
        "asin": asin,
        "category": raw["category"],
        "query": raw["query"].lower().strip(),
        "product_category": raw["product_category"],
        "name": raw["name"],
        "Title": raw["name"],
        "Description": raw.get("full_description") or "",
        "BulletPoints": small if isinstance(small, list) else [small],
        "Reviews": reviews.get(asin, {}).get("reviews", []),
        "Rating": reviews.get(asin, {}).get("average_rating", "N.A."),
        "pricing": pricing,
        "Price": price_tag,
        "options": options,
        "option_to_image": option_to_image,
        "Attributes": attributes.get(asin, {}).get("attributes") or ["DUMMY_ATTR"],
        "MainImage": (raw.get("images") or [""])[0],
    }
    if human is not None:
        if asin in human:
            product["instructions"] = human[asin]
    else:
        product["instruction_text"] = attributes.get(asin, {}).get("instruction")
        product["instruction_attributes"] = attributes.get(asin, {}).get("instruction_attributes")
    return product


def _load_reviews(folder: str) -> dict:
    path = os.path.join(folder, "reviews.json")
    if not os.path.exists(path):
        return {}
    with open(path, encoding="utf-8") as f:
        out = {}
        for r in json.load(f):
            converted = []
            for review in r.get("reviews", []):
                review = dict(review)
                if "score" not in review:
                    review["score"] = review.pop("stars", 0)
                review["body"] = review.pop("review", "")
                converted.append(review)
            out[r["asin"]] = {"reviews": converted, "average_rating": r.get("average_rating", "N.A.")}
        return out


def load_original_catalog(
    folder: str, num_products: int | None = None, human_goals: bool | None = None, files: str = "auto"
) -> Catalog:
    """Loads the original WebShop data files the way the original ``load_products`` does.

    Reads ``items_shuffle*.json`` (products), ``items_ins_v2*.json`` (attributes and synthetic
    instructions), and when present ``items_human_ins.json`` (human instructions) and
    ``reviews.json``. Skips products whose asin is ``"nan"`` or longer than 10 characters, and
    repeated asins.

    Args:
        folder: the folder holding the files.
        num_products: keep only the first N products of the (already shuffled) file.
        human_goals: use human instructions; default: when ``items_human_ins.json`` exists.
        files: which product and attribute files (:func:`_pick`): ``"auto"``, ``"full"`` or ``"small"``.

    Raises:
        FileNotFoundError: if a required file is missing.
    """
    if files not in CATALOG_FILES:
        raise ValueError(f"files must be one of {', '.join(CATALOG_FILES)}, got {files!r}")
    items_path = _pick(folder, "items_shuffle*.json", required=True, files=files)
    attrs_path = _pick(folder, "items_ins_v2*.json", required=True, files=files)
    human_path = _pick(folder, "items_human_ins.json", required=False)
    if human_goals is None:
        human_goals = human_path is not None
    if human_goals and human_path is None:
        raise FileNotFoundError(f"human_goals=True but {folder!r} has no items_human_ins.json; pass human_goals=False")
    with open(items_path, encoding="utf-8") as f:
        raw_products = json.load(f)
    with open(attrs_path, encoding="utf-8") as f:
        attributes = json.load(f)
    human = None
    if human_goals:
        with open(human_path, encoding="utf-8") as f:
            human = json.load(f)
    reviews = _load_reviews(folder)
    if num_products is not None:
        raw_products = raw_products[:num_products]
    products, seen = [], set()
    for raw in raw_products:
        asin = raw.get("asin")
        if not isinstance(asin, str) or asin == "nan" or len(asin) > 10 or asin in seen:
            continue
        seen.add(asin)
        products.append(_convert_original(raw, reviews, attributes, human))
    return Catalog(products, source=os.path.abspath(folder), human_goals=human_goals)


def load_catalog(
    spec: str = "embedded",
    *,
    n_products: int = 1000,
    seed: int = 0,
    files: str = "auto",
    human_goals: bool | None = None,
) -> Catalog:
    """Loads a catalog from a spec: ``"embedded"`` (generated, easy), ``"embedded-v1"`` (generated,
    hard: :mod:`webshop_server.catalog_v1`) or a folder of original data files.

    ``files`` and ``human_goals`` choose among the original files (:func:`load_original_catalog`).

    Raises:
        FileNotFoundError: if ``spec`` is neither an embedded catalog nor an existing folder.
    """
    if spec == "embedded":
        return generate_catalog(n_products, seed)
    if spec == "embedded-v1":
        return generate_catalog_v1(n_products, seed)
    if not os.path.isdir(spec):
        raise FileNotFoundError(
            f"catalog must be 'embedded', 'embedded-v1' or a folder with the original WebShop data files, got "
            f"{spec!r} (no such folder)"
        )
    return load_original_catalog(spec, human_goals=human_goals, files=files)
