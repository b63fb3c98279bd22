"""GPU smoke run: 2 GACA iterations of a Qwen2.5-1.5B-shaped model at the paper config's precision and micro-batch.

    bash scripts/gpu_wheelhouse.sh    # where the package registry is reachable: the wheels, in .whl/gpu
    bash scripts/gpu_smoke.sh         # on the GPU machine, offline: installs .whl/gpu, then runs this file
    bash scripts/gpu_smoke.sh --tiny  # the same chain on the CPU with a 2-layer model

The work is done by :mod:`gaca_train.experiments.gpu_smoke` (``--help`` says what the run takes and prints).
"""

from pathlib import Path

from gaca_train.experiments.gpu_smoke import main

if __name__ == "__main__":
    main(root=Path(__file__).resolve().parent.parent)
