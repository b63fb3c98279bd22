"""Server and search benchmarks of the self-hosted WebShop (parts 2 and 3 of ``scripts/bench_webshop.py``).

- :func:`bench_http`: server start time (cold: index built; warm: cached index) and HTTP
  requests/s with concurrent client processes on 127.0.0.1, for 1 worker (Werkzeug, threaded)
  and N gunicorn workers;
- :func:`bench_search`: for one catalog size, generation and index build time, cached index load
  time, search latency p50/p95 over varied queries, and the resident memory of a process holding
  the catalog and index (:func:`search_worker`, run in a fresh process by
  ``python -m webshop_server.bench --products N --queries Q``).

The report, with the in-process env's step time, is :mod:`gaca_envs.webshop.bench`.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from webshop_server import Shop


def bench_shop(cache_dir: str) -> Shop:
    """The embedded 1k shop with its index cached under ``cache_dir``, title nouns by the fallback."""
    from webshop_server import Shop, ShopConfig

    return Shop.from_config(ShopConfig(cache_dir=cache_dir, title_nouns="fallback"))


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

    shop = bench_shop(cache_dir)
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
    """:func:`search_worker` in a fresh process, so that its resident memory is not this process's."""
    cmd = [sys.executable, "-m", "webshop_server.bench", "--products", str(n_products), "--queries", str(n_queries)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    """Runs :func:`search_worker` and prints its figures as one JSON line (what :func:`bench_search` reads)."""
    parser = argparse.ArgumentParser(description="Search benchmark of one catalog size, in this process.")
    parser.add_argument("--products", type=int, required=True, help="catalog size")
    parser.add_argument("--queries", type=int, default=500, help="search queries timed (default: %(default)s)")
    args = parser.parse_args(argv)
    print(json.dumps(search_worker(args.products, args.queries)))


if __name__ == "__main__":
    main()
