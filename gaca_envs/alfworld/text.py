"""Reading ALFWorld's feedback text: the room's receptacles, the task, what a receptacle shows.

Shared by the searching baseline (:mod:`gaca_envs.alfworld.baseline`), which may only read the
text an agent sees, and the room statistics (:mod:`gaca_envs.alfworld.room_stats`), which read
public transcripts of real ALFWorld games. Both the current grammar (``You arrive at cabinet
1. On the cabinet 1, ...``) and the one of the ReAct-era transcripts (arrival sentence removed)
are understood.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_ROOM_RE = re.compile(r"Looking quickly around you, you see (.*?)\.(?:\n|$)")
_TASK_RE = re.compile(r"Your task is to: (.*?)\.?(?:\n|$)")
_ARRIVAL_RE = re.compile(r"^You arrive at [^.]*\.\s*")
_SURFACE_RE = re.compile(r"^On the (\w+ \d+), you see (.*?)\.$")
_OPEN_RE = re.compile(r"^(?:You open the \w+ \d+\. )?The (\w+ \d+) is open\. In it, you see (.*?)\.$")
_CLOSED_RE = re.compile(r"^The (\w+ \d+) is closed\.$")
_FACING_RE = re.compile(r"^You are facing the (.*?)\. Next to it")


def parse_list(text: str) -> list[str]:
    """Names in an ALFWorld list: ``"a cup 1, a fork 2, and a mug 1"`` -> ``["cup 1", "fork 2", "mug 1"]``."""
    text = text.strip()
    if not text or text == "nothing":
        return []
    names = []
    for part in text.split(", "):
        part = part.strip().removeprefix("and ").strip()
        for article in ("a ", "an ", "the "):
            part = part.removeprefix(article)
        if part:
            names.append(part)
    return names


def kind_of(name: str) -> str:
    """``"cabinet 4"`` -> ``"cabinet"``."""
    return name.rsplit(" ", 1)[0]


def room_receptacles(observation: str) -> list[str]:
    """The receptacles listed in the first observation ("you see a cabinet 4, ..."), in text order."""
    match = _ROOM_RE.search(observation)
    return parse_list(match.group(1)) if match else []


def task_text(observation: str) -> str:
    """The task sentence without its final period ("put some spraybottle on toilet")."""
    match = _TASK_RE.search(observation)
    return match.group(1).strip() if match else ""


@dataclass(frozen=True)
class ReceptacleView:
    """What an observation shows of one receptacle.

    Attributes:
        name: the receptacle (``"cabinet 2"``).
        state: ``"surface"`` ("On the X, you see ..."), ``"open"`` ("The X is open. In it ...")
            or ``"closed"`` ("The X is closed.").
        items: the objects listed (empty when closed).
    """

    name: str
    state: str
    items: tuple[str, ...]


def receptacle_view(observation: str) -> ReceptacleView | None:
    """The receptacle view an arrival, ``open`` or ``examine`` feedback shows, else ``None``."""
    text = _ARRIVAL_RE.sub("", observation.strip())
    if match := _SURFACE_RE.match(text):
        return ReceptacleView(match.group(1), "surface", tuple(parse_list(match.group(2))))
    if match := _OPEN_RE.match(text):
        return ReceptacleView(match.group(1), "open", tuple(parse_list(match.group(2))))
    if match := _CLOSED_RE.match(text):
        return ReceptacleView(match.group(1), "closed", ())
    return None


def facing(observation: str) -> list[str]:
    """The receptacles a ``look`` says the agent faces (two or more when they share a place)."""
    match = _FACING_RE.match(observation.strip())
    return parse_list(match.group(1)) if match else []
