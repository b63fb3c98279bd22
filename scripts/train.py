"""Train an LLM agent with GACA, GiGPO or GRPO on a GACA env, TRL-style.

    accelerate launch scripts/train.py --config configs/alfworld_gaca.yaml
    python scripts/train.py --config configs/alfworld_gaca.yaml --dry_run true   # start-up checks only
    python scripts/train.py --config configs/quickstart_cpu.yaml --estimator gigpo   # CLI overrides YAML

The work is done by :mod:`gaca_train.experiments.train` (``--help`` lists every option: GACAConfig,
TRL's ModelConfig and the script options).
"""

from gaca_train.experiments.train import cli

if __name__ == "__main__":
    cli()
