"""Embedded catalog, original data files, goals and splits."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from webshop_server.catalog import (
    generate_catalog,
    load_catalog,
    load_original_catalog,
    parse_pricing,
    product_document,
)
from webshop_server.goals import build_goals, price_bound, read_goals, split_range, write_goals
from webshop_server.shop import Shop, ShopConfig


def test_embedded_catalog_is_deterministic_and_covers_five_categories():
    a, b = generate_catalog(300, seed=1), generate_catalog(300, seed=1)
    assert a.products == b.products
    assert generate_catalog(300, seed=2).products != a.products
    assert {p["category"] for p in a.products} == {"beauty", "food", "fashion", "furniture", "electronics"}
    assert len({p["asin"] for p in a.products}) == 300
    for p in a.products:
        assert len(p["asin"]) == 10 and p["Title"] and p["Description"] and len(p["BulletPoints"]) >= 3
        assert p["Price"].startswith("$") and 1 <= len(p["pricing"]) <= 2
        assert all(len(values) >= 2 for values in p["options"].values())
        assert set(p["instruction_attributes"]) <= set(p["Attributes"])
    # A price range scores at a fixed point inside it.
    ranged = next(p for p in a.products if len(p["pricing"]) == 2)
    assert ranged["pricing"][0] <= a.prices[ranged["asin"]] <= ranged["pricing"][1]
    assert a.prices == b.prices


def test_embedded_catalog_rejects_bad_size():
    with pytest.raises(ValueError, match="n_products must be between 1 and"):
        generate_catalog(0)
    with pytest.raises(FileNotFoundError, match="catalog must be 'embedded', 'embedded-v1' or a folder"):
        load_catalog("/no/such/folder")


def test_document_is_built_like_the_original():
    p = {"Title": "Red Shoe", "Description": "Soft.", "BulletPoints": ["Grippy", "Light"],
         "options": {"color": ["red", "blue"], "size": ["7"]}}  # fmt: skip
    assert product_document(p) == "red shoe soft. grippy color: red, blue, and size: 7"


def test_parse_pricing_like_the_original():
    assert parse_pricing("$12.99") == ([12.99], "$12.99")
    assert parse_pricing("$10.99 - $25.50") == ([10.99, 25.5], "$10.99 to $25.5")
    assert parse_pricing("") == ([100.0], "$100.0")
    assert parse_pricing(None) == ([100.0], "$100.0")


def test_original_files_load_like_the_original(original_folder):
    catalog = load_original_catalog(str(original_folder))
    assert [p["asin"] for p in catalog.products] == ["B00000000A", "B00000000B", "B00000000C"]
    a = catalog.by_asin["B00000000A"]
    assert a["options"] == {"size": ["4 fl oz | 120ml", "8 fl oz"]}  # lowercased, '/' -> ' | ', None skipped
    assert a["query"] == "hair oil" and a["BulletPoints"] == ["Argan Hair Oil bullet"]
    assert a["Reviews"] == [{"title": "Nice", "score": 5, "body": "Works."}] and a["Rating"] == 4.5
    assert a["Attributes"] == ["argan oil", "dry hair"] and a["MainImage"] == "http://img/B00000000A.jpg"
    assert catalog.by_asin["B00000000C"]["Attributes"] == ["DUMMY_ATTR"]
    assert catalog.by_asin["B00000000C"]["Price"] == "$100.0"
    assert catalog.by_asin["B00000000B"]["pricing"] == [20.0, 30.0]
    assert catalog.human_goals


def test_human_goals_follow_the_original_recipe_and_shuffle(original_folder):
    catalog = load_original_catalog(str(original_folder))
    goals = build_goals(catalog)
    assert len(goals) == 2  # the instruction without attributes is skipped
    texts = sorted(g["instruction_text"] for g in goals)
    assert texts[1].startswith("i want an argan oil for my dry hair, and price lower than ")  # '.' stripped
    assert texts[0].startswith("coconut oil please")
    argan = next(g for g in goals if g["asin"] == "B00000000A")
    assert argan["goal_options"] == ["4 fl oz | 120ml"] and argan["attributes"] == ["argan oil"]
    # Same order as the original's `random.seed(233); random.shuffle(goals)`.
    unshuffled = sorted(goals, key=lambda g: g["asin"])
    expected = list(unshuffled)
    random.Random(233).shuffle(expected)
    assert [g["asin"] for g in goals] == [g["asin"] for g in expected]


def test_synthetic_goals_from_original_instructions(original_folder):
    catalog = load_original_catalog(str(original_folder), human_goals=False)
    goals = build_goals(catalog)
    by_asin = {}
    for g in goals:
        by_asin.setdefault(g["asin"], []).append(g)
    assert sorted(by_asin) == ["B00000000A", "B00000000B"]  # C has no instruction
    texts = sorted(g["instruction_text"] for g in by_asin["B00000000A"])
    assert texts[0].startswith("i need argan hair oil for dry hair with size: 4 fl oz | 120ml, and price lower than")
    assert len(texts) == 2  # one goal per option value


def test_full_and_small_files_and_goal_kind_are_chosen_as_configured(original_folder):
    # A folder with both sets, as the original's setup.sh -d all leaves it: the full files hold one more product.
    items = json.loads((original_folder / "items_shuffle_1000.json").read_text())
    extra = {**items[0], "asin": "B0000000FF", "name": "Full-set Oil"}
    (original_folder / "items_shuffle.json").write_text(json.dumps([*items, extra]))
    (original_folder / "items_ins_v2.json").write_text((original_folder / "items_ins_v2_1000.json").read_text())
    full = load_original_catalog(str(original_folder))  # auto: the full files win, human goals when present
    assert "B0000000FF" in full.by_asin and full.human_goals
    small = load_original_catalog(str(original_folder), files="small", human_goals=False)  # verl-agent's defaults
    assert "B0000000FF" not in small.by_asin and not small.human_goals
    assert load_original_catalog(str(original_folder), files="full").by_asin.keys() == full.by_asin.keys()
    shop = Shop.from_config(
        ShopConfig(catalog=str(original_folder), catalog_files="small", human_goals=False, cache_dir="")
    )
    assert len(shop.catalog.products) == 3 and {g["asin"] for g in shop.goals} == {"B00000000A", "B00000000B"}
    (original_folder / "items_shuffle_1000.json").unlink()
    with pytest.raises(FileNotFoundError, match=r"no file matching 'items_shuffle\*.json' \(the _1000 subset\)"):
        load_original_catalog(str(original_folder), files="small")
    with pytest.raises(ValueError, match="catalog_files must be one of auto, full, small, got 'tiny'"):
        ShopConfig(catalog=str(original_folder), catalog_files="tiny")


def test_verl_agent_webshop_configs_shop_the_small_files_with_synthetic_goals(original_folder, monkeypatch):
    import yaml

    items = json.loads((original_folder / "items_shuffle_1000.json").read_text())
    (original_folder / "items_shuffle.json").write_text(json.dumps([*items, {**items[0], "asin": "B0000000FF"}]))
    (original_folder / "items_ins_v2.json").write_text((original_folder / "items_ins_v2_1000.json").read_text())
    root = Path(__file__).resolve().parents[2]
    for estimator in ("grpo", "gigpo", "gaca"):
        fields = yaml.safe_load((root / "configs" / "verl_agent" / f"webshop_{estimator}.yaml").read_text())
        shop_fields = json.loads(fields["env_kwargs"])["shop_config"]
        monkeypatch.delenv("WEBSHOP_DATA", raising=False)
        with pytest.raises(
            ValueError, match=r"catalog='\$WEBSHOP_DATA' names an environment variable that is not set"
        ):
            ShopConfig(**shop_fields)
        monkeypatch.setenv("WEBSHOP_DATA", str(original_folder))
        shop = Shop.from_config(ShopConfig(**shop_fields, cache_dir=""))
        assert "B0000000FF" not in shop.catalog.by_asin and not shop.catalog.human_goals
        texts = [
            g["instruction_text"] for g in shop.goals
        ]  # items_ins_v2's synthetic instructions, not the human ones
        assert any(t.startswith("i need argan hair oil") for t in texts)
        assert not any(t.startswith(("i want an argan oil", "coconut oil please")) for t in texts)


def test_missing_files_give_clear_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"no file matching 'items_shuffle\*.json'"):
        load_original_catalog(str(tmp_path))


def test_goals_are_seeded_and_split(shop, tmp_path):
    again = build_goals(shop.catalog, seed=0)
    assert again == shop.goals  # same index, same text and bound, in a fresh computation
    assert len(shop.goals) > 1500
    assert split_range("test", len(shop.goals)) == range(0, 500)
    assert split_range("eval", len(shop.goals)) == range(500, 1500)
    assert split_range("train", len(shop.goals)) == range(1500, len(shop.goals))
    with pytest.raises(ValueError, match="split 'train' .* is empty"):
        split_range("train", 1000)
    with pytest.raises(ValueError, match="split must be one of"):
        split_range("dev", 10)
    for g in shop.goals[:50]:
        price = shop.catalog.prices[g["asin"]]
        assert price < g["price_upper"] and g["instruction_text"].endswith(f"{g['price_upper']:.2f} dollars")
        assert g["goal_options"] == list(g["goal_options_by_name"].values())  # the list the original scores 1.0
        for name, value in g["goal_options_by_name"].items():
            assert f"{name}: {value}" in g["instruction_text"]
    path = tmp_path / "goals.json"
    write_goals(str(path), shop.goals, shop.catalog.source)
    assert read_goals(str(path)) == shop.goals
    assert json.loads(path.read_text())["splits"]["eval"] == [500, 1500]


def test_price_bound_recipe():
    upper, text = price_bound(23.5, random.Random(0))
    assert upper in (40.0, 50.0, 60.0) and text == f", and price lower than {upper:.2f} dollars"
    assert price_bound(985.0, random.Random(0)) == (1_000_000.0, "")  # fewer than two multiples of 10 above


def test_read_goals_takes_both_goal_option_forms(tmp_path):
    base = {"asin": "B1", "category": "c", "query": "q", "name": "n", "product_category": "a › b",
            "instruction_text": "i need n", "attributes": ["x"], "price_upper": 10.0}  # fmt: skip
    synthetic = {**base, "goal_options": {"color": "red", "size": "large"}}  # the original's synthetic form
    human = {**base, "goal_options": ["red", "large"]}  # the original's human form
    path = tmp_path / "original_goals.json"
    path.write_text(json.dumps([synthetic, human]))  # a bare list, as the original's get_goals returns
    first, second = read_goals(str(path))
    assert first["goal_options"] == second["goal_options"] == ["red", "large"]
    assert first["goal_options_by_name"] == {"color": "red", "size": "large"} and "goal_options_by_name" not in second
    path.write_text(json.dumps([{**base, "goal_options": "red"}]))
    with pytest.raises(ValueError, match=r"goal 0: goal_options must be a list of option values or a dict"):
        read_goals(str(path))
    path.write_text(json.dumps({"goal": []}))
    with pytest.raises(ValueError, match="is not a goal file"):
        read_goals(str(path))
