"""The hard embedded catalog (``catalog="embedded-v1"``, the shop of ``GACA-WebShop-v1``).

The easy catalog (:func:`webshop_server.catalog.generate_catalog`) names every goal attribute in
the target's title and has no near-duplicates, so searching the instruction and clicking the
first result solves most goals. This one is built from what makes the original shop hard:

- **product lines**: a brand's line of one product type comes as 2-6 sibling products with the
  same title (or a variant suffix) that differ in the option values they offer, in their price
  (some above a goal's bound) and in one feature (a sibling may lack one of the line's
  attributes);
- **competing lines**: other brands' lines of the same type draw their features from the type's
  list and its category's (``vocab.CATEGORY_ATTRIBUTES_V1``), so results pages hold many
  products that share some of a goal's attributes and few that share all;
- **features off the title**: the title names one or two of a product's 3-4 attributes; the others
  appear only in its bullet points (of which the search index holds the first, as the
  original's) and description, and the goals name them (see :mod:`webshop_server.goals`,
  ``wording="v1"``);
- **products without options**: 35% of the lines sell one variant, as many originals do; their
  goals name no option;
- **crowded results**: 10,000 products by default, about 260 per product type.

Product ``i`` is product ``i - start`` of line ``j``, where lines are generated in order and each
line is a pure function of ``(j, seed)``: the same size and seed always give the same catalog,
and a larger catalog extends a smaller one. :func:`webshop_server.catalog.generate_catalog_v1`
gives the products their asins and makes the catalog.
"""

from __future__ import annotations

import random

from webshop_server import vocab
from webshop_server.products import embedded_product

DEFAULT_PRODUCTS = 10_000
LINE_SIZES = (3, 4, 5, 6, 7, 8)
NO_OPTION_LINES = 0.35  # the share of lines whose products have no options (their goals name none)


def _title_case(text: str) -> str:
    return " ".join(w[:1].upper() + w[1:] for w in text.split())


def _options(ptype: vocab.ProductType, rng: random.Random) -> dict[str, list[str]]:
    options: dict[str, list[str]] = {}
    for name, values in ptype.options.items():
        if rng.random() < 0.9:
            keep = set(rng.sample(range(len(values)), k=rng.randint(2, min(3, len(values)))))
            options[name] = [v for i, v in enumerate(values) if i in keep]
    return options


def _text(
    ptype: vocab.ProductType, brand: str, attrs: list[str], in_title: list[str], rng: random.Random
) -> tuple[str, list[str]]:
    """Description and bullet points that name every attribute in ``attrs`` and no other.

    The description leads with a title attribute; the other attributes have a bullet each, and a
    generic bullet comes first in 85% of products, so the search index (which holds the first
    bullet) rarely sees them.
    """
    lead = rng.choice(in_title)
    description = " ".join(
        [rng.choice(vocab.DESCRIPTION_OPENERS_V1).format(brand=brand, noun=ptype.noun, a=lead)]
        + rng.sample([b.format(noun=ptype.noun, a2=lead) for b in vocab.DESCRIPTION_BODIES], k=rng.randint(1, 2))
    )
    bullets = [rng.choice(vocab.BULLETS_V1).format(A=a.capitalize(), a=a) for a in attrs]
    rng.shuffle(bullets)
    generic = [b.format(noun=ptype.noun) for b in rng.sample(vocab.GENERIC_BULLETS_V1, k=rng.randint(1, 2))]
    if rng.random() < 0.85:
        return description, [generic[0], *bullets, *generic[1:]]
    return description, [*bullets, *generic]


def generate_line(line_index: int, seed: int = 0) -> list[dict]:
    """The products of line ``line_index`` (without asins), a pure function of the index and seed."""
    rng = random.Random(f"v1-line:{seed}:{line_index}")
    category = rng.choice(sorted(vocab.CATEGORIES))
    ptype = rng.choice(vocab.CATEGORIES[category])
    brand = rng.choice(vocab.BRANDS[category])
    pool = ptype.attributes + tuple(a for a in vocab.CATEGORY_ATTRIBUTES_V1[category] if a not in ptype.attributes)
    line_attrs = [rng.choice(ptype.attributes)]  # the title names a feature of the type
    line_attrs += rng.sample([a for a in pool if a != line_attrs[0]], k=2 if rng.random() < 0.6 else 3)
    in_title = line_attrs[: 1 if rng.random() < 0.6 else 2]
    adjective = _title_case(rng.choice(vocab.TITLE_ADJECTIVES))
    title = f"{brand} {adjective} {_title_case(ptype.noun)} with {' and '.join(_title_case(a) for a in in_title)}"
    base_price = rng.uniform(*ptype.price)
    single_variant = rng.random() < NO_OPTION_LINES  # a line sold without options, as many originals are
    products = []
    for sibling in range(rng.choice(LINE_SIZES)):
        attrs = list(line_attrs)
        droppable = [a for a in attrs if a not in in_title]
        if sibling > 0 and len(droppable) > 1 and rng.random() < 0.6:
            attrs.remove(rng.choice(droppable))  # a near-duplicate without one of the line's features
        options = {} if single_variant else _options(ptype, rng)
        low = round(base_price * (1.0 if sibling == 0 else rng.uniform(0.9, 3.0)), 2)
        pricing = [low, round(low * rng.uniform(1.1, 1.4), 2)] if options and rng.random() < 0.2 else [low]
        description, bullets = _text(ptype, brand, attrs, in_title, rng)
        fill = {"noun": ptype.noun, "a1": attrs[0]}
        reviews = [
            {"title": rng.choice(vocab.REVIEW_TITLES), "score": rng.randint(1, 5),
             "body": rng.choice(vocab.REVIEW_BODIES).format(**fill)}
            for _ in range(rng.randint(0, 3))
        ]  # fmt: skip
        off_title = [a for a in attrs if a not in in_title]
        wanted = rng.sample(off_title, k=min(len(off_title), rng.randint(2, 3)))
        if len(wanted) < 2 or rng.random() < 0.3:
            wanted.append(in_title[0])
        product = embedded_product(category, ptype, title + rng.choice(vocab.VARIANT_SUFFIXES), description, bullets,
                                   reviews, pricing, options, attrs, wanted or [in_title[0]])  # fmt: skip
        products.append({**product, "line": line_index})
    return products


def line_products(n_products: int, seed: int = 0) -> list[dict]:
    """The first ``n_products`` products of the lines in order (without asins: the catalog gives them)."""
    products: list[dict] = []
    line = 0
    while len(products) < n_products:
        products += generate_line(line, seed)[: n_products - len(products)]
        line += 1
    return products
