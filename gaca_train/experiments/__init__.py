"""Experiments built on the envs and the trainer: warm starts and the CPU quickstart.

- :mod:`gaca_train.experiments.warm_start`: expert demonstrations as chat prompts, and SFT on them.
- :mod:`gaca_train.experiments.quickstart`: the CPU quickstart (``make demo``) and its seed sweep.

The scripts in ``scripts/`` are thin command-line wrappers of these modules.
"""
