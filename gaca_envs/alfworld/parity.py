"""Parity check: the native ALFWorld engine against TextWorld's PDDL engine, step by step.

For each of N generated games (every task type, every room kind), plays the stored
walkthrough and K random walks of 50 steps (mostly admissible commands, about a quarter
invalid or whitespace-padded ones) with both engines and compares, at reset and after every
step: the observation text, the admissible commands (same order), ``won``, the dynamic facts,
and what the env derives from them (reward, done, anchor key). It also compares the static
facts and entity names (the expert's input). Every mismatch is printed with the game, walk,
step, field and both values; the exit status is 1 if there was any.

The stock engine is slow (about 15 steps/s), so its traces can be cached (``--cache DIR``):
a trace is keyed by the game file's digest, the walk and the versions of alfworld/textworld,
and is reused by later runs. ``--shard I/N`` plays every N-th game starting at I, so several
processes can share the work.

Command line: ``scripts/parity_alfworld.py`` (a wrapper of :func:`main`)::

    python scripts/parity_alfworld.py --games 300 --walks 5 [--data DIR] [--cache DIR] [--shard 0/2]
        [--difficulty standard|easy|real]
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import importlib.metadata
import json
import random
import sys
import time
from pathlib import Path

from gaca_envs.alfworld.engines.base import EngineState
from gaca_envs.alfworld.engines.textworld import TextWorldEngine
from gaca_envs.alfworld.generate import DIFFICULTIES, generate
from gaca_envs.anchors import anchor_digest

WALK_STEPS = 50
INVALID_RATE = 0.25
REWARD_ON_SUCCESS = 10.0
_VERBS = (
    "go to {r}",
    "open {r}",
    "close {r}",
    "examine {r}",
    "examine {o}",
    "use {o}",
    "take {o} from {r}",
    "move {o} to {r}",
    "heat {o} with {r}",
    "cool {o} with {r}",
    "clean {o} with {r}",
    "slice {o} with {p}",
)
_JUNK = ("", "xyzzy", "go to", "take", "inventory please", "Look", "go to fridge 99", "help me")


def walk_commands(rng: random.Random, state: EngineState, names: list[str], policy: str = "uniform") -> str:
    """One walk step: a random admissible command, or (``INVALID_RATE``) an invalid/padded one.

    ``policy="uniform"`` draws admissible commands uniformly; ``"verbs"`` first draws a verb
    (go, take, move, heat, use, slice, ...) then a command with it, so rare actions get played.
    """
    if rng.random() >= INVALID_RATE:
        if policy == "verbs":
            by_verb: dict[str, list[str]] = {}
            for command in state.admissible_commands:
                by_verb.setdefault(command.split()[0], []).append(command)
            return rng.choice(by_verb[rng.choice(sorted(by_verb))])
        return rng.choice(state.admissible_commands)
    kind = rng.random()
    if kind < 0.2:
        return rng.choice(_JUNK)
    if kind < 0.35:  # padded admissible command: engines strip it
        return "  " + rng.choice(state.admissible_commands) + " "
    o, r, p = (rng.choice(names) for _ in range(3))
    return rng.choice(_VERBS).format(o=o, r=r, p=p)


def _record(state: EngineState) -> dict:
    return {
        "obs": state.observation,
        "adm": list(state.admissible_commands),
        "won": state.won,
        "facts": list(state.facts),
    }


def _derived(rec: dict) -> dict:
    # What ALFWorldEnv derives from an engine state (reward, done, anchor key).
    return {
        "reward": REWARD_ON_SUCCESS if rec["won"] else 0.0,
        "done": rec["won"],
        "anchor_key": anchor_digest("alfworld", tuple(rec["facts"])),
    }


def play_reference(engine, game_file: str, walks: int, policy: str = "uniform") -> dict:
    """Plays the walkthrough and ``walks`` random walks with ``engine``; returns the commands and states."""
    game = json.loads(Path(game_file).read_text())
    engine.load(game_file)
    first = engine.reset()
    names = sorted(set(engine.entity_names().values()))
    out = {
        "static": list(engine.static_facts()),
        "names": dict(sorted(engine.entity_names().items())),
        "walks": [],
    }
    plans = [("walkthrough", list(game.get("walkthrough") or []))]
    plans += [(f"walk{k}", None) for k in range(walks)]
    for label, commands in plans:
        state = engine.reset() if out["walks"] else first
        steps = [{"cmd": None, **_record(state)}]
        rng = random.Random(f"{Path(game_file).parent.name}|{label}")
        for i in range(len(commands) if commands is not None else WALK_STEPS):
            cmd = commands[i] if commands is not None else walk_commands(rng, state, names, policy)
            state = engine.step(cmd)
            steps.append({"cmd": cmd, **_record(state)})
        out["walks"].append({"label": label, "steps": steps})
    return out


def _cache_key(game_file: str, walks: int, policy: str) -> str:
    versions = "|".join(importlib.metadata.version(p) for p in ("alfworld", "textworld"))
    digest = hashlib.sha256(Path(game_file).read_bytes()).hexdigest()
    key = f"v1|{versions}|{digest}|{walks}|{WALK_STEPS}|{INVALID_RATE}" + ("" if policy == "uniform" else f"|{policy}")
    return hashlib.sha256(key.encode()).hexdigest()[:24]


def reference_trace(game_file: str, walks: int, cache: Path | None, policy: str = "uniform") -> dict:
    """The stock engine's trace of a game, from the cache when present."""
    path = cache / f"{_cache_key(game_file, walks, policy)}.json.gz" if cache else None
    if path is not None and path.exists():
        return json.loads(gzip.decompress(path.read_bytes()))
    trace = play_reference(TextWorldEngine(), game_file, walks, policy)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(gzip.compress(json.dumps(trace).encode()))
        tmp.rename(path)
    return trace


def compare_game(engine, game_file: str, ref: dict) -> list[str]:
    """Replays the reference commands in ``engine``; returns one line per mismatch."""
    mismatches = []
    engine.load(game_file)
    for walk in ref["walks"]:
        state = engine.reset()
        for i, step in enumerate(walk["steps"]):
            if step["cmd"] is not None:
                state = engine.step(step["cmd"])
            got = _record(state)
            want_all = {**{k: step[k] for k in got}, **_derived(step)}
            got_all = {**got, **_derived(got)}
            for field, want in want_all.items():
                if got_all[field] != want:
                    mismatches.append(
                        f"{game_file} {walk['label']} step {i} cmd={step['cmd']!r} field={field}\n"
                        f"  textworld: {want!r}\n  native:    {got_all[field]!r}"
                    )
    for field, got in (
        ("static_facts", list(engine.static_facts())),
        ("entity_names", dict(sorted(engine.entity_names().items()))),
    ):
        want = ref["static"] if field == "static_facts" else ref["names"]
        if got != want:
            mismatches.append(f"{game_file} field={field}\n  textworld: {want!r}\n  native:    {got!r}")
    return mismatches


def game_files(data: Path, num: int, seed: int, difficulty: str = "standard") -> list[str]:
    """``num`` generated train games of ``difficulty`` under ``data`` (generated on first use)."""
    root = data / "json_2.1.1" / "train"
    files = sorted(root.glob("*/*/game.tw-pddl"), key=lambda p: p.parent.name) if root.exists() else []
    if len(files) < num:
        generate(data, num, seed=seed, split="train", workers=2, difficulty=difficulty)
        files = sorted(root.glob("*/*/game.tw-pddl"), key=lambda p: p.parent.name)
    return [str(f) for f in files[:num]]


def main(argv: list[str] | None = None) -> int:
    """Command line entry point; returns 1 if any mismatch was found."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--games", type=int, default=30, help="number of games (default: %(default)s)")
    parser.add_argument("--walks", type=int, default=5, help="random walks per game (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="generator seed (default: %(default)s)")
    parser.add_argument("--data", default="outputs/parity_games", help="folder of generated games")
    parser.add_argument(
        "--difficulty", default="standard", choices=DIFFICULTIES, help="generator difficulty (default: %(default)s)"
    )
    parser.add_argument("--cache", default=None, help="folder to cache the stock engine's traces in")
    parser.add_argument("--shard", default="0/1", help="I/N: play games I, I+N, ... (default: %(default)s)")
    parser.add_argument("--policy", default="uniform", choices=("uniform", "verbs"), help="random walk policy")
    parser.add_argument("--cached-only", action="store_true", help="skip games whose stock trace is not cached")
    parser.add_argument("--reference-only", action="store_true", help="only compute/cache the stock traces")
    args = parser.parse_args(argv)
    index, count = (int(x) for x in args.shard.split("/"))
    files = game_files(Path(args.data), args.games, args.seed, args.difficulty)[index::count]
    cache = Path(args.cache) if args.cache else None
    native = None
    if not args.reference_only:
        from gaca_envs.alfworld.engines.native import NativeEngine

        native = NativeEngine()
    start = time.perf_counter()
    total_steps, mismatches, played = 0, [], 0
    for n, game_file in enumerate(files, 1):
        if args.cached_only and (
            cache is None or not (cache / f"{_cache_key(game_file, args.walks, args.policy)}.json.gz").exists()
        ):
            continue
        ref = reference_trace(game_file, args.walks, cache, args.policy)
        total_steps += sum(len(w["steps"]) for w in ref["walks"])
        played += 1
        if native is not None:
            found = compare_game(native, game_file, ref)
            mismatches += found
            for line in found[:20]:
                sys.stdout.write(line + "\n")
        if n % 10 == 0 or n == len(files):
            sys.stderr.write(
                f"[{time.perf_counter() - start:7.1f}s] {n}/{len(files)} games, {len(mismatches)} mismatches\n"
            )
    sys.stdout.write(
        f"parity: {played} games x (walkthrough + {args.walks} walks), {total_steps} compared states, "
        f"{len(mismatches)} mismatches, {time.perf_counter() - start:.1f} s\n"
    )
    return 1 if mismatches else 0
