"""Snapshot size and save + restore time per env; prints a Markdown table for docs/BENCHMARKS.md.

    python scripts/bench_snapshots.py                  # about a minute on one CPU core
    python scripts/bench_snapshots.py --snapshots 100 --http

For each env, random walks (seeded) take snapshots at random steps; per snapshot the script
measures its pickled size, its JSON size, the time of ``env.unwrapped.save_state()`` and of
``env.reset(options={"snapshot": s})`` into a second env of the same arguments (``gym.make``
wrappers included), and reports medians and maxima. ALFWorld plays six generated games (native
engine); WebShop the embedded 1k-product shop, in-process (and with ``--http`` over HTTP to a
``webshop-server`` on 127.0.0.1); CriticalChain its defaults with ``noise=0.2``.
"""

from __future__ import annotations

import argparse
import json
import pickle
import random
import statistics
import tempfile
import time
from pathlib import Path

import gymnasium as gym

import gaca_envs  # noqa: F401  (registers the ids)


def measure(
    name: str, source: gym.Env, target: gym.Env, task_ids: list[str], snapshots: int, seed: int, walk_steps: int = 11
) -> dict:
    """Takes ``snapshots`` snapshots along random walks of 1 to ``walk_steps`` steps of ``source``; restores each
    into ``target``."""
    rng = random.Random(seed)
    sizes, json_sizes, saves, restores = [], [], [], []
    while len(saves) < snapshots:
        _, info = source.reset(options={"task_id": rng.choice(task_ids)})
        for _ in range(rng.randrange(1, walk_steps + 1)):
            actions = [a for a in info["admissible_actions"] if a != "search[<query>]"] or ["search[bar stool]"]
            _, _, terminated, truncated, info = source.step(rng.choice(actions))
            if terminated or truncated:
                break
        start = time.perf_counter()
        snapshot = source.unwrapped.save_state()
        saves.append(time.perf_counter() - start)
        sizes.append(len(pickle.dumps(snapshot)))
        json_sizes.append(len(json.dumps(snapshot.to_dict())))
        start = time.perf_counter()
        target.reset(options={"snapshot": snapshot})
        restores.append(time.perf_counter() - start)
    return {
        "env": name,
        "pickle_median": int(statistics.median(sizes)),
        "pickle_max": max(sizes),
        "json_median": int(statistics.median(json_sizes)),
        "save_ms": 1000 * statistics.median(saves),
        "restore_ms": 1000 * statistics.median(restores),
        "restore_ms_max": 1000 * max(restores),
    }


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--snapshots", type=int, default=200, help="snapshots per env (default 200)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random walks (default: 0)")
    p.add_argument("--http", action="store_true", help="also WebShop over HTTP to a webshop-server subprocess")
    p.add_argument(
        "--walk-steps",
        type=int,
        default=11,
        help="longest random walk before a snapshot, in steps (default 11; an episode that ends stops it sooner)",
    )
    args = p.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        from gaca_envs.alfworld.generate import generate

        generate(tmp, 6, seed=6, split="train")
        files = sorted(str(f) for f in Path(tmp, "json_2.1.1", "train").glob("*/*/game.tw-pddl"))
        make = lambda: gym.make("GACA-ALFWorld-v0", game_files=files)  # noqa: E731
        source = make()
        rows.append(
            measure(
                "ALFWorld (native)",
                source,
                make(),
                list(source.unwrapped.task_ids),
                args.snapshots,
                0,
                args.walk_steps,
            )
        )
    from webshop_server import create_app

    app = create_app({"title_nouns": "fallback"})
    for mode in ("text", "html"):
        make = lambda mode=mode: gym.make("GACA-WebShop-v0", app=app, observation_mode=mode, split="all")  # noqa: E731
        source = make()
        ids = list(source.unwrapped.task_ids)
        rows.append(
            measure(f"WebShop in-process ({mode})", source, make(), ids, args.snapshots, args.seed, args.walk_steps)
        )
    if args.http:
        from webshop_server.process import free_port, start_server, stop_server

        port = free_port()
        server = start_server(port, "--title-nouns", "fallback")
        try:
            url = f"http://127.0.0.1:{port}"
            source = gym.make("GACA-WebShop-v0", server_url=url, split="all")
            target = gym.make("GACA-WebShop-v0", server_url=url)
            ids = list(source.unwrapped.task_ids)
            rows.append(
                measure("WebShop over HTTP (text)", source, target, ids, args.snapshots, args.seed, args.walk_steps)
            )
        finally:
            stop_server(server)
    make = lambda: gym.make("GACA-CriticalChain-v0", noise=0.2)  # noqa: E731
    source = make()
    source.reset(seed=args.seed)
    rows.append(
        measure(
            "CriticalChain",
            source,
            make(),
            source.unwrapped.task_ids[:100],
            args.snapshots,
            args.seed,
            args.walk_steps,
        )
    )
    print("| env | pickled bytes (median / max) | JSON bytes (median) | save ms | restore ms (median / max) |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['env']} | {r['pickle_median']:,} / {r['pickle_max']:,} | {r['json_median']:,} | "
            f"{r['save_ms']:.3f} | {r['restore_ms']:.3f} / {r['restore_ms_max']:.2f} |"
        )


if __name__ == "__main__":
    main()
