"""Reads ALFWorld's PDDL without Fast Downward: s-expressions, the domain check and the problem.

Names are lowercased, as Fast Downward's parser does (TextWorld reports facts that way).
The goal test lives in :mod:`.goal`; :mod:`gaca_envs.alfworld.pddl_writer` writes problems.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from gaca_envs.alfworld.engines.base import GameFileError

_TOKEN = re.compile(r"\(|\)|[^\s()]+")
SExpr = str | list  # a token or a list of s-expressions

# sha256 of ALFWorld's domain (alfworld 0.4.2, alfworld/data/alfred.pddl) after
# normalise_pddl(): the only domain whose actions NativeEngine implements.
ALFRED_DOMAIN_SHA256 = "915e118f4f32b4d826bf53c99e860dd85831afffb1a31ad333f063ce005b7122"


def strip_comments(text: str) -> str:
    """Removes ``;`` comments (to the end of the line)."""
    return "\n".join(line.split(";", 1)[0] for line in text.split("\n"))


def normalise_pddl(text: str) -> str:
    """Comment-free, lowercase, single-spaced token text (what the domain check hashes)."""
    return " ".join(_TOKEN.findall(strip_comments(text).lower()))


def domain_digest(text: str) -> str:
    """sha256 of :func:`normalise_pddl` of a domain."""
    return hashlib.sha256(normalise_pddl(text).encode()).hexdigest()


def parse_sexpr(text: str, what: str) -> list:
    """Parses one parenthesised expression (lowercased, comments removed).

    Raises:
        GameFileError: if parentheses do not balance.
    """
    text = strip_comments(text).lower() if ";" in text else text.lower()
    stack: list[list] = [[]]
    for token in _TOKEN.findall(text):
        if token == "(":
            stack.append([])
        elif token == ")":
            if len(stack) == 1:
                raise GameFileError(f"{what}: unbalanced ')'")
            done = stack.pop()
            stack[-1].append(done)
        else:
            stack[-1].append(token)
    if len(stack) != 1 or len(stack[0]) != 1 or not isinstance(stack[0][0], list):
        raise GameFileError(f"{what}: expected one balanced (define ...) expression")
    return stack[0][0]


def typed_list(items: list, what: str) -> list[tuple[str, str]]:
    """``a b - t1 c - t2`` -> ``[(a, t1), (b, t1), (c, t2)]`` (untyped names get ``object``)."""
    out, pending, i = [], [], 0
    while i < len(items):
        item = items[i]
        if not isinstance(item, str):
            raise GameFileError(f"{what}: expected names and types, got {item!r}")
        if item == "-":
            if i + 1 >= len(items) or not isinstance(items[i + 1], str):
                raise GameFileError(f"{what}: '-' must be followed by a type name")
            out += [(name, items[i + 1]) for name in pending]
            pending, i = [], i + 2
            continue
        pending.append(item)
        i += 1
    return out + [(name, "object") for name in pending]


@dataclass(frozen=True)
class Problem:
    """A parsed PDDL problem: objects with types, initial facts and the goal formula."""

    objects: Mapping[str, str]
    init: tuple[tuple[str, ...], ...]
    goal: SExpr


def parse_problem(text: str, predicates: Mapping[str, tuple[str, ...]], types: Iterable[str], what: str) -> Problem:
    """Parses and checks a problem against the domain's predicates and types.

    Raises:
        GameFileError: naming the fact, object or type that is wrong.
    """
    tree = parse_sexpr(text, what)
    if tree[:1] != ["define"]:
        raise GameFileError(f"{what}: the problem must start with (define (problem ...) ...)")
    sections = {part[0]: part[1:] for part in tree[1:] if isinstance(part, list) and part}
    for key in (":objects", ":init", ":goal"):
        if key not in sections:
            raise GameFileError(f"{what}: the problem has no ({key} ...) section")
    known_types = set(types)
    objects: dict[str, str] = {}
    for name, type_ in typed_list(sections[":objects"], f"{what} (:objects)"):
        if type_ not in known_types:
            raise GameFileError(
                f"{what}: object {name} has unknown type {type_!r}; the domain's types are {sorted(known_types)}"
            )
        objects[name] = type_
    init = []
    for fact in sections[":init"]:
        if not isinstance(fact, list) or not fact or not isinstance(fact[0], str):
            raise GameFileError(f"{what}: malformed fact {fact!r} in (:init ...)")
        if fact[0] == "=":  # numeric fluents such as (= (total-cost) 0): not facts
            continue
        init.append(check_fact(fact, predicates, objects, what))
    if len(sections[":goal"]) != 1:
        raise GameFileError(f"{what}: (:goal ...) must hold exactly one formula")
    return Problem(objects, tuple(dict.fromkeys(init)), sections[":goal"][0])


def check_fact(fact: list, predicates: Mapping[str, tuple[str, ...]], objects: Mapping[str, str], what: str) -> tuple:
    """Checks one initial fact's predicate, arity, objects and argument types."""
    name, args = fact[0], fact[1:]
    signature = predicates.get(name)
    if signature is not None and len(args) == len(signature):
        try:
            if all(e == "object" or objects[a] == e for a, e in zip(args, signature, strict=True)):
                return tuple(fact)
        except (KeyError, TypeError):
            pass
    text = "(" + " ".join(map(str, fact)) + ")"
    if signature is None:
        raise GameFileError(f"{what}: fact {text} uses unknown predicate {name!r}")
    if len(args) != len(signature) or not all(isinstance(a, str) for a in args):
        raise GameFileError(f"{what}: fact {text} needs {len(signature)} object arguments ({', '.join(signature)})")
    for position, (arg, expected) in enumerate(zip(args, signature, strict=True), 1):
        if arg not in objects:
            raise GameFileError(f"{what}: fact {text} names {arg!r}, which is not declared in (:objects ...)")
        if expected != "object" and objects[arg] != expected:
            raise GameFileError(
                f"{what}: fact {text}: argument {position} {arg!r} has type {objects[arg]!r}, "
                f"predicate {name} expects {expected!r}"
            )
    raise AssertionError("unreachable")  # pragma: no cover
