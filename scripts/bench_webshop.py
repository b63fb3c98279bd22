"""Benchmarks of the self-hosted WebShop; prints a Markdown report for docs/BENCHMARKS.md.

Measures:
1. ``GACA-WebShop-v0`` in-process step time on the 1k catalog (oracle episodes plus invalid steps);
2. server start time (cold: index built; warm: cached index) and HTTP requests/s with concurrent
   client processes on 127.0.0.1, with 1 worker (Werkzeug, threaded) and N gunicorn workers;
3. for each catalog size: generation and index build time, cached index load time, search
   latency p50/p95 over varied queries, and the resident memory of a process holding the
   catalog and index.

Usage::

    python scripts/bench_webshop.py                       # 1k and 1M products (1M takes minutes)
    python scripts/bench_webshop.py --scales 1000,100000 --http-seconds 5
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np


def _shop(cache_dir: str):
    """The embedded 1k shop with its index cached under ``cache_dir``, title nouns by the fallback."""
    from webshop_server import Shop, ShopConfig

    return Shop.from_config(ShopConfig(cache_dir=cache_dir, title_nouns="fallback"))


def bench_env(episodes: int, cache_dir: str) -> dict:
    """Per-step wall time of the in-process text env on the 1k catalog."""
    from gaca_envs.webshop.env import WebShopEnv
    from webshop_server import create_app
    from webshop_server.expert import oracle_actions

    shop = _shop(cache_dir)
    env = WebShopEnv(app=create_app({"title_nouns": "fallback"}, shop=shop), split="all")
    times = []
    for n in range(episodes):
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


def _client(args: tuple[str, list[str], float, int]) -> int:
    import requests

    base, paths, seconds, seed = args
    rng = random.Random(seed)
    session = requests.Session()
    done = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        response = session.get(base + rng.choice(paths), timeout=30)
        if response.status_code != 200:
            raise RuntimeError(f"{response.status_code} for {response.url}")
        done += 1
    return done


def _request_mix(shop, n: int = 300) -> list[str]:
    """Start pages, results pages of distinct queries, and item pages: what agents request."""
    from urllib.parse import quote

    rng = random.Random(0)
    paths = []
    for i in range(n):
        product = shop.catalog.products[rng.randrange(len(shop.catalog))]
        words = str((product["query"] + " " + " ".join(product["Attributes"][:2])).split())
        session = f"bench{i}_fixed_{i % len(shop.goals)}"
        paths.append(f"/{session}")
        paths.append(f"/search_results/{session}/{quote(words)}/1")
        paths.append(f"/item_page/{session}/{product['asin']}/{quote(words)}/1/%7B%7D")
    return paths


def _time_start(args: list[str], cache_dir: str) -> tuple[float, subprocess.Popen, int]:
    from webshop_server.process import free_port, start_server

    port = free_port()
    started = time.perf_counter()
    proc = start_server(port, "--cache-dir", cache_dir, *args)
    return time.perf_counter() - started, proc, port


def bench_http(seconds: float, clients: int, workers: int, threads: int, cache_dir: str) -> list[dict]:
    """Server start times and requests/s with ``clients`` client processes, for 1 and ``workers`` workers."""
    from webshop_server.process import stop_server

    shop = _shop(cache_dir)
    paths = _request_mix(shop)
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-cold-") as cold_cache:
        cold, proc, _ = _time_start([], cold_cache)
        stop_server(proc)
    for n_workers in (1, workers):
        warm, proc, port = _time_start(["--workers", str(n_workers), "--threads", str(threads)], cache_dir)
        try:
            base = f"http://127.0.0.1:{port}"
            _client((base, paths, 1.0, 99))  # warm-up
            with ProcessPoolExecutor(clients) as pool:
                counts = list(pool.map(_client, [(base, paths, seconds, s) for s in range(clients)]))
            rate = sum(counts) / seconds
            rows.append({"workers": n_workers, "clients": clients, "requests_per_s": rate, "start_s_warm": warm,
                         "start_s_cold": cold})  # fmt: skip
        finally:
            stop_server(proc)
    return rows


def search_worker(n_products: int, n_queries: int) -> dict:
    """Runs in its own process so that its resident memory is the catalog's and index's."""
    import psutil

    from webshop_server.catalog import generate_catalog
    from webshop_server.search import SearchIndex

    started = time.perf_counter()
    catalog = generate_catalog(n_products)
    generate_s = time.perf_counter() - started
    with tempfile.TemporaryDirectory(prefix="bench-index-") as cache:
        started = time.perf_counter()
        SearchIndex.for_catalog(catalog, cache)  # builds and saves
        build_s = time.perf_counter() - started
        started = time.perf_counter()
        index = SearchIndex.for_catalog(catalog, cache)  # loads the cached index (documents digested again)
        load_s = time.perf_counter() - started
    rng = random.Random(1)
    queries = []
    for _ in range(n_queries):
        p = catalog.products[rng.randrange(n_products)]
        kind = rng.random()
        if kind < 0.4:
            queries.append(p["query"] + " " + " ".join(p["instruction_attributes"]))
        elif kind < 0.7:
            queries.append(p["Title"].lower())
        else:
            values = [v for vs in p["options"].values() for v in vs[:1]]
            queries.append(" ".join([p["query"], *values, *p["Attributes"][:1]]))
    for q in queries[:20]:
        index.search(q)  # warm-up
    latencies = []
    for q in queries:
        t = time.perf_counter()
        index.search(q)
        latencies.append(time.perf_counter() - t)
    ms = np.array(latencies) * 1000
    return {"products": n_products, "generate_s": generate_s, "build_s": build_s, "load_s": load_s,
            "p50_ms": float(np.percentile(ms, 50)), "p95_ms": float(np.percentile(ms, 95)),
            "rss_gib": psutil.Process().memory_info().rss / 2**30}  # fmt: skip


def bench_search(n_products: int, n_queries: int) -> dict:
    cmd = [sys.executable, __file__, "--search-worker", str(n_products), "--queries", str(n_queries)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--scales", default="1000,1000000", help="catalog sizes for the search benchmark")
    p.add_argument("--queries", type=int, default=500)
    p.add_argument("--episodes", type=int, default=200)
    p.add_argument("--http-seconds", type=float, default=10.0)
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--workers", type=int, default=2, help="gunicorn workers of the multi-worker run")
    p.add_argument("--threads", type=int, default=4, help="threads per gunicorn worker")
    p.add_argument("--search-worker", type=int, default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.search_worker:
        print(json.dumps(search_worker(args.search_worker, args.queries)))
        return
    with tempfile.TemporaryDirectory(prefix="bench-webshop-") as cache:
        env = bench_env(args.episodes, cache)
        http = bench_http(args.http_seconds, args.clients, args.workers, args.threads, cache)
    search = [bench_search(int(n), args.queries) for n in args.scales.split(",")]
    cpu = platform.processor() or platform.machine()
    print(f"Machine: {os.cpu_count()} CPUs, {cpu}, Python {platform.python_version()}")
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


if __name__ == "__main__":
    main()
