"""The reward's fuzzy ratio equals the original's: thefuzz 0.19.0's token-set ratio with its difflib backend."""

from __future__ import annotations

import hashlib
import itertools

import pytest
from rapidfuzz import fuzz as rapid_fuzz
from rapidfuzz import utils as rapid_utils

from webshop_server import vocab
from webshop_server.fuzzy import process, ratio, token_set_ratio
from webshop_server.reward import normalize_color

# sha256 of the lines "a\tb\tthefuzz.fuzz.token_set_ratio(a, b)\n" over every ordered pair of the
# values below, computed with thefuzz 0.19.0 unpacked from its PyPI sdist (without
# python-Levenshtein, so on difflib, as the original's requirements install it).
THEFUZZ_0_19_DIGESTS = {
    "options": ("1daa24aefc25f862a098fec5aa509980d4b3dc5a2a5af6c4bda5fe1398cffdbb", 24964),
    "attributes": ("10d4ca33e7c94f4b108c3a0d465c4f585389da6812b401b9912b675b28cfe205", 26244),
}


def catalog_values() -> dict[str, list[str]]:
    """Every option value (and its colour-normalised form) and every attribute the embedded catalog can hold."""
    types = [t for ts in vocab.CATEGORIES.values() for t in ts]
    options = {v for t in types for values in t.options.values() for v in values}
    options |= {normalize_color(v) for v in options}
    return {"options": sorted(options), "attributes": sorted({a for t in types for a in t.attributes})}


@pytest.mark.parametrize("kind", ["options", "attributes"])
def test_equals_thefuzz_0_19_on_every_catalog_value_pair(kind):
    values = catalog_values()[kind]
    digest = hashlib.sha256()
    for a, b in itertools.product(values, values):
        digest.update(f"{a}\t{b}\t{token_set_ratio(a, b)}\n".encode())
    assert (digest.hexdigest(), len(values) ** 2) == THEFUZZ_0_19_DIGESTS[kind]


def test_rapidfuzz_would_change_one_verdict_on_the_catalog():
    # Why the reward does not use rapidfuzz: its indel ratio is not difflib's. Over the catalog's
    # 24,964 option pairs and 26,244 attribute pairs the values differ often; the > 85 verdict
    # differs on exactly one ordered pair.
    flipped = []
    for values in catalog_values().values():
        for a, b in itertools.product(values, values):
            theirs = int(round(rapid_fuzz.token_set_ratio(a, b, processor=rapid_utils.default_process)))
            if (theirs > 85) != (token_set_ratio(a, b) > 85):
                flipped.append((a, b, token_set_ratio(a, b), theirs))
    assert flipped == [("24 ounce (pack of 2)", "12 ounce (pack of 1)", 84, 89)]


# (a, b, expected); difflib's ratio is 2 * matched characters / total characters, rounded.
CASES = [
    ("memory foam", "Memory-Foam!", 100),  # same tokens after processing
    ("x-large", "large", 100),  # {large} is inside {x, large}
    ("blue", "red", 29),  # "e": 2 * 1 / 7 = 28.6
    ("black", "blue", 44),  # "bl": 2 * 2 / 9 = 44.4
    ("medium", "large", 18),  # "e" (difflib takes the first longest block): 2 * 1 / 11 = 18.2
    ("pack of 2", "pack of 12", 95),  # "of pack 2" / "of pack 12": "of pack " + "2", 2 * 9 / 19 = 94.7
    # "of ounce pack 2 24" / "of ounce pack 1 12": "of ounce pack " (14) + "2" = 15, 2 * 15 / 36 = 83.3;
    # sect "of ounce pack" vs either: 2 * 13 / 31 = 83.9 -> 84.
    ("24 ounce (pack of 2)", "12 ounce (pack of 1)", 84),
    # Reversed, difflib matches " " then "2": 2 * 16 / 36 = 88.9. The ratio is not symmetric.
    ("12 ounce (pack of 1)", "24 ounce (pack of 2)", 89),
    ("café", "caf", 100),  # U+0080-U+00FF are dropped before comparing
    ("!!", "!!", 0),  # no token: 0, even for equal strings
    ("", "red", 0),
]


@pytest.mark.parametrize(("a", "b", "expected"), CASES)
def test_hand_computed_ratios(a, b, expected):
    assert token_set_ratio(a, b) == expected


def test_processing_and_plain_ratio():
    assert process("  Navy-Blue/XL_2 ") == "navy blue xl_2"  # underscore is a word character, as in thefuzz
    assert process(("color", "red")) == "color    red"  # non-strings compare as str(), as in thefuzz
    assert token_set_ratio(None, "red") == 0
    assert ratio("", "") == 100 and ratio("", "a") == 0
    assert ratio("abcd", "bcde") == 75  # "bcd": 2 * 3 / 8
