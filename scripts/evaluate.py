"""Evaluate a policy on a GACA env split: a model (local, vLLM, or an OpenAI-compatible endpoint), or a baseline.

    python scripts/evaluate.py --env GACA-CriticalChain-v0 --policy expert --max-tasks 100
    python scripts/evaluate.py --config configs/alfworld_gaca.yaml --model outputs/alfworld-gaca \
        --max-tasks 140 --out runs/eval-alfworld
    python scripts/evaluate.py --config configs/webshop_gaca.yaml --base-url http://127.0.0.1:8000/v1 \
        --model Qwen/Qwen2.5-7B-Instruct --concurrency 16 --out runs/eval-webshop

The work is done by :mod:`gaca_train.experiments.evaluate` (``--help`` lists the options and outputs).
"""

from gaca_train.experiments.evaluate import cli

if __name__ == "__main__":
    cli()
