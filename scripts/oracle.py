#!/usr/bin/env python
"""Estimators of a checkpoint or served model against oracle advantages (gaca_train/experiments/oracle_measure.py)."""

from gaca_train.experiments.oracle_measure import main

if __name__ == "__main__":
    main()
