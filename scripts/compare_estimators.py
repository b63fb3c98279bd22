"""Credit-assignment study: GRPO vs GiGPO vs GACA vs NLL reweighting, several seeds each.

    python scripts/compare_estimators.py --out runs/compare            # full study (~10-20 min, 2 cores)
    python scripts/compare_estimators.py --out runs/smoke --smoke      # seconds, for CI
    python scripts/compare_estimators.py --setup alfworld --out runs/compare-alfworld   # ~3 h, 2 cores
    python scripts/compare_estimators.py --setup alfworld --out runs/compare-alfworld --sweep-eta 0.5 1.0  # +10 runs
    python scripts/compare_estimators.py --out runs/compare-alfworld --report-only   # table + PNG again

The work is done by :mod:`gaca_train.experiments.study` (``--help`` describes the set-ups and options).
"""

from gaca_train.experiments.study import main

if __name__ == "__main__":
    main()
