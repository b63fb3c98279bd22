"""The fuzzy string ratio WebShop's reward uses: ``thefuzz`` 0.19.0's token-set ratio, difflib backend.

The original pins ``thefuzz==0.19.0`` and not ``python-Levenshtein`` (its ``speedup`` extra), so
``thefuzz`` falls back to the standard library's ``difflib.SequenceMatcher`` for its ratio. That
ratio (Ratcliff/Obershelp matching blocks) is not the indel-distance ratio of
``python-Levenshtein`` or ``rapidfuzz``: the two disagree on some strings (``token_set_ratio``
here vs ``rapidfuzz.fuzz.token_set_ratio``, see tests/webshop_server/test_fuzzy.py), so the reward
uses this reimplementation of the algorithm on top of ``difflib``:

1. process each string: drop the characters U+0080-U+00FF (``force_ascii``), turn every
   character that is not a letter, digit or underscore into a space, lowercase, strip;
2. split into token sets A and B; with I = A & B, build ``sect`` (sorted I joined by spaces),
   ``sect + " " + sorted(A - B)`` and ``sect + " " + sorted(B - A)`` (each stripped);
3. the result is the largest of the three pairwise ratios (sect vs first, sect vs second, first
   vs second), each ``round(100 * SequenceMatcher(None, x, y).ratio())``, with 100 for equal
   strings and 0 when either is empty. A string with no token scores 0.
"""

from __future__ import annotations

import difflib
import re

_LATIN1_HIGH = {code: None for code in range(128, 256)}
_NON_WORD = re.compile(r"\W", re.UNICODE)


def process(text: object) -> str:
    """The string ``thefuzz`` compares: Latin-1 high characters dropped, non-word characters as spaces, lowercase."""
    text = str(text).translate(_LATIN1_HIGH)
    return _NON_WORD.sub(" ", text).lower().strip()


def ratio(a: str, b: str) -> int:
    """``round(100 * difflib ratio)`` of two processed strings; 100 if equal, 0 if one is empty."""
    if a == b:
        return 100
    if not a or not b:
        return 0
    return int(round(100 * difflib.SequenceMatcher(None, a, b).ratio()))


def token_set_ratio(a: object, b: object) -> int:
    """Token-set ratio in 0-100 of ``a`` and ``b``, as ``thefuzz`` 0.19.0 computes it without python-Levenshtein.

    Args:
        a: the first string (anything else is compared as ``str(a)``, as ``thefuzz`` does).
        b: the second string.

    Returns:
        An integer in [0, 100]; 0 when either has no letter or digit.
    """
    if a is None or b is None:
        return 0
    tokens_a, tokens_b = set(process(a).split()), set(process(b).split())
    if not tokens_a or not tokens_b:
        return 0
    common = " ".join(sorted(tokens_a & tokens_b))
    with_a = f"{common} {' '.join(sorted(tokens_a - tokens_b))}".strip()
    with_b = f"{common} {' '.join(sorted(tokens_b - tokens_a))}".strip()
    return max(ratio(common, with_a), ratio(common, with_b), ratio(with_a, with_b))
