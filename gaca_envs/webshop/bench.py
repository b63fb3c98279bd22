"""Benchmarks of the self-hosted WebShop; prints a Markdown report for docs/BENCHMARKS.md.

Measures:
1. ``GACA-WebShop-v0`` in-process step time on the 1k catalog (oracle episodes plus invalid steps);
2. server start time (cold: index built; warm: cached index) and HTTP requests/s with concurrent
   client processes on 127.0.0.1, with 1 worker (Werkzeug, threaded) and N gunicorn workers;
3. for each catalog size: generation and index build time, cached index load time, search
   latency p50/p95 over varied queries, and the resident memory of a process holding the
   catalog and index.

Parts 2 and 3 are :mod:`webshop_server.bench`; part 1 is here, as it needs the env.

``--baselines`` instead measures how hard a shop is (:func:`bench_baselines`): the baseline
policies of :mod:`gaca_envs.webshop.baselines` on a split's goals, score and success with 95%
intervals, and the shop's start time and search latency.

Command line: ``scripts/bench_webshop.py`` (a wrapper of :func:`main`)::

    python scripts/bench_webshop.py                       # 1k and 1M products (1M takes minutes)
    python scripts/bench_webshop.py --scales 1000,100000 --http-seconds 5
    python scripts/bench_webshop.py --baselines --env GACA-WebShop-v1 --split test   # difficulty table
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from typing import Any

import numpy as np

from webshop_server.bench import bench_http, bench_search, bench_shop, search_worker


def bench_env(episodes: int, cache_dir: str) -> dict:
    """Per-step wall time of the in-process text env on the 1k catalog."""
    from gaca_envs.webshop.env import WebShopEnv
    from webshop_server import create_app

    shop = bench_shop(cache_dir)
    env = WebShopEnv(app=create_app({"title_nouns": "fallback"}, shop=shop), split="all")
    return step_times(env, shop, range(episodes))


def step_times(env: Any, shop: Any, goal_ids: Any) -> dict:
    """Per-step wall time of ``env`` over oracle episodes of ``goal_ids``, each with 3 navigation or invalid steps."""
    from webshop_server.expert import oracle_actions

    times = []
    for n in goal_ids:
        env.reset(options={"task_id": n})
        actions = oracle_actions(shop, n)
        actions[1:1] = ["click[nothing here]", "click[next >]", "click[< prev]"]
        for action in actions:
            started = time.perf_counter()
            env.step(action)
            times.append(time.perf_counter() - started)
    t = np.array(times) * 1000
    return {"steps": len(t), "mean_ms": t.mean(), "p50_ms": np.percentile(t, 50), "p95_ms": np.percentile(t, 95),
            "steps_per_s": 1000 / t.mean()}  # fmt: skip


def bench_baselines(
    env_id: str, split: str, goals: int | None, shop: dict, policies: list[str], seed: int
) -> tuple[dict, dict]:
    """The difficulty table of one shop: every baseline policy on the first ``goals`` goals of ``split``.

    Returns the table (policy -> :func:`~gaca_envs.webshop.baselines.summarize`) and the shop's
    figures: products, goals, start time, search latency p50/p95 over the rule's queries.
    """
    import gymnasium as gym

    import gaca_envs  # noqa: F401 - registers the ids
    from gaca_envs.webshop.baselines import difficulty_table
    from webshop_server import Shop, ShopConfig, create_app

    defaults = {"catalog": "embedded-v1"} if env_id.endswith("-v1") else {}
    config = ShopConfig(**{**defaults, "title_nouns": "fallback", **shop})
    started = time.perf_counter()
    shop_obj = Shop.from_config(config)
    start_s = time.perf_counter() - started
    app = create_app(config, shop=shop_obj)
    probe = gym.make(env_id, app=app, split=split)
    task_ids = probe.unwrapped.task_ids[:goals] if goals else probe.unwrapped.task_ids
    probe.close()
    table = difficulty_table(lambda expert: gym.make(env_id, app=app, split=split, expert=expert), task_ids,
                             policies, seed)  # fmt: skip
    latencies = []
    for goal in shop_obj.goals[: len(task_ids)]:
        started = time.perf_counter()
        shop_obj.index.search(goal["instruction_text"])
        latencies.append(time.perf_counter() - started)
    ms = np.array(latencies) * 1000
    goal_ids = [int(str(t).removeprefix("fixed_")) for t in task_ids]
    steps = step_times(gym.make(env_id, app=app, split=split), shop_obj, goal_ids[:200])
    figures = {"env": env_id, "split": split, "goals": len(task_ids), "products": len(shop_obj.catalog),
               "shop_goals": len(shop_obj.goals), "catalog": shop_obj.catalog.source, "start_s": start_s,
               "search_p50_ms": float(np.percentile(ms, 50)), "search_p95_ms": float(np.percentile(ms, 95)),
               "title_nouns": config.title_nouns, "seed": seed,
               "near_duplicate_traps": near_duplicate_traps(shop_obj, goal_ids), "env_step_mean_ms": steps["mean_ms"],
               "env_step_p50_ms": steps["p50_ms"], "env_step_p95_ms": steps["p95_ms"]}  # fmt: skip
    return table, figures


def _cpu() -> str:
    from gaca_envs.machine import cpu_model

    return cpu_model() or platform.processor() or platform.machine()


def near_duplicate_traps(shop: Any, goal_ids: list[int]) -> int | None:
    """How many of the goals have a sibling of their target's product line that fails them (None: no lines).

    A sibling fails a goal when buying it with the goal's option values it offers scores below 1.0.
    """
    by_line: dict[int, list[dict]] = {}
    for product in shop.catalog.products:
        if "line" not in product:
            return None
        by_line.setdefault(product["line"], []).append(product)
    trapped = 0
    for n in goal_ids:
        goal = shop.goals[n]
        for p in by_line[shop.catalog.by_asin[goal["asin"]]["line"]]:
            chosen = {name: v for v in goal["goal_options"] for name, vs in p["options"].items() if v in vs}
            if p["asin"] != goal["asin"] and shop.score(goal, p["asin"], chosen)[0] < 1.0:
                trapped += 1
                break
    return trapped


def main(argv: list[str] | None = None) -> None:
    """Command line entry point: runs the three benchmarks and prints the Markdown report."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--scales", default="1000,1000000", help="catalog sizes for the search benchmark")
    p.add_argument("--queries", type=int, default=500, help="search queries timed (default: %(default)s)")
    p.add_argument("--episodes", type=int, default=200, help="env episodes timed (default: %(default)s)")
    p.add_argument(
        "--http-seconds", type=float, default=10.0, help="length of the HTTP load test (default: %(default)s)"
    )
    p.add_argument("--clients", type=int, default=8, help="concurrent HTTP clients (default: %(default)s)")
    p.add_argument("--workers", type=int, default=2, help="gunicorn workers of the multi-worker run")
    p.add_argument("--threads", type=int, default=4, help="threads per gunicorn worker")
    p.add_argument("--search-worker", type=int, default=None, help=argparse.SUPPRESS)
    b = p.add_argument_group("difficulty (--baselines)")
    b.add_argument("--baselines", action="store_true", help="measure the baseline policies instead (difficulty)")
    b.add_argument("--env", default="GACA-WebShop-v1", help="env id (default: %(default)s)")
    b.add_argument("--split", default="test", choices=("train", "eval", "test", "all"), help="goals' split")
    b.add_argument("--goals", type=int, default=None, help="first N goals of the split (default: all of it)")
    b.add_argument("--n-products", type=int, default=None, help="catalog size (default: the env's)")
    b.add_argument("--shop-config", default="{}", help="more ShopConfig fields as JSON, e.g. '{\"seed\": 1}'")
    b.add_argument("--policies", default=None, help="comma-separated policies (default: all)")
    b.add_argument("--seed", type=int, default=0, help="seed of the random policy's draws (default: %(default)s)")
    b.add_argument("--json", default=None, metavar="PATH", help="also write the table and figures as JSON")
    args = p.parse_args(argv)
    if args.search_worker:
        print(json.dumps(search_worker(args.search_worker, args.queries)))
        return
    if args.baselines:
        _main_baselines(args)
        return
    with tempfile.TemporaryDirectory(prefix="bench-webshop-") as cache:
        env = bench_env(args.episodes, cache)
        http = bench_http(args.http_seconds, args.clients, args.workers, args.threads, cache)
    search = [bench_search(int(n), args.queries) for n in args.scales.split(",")]
    print(f"Machine: {os.cpu_count()} CPUs, {_cpu()}, Python {platform.python_version()}")
    print(f"\nIn-process env (1k catalog, {env['steps']} steps of {args.episodes} episodes):")
    print(f"step mean {env['mean_ms']:.2f} ms, p50 {env['p50_ms']:.2f} ms, p95 {env['p95_ms']:.2f} ms, "
          f"{env['steps_per_s']:.0f} steps/s")  # fmt: skip
    print("\n| server | clients | requests/s | start (cached index) | start (cold) |\n|---|---|---|---|---|")
    for r in http:
        name = "werkzeug, 1 worker" if r["workers"] == 1 else f"gunicorn, {r['workers']} workers"
        rate, warm, cold = r["requests_per_s"], r["start_s_warm"], r["start_s_cold"]
        print(f"| {name} | {r['clients']} | {rate:.0f} | {warm:.2f} s | {cold:.2f} s |")
    print("\n| products | generate | index build | cached index load | search p50 | search p95 | RSS |")
    print("|---|---|---|---|---|---|---|")
    for r in search:
        print(f"| {r['products']:,} | {r['generate_s']:.1f} s | {r['build_s']:.1f} s | {r['load_s']:.2f} s | "
              f"{r['p50_ms']:.2f} ms | {r['p95_ms']:.2f} ms | {r['rss_gib']:.2f} GiB |")  # fmt: skip


def _main_baselines(args: argparse.Namespace) -> None:
    from gaca_envs.webshop.baselines import POLICIES

    try:
        shop = json.loads(args.shop_config)
    except json.JSONDecodeError as e:
        raise SystemExit(f"--shop-config must be a JSON object of ShopConfig fields: {e}") from None
    if not isinstance(shop, dict):
        raise SystemExit("--shop-config must be a JSON object of ShopConfig fields, e.g. '{\"seed\": 1}'")
    if args.n_products is not None:
        shop["n_products"] = args.n_products
    policies = args.policies.split(",") if args.policies else list(POLICIES)
    unknown = [name for name in policies if name not in POLICIES]
    if unknown:
        raise SystemExit(f"--policies: unknown {', '.join(unknown)}; choose from {', '.join(POLICIES)}")
    print(f"Machine: {os.cpu_count()} CPUs, {_cpu()}, Python {platform.python_version()}")
    runs = [bench_baselines(args.env, args.split, args.goals, shop, policies, args.seed)]
    if "catalog" not in shop and os.environ.get("WEBSHOP_DATA"):  # the original files beside the embedded shop
        original = {**shop, "catalog": "$WEBSHOP_DATA"}
        runs.append(bench_baselines(args.env, args.split, args.goals, original, policies, args.seed))
    for table, fig in runs:
        _print_difficulty(table, fig)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump([{"figures": fig, "table": table} for table, fig in runs], f, indent=1)


def _print_difficulty(table: dict, fig: dict) -> None:
    from gaca_envs.webshop.baselines import table_markdown

    print(f"{fig['env']} ({fig['catalog']}, {fig['products']:,} products, {fig['shop_goals']:,} goals), split "
          f"{fig['split']}: {fig['goals']} goals, title nouns {fig['title_nouns']}, seed {fig['seed']}")  # fmt: skip
    print(f"shop loaded in {fig['start_s']:.1f} s (catalog, goals, index), search p50 {fig['search_p50_ms']:.2f} ms, "
          f"p95 {fig['search_p95_ms']:.2f} ms (the instructions as queries)")  # fmt: skip
    print(f"env step mean {fig['env_step_mean_ms']:.2f} ms, p50 {fig['env_step_p50_ms']:.2f} ms, "
          f"p95 {fig['env_step_p95_ms']:.2f} ms (oracle episodes with 3 navigation or invalid steps)")  # fmt: skip
    if fig["near_duplicate_traps"] is not None:
        print(f"goals with a near-duplicate that fails them (a sibling of the target): "
              f"{fig['near_duplicate_traps']} of {fig['goals']}")  # fmt: skip
    print()
    print(table_markdown(table))
    print("\nscore: mean get_reward x 100 (normal 95% CI); success: score 1.0 (Wilson 95% CI)")
