#!/usr/bin/env python
"""Oracle studies on CriticalChain (see gaca_train/experiments/oracle_study.py and docs/BENCHMARKS.md)."""

from gaca_train.experiments.oracle_study import main

if __name__ == "__main__":
    main()
