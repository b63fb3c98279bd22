"""Shared test helpers for the shop: a small shop with a cached index."""

from __future__ import annotations

from webshop_server import Shop, ShopConfig


def build_test_shop(cache_dir: str, n_products: int = 1000) -> Shop:
    """The embedded 1k shop with its index cached under ``cache_dir``, title nouns by the fallback."""
    return Shop.from_config(ShopConfig(cache_dir=cache_dir, n_products=n_products, title_nouns="fallback"))
