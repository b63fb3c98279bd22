"""Table-driven tests of the WebShop score: every branch with hand-made products and goals."""

from __future__ import annotations

import pytest

from webshop_server.reward import (
    TitleNouns,
    attribute_reward,
    fallback_title_nouns,
    fuzzy_ratio,
    normalize_color,
    option_reward,
    score_purchase,
    type_reward,
)

PATH = "Clothing › Women › Shoes › Running"


def product(**overrides) -> dict:
    base = {
        "asin": "B000000001",
        "query": "running shoes women",
        "product_category": PATH,
        "name": "Kestrel Lightweight Running Shoes with Memory Foam",
        "Title": "Kestrel Lightweight Running Shoes with Memory Foam",
        "BulletPoints": ["Non slip rubber sole for wet roads.", "Breathable upper."],
        "Description": "A shoe for daily training with arch support.",
        "Attributes": ["non slip", "memory foam", "rubber sole"],
        "options": {"color": ["navy blue", "black"], "size": ["7", "8"]},
    }
    base.update(overrides)
    return base


def goal(**overrides) -> dict:
    base = {
        "asin": "B000000001",
        "query": "running shoes women",
        "product_category": PATH,
        "name": "Kestrel Lightweight Running Shoes with Memory Foam",
        "attributes": ["memory foam"],
        "goal_options": {"color": "navy blue", "size": "8"},
        "price_upper": 50.0,
    }
    base.update(overrides)
    return base


NOUNS = TitleNouns(False)

# (case, purchased overrides, goal overrides, expected r_type, query_match, category_match, title_score)
TYPE_CASES = [
    ("all match", {}, {}, 1.0, True, True, 1.0),
    ("query only, titles share > 20%", {"product_category": "A › B"}, {}, 1.0, True, False, 1.0),
    ("category (2 levels, any order) only", {"query": "x", "product_category": "Shoes › Women › Z"}, {}, 1.0, False,
     True, 1.0),
    # Goal nouns: kestrel, running, shoes, memory, foam (5). Purchased shares "shoes" only -> 0.2, not > 0.2.
    ("no query/category, title 0.2 -> 0.5", {"query": "x", "product_category": "A › B", "name": "Trail Shoes"}, {},
     0.5, False, False, 0.2),
    ("query match but title < 0.1 -> 0.1",
     # 11 goal nouns, 1 shared: 1/11 < 0.1.
     {"name": "Shoes"}, {"name": "alpha bravo charlie delta echo foxtrot golf hotel india juliet shoes"}, 0.1, True,
     True, None),
    ("title shares nothing -> 0.0", {"name": "Ceramic Coffee Mug"}, {}, 0.0, True, True, 0.0),
    ("goal title without nouns counts 0.2", {"query": "x", "product_category": "A › B"}, {"name": "the and of"},
     0.5, False, False, 0.2),
]  # fmt: skip


@pytest.mark.parametrize(("case", "p_over", "g_over", "r_type", "query", "category", "title"), TYPE_CASES)
def test_type_reward_branches(case, p_over, g_over, r_type, query, category, title):
    info = type_reward(product(**p_over), goal(**g_over), NOUNS)
    assert info["r_type"] == r_type, case
    assert info["query_match"] is query
    assert info["category_match"] is category
    if title is not None:
        assert info["title_score"] == pytest.approx(title)
    else:
        assert 0 < info["title_score"] < 0.1


# (case, purchased overrides, goal attributes, expected matches)
ATTRIBUTE_CASES = [
    ("fuzzy match of an attribute", {}, ["memory foams"], 1),
    ("verbatim in title", {"Attributes": []}, ["lightweight running"], 1),
    ("verbatim in bullet points", {"Attributes": []}, ["wet roads"], 1),
    ("verbatim in description", {"Attributes": []}, ["arch support"], 1),
    ("absent everywhere", {}, ["waterproof"], 0),
    ("two of three", {}, ["non slip", "rubber sole", "waterproof"], 2),
]


@pytest.mark.parametrize(("case", "p_over", "attrs", "matches"), ATTRIBUTE_CASES)
def test_attribute_reward_branches(case, p_over, attrs, matches):
    r_att, n = attribute_reward(product(**p_over), goal(attributes=attrs))
    assert n == matches, case
    assert r_att == pytest.approx(matches / len(attrs))


# (case, goal option values, chosen options, expected r_option, expected matches)
OPTION_CASES = [
    ("size is matched exactly", ["8"], {"size": "8"}, 1.0, 1),
    ("size close but not equal fails", ["8"], {"size": "8.5"}, 0.0, 0),
    # Both normalise to "blue"; unnormalised their token-set ratio is about 61, no match.
    ("colour normalised: 'navy blue' vs 'royal blue'", ["navy blue"], {"color": "royal blue"}, 1.0, 1),
    ("other options fuzzy-matched", ["pack of 2"], {"style": "pack of 2 "}, 1.0, 1),
    ("option found in product text", ["black"], {"style": "memory foam"}, 1.0, 1),
    ("option missed", ["navy blue", "8"], {"color": "black", "size": "7"}, 0.0, 0),
    ("no goal options -> None", [], {"color": "black"}, None, 0),
]


@pytest.mark.parametrize(("case", "wanted", "chosen", "r_option", "matches"), OPTION_CASES)
def test_option_reward_branches(case, wanted, chosen, r_option, matches):
    r, n = option_reward(product(), wanted, chosen)
    assert n == matches, case
    assert r == (pytest.approx(r_option) if r_option is not None else None)


def test_total_score_formula_and_breakdown():
    # 1 attribute matched, options: navy blue matched, size 7 != 8; price 60 > 50.
    # score = r_type 1.0 * (1 + 1 + 0) / (1 + 2 + 1) = 0.5
    score, info = score_purchase(product(), goal(), 60.0, {"color": "navy blue", "size": "7"}, NOUNS)
    assert score == pytest.approx(0.5)
    assert info["r_att"] == 1.0 and info["r_option"] == 0.5 and info["r_price"] is False
    assert info["w_att"] == pytest.approx(0.25) and info["w_option"] == pytest.approx(0.5)
    assert info["w_price"] == pytest.approx(0.25)
    assert info["title_nouns"] == "fallback"


def test_full_match_is_success_and_type_scales_score():
    score, _ = score_purchase(product(), goal(), 49.99, {"color": "navy blue", "size": "8"}, NOUNS)
    assert score == 1.0
    # Same purchase of a product of another type (0.5 type factor): 0.5 * 4 / 4.
    other = product(query="x", product_category="A › B", name="Trail Shoes")
    score, info = score_purchase(other, goal(), 49.99, {"color": "navy blue", "size": "8"}, NOUNS)
    assert info["r_type"] == 0.5 and score == pytest.approx(0.5)


def test_goal_options_as_list_like_human_goals():
    score, info = score_purchase(product(), goal(goal_options=["8"]), 10.0, {"size": "8"}, NOUNS)
    assert score == 1.0 and info["w_option"] == pytest.approx(1 / 3)


def test_normalize_color_and_fuzzy_ratio():
    assert normalize_color("dark navy") == "dark"  # first colour of the list that occurs, as the original
    assert normalize_color("xl") == "xl"
    assert fuzzy_ratio("Memory-Foam!", "memory foam") == 100
    assert fuzzy_ratio("tea tree", "essential oils") < 50
    assert fuzzy_ratio("royal blue", "navy blue") <= 85


def test_fallback_nouns_drop_stop_words_numbers_and_descriptors():
    assert fallback_title_nouns("The Premium 2 Pack Black Running Shoes for Men") == ["running", "shoes"]


class _Token:
    def __init__(self, text: str, pos: str) -> None:
        self.text, self.pos_ = text, pos


def test_spacy_path_uses_pos_tags_with_a_local_pipeline():
    spacy = pytest.importorskip("spacy", reason="spaCy is in the dev extra; this checks its code path")
    nlp = spacy.blank("en")
    ruler = nlp.add_pipe("attribute_ruler")
    for word, pos in (("Kestrel", "PROPN"), ("Shoes", "NOUN"), ("Foam", "NOUN"), ("Trail", "NOUN")):
        ruler.add(patterns=[[{"ORTH": word}]], attrs={"POS": pos})
    nouns = TitleNouns(nlp)
    assert nouns.method == "spacy"
    assert nouns("Kestrel Lightweight Running Shoes with Memory Foam") == ["kestrel", "shoes", "foam"]
    # Goal nouns kestrel/shoes/foam; purchased "Trail Shoes" shares 1 of 3 -> 0.333 > 0.2, r_type 1.0.
    info = type_reward(product(query="x", product_category="A › B", name="Trail Shoes"), goal(), nouns)
    assert info["title_score"] == pytest.approx(1 / 3) and info["r_type"] == 1.0


def test_title_nouns_accepts_any_tagger():
    nouns = TitleNouns(lambda text: [_Token(w, "NOUN" if w.istitle() else "ADJ") for w in text.split()])
    assert nouns("Red Shoes big") == ["red", "shoes"]
    assert nouns.method == "spacy"
