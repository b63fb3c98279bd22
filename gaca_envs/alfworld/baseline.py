"""Reference agents that measure how hard ALFWorld games are: a searching baseline and a random one.

:class:`SearchingAgent` reads only the text an agent sees (the first observation and each
feedback), never the PDDL state, the admissible commands or the expert. It parses the task,
then visits the receptacles that ALFRED allows to hold the object it needs, in a fixed order
(the room's list, kinds in text order, numbers ascending), opening closed ones, until it sees
the object; then it takes it, transforms it (sink basin, microwave, fridge) or finds and uses
the lamp, and puts it on the first receptacle of the goal kind. Pick-two tasks repeat the search
for a second instance. It remembers what it saw on the way, as a reader of the text would.

:func:`play_random` plays uniformly random admissible commands. :func:`measure_game` plays one
game with both and reports the expert's plan length beside them.
"""

from __future__ import annotations

import random
import re
from collections.abc import Generator
from dataclasses import dataclass, field

from gaca_envs.alfworld.alfred_data import AlfredData, load_alfred_data
from gaca_envs.alfworld.domain import APPLIANCE_OF_TASK
from gaca_envs.alfworld.scenes import LAMP_HOLDERS, LAMPS
from gaca_envs.alfworld.text import kind_of, receptacle_view, room_receptacles, task_text
from gaca_envs.task_env import NOTHING_HAPPENS

NOTHING = NOTHING_HAPPENS  # the name the room statistics read it under
# ALFWorld task types the baseline plays (the six of ALFWorld's text benchmark).
_TASKS = (
    "pick_and_place_simple",
    "look_at_obj_in_light",
    "pick_clean_then_place_in_recep",
    "pick_heat_then_place_in_recep",
    "pick_cool_then_place_in_recep",
    "pick_two_obj_and_place",
)


@dataclass(frozen=True)
class ParsedTask:
    """A task sentence read back into ALFWorld's parameters (lower-case kinds as in the text)."""

    task_type: str
    object_kind: str
    target_kind: str  # the goal receptacle kind, or the lamp kind for look-at tasks


def task_patterns(data: AlfredData) -> list[tuple[re.Pattern[str], str]]:
    """Regexes of ALFWorld's task phrasings (``gen/goal_library.py``) for the six task types."""
    patterns = []
    for task_type in _TASKS:
        for template in data.goal_templates[task_type]:
            regex = re.escape(template)
            for slot in ("obj", "recep", "toggle"):
                regex = regex.replace(re.escape("{" + slot + "}"), f"(?P<{slot}>\\w+)")
            patterns.append((re.compile(f"^{regex}$"), task_type))
    return patterns


def parse_task(sentence: str, patterns: list[tuple[re.Pattern[str], str]]) -> ParsedTask | None:
    """The task a sentence poses, or ``None`` if it is none of the six phrasings."""
    for pattern, task_type in patterns:
        if match := pattern.match(sentence.strip().rstrip(".")):
            slots = match.groupdict()
            return ParsedTask(task_type, slots["obj"], slots.get("recep") or slots.get("toggle") or "")
    return None


@dataclass
class _Memory:
    """What the agent has read: receptacle -> objects last seen in it, where it stands, what it holds."""

    seen: dict[str, list[str]] = field(default_factory=dict)
    visited: set[str] = field(default_factory=set)
    placed: set[str] = field(default_factory=set)
    at: str = ""


class SearchingAgent:
    """A state-blind searching baseline (module docstring). Feed it observations, get commands.

    Args:
        first_observation: the observation returned by ``reset`` (room and task).
        data: ALFRED's rules (which receptacle kinds hold which object kinds).
        patterns: :func:`task_patterns` (pass them to avoid recompiling per game).
        rng: when given, the receptacles are searched in an order drawn from it (holders of the
            object still first) instead of the room's order: demonstrations of a search that does
            not always start at the same place.
    """

    def __init__(
        self,
        first_observation: str,
        data: AlfredData | None = None,
        patterns: list[tuple[re.Pattern[str], str]] | None = None,
        rng: random.Random | None = None,
    ) -> None:
        data = data or load_alfred_data()
        self.task = parse_task(task_text(first_observation), patterns or task_patterns(data))
        self.receptacles = _search_order(room_receptacles(first_observation))
        if rng is not None:
            rng.shuffle(self.receptacles)
        self._holds = {rtype.lower(): {o.lower() for o in objs} for rtype, objs in data.receptacle_objects.items()}
        for holder in LAMP_HOLDERS:
            self._holds.setdefault(holder.lower(), set()).update(lamp.lower() for lamp in LAMPS)
        self._memory = _Memory()
        self._policy = self._plan()
        self._pending: str | None = next(self._policy, None)

    def act(self, observation: str | None = None) -> str:
        """The next command, given the feedback of the previous one (``None`` on the first call)."""
        if observation is not None and self._pending is not None:
            self._read(self._pending, observation)
            try:
                self._pending = self._policy.send(observation)
            except StopIteration:
                self._pending = None
        return self._pending if self._pending is not None else "look"

    def _read(self, command: str, observation: str) -> None:
        view = receptacle_view(observation)
        if command.startswith("go to ") and observation != NOTHING:
            self._memory.at = command.removeprefix("go to ")
        if view is not None and view.state != "closed":
            self._memory.seen[view.name] = list(view.items)
            self._memory.visited.add(view.name)

    def _candidates(self, kind: str, exclude_kind: str = "") -> list[str]:
        holders = [
            r for r in self.receptacles if kind in self._holds.get(kind_of(r), ()) and kind_of(r) != exclude_kind
        ]
        rest = [r for r in self.receptacles if r not in holders and kind_of(r) != exclude_kind]
        return holders + rest

    def _find(self, kind: str, exclude_kind: str = "") -> Generator[str, str, str | None]:
        """Goes to a receptacle holding an object of ``kind``; returns ``"object|receptacle"``."""
        memory = self._memory
        for receptacle in [None, *self._candidates(kind, exclude_kind)]:
            if receptacle is not None and receptacle in memory.visited:
                continue
            if receptacle is not None:
                yield from self._visit(receptacle)
            for where, items in memory.seen.items():
                for item in items:
                    if kind_of(item) == kind and item not in memory.placed and kind_of(where) != exclude_kind:
                        if memory.at != where:
                            yield from self._visit(where)
                        return f"{item}|{where}"
        return None

    def _visit(self, receptacle: str) -> Generator[str, str, None]:
        """Goes to ``receptacle`` and opens it if closed.

        ``go to`` answers "Nothing happens." when the agent already stands where the receptacle
        is (two receptacles can share a place): then it looks at it with ``examine``.
        """
        observation = yield f"go to {receptacle}"
        if observation == NOTHING:
            observation = yield f"examine {receptacle}"
            if observation != NOTHING:
                self._memory.at = receptacle
        if observation.endswith("is closed."):
            yield f"open {receptacle}"

    def _goto_open(self, receptacle: str) -> Generator[str, str, None]:
        if self._memory.at != receptacle:
            yield from self._visit(receptacle)

    def _fetch(self, kind: str, exclude_kind: str) -> Generator[str, str, str | None]:
        found = yield from self._find(kind, exclude_kind)
        if found is None:
            return None
        item, where = found.split("|")
        observation = yield f"take {item} from {where}"
        if observation == NOTHING:
            return None
        self._memory.seen[where].remove(item)
        return item

    def _plan(self) -> Generator[str, str, None]:
        task = self.task
        if task is None:
            return
        goal = [r for r in self.receptacles if kind_of(r) == task.target_kind]
        for _ in range(2 if task.task_type == "pick_two_obj_and_place" else 1):
            item = yield from self._fetch(task.object_kind, task.target_kind)
            if item is None:
                return
            if task.task_type == "look_at_obj_in_light":
                lamp = yield from self._find(task.target_kind)
                if lamp is not None:
                    yield f"use {lamp.split('|')[0]}"
                return
            if task.task_type in APPLIANCE_OF_TASK:
                spec = APPLIANCE_OF_TASK[task.task_type]
                verb, appliance_kind = spec.verb, spec.kind
                appliance = next((r for r in self.receptacles if kind_of(r) == appliance_kind), None)
                if appliance is None:
                    return
                yield from self._goto_open(appliance)
                if (yield f"{verb} {item} with {appliance}") == NOTHING:
                    yield f"open {appliance}"
                    yield f"{verb} {item} with {appliance}"
            for receptacle in goal:
                yield from self._goto_open(receptacle)
                if (yield f"move {item} to {receptacle}") != NOTHING:
                    self._memory.placed.add(item)
                    self._memory.seen.setdefault(receptacle, []).append(item)
                    break


def _search_order(receptacles: list[str]) -> list[str]:
    """Kinds in the order the room lists them, numbers ascending within a kind."""
    kinds = list(dict.fromkeys(kind_of(r) for r in receptacles))
    return sorted(receptacles, key=lambda r: (kinds.index(kind_of(r)), int(r.rsplit(" ", 1)[1])))


@dataclass(frozen=True)
class Episode:
    """One played episode: whether it was won, in how many steps, and its text."""

    won: bool
    steps: int
    transcript: str


def play_searching(
    env, task_id: str, max_env_steps: int = 50, data: AlfredData | None = None, patterns=None
) -> Episode:
    """Plays :class:`SearchingAgent` on ``task_id`` of an ALFWorld env for at most ``max_env_steps``."""
    observation, info = env.reset(options={"task_id": task_id})
    agent = SearchingAgent(observation, data, patterns)
    lines, command = [observation], agent.act()
    for step in range(1, max_env_steps + 1):
        observation, _, terminated, truncated, info = env.step(command)
        lines += [f"> {command}", observation]
        if terminated or truncated:
            return Episode(bool(info["won"]), step, "\n".join(lines))
        command = agent.act(observation)
    return Episode(bool(info["won"]), max_env_steps, "\n".join(lines))


def play_random(env, task_id: str, seed: int, max_env_steps: int = 50) -> Episode:
    """Plays uniformly random admissible commands (seeded) on ``task_id`` for at most ``max_env_steps``."""
    rng = random.Random(seed)
    observation, info = env.reset(options={"task_id": task_id})
    lines = [observation]
    for step in range(1, max_env_steps + 1):
        command = rng.choice(info["admissible_actions"])
        observation, _, terminated, truncated, info = env.step(command)
        lines += [f"> {command}", observation]
        if terminated or truncated:
            return Episode(bool(info["won"]), step, "\n".join(lines))
    return Episode(bool(info["won"]), max_env_steps, "\n".join(lines))


@dataclass(frozen=True)
class GameMeasure:
    """One game measured: the expert's plan length, the searching baseline, the random agent."""

    task_id: str
    task_type: str
    expert_steps: int
    search_won: bool
    search_steps: int
    random_won: bool
    search_transcript: str


def measure_games(game_files: list[str], seed: int = 0, max_env_steps: int = 50) -> list[GameMeasure]:
    """Plays every game with the expert plan, :class:`SearchingAgent` and :func:`play_random`.

    Args:
        game_files: ``game.tw-pddl`` files.
        seed: seed of the random agent (game ``i`` uses ``seed + i``).
        max_env_steps: step cap of both agents (ALFWorld's 50).

    Returns:
        One :class:`GameMeasure` per game, in the env's task order.
    """
    from gaca_envs.alfworld.env import ALFWorldEnv

    env = ALFWorldEnv(game_files=game_files, expert=True, max_env_steps=max_env_steps)
    data = load_alfred_data()
    patterns = task_patterns(data)
    measures = []
    for i, task_id in enumerate(env.task_ids):
        _, info = env.reset(options={"task_id": task_id})
        expert_steps = len(env.expert_plan())
        search = play_searching(env, task_id, max_env_steps, data, patterns)
        random_episode = play_random(env, task_id, seed + i, max_env_steps)
        measures.append(
            GameMeasure(
                task_id,
                info["task_type"],
                expert_steps,
                search.won,
                search.steps,
                random_episode.won,
                search.transcript,
            )
        )
    env.close()
    return measures


def summarise_measures(measures: list[GameMeasure]) -> dict[str, dict[str, float]]:
    """Per task type (and ``all``): games, searching success and mean steps (wins), random success, expert length."""
    groups: dict[str, list[GameMeasure]] = {}
    for m in measures:
        groups.setdefault(m.task_type, []).append(m)
    groups = dict(sorted(groups.items()))
    if measures:
        groups["all"] = list(measures)
    table = {}
    for task_type, rows in groups.items():
        wins = [m.search_steps for m in rows if m.search_won]
        table[task_type] = {
            "games": len(rows),
            "search_success": sum(m.search_won for m in rows) / len(rows),
            "search_steps_won": sum(wins) / len(wins) if wins else float("nan"),
            "search_steps_all": sum(m.search_steps for m in rows) / len(rows),
            "random_success": sum(m.random_won for m in rows) / len(rows),
            "expert_steps_mean": sum(m.expert_steps for m in rows) / len(rows),
            "expert_steps_max": max(m.expert_steps for m in rows),
        }
    return table
