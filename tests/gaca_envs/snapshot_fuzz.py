"""Tampered, truncated, inconsistent and foreign snapshots, generated from good ones with a seeded RNG.

The fuzz suites (tests/gaca_envs/test_snapshot_fuzz.py in-process, tests/gaca_server/test_snapshot_signing.py
through the server) feed each mutation to an env and sort the outcome:

- ``refused``: a ValueError or TypeError whose message speaks of the snapshot, reveals no file path, and
  leaves the env needing a reset (the next step raises the documented RuntimeError);
- ``valid``: restored, and the env saves back exactly the snapshot it was given (a snapshot of another
  state the task can be in, e.g. another generator state: consistent, nothing to refuse in-process; a
  server's signature refuses these too);
- ``silent``: anything else (restored into a state other than the snapshot claims, or refused unclearly).
  The suites assert there are none.
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

# Values of every JSON type, for type swaps (one of another type than the original is picked).
SWAPS: tuple[Any, ...] = (None, True, False, 0, -1, 7, 2.5, "", "x", "7", [], [1, 2], {}, {"a": 1})
KINDS = (
    "delete",
    "type_swap",
    "truncate",
    "extend",
    "out_of_range",
    "done_flip",
    "steps_over_cap",
    "steps_shift",
    "observation",
    "task_swap",
    "foreign",
    "version",
)
SIGNATURE_KINDS = ("signature_altered", "signature_deleted", "signature_swapped", "signature_type")


@dataclass
class Pool:
    """What mutations draw from besides the snapshot itself.

    Attributes:
        cap: the env's ``max_env_steps``.
        task_ids: other task ids of the env's own split.
        others: good snapshot dicts of the same env (other tasks and steps), for swapped parts.
        foreign: good snapshot dicts of the other envs.
    """

    cap: int
    task_ids: list[str]
    others: list[dict[str, Any]]
    foreign: list[dict[str, Any]]


@dataclass
class Tally:
    """Outcomes of one suite, by kind of mutation."""

    refused: dict[str, int] = field(default_factory=dict)
    valid: dict[str, int] = field(default_factory=dict)
    silent: list[str] = field(default_factory=list)

    def count(self, outcome: str, kind: str, detail: str = "") -> None:
        if outcome == "silent":
            self.silent.append(f"{kind}: {detail}")
        else:
            table = self.refused if outcome == "refused" else self.valid
            table[kind] = table.get(kind, 0) + 1

    @property
    def total(self) -> int:
        return sum(self.refused.values()) + sum(self.valid.values()) + len(self.silent)


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path below ``value`` (dict keys and list indices), parents before children."""
    out = []
    if isinstance(value, dict):
        for k, v in value.items():
            out.append((*prefix, k))
            out += _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out.append((*prefix, i))
            out += _paths(v, (*prefix, i))
    return out


def _get(value: Any, path: tuple) -> Any:
    for part in path:
        value = value[part]
    return value


def _set(value: Any, path: tuple, new: Any) -> None:
    _get(value, path[:-1])[path[-1]] = new


def _body_paths(snapshot: dict[str, Any]) -> list[tuple]:
    return [p for p in _paths(snapshot) if p[0] != "signature"]


def mutate(kind: str, snapshot: dict[str, Any], pool: Pool, rng: random.Random) -> dict[str, Any] | None:
    """One mutation of ``kind`` of a snapshot dict (``to_dict()`` form); None if it does not apply to it."""
    d = copy.deepcopy(snapshot)
    paths = _body_paths(d)
    if kind == "delete":
        path = rng.choice([p for p in paths if isinstance(_get(d, p[:-1]), dict)])
        del _get(d, path[:-1])[path[-1]]
    elif kind == "type_swap":
        path = rng.choice(paths)
        old = _get(d, path)
        _set(d, path, copy.deepcopy(rng.choice([v for v in SWAPS if type(v) is not type(old)])))
    elif kind == "truncate":
        options = [p for p in paths if isinstance(_get(d, p), (list, str)) and len(_get(d, p)) > 0]
        if not options:
            return None
        path = rng.choice(options)
        old = _get(d, path)
        _set(d, path, old[: rng.randrange(len(old))])
    elif kind == "extend":
        options = [p for p in paths if isinstance(_get(d, p), (list, str))]
        path = rng.choice(options)
        old = _get(d, path)
        if isinstance(old, str):
            _set(d, path, old + rng.choice((" ", "x", " You win!", "/../etc/passwd")))
        else:
            _set(d, path, old + copy.deepcopy([rng.choice(old)] if old and rng.random() < 0.5 else ["look"]))
    elif kind == "out_of_range":
        options = [p for p in paths if isinstance(_get(d, p), int) and not isinstance(_get(d, p), bool)]
        path = rng.choice(options)
        old = _get(d, path)
        _set(d, path, rng.choice((-1, -(10**9), 10**9, 2**70, old + 1, old - 1)))
    elif kind == "done_flip":
        d["done"] = not d["done"]
    elif kind == "steps_over_cap":
        d["steps"] = pool.cap + rng.randint(1, 1000)
    elif kind == "steps_shift":
        d["steps"] = max(0, d["steps"] + rng.choice((-3, -2, -1, 1, 2, 3)))
    elif kind == "observation":
        others = [o["observation"] for o in pool.others if o["observation"] != d["observation"]]
        edits = [d["observation"] + " You win!", "", d["observation"][::-1], d["observation"].upper()]
        d["observation"] = rng.choice(edits + others[:4])
    elif kind == "task_swap":
        d["task_id"] = rng.choice([t for t in pool.task_ids if t != d["task_id"]])
    elif kind == "foreign":
        other = copy.deepcopy(rng.choice(pool.foreign))
        part = rng.choice(("whole", "state", "env", "task_id"))
        if part == "whole":
            d = {**other, **({"signature": d["signature"]} if "signature" in d else {})}
        elif part in ("state", "task_id"):
            d[part] = other[part]
        else:
            d["env"] = other["env"]
    elif kind == "version":
        d["version"] = rng.choice((0, d["version"] - 1, d["version"] + 1, 99))
    elif kind == "signature_altered":
        signature = d["signature"]
        i = rng.randrange(len(signature))
        d["signature"] = signature[:i] + ("0" if signature[i] != "0" else "1") + signature[i + 1 :]
    elif kind == "signature_deleted":
        del d["signature"]
    elif kind == "signature_swapped":
        d["signature"] = rng.choice([o["signature"] for o in pool.others if o["signature"] != d["signature"]])
    elif kind == "signature_type":
        d["signature"] = rng.choice((None, 7, ["x"], {"a": 1}, "", "é" * 64))
    else:
        raise ValueError(f"unknown mutation kind {kind!r}")
    return None if canonical(d) == canonical(snapshot) else d


def mutations(
    bases: list[dict[str, Any]], pool: Pool, count: int, seed: int, kinds: tuple[str, ...] = KINDS
) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """``count`` distinct mutations (kind, base, mutated) of the ``bases``, every kind in turn, seeded."""
    rng = random.Random(seed)
    out, seen = [], set()
    attempts = 0
    while len(out) < count:
        attempts += 1
        if attempts > 50 * count:
            raise RuntimeError(f"only {len(out)} distinct mutations of {count} after {attempts} attempts")
        kind = kinds[len(out) % len(kinds)] if attempts <= count else rng.choice(kinds)
        base = rng.choice(bases)
        mutated = mutate(kind, base, pool, rng)
        if mutated is None or canonical(mutated) in seen:
            continue
        seen.add(canonical(mutated))
        out.append((kind, base, mutated))
    return out


def canonical(value: Any) -> str:
    """A JSON text of ``value`` with sorted keys (for comparing and de-duplicating snapshots)."""
    return json.dumps(value, sort_keys=True, default=repr)


def saves_back(saved: dict[str, Any], given: dict[str, Any]) -> bool:
    """Whether an env saved back the snapshot it was given, signatures aside (given no generator state, an env
    keeps its own, as documented)."""
    drop = {"signature"} | ({"rng"} if given.get("rng") is None else set())
    return canonical({k: v for k, v in saved.items() if k not in drop}) == canonical(
        {k: v for k, v in given.items() if k not in drop}
    )


def clear_refusal(error: BaseException, forbidden: tuple[str, ...]) -> str | None:
    """None if ``error`` is a clear snapshot refusal; else what is wrong with it.

    Clear: a ValueError or TypeError naming the snapshot, whose message holds none of ``forbidden``
    (the env's data paths) and no file-system words.
    """
    message = str(error)
    if not isinstance(error, (ValueError, TypeError)):
        return f"{type(error).__name__} is not ValueError or TypeError: {message[:200]}"
    if "snapshot" not in message:
        return f"the message does not name the snapshot: {message[:200]}"
    leaks = [
        word for word in (*forbidden, "No such file", "Errno", "Expecting value", "game.tw-pddl") if word in message
    ]
    if leaks:
        return f"the message reveals {leaks}: {message[:200]}"
    return None


def needs_reset(step: Callable[[], Any]) -> str | None:
    """None if ``step()`` raises the documented RuntimeError of an env that needs a reset; else what it did."""
    try:
        step()
    except RuntimeError as e:
        if "after the episode ended" in str(e):
            return None
        return f"step raised another RuntimeError: {str(e)[:200]}"
    except Exception as e:  # noqa: BLE001 - any other outcome is the finding
        return f"step raised {type(e).__name__}: {str(e)[:200]}"
    return "the old episode still accepted a step"
