"""The PDDL goal test of a native game, as a small backtracking join.

Nested ``exists`` over a conjunction is flattened into one quantifier block; each quantified
variable takes its candidates from the most selective positive literal that names it
(static predicates first, their lookups cached for the game), and literals are checked as
soon as their variables are bound. A goal test then costs a few dozen set lookups rather
than a sweep over every tuple of objects.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from gaca_envs.alfworld.engines.base import GameFileError
from gaca_envs.alfworld.engines.native.pddl_reader import SExpr, typed_list

Has = Callable[[str, tuple[str, ...]], bool]
FactsOf = Callable[[str], Iterable[tuple[str, ...]]]


class Goal:
    """A compiled goal formula.

    Args:
        formula: the parsed ``(:goal ...)`` formula.
        objects: object name -> type (the domain of quantified variables).
        static: predicate -> argument tuples, for predicates no action changes.
        what: the game file, for errors.
    """

    def __init__(self, formula: SExpr, objects: Mapping[str, str], static: Mapping[str, set], what: str) -> None:
        self._types = dict(objects)
        self._by_type: dict[str, tuple[str, ...]] = {}
        for name, type_ in objects.items():
            self._by_type[type_] = (*self._by_type.get(type_, ()), name)
        self._static = static
        self._static_cache: dict[tuple, list] = {}
        self._what = what
        self._root = self._compile(formula)
        self.predicates = frozenset(_predicates(self._root))
        """The predicates the goal reads (a step that changes none of them keeps its value)."""

    def _compile(self, f: SExpr) -> tuple:
        if not isinstance(f, list) or not f or not isinstance(f[0], str):
            raise GameFileError(f"{self._what}: malformed goal formula {f!r}")
        head = f[0]
        if head in ("and", "or"):
            return (head, tuple(self._compile(x) for x in f[1:]))
        if head == "not" and len(f) == 2:
            return ("not", self._compile(f[1]))
        if head == "imply" and len(f) == 3:
            return ("or", (("not", self._compile(f[1])), self._compile(f[2])))
        if head in ("exists", "forall") and len(f) == 3 and isinstance(f[1], list):
            variables = tuple(typed_list(f[1], f"{self._what} (goal {head})"))
            body = self._compile(f[2])
            if head == "forall":
                return ("forall", variables, body)
            if body[0] == "and" and len(body[1]) == 1 and body[1][0][0] == "exists":
                body = body[1][0]
            if body[0] == "exists":  # (exists (a) (exists (b) B)) == (exists (a b) B)
                return ("exists", variables + body[1], body[2], body[3])
            literals = body[1] if body[0] == "and" else (body,)
            return ("exists", variables, literals, tuple(_free_vars(x) for x in literals))
        if any(not isinstance(a, str) for a in f):
            raise GameFileError(f"{self._what}: malformed goal literal {f!r}")
        args = tuple(f[1:])
        return ("atom", head, args, frozenset(a for a in args if a.startswith("?")))

    def holds(self, has: Has, facts_of: FactsOf) -> bool:
        """Whether the goal holds, given ``has(predicate, args)`` and ``facts_of(predicate)``."""
        return self._eval(self._root, {}, has, facts_of)

    def _eval(self, f: tuple, b: dict, has: Has, facts_of: FactsOf) -> bool:
        head = f[0]
        if head == "atom":
            args = tuple(b.get(a, a) for a in f[2])
            if f[1] == "=":
                return args[0] == args[1]
            return has(f[1], args)
        if head == "and":
            return all(self._eval(x, b, has, facts_of) for x in f[1])
        if head == "or":
            return any(self._eval(x, b, has, facts_of) for x in f[1])
        if head == "not":
            return not self._eval(f[1], b, has, facts_of)
        if head == "forall":
            return self._forall(f[1], f[2], b, has, facts_of)
        return self._exists(f, b, has, facts_of)

    def _forall(self, variables, body, b, has, facts_of) -> bool:
        if not variables:
            return self._eval(body, b, has, facts_of)
        (v, t), rest = variables[0], variables[1:]
        return all(self._forall(rest, body, {**b, v: c}, has, facts_of) for c in self._candidates(t))

    def _candidates(self, type_: str) -> tuple[str, ...]:
        return tuple(self._types) if type_ == "object" else self._by_type.get(type_, ())

    def _exists(self, f: tuple, b: dict, has: Has, facts_of: FactsOf) -> bool:
        _, variables, literals, literal_vars = f
        free = {v: t for v, t in variables if v not in b}
        best, best_score = None, None
        for lit, names in zip(literals, literal_vars, strict=True):
            if names.isdisjoint(free):
                if not self._eval(lit, b, has, facts_of):
                    return False
            elif lit[0] == "atom" and lit[1] != "=":
                score = (lit[1] in self._static, sum(a not in free for a in lit[2]))
                if best_score is None or score > best_score:
                    best, best_score = lit, score
        if not free:
            return True
        if best is None:
            v = next(iter(free))
            return any(self._exists(f, {**b, v: c}, has, facts_of) for c in self._candidates(free[v]))
        pattern = tuple(None if a in free else b.get(a, a) for a in best[2])
        for args in self._matches(best[1], pattern, facts_of):
            nb = dict(b)
            for a, value in zip(best[2], args, strict=True):
                if a in free and nb.setdefault(a, value) != value:
                    break
            else:
                typed = all(free[a] == "object" or self._types.get(nb[a]) == free[a] for a in best[2] if a in free)
                if typed and self._exists(f, nb, has, facts_of):
                    return True
        return False

    def _matches(self, predicate: str, pattern: tuple, facts_of: FactsOf) -> list:
        def fits(args: tuple) -> bool:
            return len(args) == len(pattern) and all(p is None or p == a for p, a in zip(pattern, args, strict=True))

        if predicate in self._static:
            key = (predicate, pattern)
            got = self._static_cache.get(key)
            if got is None:
                got = self._static_cache[key] = [a for a in sorted(self._static[predicate]) if fits(a)]
            return got
        return [a for a in facts_of(predicate) if fits(a)]


def _free_vars(f: tuple) -> frozenset[str]:
    head = f[0]
    if head == "atom":
        return f[3]
    if head in ("and", "or"):
        return frozenset().union(*(_free_vars(x) for x in f[1]))
    if head == "not":
        return _free_vars(f[1])
    if head == "forall":
        return _free_vars(f[2]) - {v for v, _ in f[1]}
    return frozenset().union(*f[3]) - {v for v, _ in f[1]}


def _predicates(f: tuple) -> set[str]:
    head = f[0]
    if head == "atom":
        return {f[1]}
    if head in ("and", "or"):
        return set().union(*(_predicates(x) for x in f[1]))
    if head == "not":
        return _predicates(f[1])
    if head == "forall":
        return _predicates(f[2])
    return set().union(*(_predicates(x) for x in f[2]))
