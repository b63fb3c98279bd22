from __future__ import annotations

import pytest

from webshop_server import create_app
from webshop_server.testing import build_test_shop


@pytest.fixture(scope="session")
def shop_cache(tmp_path_factory):
    return str(tmp_path_factory.mktemp("webshop-env-index"))


@pytest.fixture(scope="session")
def shop(shop_cache):
    return build_test_shop(shop_cache)


@pytest.fixture
def app(shop):
    return create_app({"title_nouns": "fallback"}, shop=shop)
