"""Time per GACATrainer iteration, split into generation, env, advantage, train and other.

    python scripts/bench_trainer.py --iterations 5 --micro-batch-tokens 512 4096

The work is done by :mod:`gaca_train.experiments.bench_trainer` (``--help`` says what each part
covers and lists the options).
"""

from gaca_train.experiments.bench_trainer import main

if __name__ == "__main__":
    main()
