"""Parity check: the native ALFWorld engine against TextWorld's PDDL engine, step by step.

    python scripts/parity_alfworld.py --games 300 --walks 5 [--data DIR] [--cache DIR] [--shard 0/2]
        [--difficulty standard|easy|real]

Exit status 1 if any state differs. The work is done by :mod:`gaca_envs.alfworld.parity`
(``--help`` lists the options; its docstring says what is compared and how traces are cached).
"""

from gaca_envs.alfworld.parity import main

if __name__ == "__main__":
    raise SystemExit(main())
