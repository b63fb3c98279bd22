"""Benchmarks of the self-hosted WebShop; prints a Markdown report for docs/BENCHMARKS.md.

    python scripts/bench_webshop.py                       # 1k and 1M products (1M takes minutes)
    python scripts/bench_webshop.py --scales 1000,100000 --http-seconds 5

The work is done by :mod:`gaca_envs.webshop.bench` (the env's step time and the report) and
:mod:`webshop_server.bench` (server start, requests/s, search); ``--help`` lists the options.
"""

from gaca_envs.webshop.bench import main

if __name__ == "__main__":
    main()
