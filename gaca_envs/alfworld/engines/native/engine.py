"""``NativeEngine``: ALFWorld simulated directly, with TextWorld's text, byte for byte.

The stock engine grounds ALFWorld's PDDL domain with Fast Downward's translator, asks the
planner library for the applicable operators after every step and re-parses the grammar for
each admissible command. This engine implements the fifteen actions of ALFWorld's domain
(``alfworld/data/alfred.pddl``) directly in Python over sets of facts, and renders text with
a re-implementation of TextWorld's grammar (:mod:`.grammar`). What it reproduces, including
TextWorld's own bookkeeping quirks:

- Applicable actions are the domain's preconditions; like Fast Downward's translator it
  drops operators that change nothing (``go to`` a receptacle at the agent's own location).
- TextWorld's fact set applies every effect an operator lists, conditional or not, adds
  before deletes: after ``use`` a lamp the facts hold ``istoggled`` and never ``ison``, and a
  deleted fact ``f`` leaves ``not_f`` behind (the grammar's ``not_inreceptacle`` reads it).
  The goal test uses the true PDDL state (Fast Downward's), where ``ison`` flips.
- Names: ALFWorld's ``Demangler`` (``apple 2``: objects of a kind numbered from the end of
  the sorted ids), ``a`` as every indefinite article.
- Commands: each operator's template rendered, de-duplicated, sorted; invalid commands
  answer "Nothing happens."; commands are stripped first.
"""

from __future__ import annotations

import os
from collections import Counter, OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from gaca_envs.alfworld.domain import DYNAMIC_PREDICATES, EFFECT_PREDICATES, demangle
from gaca_envs.alfworld.engines.base import EngineState, GameFileError, read_game_file
from gaca_envs.alfworld.engines.native.actions import effects, operators
from gaca_envs.alfworld.engines.native.goal import Goal
from gaca_envs.alfworld.engines.native.grammar import Deriver, Entity, GrammarAction, parse_twl2
from gaca_envs.alfworld.engines.native.pddl_reader import (
    ALFRED_DOMAIN_SHA256,
    domain_digest,
    parse_problem,
    parse_sexpr,
    typed_list,
)
from gaca_envs.task_env import NOTHING_HAPPENS


@dataclass(frozen=True)
class NativeState:
    """A snapshot of a native game (small, immutable, picklable).

    Attributes:
        facts: TextWorld's view of the changing facts, ``(predicate, *args)``.
        deleted: facts deleted at some point and not added back (TextWorld's ``not_`` facts).
        on: objects whose ``isOn`` is true in the PDDL state.
    """

    facts: frozenset[tuple[str, ...]]
    deleted: frozenset[tuple[str, ...]]
    on: frozenset[str]


class Replay(NamedTuple):
    """What :meth:`NativeEngine.replay` reports.

    Attributes:
        state: the state after the commands played.
        intro: the game's intro (the observation of its start).
        stopped_at: the index of the command play stopped at, or None when all were played.
        why: why it stopped there: ``"not admissible"`` or ``"won"`` (the game was won before it).
    """

    state: EngineState
    intro: str
    stopped_at: int | None
    why: str


class _Store:
    """The fact store queries read: static facts plus the current TextWorld fact view."""

    def __init__(self, game: _Game, dynamic: dict[str, set], deleted: dict[str, set]) -> None:
        self.static = game.static
        self.dynamic = dynamic
        self.deleted = deleted
        self._sorted = game.static_sorted
        self._static_index = game.static_index
        self._sorted_dynamic: dict[str, list] = {}
        self._index: dict[tuple[str, int], dict[str, list]] = {}

    def sorted_facts(self, predicate: str) -> list[tuple[str, ...]]:
        got = self._sorted.get(predicate)
        if got is not None:
            return got
        if predicate in self.static:
            got = self._sorted[predicate] = sorted(self.static[predicate])
            return got
        got = self._sorted_dynamic.get(predicate)
        if got is None:
            if predicate.startswith("not_"):
                got = sorted(self.deleted.get(predicate[4:], ()))
            else:
                got = sorted(self.dynamic.get(predicate, ()))
            self._sorted_dynamic[predicate] = got
        return got

    def has(self, predicate: str, args: tuple[str, ...]) -> bool:
        if predicate.startswith("not_"):
            return args in self.deleted.get(predicate[4:], ())
        return args in self.dynamic.get(predicate, ()) or args in self.static.get(predicate, ())

    def matching(self, predicate: str, position: int, value: str) -> list[tuple[str, ...]]:
        """Sorted facts of ``predicate`` whose argument ``position`` is ``value``."""
        cache = self._static_index if predicate in self.static else self._index
        index = cache.get((predicate, position))
        if index is None:
            index = cache[(predicate, position)] = {}
            for args in self.sorted_facts(predicate):
                if position < len(args):
                    index.setdefault(args[position], []).append(args)
        return index.get(value, [])

    def changed(self) -> None:
        self._sorted_dynamic.clear()
        self._index.clear()


def _domain_actions(domain: str, what: str) -> dict[str, tuple[tuple[str, str], ...]]:
    tree = parse_sexpr(domain, what)
    actions = {}
    for part in tree:
        if isinstance(part, list) and part[:1] == [":action"]:
            params = part[part.index(":parameters") + 1]
            actions[part[1]] = tuple((n.lstrip("?"), t) for n, t in typed_list(params, f"{what} ({part[1]})"))
    return actions


def _domain_signature(domain: str, what: str) -> tuple[dict[str, tuple[str, ...]], list[str]]:
    tree = parse_sexpr(domain, what)
    predicates, types = {}, ["object"]
    for part in tree:
        if isinstance(part, list) and part[:1] == [":predicates"]:
            for pred in part[1:]:
                predicates[pred[0]] = tuple(t for _, t in typed_list(pred[1:], f"{what} (:predicates)"))
        elif isinstance(part, list) and part[:1] == [":types"]:
            types += [n for n, _ in typed_list(part[1:], f"{what} (:types)")]
    return predicates, types


# Built games shared by every engine of the process, keyed by file, size and modification time: the envs of a
# vector env load the same few games (a group's rollouts share one), and a branching continuation restores a
# snapshot into an env that last played another game. A :class:`_Game` is never changed by a step (its lazily
# filled caches hold only what the game's own facts determine), so engines can share one. Bounded, least
# recently used first out.
_GAMES: OrderedDict[tuple, _Game] = OrderedDict()
_GAMES_MAX = 128


@dataclass
class _Game:
    """Everything about a loaded game that no step changes."""

    file: str
    objects: Mapping[str, str]
    init: tuple[tuple[str, ...], ...]
    static: dict[str, set]
    static_sorted: dict[str, list]
    static_index: dict
    params: Mapping[str, tuple[tuple[str, str], ...]]
    actions: Mapping[str, GrammarAction]
    deriver: Deriver
    goal: Goal
    names: dict[str, str]
    static_facts: tuple[str, ...] | None  # computed on first use
    agents: tuple[str, ...]
    loc_of: dict[str, str]  # receptacle -> location
    at_loc: dict[str, tuple[str, ...]]  # location -> receptacles (sorted)
    cacheable: frozenset[str]  # actions whose command text depends only on static facts


class NativeEngine:
    """ALFWorld without TextWorld or Fast Downward: same text, admissible commands, facts and goal.

    Implements :class:`gaca_envs.alfworld.engines.base.Engine` with snapshots (:meth:`get_state` /
    :meth:`set_state`) for branching rollouts.
    """

    name = "native"
    supports_snapshots = True

    def __init__(self) -> None:
        self._game: _Game | None = None
        self._domains: dict[str, tuple] = {}  # domain text -> parsed (a game set shares one domain)
        self._command_cache: dict[tuple, str] = {}
        self._grammar_cache: dict = {}  # parsed grammar pieces, shared by the games this engine loads
        self._store: _Store | None = None
        self._on: set[str] = set()
        self._ops: list[tuple[str, tuple[str, ...], str]] = []
        self._fact_strings: set[str] = set()
        self._facts: tuple[str, ...] | None = None
        self._won: bool | None = None
        self._pending: tuple[str, NativeState | None] | None = None  # (game file, state) left to rebuild

    # Pickling -------------------------------------------------------------------------------
    def __getstate__(self) -> dict:
        """The loaded game file and a snapshot of its state, nothing else.

        The parsed game and the caches hold compiled grammar expressions (code objects, which
        pickle refuses) and are large; a copy reloads the game file and restores the state the
        first time it is used.
        """
        if self._pending is not None:
            return {"game_file": self._pending[0], "state": self._pending[1]}
        if self._game is None:
            return {"game_file": None, "state": None}
        return {"game_file": self._game.file, "state": self.get_state() if self._store is not None else None}

    def __setstate__(self, saved: dict) -> None:
        self.__init__()
        if saved["game_file"] is not None:
            self._pending = (saved["game_file"], saved["state"])

    # Loading ------------------------------------------------------------------------------
    def load(self, game_file: str) -> None:
        """Loads a ``game.tw-pddl`` file.

        Raises:
            GameFileError: naming the file and what is wrong (not ALFWorld's domain, unknown
                types or objects, missing facts, a grammar the engine cannot read).
        """
        self._game = self._pending = None
        try:
            stat = os.stat(game_file)
            key: tuple | None = (os.path.abspath(game_file), stat.st_size, stat.st_mtime_ns)
        except OSError:
            key = None  # read_game_file names the problem
        game = _GAMES.get(key) if key is not None else None
        if game is not None and game.file == game_file:
            _GAMES.move_to_end(key)
            self._game = game
            self._command_cache.clear()
            return
        data = read_game_file(game_file)
        what = f"cannot load ALFWorld game file {game_file}"
        domain = self._domains.get(data["pddl_domain"])
        if domain is None:
            digest = domain_digest(data["pddl_domain"])
            if digest != ALFRED_DOMAIN_SHA256:
                raise GameFileError(
                    f"{what}: its PDDL domain is not ALFWorld's alfred.pddl (normalised sha256 {digest[:12]}..., "
                    f"expected {ALFRED_DOMAIN_SHA256[:12]}...); the native engine implements exactly that domain, "
                    "use engine='textworld' for other domains"
                )
            domain = (*_domain_signature(data["pddl_domain"], what), _domain_actions(data["pddl_domain"], what))
            self._domains[data["pddl_domain"]] = domain
        predicates, types, params = domain
        problem = parse_problem(data["pddl_problem"], predicates, types, what)
        rules, actions = parse_twl2(data["grammar"], what, self._grammar_cache)
        self._game = self._build(game_file, what, problem, (predicates, params), rules, actions)
        self._command_cache.clear()
        if key is not None:
            _GAMES[key] = self._game
            if len(_GAMES) > _GAMES_MAX:
                _GAMES.popitem(last=False)

    def _build(self, game_file, what, problem, domain, rules, actions) -> _Game:
        predicates, params = domain
        missing = sorted(set(params) - set(actions))
        if missing or "intro" not in rules:
            raise GameFileError(f"{what}: the grammar lacks {', '.join(missing) or '#intro#'}")
        static: dict[str, set] = {}
        for fact in problem.init:
            if fact[0] not in EFFECT_PREDICATES:
                static.setdefault(fact[0], set()).add(fact[1:])
        ids = sorted({arg for fact in problem.init for arg in fact[1:]})
        names = demangle(ids)
        entities = {i: Entity(i, names[i], problem.objects[i]) for i in ids}
        deriver = Deriver(rules, problem.objects, entities)
        # The grammar check and the cacheable templates depend only on the parsed rules, whose
        # pieces the grammar cache shares between games: key them by those pieces' identities.
        # (Rule texts are interned in the cache, so their ids are stable; plain-text rules such as
        # the task sentence cannot change the outcome and are left out of the key.)
        key = (
            "checked",
            tuple((n, tuple(id(r.rhs) for r in rs)) for n, rs in rules.items() if not _plain(rs)),
            tuple((n, id(g.template), id(g.feedback)) for n, g in actions.items()),
        )
        cacheable = self._grammar_cache.get(key)
        if cacheable is None:
            _check_symbols(deriver, actions, what)
            static_preds = frozenset(predicates) - EFFECT_PREDICATES
            cacheable = frozenset(a for a, g in actions.items() if deriver.is_static(g.template, static_preds))
            self._grammar_cache[key] = cacheable
        agents = tuple(sorted(o for o, t in problem.objects.items() if t == "agent"))
        placed = Counter(f[1] for f in problem.init if f[0] == "atlocation")
        if not agents or any(placed[a] != 1 for a in agents):
            raise GameFileError(f"{what}: missing fact (atLocation <agent> <location>): each agent needs one start")
        loc_of, at_loc = {}, {}
        for r, loc in sorted(static.get("receptacleatlocation", ())):
            if r in loc_of:
                raise GameFileError(f"{what}: receptacle {r} has two receptacleAtLocation facts")
            loc_of[r] = loc
            at_loc.setdefault(loc, ())
            at_loc[loc] += (r,)
        unplaced = sorted(
            o for o, t in problem.objects.items() if t == "receptacle" and o in names and o not in loc_of
        )
        if unplaced:
            raise GameFileError(f"{what}: missing fact (receptacleAtLocation {unplaced[0]} <location>)")
        return _Game(
            file=game_file,
            objects=problem.objects,
            init=problem.init,
            static=static,
            static_sorted={},
            static_index={},
            params=params,
            actions=actions,
            deriver=deriver,
            goal=Goal(problem.goal, problem.objects, static, what),
            names=names,
            static_facts=None,
            agents=agents,
            loc_of=loc_of,
            at_loc=at_loc,
            cacheable=cacheable,
        )

    # Episode --------------------------------------------------------------------------------
    def reset(self) -> EngineState:
        """Starts the loaded game from its initial state (no planner is run)."""
        game = self._require()
        dynamic: dict[str, set] = {}
        for fact in game.init:
            if fact[0] in EFFECT_PREDICATES:
                dynamic.setdefault(fact[0], set()).add(fact[1:])
        self._store = _Store(game, dynamic, {})
        self._on = {args[0] for args in dynamic.get("ison", ())}
        self._fresh_state()
        return self._state(game.deriver.derive(self._store, (("N", "intro"),), {}))

    def step(self, command: str) -> EngineState:
        """Applies a command; one that is not admissible answers "Nothing happens."."""
        game, store = self._require(), self._store
        if store is None:
            raise RuntimeError("NativeEngine.step() called before reset()")
        command = command.strip()
        match = next(((a, args) for a, args, text in self._ops if text == command), None)
        if match is None:
            return self._state(NOTHING_HAPPENS)
        action, args = match
        self._apply(action, args)
        store.changed()
        mapping = dict(zip(game.params[action], args, strict=True))
        feedback = game.deriver.derive(store, game.actions[action].feedback, mapping)
        self._ops = self._applicable()
        return self._state(feedback)

    def replay(self, commands: Sequence[str]) -> Replay:
        """Starts the loaded game and plays ``commands`` as :meth:`reset` then :meth:`step` would.

        Faster than stepping, for restoring a snapshot: a command's text is derived only until the
        command is found among the applicable operators (in the order :meth:`step` matches them),
        and only the last command's feedback is derived. Play stops at the first command that is
        not admissible, or that comes after the game was won.

        Returns:
            The state after the commands played (observation: the last one's feedback, or the intro),
            the intro, and where and why play stopped (None when every command was played).
        """
        intro = self.reset().observation
        game, store = self._require(), self._store
        ops: list[tuple[str, tuple[str, ...], str]] | None = self._ops  # the start's, with their texts
        last = None
        for i, command in enumerate(commands):
            if self._won_now():
                self._ops = self._applicable()
                return Replay(self._state(""), intro, i, "won")
            if ops is not None:
                match = next(((a, args) for a, args, text in ops if text == command), None)
            else:
                match = next(
                    ((a, args) for a, args in operators(game, store) if self._command(a, args) == command), None
                )
            if match is None:
                self._ops = self._applicable()
                return Replay(self._state(""), intro, i, "not admissible")
            self._apply(*match)
            store.changed()
            ops, last = None, match
        self._ops = self._applicable()
        if last is None:
            return Replay(self._state(intro), intro, None, "")
        action, args = last
        mapping = dict(zip(game.params[action], args, strict=True))
        return Replay(self._state(game.deriver.derive(store, game.actions[action].feedback, mapping)), intro, None, "")

    def _won_now(self) -> bool:
        if self._won is None:
            self._won = self._require().goal.holds(self._true_fact, self._true_facts_of)
        return self._won

    def _fresh_state(self) -> None:
        dynamic = self._store.dynamic
        self._fact_strings = {" ".join((p, *a)) for p in DYNAMIC_PREDICATES & dynamic.keys() for a in dynamic[p]}
        self._facts = self._won = None
        self._ops = self._applicable()

    def _state(self, observation: str) -> EngineState:
        game = self._require()
        if self._facts is None:
            self._facts = tuple(sorted(self._fact_strings))
        if self._won is None:
            self._won = game.goal.holds(self._true_fact, self._true_facts_of)
        return EngineState(
            observation=observation,
            admissible_commands=tuple(sorted({text for _, _, text in self._ops})),
            won=self._won,
            facts=self._facts,
        )

    def _true_fact(self, predicate: str, args: tuple[str, ...]) -> bool:
        # The PDDL (Fast Downward) state: TextWorld's view except for isOn.
        if predicate == "ison":
            return len(args) == 1 and args[0] in self._on
        return self._store.has(predicate, args)

    def _true_facts_of(self, predicate: str) -> Iterable[tuple[str, ...]]:
        if predicate == "ison":
            return [(o,) for o in sorted(self._on)]
        return self._store.sorted_facts(predicate)

    # Snapshots -----------------------------------------------------------------------------
    def get_state(self) -> NativeState:
        """A snapshot of the current game state."""
        if self._pending is not None:
            self._require()
        store = self._store
        if store is None:
            raise RuntimeError("NativeEngine.get_state() called before reset()")
        return NativeState(
            facts=frozenset((p, *a) for p, s in store.dynamic.items() for a in s),
            deleted=frozenset((p, *a) for p, s in store.deleted.items() for a in s),
            on=frozenset(self._on),
        )

    def set_state(self, state: NativeState) -> EngineState:
        """Restores a snapshot taken in the loaded game; returns its state (with an empty observation)."""
        game = self._require()
        dynamic: dict[str, set] = {}
        deleted: dict[str, set] = {}
        for fact in state.facts:
            dynamic.setdefault(fact[0], set()).add(fact[1:])
        for fact in state.deleted:
            deleted.setdefault(fact[0], set()).add(fact[1:])
        self._store = _Store(game, dynamic, deleted)
        self._on = set(state.on)
        self._fresh_state()
        return self._state("")

    # Engine protocol extras -----------------------------------------------------------------
    def static_facts(self) -> tuple[str, ...]:
        """The loaded game's facts that never change (as TextWorldEngine reports them)."""
        game = self._require()
        if game.static_facts is None:
            game.static_facts = tuple(sorted(" ".join(f) for f in game.init if f[0] not in DYNAMIC_PREDICATES))
        return game.static_facts

    def entity_names(self) -> Mapping[str, str]:
        """PDDL id -> demangled name."""
        return dict(self._require().names)

    def close(self) -> None:
        """Forgets the loaded game."""
        self._game = self._pending = None
        self._store = None

    def _require(self) -> _Game:
        if self._game is None and self._pending is not None:  # an unpickled copy, used for the first time
            game_file, state = self._pending
            self._pending = None
            self.load(game_file)
            if state is not None:
                self.set_state(state)
        if self._game is None:
            raise RuntimeError("NativeEngine used before a successful load(game_file)")
        return self._game

    # Actions ------------------------------------------------------------------------------
    def _command(self, action: str, args: tuple[str, ...]) -> str:
        game = self._game
        key = (action, args)
        text = self._command_cache.get(key)
        if text is None:
            mapping = dict(zip(game.params[action], args, strict=True))
            text = game.deriver.derive(self._store, game.actions[action].template, mapping)
            if action in game.cacheable:
                self._command_cache[key] = text
        return text

    def _applicable(self) -> list[tuple[str, tuple[str, ...], str]]:
        ops = [(a, args, self._command(a, args)) for a, args in operators(self._game, self._store)]
        return ops

    def _apply(self, action: str, args: tuple[str, ...]) -> None:
        adds, dels = effects(action, args)
        dynamic, deleted, strings = self._store.dynamic, self._store.deleted, self._fact_strings
        for fact in adds:  # TextWorld applies the listed effects in order: adds, then deletes
            dynamic.setdefault(fact[0], set()).add(fact[1:])
            deleted.get(fact[0], set()).discard(fact[1:])
            if fact[0] in DYNAMIC_PREDICATES:
                strings.add(" ".join(fact))
        for fact in dels:
            dynamic.get(fact[0], set()).discard(fact[1:])
            deleted.setdefault(fact[0], set()).add(fact[1:])
            if fact[0] in DYNAMIC_PREDICATES:
                strings.discard(" ".join(fact))
        if action == "toggleobject":
            self._on ^= {args[2]}
        if adds or dels:
            self._facts = None
            if any(f[0] in self._game.goal.predicates for f in (*adds, *dels)):
                self._won = None


def _plain(rules) -> bool:
    return all(not r.condition and all(sym[0] == "T" for sym in r.rhs) for r in rules)


def _check_symbols(deriver: Deriver, actions: Mapping[str, GrammarAction], what: str) -> None:
    """Every nonterminal reachable from the intro and the actions must have rules."""
    pending = [("N", "intro")]
    for g in actions.values():
        pending += [*g.template, *g.feedback]
    seen: set[str] = set()
    while pending:
        s = pending.pop()
        if s[0] == "N":
            if s[1] in seen:
                continue
            seen.add(s[1])
            if s[1] not in deriver.rules:
                raise GameFileError(f"{what}: the grammar uses #{s[1]}# but defines no rule for it")
            for rule in deriver.rules[s[1]]:
                pending += list(rule.rhs)
        elif s[0] == "C":
            pending.append(s[1])
        elif s[0] == "L":
            pending += [s[1], ("N", "list_empty"), ("N", "list_separator"), ("N", "list_last_separator")]
