"""The completion budget of an ALFWorld episode under plain TRL's ``GRPOTrainer(environment_factory=...)``.

    python scripts/trl_budget.py                                   # characters, 100 generated games, 50 steps
    python scripts/trl_budget.py --tokenizer Qwen/Qwen2.5-1.5B-Instruct --json budget.json

The work is done by :mod:`gaca_train.experiments.trl_budget` (``--help`` says what is counted and
lists the options).
"""

from gaca_train.experiments.trl_budget import main

if __name__ == "__main__":
    main()
