from __future__ import annotations

import json

import pytest

from tests.webshop_server.helpers import build_test_shop
from webshop_server import create_app


@pytest.fixture(scope="session")
def shop(tmp_path_factory):
    return build_test_shop(str(tmp_path_factory.mktemp("webshop-index")))


@pytest.fixture
def app(shop):
    return create_app({"title_nouns": "fallback"}, shop=shop)


@pytest.fixture
def client(app):
    return app.test_client()


def _raw_product(asin: str, name: str, price: str, options=None) -> dict:
    return {
        "asin": asin, "name": name, "category": "beauty", "query": " Hair Oil ", "product_category":
        "Beauty & Personal Care › Hair Care › Hair Oils", "full_description": f"{name} description.",
        "small_description": f"{name} bullet", "pricing": price, "images": [f"http://img/{asin}.jpg"],
        "customization_options": options, "brand": "X", "seller_id": "S1", "Title": name,
    }  # fmt: skip


@pytest.fixture
def original_folder(tmp_path):
    """A tiny data folder in exactly the original file formats."""
    items = [
        _raw_product("B00000000A", "Argan Hair Oil", "$12.99",
                     {"Size": [{"value": "4 Fl Oz/120ml", "image": "i1"}, {"value": "8 Fl Oz", "image": None}],
                      "Color": None}),
        _raw_product("nan", "Broken", "$1.00"),
        _raw_product("B00000000ATOOLONG", "Too long", "$1.00"),
        _raw_product("B00000000B", "Tea Tree Hair Oil", "$20.00 - $30.00"),
        _raw_product("B00000000A", "Duplicate", "$1.00"),
        _raw_product("B00000000C", "Coconut Hair Oil", ""),
    ]  # fmt: skip
    ins = {
        "B00000000A": {"attributes": ["argan oil", "dry hair"], "instruction": "i need argan hair oil for dry hair",
                       "instruction_attributes": ["argan oil", "dry hair"]},
        "B00000000B": {"attributes": ["tea tree"], "instruction": "i want tea tree hair oil",
                       "instruction_attributes": ["tea tree"]},
    }  # fmt: skip
    human = {
        "B00000000A": [
            {"asin": "B00000000A", "instruction": "i want an argan oil for my dry hair.",
             "instruction_attributes": ["argan oil"], "instruction_options": ["4 fl oz | 120ml"]},
            {"asin": "B00000000A", "instruction": "skip me", "instruction_attributes": [], "instruction_options": []},
        ],
        "B00000000C": [
            {"asin": "B00000000C", "instruction": "coconut oil please", "instruction_attributes": ["coconut"],
             "instruction_options": []},
        ],
    }  # fmt: skip
    reviews = [{"asin": "B00000000A", "average_rating": 4.5,
                "reviews": [{"title": "Nice", "stars": 5, "review": "Works."}]}]  # fmt: skip
    for name, data in (("items_shuffle_1000.json", items), ("items_ins_v2_1000.json", ins),
                       ("items_human_ins.json", human), ("reviews.json", reviews)):  # fmt: skip
        (tmp_path / name).write_text(json.dumps(data))
    return tmp_path
