"""The hard embedded catalog (``embedded-v1``): product lines with near-duplicates, goals worded off the title."""

from __future__ import annotations

import json
import re
from collections import defaultdict

import pytest

from webshop_server import Shop, ShopConfig
from webshop_server.catalog import generate_catalog_v1
from webshop_server.catalog_v1 import generate_line
from webshop_server.goals import paraphrase


@pytest.fixture(scope="module")
def hard_shop(tmp_path_factory):
    config = ShopConfig(catalog="embedded-v1", n_products=2000, cache_dir=str(tmp_path_factory.mktemp("v1")),
                        title_nouns="fallback")  # fmt: skip
    return Shop.from_config(config)


def _text(product: dict) -> str:
    return " ".join([product["Title"], product["Description"], *product["BulletPoints"]]).lower()


def test_the_catalog_is_a_pure_function_of_size_and_seed_and_a_larger_one_extends_a_smaller():
    small, large = generate_catalog_v1(300, seed=4), generate_catalog_v1(600, seed=4)
    assert small.products == generate_catalog_v1(300, seed=4).products
    assert [p["asin"] for p in large.products[:300]] == [p["asin"] for p in small.products]
    assert large.products[:299] == small.products[:299]  # the last line of the small one may be cut short
    assert len({p["asin"] for p in large.products}) == 600
    assert generate_catalog_v1(300, seed=5).products[0]["Title"] != small.products[0]["Title"] or (
        generate_catalog_v1(300, seed=5).products[0]["Attributes"] != small.products[0]["Attributes"]
    )
    with pytest.raises(ValueError, match="n_products"):
        generate_catalog_v1(0)


def test_every_attribute_is_in_the_products_text_and_the_title_names_at_most_two():
    for line in range(40):
        for p in generate_line(line, seed=0):
            text = _text(p)
            assert all(a in text for a in p["Attributes"]), p["asin"] if "asin" in p else p["Title"]
            assert sum(a.lower() in p["Title"].lower() for a in p["Attributes"]) <= 2
            assert set(p["instruction_attributes"]) <= set(p["Attributes"])


def test_a_line_holds_near_duplicates_that_differ_in_options_price_or_a_feature():
    differs = defaultdict(int)
    for line in range(60):
        siblings = generate_line(line, seed=0)
        assert 3 <= len(siblings) <= 8
        stems = {p["Title"].split(" - ")[0].split(" (")[0].split(" 2024")[0] for p in siblings}
        assert len(stems) == 1, stems
        first = siblings[0]
        for p in siblings[1:]:
            differs["options"] += p["options"] != first["options"]
            differs["price"] += p["pricing"] != first["pricing"]
            differs["feature"] += p["Attributes"] != first["Attributes"]
    assert min(differs.values()) > 50, differs


def test_goals_name_features_the_title_lacks_and_their_exact_purchase_scores_one(hard_shop):
    off_title = 0
    for n, goal in enumerate(hard_shop.goals[:500]):
        product = hard_shop.catalog.by_asin[goal["asin"]]
        off_title += any(a not in product["Title"].lower() for a in goal["attributes"])
        chosen = dict(goal["goal_options_by_name"])
        assert hard_shop.score(goal, goal["asin"], chosen)[0] == 1.0, n
        assert goal["instruction_text"].endswith("dollars") or goal["price_upper"] >= 1e6
    assert off_title == 500


def test_goals_are_reworded_not_copied_from_the_title(hard_shop):
    verbatim_noun = sum(
        re.search(rf"\b{re.escape(hard_shop.catalog.by_asin[g['asin']]['noun'])}\b", g["instruction_text"]) is not None
        for g in hard_shop.goals[:500]
    )
    assert 50 < verbatim_noun < 300  # the noun itself, or one of its synonyms
    import random

    forms = {paraphrase("gluten free", random.Random(i)) for i in range(60)}
    assert forms == {"gluten free", "free of gluten", "without gluten", "gluten-free"}
    assert {paraphrase("non gmo", random.Random(i)) for i in range(40)} == {"non gmo", "non-gmo", "no gmo"}


def test_most_goals_have_a_near_duplicate_that_fails_them(hard_shop):
    """A product of the target's line that the goal's exact options, price or features rule out."""
    by_line = defaultdict(list)
    for p in hard_shop.catalog.products:
        by_line[p["line"]].append(p)
    trapped = 0
    for goal in hard_shop.goals[:300]:
        target = hard_shop.catalog.by_asin[goal["asin"]]
        for p in by_line[target["line"]]:
            if p["asin"] == goal["asin"]:
                continue
            chosen = {name: v for v in goal["goal_options"] for name, vs in p["options"].items() if v in vs}
            if hard_shop.score(goal, p["asin"], chosen)[0] < 1.0:
                trapped += 1
                break
    assert trapped > 250


def test_shop_config_sizes_each_embedded_catalog_by_default():
    assert ShopConfig().n_products == 1000
    assert ShopConfig(catalog="embedded-v1").n_products == 10_000
    assert ShopConfig(catalog="embedded-v1", n_products=50).n_products == 50
    with pytest.raises(ValueError, match="embedded-v1"):
        ShopConfig(catalog="embedded-v2")


def test_the_difficulty_table_also_plays_the_original_files_when_webshop_data_is_set(
    original_folder, monkeypatch, tmp_path, capsys
):
    from gaca_envs.webshop import bench

    monkeypatch.setenv("WEBSHOP_DATA", str(original_folder))
    out = tmp_path / "t.json"
    bench.main(["--baselines", "--n-products", "300", "--split", "all", "--goals", "3", "--policies", "rule,expert",
                "--json", str(out), "--shop-config", f'{{"cache_dir": "{tmp_path}"}}'])  # fmt: skip
    embedded, original = json.loads(out.read_text())
    assert embedded["figures"]["catalog"] == "embedded-v1:n=300,seed=0"
    assert original["figures"]["catalog"] == str(original_folder)
    assert original["figures"]["near_duplicate_traps"] is None
    assert original["table"]["expert"]["success_rate"] == 1.0
    assert capsys.readouterr().out.count("| expert |") == 2
