"""Command-line helpers the scripts share: deprecated option spellings and seed lists.

A renamed option keeps its old spelling for one release: :func:`add_deprecated_alias` adds it
to a parser (same destination, same checks), and using it warns, as every deprecated spelling
does, through :func:`warn_deprecated`. :func:`parse_seeds` reads the one ``--seeds`` syntax.
"""

from __future__ import annotations

import argparse
import warnings
from collections.abc import Sequence
from typing import Any


def deprecation_message(old: str, new: str) -> str:
    """The words every deprecated spelling is reported with: ``old`` is deprecated, use ``new``."""
    return f"{old} is deprecated and will be removed in the next release; use {new}"


def warn_deprecated(old: str, new: str, *, stacklevel: int = 3) -> None:
    """Warns (``FutureWarning``) that ``old`` is deprecated in favour of ``new``."""
    warnings.warn(deprecation_message(old, new), FutureWarning, stacklevel=stacklevel)


class _DeprecatedAlias(argparse.Action):
    """Stores the value as the new option does, after warning that the old spelling is deprecated."""

    def __init__(self, option_strings: Sequence[str], dest: str, *, new: str, **kwargs: Any) -> None:
        self.new = new
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:  # fmt: skip
        warn_deprecated(option_string or self.option_strings[0], self.new, stacklevel=2)
        setattr(namespace, self.dest, values)


def add_deprecated_alias(parser: argparse.ArgumentParser, old: str, new: str) -> None:
    """Adds the option ``old`` as a deprecated spelling of the parser's option ``new``.

    The alias takes a value as ``new`` does (same type, choices and destination); giving it warns
    with a ``FutureWarning`` naming ``new``. Its help reads "deprecated alias of NEW".

    Raises:
        ValueError: if the parser has no option ``new``.
    """
    action = next((a for a in parser._actions if new in a.option_strings), None)
    if action is None:
        raise ValueError(f"cannot alias {old}: the parser has no option {new}")
    parser.add_argument(
        old,
        dest=action.dest,
        type=action.type,
        choices=action.choices,
        metavar=action.metavar or action.dest.upper(),
        default=argparse.SUPPRESS,
        action=_DeprecatedAlias,
        new=new,
        help=f"deprecated alias of {new}",
    )


def parse_seeds(text: str) -> list[int]:
    """The seeds a ``--seeds`` value names: ``0-4`` (inclusive range), ``0,2,7`` (a list), ``3`` (one seed).

    Parts of a list may be ranges (``0-2,7``); the seeds come in the order written, each once.

    Raises:
        ValueError: for anything else (the message shows the accepted forms).
    """
    seeds: list[int] = []
    for part in str(text).split(","):
        first, dash, last = part.strip().partition("-")
        try:
            low, high = int(first), int(last) if dash else int(first)
        except ValueError:
            raise ValueError(
                f"--seeds takes a range 0-4, a list 0,2,7 or one seed 3 (non-negative integers), got {text!r}"
            ) from None
        if low < 0 or high < low:
            raise ValueError(f"--seeds range {part.strip()!r} must go up from a non-negative seed, as in 0-4")
        seeds += [s for s in range(low, high + 1) if s not in seeds]
    return seeds
