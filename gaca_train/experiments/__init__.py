"""The top room: experiments on the envs and the trainer: evaluation, warm starts, the CPU quickstart, studies.

- :mod:`gaca_train.experiments.warm_start`: expert demonstrations as chat prompts, and SFT on them.
- :mod:`gaca_train.experiments.quickstart`: the CPU quickstart (``make demo``) and its seed sweep.
- :mod:`gaca_train.experiments.evaluate`: evaluation of a model, an endpoint or a baseline on a split.
- :mod:`gaca_train.experiments.study`: the estimator study (tabular and ALFWorld set-ups, cached runs);
  :mod:`gaca_train.experiments.study_report` its statistics, tables, plots and report.
- :mod:`gaca_train.experiments.synthetic`: a synthetic ALFWorld-sized batch of step rows (benchmark, demo).
- :mod:`gaca_train.experiments.train`: the TRL-style training command line (``scripts/train.py``).
- :mod:`gaca_train.experiments.bench_trainer`: time per trainer iteration, by part (``scripts/bench_trainer.py``).
- :mod:`gaca_train.experiments.trl_budget`: the plain-TRL completion budget of ALFWorld episodes
  (``scripts/trl_budget.py``).
- :mod:`gaca_train.experiments.tabular`: the tabular softmax policy and its trainer (the diagnostic study).
- :mod:`gaca_train.experiments.tiny`: a tiny local causal LM and word-level tokenizer (tests, CPU runs, benches).
- :mod:`gaca_train.experiments.cli_utils`: command-line helpers (seed lists, deprecated flag aliases).

The scripts in ``scripts/`` are thin command-line wrappers of these modules.
"""
