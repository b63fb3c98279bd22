"""Self-hosted WebShop: Flask app, catalog, BM25 search, goals and reward (no Java).

``create_app(config)`` builds the app; ``webshop-server`` (``webshop_server.cli``) serves it.
"""

from __future__ import annotations

from webshop_server.app import create_app
from webshop_server.shop import Shop, ShopConfig

__all__ = ["Shop", "ShopConfig", "create_app"]
