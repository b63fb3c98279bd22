"""Benchmark of GACA-ALFWorld-v0: reset time, steps per second, games generated per second.

    python scripts/bench_alfworld.py [--games 12] [--steps 50] [--seed 0] [--engines-only]

The work is done by :mod:`gaca_envs.alfworld.bench` (its docstring lists what is measured).
"""

from gaca_envs.alfworld.bench import main

if __name__ == "__main__":
    main()
