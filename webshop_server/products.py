"""The product record of the embedded catalogs: the keys the original's pages and reward read."""

from __future__ import annotations

from webshop_server.vocab import ProductType


def embedded_product(
    category: str,
    ptype: ProductType,
    title: str,
    description: str,
    bullets: list[str],
    reviews: list[dict],
    pricing: list[float],
    options: dict[str, list[str]],
    attributes: list[str],
    instruction_attributes: list[str],
) -> dict:
    """A generated product as a dict in the original's form (the caller adds its ``asin``)."""
    return {
        "category": category,
        "query": ptype.query,
        "product_category": ptype.path,
        "name": title,
        "Title": title,
        "Description": description,
        "BulletPoints": bullets,
        "Reviews": reviews,
        "Rating": round(sum(r["score"] for r in reviews) / len(reviews), 1) if reviews else "N.A.",
        "pricing": pricing,
        "Price": " to ".join(f"${p:.2f}" for p in pricing),
        "options": options,
        "option_to_image": {},
        "Attributes": attributes,
        "MainImage": "",
        "instruction_attributes": instruction_attributes,
        "noun": ptype.noun,
    }
