"""TextWorld's context-sensitive text grammar (``*.twl2``), re-implemented for speed.

The semantics follow ``textworld.envs.pddl.textgen`` and ``textworld.logic.State.all_assignments``
exactly, because the observation text must be byte-identical:

- A nonterminal ``#name#`` expands to the first of its rules whose ``condition`` (a conjunctive
  query) has a solution under the current placeholder mapping.
- ``{expr | query}`` expands ``expr`` once per solution of ``query``, in the order TextWorld's
  depth-first search finds them: literal by literal, each over the matching facts sorted by
  argument names; a new placeholder never takes an object already bound to another one.
- ``[...]`` joins the expansions with ``#list_separator#`` / ``#list_last_separator#`` and
  says ``#list_empty#`` when there are none.
- ``{expr}`` evaluates a Python expression over the bound entities. Only names, attribute
  access, string constants, ``+``, ``and`` and ``or`` are accepted (checked when the game
  loads), so a game file cannot run code; ALFWorld's grammar needs nothing else.
- A rule text stops parsing at a character no symbol can start with (``<``, ``>``, ``|``,
  ``;``, a lone quote), as TatSu's parser of TextWorld does.
"""

from __future__ import annotations

import ast
import json
import re
import textwrap
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from gaca_envs.alfworld.engines.base import GameFileError

# Symbols: ("T", text) | ("N", tag) | ("C", expr, query) | ("L", conditional) | ("E", code, source)
Symbol = tuple
Query = tuple[tuple[str, tuple[tuple[str, str], ...]], ...]  # ((predicate, ((name, type), ...)), ...)
Mapping_ = dict[tuple[str, str], str]  # placeholder (name, type) -> object name

_LITERAL = re.compile(r"[^;|\"<>\[\]#{}]*")
_TAG = re.compile(r"[\w()/!<>\-\s,.]+")
_STATEMENT = re.compile(r"[^|\[\]{}\n<>]+")
_GIVEN = re.compile(r"\s*\|\s*([^;|{}\n\[\]#]+)")
_EOL_COMMENT = re.compile(r"(//.*|\s*)\n?")
_ALLOWED_AST = (ast.Expression, ast.BinOp, ast.Add, ast.BoolOp, ast.Or, ast.And, ast.Name, ast.Load, ast.Attribute)


@dataclass(frozen=True)
class Rule:
    """One production: a condition (empty: always) and the parsed right-hand side."""

    condition: Query
    rhs: tuple[Symbol, ...]


@dataclass(frozen=True)
class GrammarAction:
    """An action's command template and feedback symbol, as the ``.twl2`` file gives them."""

    template: tuple[Symbol, ...]
    feedback: tuple[Symbol, ...]


class Entity:
    """What grammar expressions see for an object (TextWorld's ``EntityInfo`` as PddlEnv fills it)."""

    __slots__ = ("id", "name", "type", "definite", "indefinite", "adj", "noun", "desc", "room_type")

    def __init__(self, id: str, name: str, type: str) -> None:  # noqa: A002 (TextWorld's field names)
        self.id, self.name, self.type = id, name, type
        self.definite, self.indefinite = "the", "a"
        self.adj = self.noun = self.desc = self.room_type = None

    def __str__(self) -> str:
        return self.name


def parse_query(text: str, what: str) -> Query:
    """``pred(a:t, b:t2) & not_pred(...)`` -> a query tuple."""
    literals = []
    for part in text.split("&"):
        m = re.fullmatch(r"\s*([\w-]+)\s*\(([^()]*)\)\s*", part)
        if m is None:
            raise GameFileError(f"{what}: cannot parse condition {text!r}")
        args = []
        for arg in filter(None, (a.strip() for a in m.group(2).split(","))):
            name, _, type_ = (x.strip() for x in arg.partition(":"))
            args.append((name, type_ or name))
        literals.append((m.group(1), tuple(args)))
    return tuple(literals)


def _compile_expr(source: str, what: str) -> object:
    try:
        tree = ast.parse(source.strip(), mode="eval")
    except SyntaxError as e:
        raise GameFileError(f"{what}: cannot parse grammar expression {{{source}}}: {e}") from e
    for node in ast.walk(tree):
        ok = isinstance(node, _ALLOWED_AST) or (isinstance(node, ast.Constant) and isinstance(node.value, str))
        if not ok or (isinstance(node, ast.Attribute) and node.attr.startswith("_")):
            raise GameFileError(
                f"{what}: grammar expression {{{source}}} uses {type(node).__name__}; the native engine "
                "accepts names, attributes, string constants, + , and, or (use engine='textworld' otherwise)"
            )
    return compile(tree, "<grammar>", "eval")


class _RhsParser:
    def __init__(self, text: str, what: str) -> None:
        self.text, self.pos, self.what = text, 0, what

    def symbols(self) -> tuple[Symbol, ...]:
        out: list[Symbol] = []
        while self.pos < len(self.text):
            symbol = self.symbol()
            if symbol is None:
                break
            out.append(symbol)
        return tuple(out)

    def _skip_tabs(self) -> None:
        # TatSu skips whitespace (tabs) and "comments" before each symbol; the grammar's comment
        # pattern ^(//.*|\s*)\n? eats blank space at the start of a line (e.g. a leading newline).
        while True:
            start = self.pos
            while self.pos < len(self.text) and self.text[self.pos] == "\t":
                self.pos += 1
            if self.pos == 0 or self.text[self.pos - 1] == "\n":
                self.pos = _EOL_COMMENT.match(self.text, self.pos).end()
            if self.pos == start:
                return

    def symbol(self) -> Symbol | None:
        self._skip_tabs()
        start = self.pos
        c = self.text[self.pos] if self.pos < len(self.text) else ""
        if c == "[":
            self.pos += 1
            self._skip_tabs()
            if self.text[self.pos : self.pos + 1] == "{":
                cond = self.conditional()
                if cond is not None and self.text[self.pos : self.pos + 1] == "]":
                    self.pos += 1
                    return ("L", cond)
            self.pos = start
            return None
        if c == "{":
            return self.conditional()
        if c == "#":
            return self.nonterminal()
        if c == '"':
            m = _LITERAL.match(self.text, self.pos + 1)
            if self.text[m.end() : m.end() + 1] == '"':
                self.pos = m.end() + 1
                return ("T", m.group(0))
            return None
        m = _LITERAL.match(self.text, self.pos)
        if m.end() == self.pos:
            return None
        self.pos = m.end()
        return ("T", m.group(0))

    def nonterminal(self) -> Symbol | None:
        m = _TAG.match(self.text, self.pos + 1)
        if m is None or self.text[m.end() : m.end() + 1] != "#":
            return None
        self.pos = m.end() + 1
        return ("N", m.group(0))

    def conditional(self) -> Symbol | None:
        start = self.pos
        self.pos += 1
        self._skip_tabs()
        if self.text[self.pos : self.pos + 1] == "#":
            expr = self.nonterminal()
        else:
            m = _STATEMENT.match(self.text, self.pos)
            expr = None
            if m is not None:
                self.pos = m.end()
                expr = ("E", _compile_expr(m.group(0), self.what), m.group(0))
        if expr is None:
            self.pos = start
            return None
        query: Query = ()
        m = _GIVEN.match(self.text, self.pos)
        if m is not None:
            query = parse_query(m.group(1), self.what)
            self.pos = m.end()
        self._skip_tabs()
        if self.text[self.pos : self.pos + 1] != "}":
            self.pos = start
            return None
        self.pos += 1
        return ("C", expr, query)


def parse_rhs(text: str, what: str) -> tuple[Symbol, ...]:
    """Parses a rule's right-hand side or a command template."""
    return _RhsParser(text, what).symbols()


_DOC_TOKEN = re.compile(r'\s+|#[^\n]*|"""(?:.|\n)*?"""|"[^"]*"|::|[{};]|[\w/-]+')


_ACTION_START = re.compile(r"(?m)^(?=action\s)")


def _parse_chunk(text: str, what: str) -> list[tuple]:
    """One top-level stretch of a ``.twl2`` document -> ``("grammar", dict)`` / ``("action", name, fields)``."""
    if "".join(_DOC_TOKEN.findall(text)) != text:
        raise GameFileError(f"{what}: the grammar holds text that is not TextWorld's .twl2 syntax")
    tokens = [t for t in _DOC_TOKEN.findall(text) if t.strip() and not t.startswith("#")]
    items: list[tuple] = []
    i = 0
    try:
        while i < len(tokens):
            if tokens[i] == "grammar":
                items.append(("grammar", json.loads(textwrap.dedent(tokens[i + 2][3:-3]))))
                i += 4
            elif tokens[i] == "action":
                name, i = tokens[i + 1], i + 3
                fields: dict[str, str] = {}
                while tokens[i] != "}":
                    fields[tokens[i]] = tokens[i + 2]
                    i += 4
                i += 1
                items.append(("action", name.lower(), fields))
                if "grammar" in fields:
                    block = textwrap.dedent(fields["grammar"][3:-3])
                    lines = "\n".join(x for x in block.split("\n") if not x.lstrip().startswith("#"))
                    items.append(("grammar", json.loads(lines)))
            else:
                raise GameFileError(f"{what}: unexpected {tokens[i]!r} in the grammar")
    except (IndexError, ValueError) as e:
        raise GameFileError(f"{what}: cannot parse the grammar: {e}") from e
    return items


def parse_twl2(
    text: str, what: str, cache: dict | None = None
) -> tuple[dict[str, list[Rule]], dict[str, GrammarAction]]:
    """Parses a ``.twl2`` document into grammar rules and per-action templates/feedback.

    Args:
        text: the document.
        what: the game file, for errors.
        cache: a dict the caller keeps between games: stretches of the document and rule texts
            already parsed are reused (games differ only in the task sentence).

    Raises:
        GameFileError: if the document or a rule cannot be parsed.
    """
    cache = {} if cache is None else cache
    if len(cache.get("rhs", ())) > 4096 or len(cache.get("chunks", ())) > 512:
        cache.clear()  # bounded; everything keyed on the cached pieces goes with them
    chunks_cache, rhs_cache = cache.setdefault("chunks", {}), cache.setdefault("rhs", {})
    items: list[tuple] = []
    try:
        for chunk in _ACTION_START.split(text):
            got = chunks_cache.get(chunk)
            if got is None:
                got = chunks_cache[chunk] = _parse_chunk(chunk, what)
            items += got
    except GameFileError:
        items = _parse_chunk(text, what)  # a split inside a string: parse the document whole
    blocks: dict = {}
    actions: dict[str, dict[str, str]] = {}
    for item in items:
        if item[0] == "grammar":
            blocks.update(item[1])
        else:
            actions[item[1]] = item[2]

    def rhs(source: str) -> tuple[Symbol, ...]:
        got = rhs_cache.get(source)
        if got is None:
            got = rhs_cache[source] = parse_rhs(source, what)
        return got

    def condition(source: str) -> Query:
        key = ("?", source)
        got = rhs_cache.get(key)
        if got is None:
            got = rhs_cache[key] = parse_query(source, what) if source else ()
        return got

    try:
        rules = {
            name: [Rule(condition(r.get("condition", "")), rhs(r["rhs"])) for r in entries]
            for name, entries in blocks.items()
        }
    except (KeyError, TypeError, AttributeError) as e:
        raise GameFileError(f"{what}: a grammar rule lacks its rhs or is not an object: {e!r}") from e
    parsed = {
        name: GrammarAction(rhs(f.get("template", '""')[1:-1]), rhs(f["feedback"][1:-1]))
        for name, f in actions.items()
        if "feedback" in f
    }
    return rules, parsed


class Facts:
    """What queries read: sorted facts of a predicate (``not_`` names read deleted facts)."""

    def sorted_facts(self, predicate: str) -> list[tuple[str, ...]]:  # pragma: no cover - interface
        raise NotImplementedError

    def has(self, predicate: str, args: tuple[str, ...]) -> bool:  # pragma: no cover - interface
        raise NotImplementedError

    def matching(self, predicate: str, position: int, value: str) -> list[tuple[str, ...]]:  # pragma: no cover
        raise NotImplementedError


class Deriver:
    """Expands grammar symbols against a fact store.

    Args:
        rules: the grammar's rules.
        types: object name -> type (placeholders match objects of their type; ``object`` all).
        entities: object name -> :class:`Entity`.
    """

    def __init__(self, rules: Mapping[str, list[Rule]], types: Mapping[str, str], entities: Mapping[str, Entity]):
        self.rules, self.types, self.entities = rules, types, entities

    def solutions(self, facts: Facts, query: Query, mapping: Mapping_, first_only: bool = False) -> list[Mapping_]:
        """All extensions of ``mapping`` satisfying ``query``, in TextWorld's order."""
        if all(p in mapping for _, params in query for p in params):  # nothing to search: check the facts
            ok = all(
                facts.has(pred, tuple(mapping[p] for p in params))
                and self._typed([mapping[p] for p in params], params)
                for pred, params in query
            )
            return [dict(mapping)] if ok else []
        out: list[Mapping_] = []
        self._search(facts, query, 0, dict(mapping), set(mapping.values()), out, first_only)
        return out

    def _search(self, facts, query, depth, mapping, used, out, first_only) -> bool:
        if depth == len(query):
            out.append(dict(mapping))
            return first_only
        predicate, params = query[depth]
        bound = [mapping.get(p) for p in params]
        if all(v is not None for v in bound):
            if facts.has(predicate, tuple(bound)) and self._typed(bound, params):
                return self._search(facts, query, depth + 1, mapping, used, out, first_only)
            return False
        candidates = None
        for position, value in enumerate(bound):
            if value is not None:
                candidates = facts.matching(predicate, position, value)
                break
        for fact in facts.sorted_facts(predicate) if candidates is None else candidates:
            if len(fact) != len(params):
                continue
            new = []
            for p, got in zip(params, fact, strict=True):
                existing = mapping.get(p)
                if existing is None:
                    if got in used or not self._type_ok(got, p[1]):
                        break
                    mapping[p] = got
                    used.add(got)
                    new.append(p)
                elif existing != got:
                    break
            else:
                if self._search(facts, query, depth + 1, mapping, used, out, first_only):
                    return True
            for p in new:
                used.discard(mapping.pop(p))
        return False

    def _type_ok(self, name: str, type_: str) -> bool:
        return type_ == "object" or self.types.get(name) == type_

    def _typed(self, values: list, params) -> bool:
        return all(self._type_ok(v, p[1]) for v, p in zip(values, params, strict=True))

    def derive(self, facts: Facts, symbols: Iterable[Symbol], mapping: Mapping_) -> str:
        """Expands ``symbols`` under ``mapping`` into text."""
        stack = [(s, mapping) for s in reversed(tuple(symbols))]
        out: list[str] = []
        while stack:
            symbol, ctx = stack.pop()
            kind = symbol[0]
            if kind == "T":
                out.append(symbol[1])
            elif kind == "N":
                stack += [(s, ctx) for s in reversed(self._pick(facts, symbol[1], ctx).rhs)]
            elif kind == "C":
                contexts = self.solutions(facts, symbol[2], ctx) if symbol[2] else [ctx]
                stack += [(symbol[1], c) for c in reversed(contexts)]
            elif kind == "E":
                out.append(str(self._eval(symbol, ctx)))
            else:  # "L"
                cond = symbol[1]
                items = [(cond[1], c) for c in (self.solutions(facts, cond[2], ctx) if cond[2] else [ctx])]
                stack += list(reversed(self._display_list(items, ctx)))
        return "".join(out)

    @staticmethod
    def _display_list(items: list, ctx: Mapping_) -> list:
        if not items:
            return [(("N", "list_empty"), ctx)]
        if len(items) == 1:
            return items
        out = []
        for item in items[:-1]:
            out += [item, (("N", "list_separator"), ctx)]
        out[-1] = (("N", "list_last_separator"), ctx)
        return [*out, items[-1]]

    def _pick(self, facts: Facts, tag: str, ctx: Mapping_) -> Rule:
        rules = self.rules.get(tag)
        if not rules:
            raise KeyError(f"grammar symbol #{tag}# has no rules")
        for rule in rules:
            if not rule.condition or self.solutions(facts, rule.condition, ctx, first_only=True):
                return rule
        raise KeyError(f"no rule of grammar symbol #{tag}# applies")

    def _eval(self, symbol: Symbol, ctx: Mapping_) -> object:
        variables = {name: self.entities[value] for (name, _), value in ctx.items()}
        return eval(symbol[1], {"__builtins__": {}}, variables)  # noqa: S307 (checked by _compile_expr)

    def is_static(self, symbols: Iterable[Symbol], static_predicates: frozenset[str], seen: frozenset = frozenset()):
        """Whether expanding ``symbols`` reads only predicates in ``static_predicates``."""
        for s in symbols:
            if s[0] == "N":
                if s[1] in seen:
                    continue
                for rule in self.rules.get(s[1], ()):
                    if any(p not in static_predicates for p, _ in rule.condition):
                        return False
                    if not self.is_static(rule.rhs, static_predicates, seen | {s[1]}):
                        return False
            elif (
                s[0] == "C"
                and (
                    any(p not in static_predicates for p, _ in s[2])
                    or not self.is_static((s[1],), static_predicates, seen)
                )
                or s[0] == "L"
                and not self.is_static((s[1],), static_predicates, seen)
            ):
                return False
        return True
