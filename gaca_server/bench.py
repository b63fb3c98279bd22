"""Steps per second and step latency through ``gaca-env-server`` against the same env in-process.

Run by scripts/bench_env_server.py::

    python scripts/bench_env_server.py                         # ALFWorld and WebShop, 1/16/64 sessions
    python scripts/bench_env_server.py --envs alfworld --sessions 64 --steps 200 --pool 16

In-process, one thread steps ``S`` envs in turn (as a sync vector env does). Through the server,
``S`` client threads each hold a ``GACA-Remote-v0`` session on one local server (127.0.0.1) and
step it as fast as the server answers, so the server's event loop and the env's step run
concurrently, as a trainer's async pool would drive them. Every session plays random admissible
actions (seeded) and resets when an episode ends; each reports per-step latency (client-side,
request to answer). "Overhead per step" is ``1/rate(server) - 1/rate(in-process)``: the time the
server adds to each step when both run flat out, the measure that matters once envs are the
bottleneck. ALFWorld plays 20 generated games (native engine); WebShop the embedded 1k-product
shop in-process on the server.

``--pool N`` also times the trainer's rollout pool (``gaca_train.rollout.vector.RolloutPool``, async
mode, N envs) playing ALFWorld in-process and through two local servers (``server_urls``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
from typing import Any

import gymnasium as gym
import numpy as np

import gaca_envs  # noqa: F401  (registers the ids)
from gaca_server.local import local_server

ENVS = {"alfworld": "GACA-ALFWorld-v0", "webshop": "GACA-WebShop-v0"}


def env_kwargs(name: str, folder: str) -> dict[str, Any]:
    if name == "alfworld":
        from gaca_envs.alfworld.generate import generate

        generate(folder, 20, seed=6, split="train")
        return {"data_path": folder}
    return {"shop_config": {"n_products": 1000, "title_nouns": "fallback", "cache_dir": folder}}


def drive(env: gym.Env, task_ids: list[str], steps: int, seed: int, latencies: list[float]) -> None:
    """Plays ``steps`` steps of random admissible actions on ``env``, resetting when an episode ends."""
    rng = np.random.default_rng(seed)
    _, info = env.reset(seed=seed, options={"task_id": task_ids[seed % len(task_ids)]})
    for _ in range(steps):
        actions = [a for a in info["admissible_actions"] if a != "search[<query>]"] or ["search[red shoes]"]
        start = time.perf_counter()
        _, _, terminated, truncated, info = env.step(actions[rng.integers(len(actions))])
        latencies.append(time.perf_counter() - start)
        if terminated or truncated:
            _, info = env.reset(options={"task_id": task_ids[rng.integers(len(task_ids))]})


def in_process(env_id: str, kwargs: dict[str, Any], sessions: int, steps: int) -> dict[str, float]:
    envs = [gym.make(env_id, **kwargs) for _ in range(sessions)]
    task_ids = list(envs[0].unwrapped.task_ids)
    rngs = [np.random.default_rng(i) for i in range(sessions)]
    infos = [env.reset(seed=i, options={"task_id": task_ids[i % len(task_ids)]})[1] for i, env in enumerate(envs)]
    latencies: list[float] = []
    start = time.perf_counter()
    for _ in range(steps):
        for i, env in enumerate(envs):
            actions = [a for a in infos[i]["admissible_actions"] if a != "search[<query>]"] or ["search[red shoes]"]
            tic = time.perf_counter()
            _, _, terminated, truncated, infos[i] = env.step(actions[rngs[i].integers(len(actions))])
            latencies.append(time.perf_counter() - tic)
            if terminated or truncated:
                infos[i] = env.reset(options={"task_id": task_ids[rngs[i].integers(len(task_ids))]})[1]
    return summary(latencies, time.perf_counter() - start)


def through_server(url: str, sessions: int, steps: int) -> dict[str, float]:
    envs = [gym.make("GACA-Remote-v0", url=url) for _ in range(sessions)]
    task_ids = list(envs[0].unwrapped.task_ids)
    latencies: list[list[float]] = [[] for _ in range(sessions)]
    threads = [
        threading.Thread(target=drive, args=(env, task_ids, steps, i, latencies[i])) for i, env in enumerate(envs)
    ]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - start
    for env in envs:
        env.close()
    return summary([x for per in latencies for x in per], elapsed)


def summary(latencies: list[float], elapsed: float) -> dict[str, float]:
    ms = sorted(1000 * x for x in latencies)
    return {
        "steps_per_s": len(ms) / elapsed,
        "mean_ms": statistics.fmean(ms),
        "p50_ms": statistics.median(ms),
        "p99_ms": ms[min(len(ms) - 1, int(0.99 * len(ms)))],
    }


def pool_rate(env_id: str, kwargs: dict[str, Any], size: int, rounds: int, server_urls: list[str] | None) -> float:
    """Steps per second of a RolloutPool (async) playing ``rounds`` rollouts of up to 20 steps."""
    from gaca_train.rollout.vector import RolloutPool

    pool = RolloutPool(env_id, size, kwargs, mode="async", server_urls=server_urls)
    task_ids = list(gym.make(env_id, **kwargs).unwrapped.task_ids)
    rng = np.random.default_rng(0)
    steps, start = 0, time.perf_counter()
    for r in range(rounds):
        starts = pool.reset([task_ids[(r * size + i) // 4 % len(task_ids)] for i in range(size)], seed=r)
        infos = [info for _, info in starts]
        live = [True] * size
        for _ in range(20):
            actions = [
                info["admissible_actions"][rng.integers(len(info["admissible_actions"]))] if on else None
                for info, on in zip(infos, live)
            ]
            for i, result in enumerate(pool.step(actions)):
                if result is not None:
                    steps += 1
                    infos[i] = result.info
                    live[i] = not (result.terminated or result.truncated)
    elapsed = time.perf_counter() - start
    pool.close()
    return steps / elapsed


def main(argv: list[str] | None = None) -> None:
    """The command line of scripts/bench_env_server.py; prints a Markdown table row per env and session count."""
    p = argparse.ArgumentParser(prog="bench_env_server.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--envs", nargs="+", choices=sorted(ENVS), default=["alfworld", "webshop"], help="envs to measure")
    p.add_argument("--sessions", nargs="+", type=int, default=[1, 16, 64], help="concurrent clients to measure with")
    p.add_argument("--steps", type=int, default=200, help="steps per session")
    p.add_argument("--pool", type=int, default=0, help="also time a RolloutPool of this size (ALFWorld); 0: no")
    p.add_argument("--pool-rounds", type=int, default=3, help="rollout-pool rounds timed (default: %(default)s)")
    p.add_argument("--out", help="write the results as JSON here")
    args = p.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for name in args.envs:
            kwargs = env_kwargs(name, f"{folder}/{name}")
            with local_server(ENVS[name], kwargs, ["--max-sessions", str(max(args.sessions))]) as server:
                for sessions in args.sessions:
                    local = in_process(ENVS[name], kwargs, sessions, args.steps)
                    remote = through_server(server.url, sessions, args.steps)
                    overhead = 1000 * (1 / remote["steps_per_s"] - 1 / local["steps_per_s"])
                    rows.append({"env": name, "sessions": sessions, "in_process": local, "server": remote,
                                 "overhead_ms_per_step": overhead})  # fmt: skip
                    print(
                        f"| {name} | {sessions} | {local['steps_per_s']:.0f} | {local['p50_ms']:.2f} / "
                        f"{local['p99_ms']:.2f} | {remote['steps_per_s']:.0f} | {remote['p50_ms']:.2f} / "
                        f"{remote['p99_ms']:.2f} | {overhead:.2f} |",
                        flush=True,
                    )
        if args.pool:
            kwargs = env_kwargs("alfworld", f"{folder}/pool")
            local_rate = pool_rate(ENVS["alfworld"], kwargs, args.pool, args.pool_rounds, None)
            with local_server(ENVS["alfworld"], kwargs) as a, local_server(ENVS["alfworld"], kwargs) as b:
                remote_rate = pool_rate(ENVS["alfworld"], kwargs, args.pool, args.pool_rounds, [a.url, b.url])
            rows.append(
                {"pool": args.pool, "in_process_steps_per_s": local_rate, "two_servers_steps_per_s": remote_rate}
            )
            print(
                f"RolloutPool({args.pool}, async): in-process {local_rate:.0f} steps/s, two servers {remote_rate:.0f}"
            )
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1)
