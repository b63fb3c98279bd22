from __future__ import annotations

import pytest

from tests.webshop_server.helpers import build_test_shop
from webshop_server import create_app


@pytest.fixture(scope="session")
def shop_cache(tmp_path_factory):
    return str(tmp_path_factory.mktemp("webshop-env-index"))


@pytest.fixture(scope="session")
def shop(shop_cache):
    return build_test_shop(shop_cache)


@pytest.fixture
def app(shop):
    return create_app({"title_nouns": "fallback"}, shop=shop)
