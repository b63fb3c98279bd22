from __future__ import annotations

import pytest

from webshop_server import create_app
from webshop_server.testing import build_test_shop


@pytest.fixture(scope="session")
def shop(tmp_path_factory):
    return build_test_shop(str(tmp_path_factory.mktemp("webshop-index")))


@pytest.fixture
def app(shop):
    return create_app({"title_nouns": "fallback"}, shop=shop)


@pytest.fixture
def client(app):
    return app.test_client()
