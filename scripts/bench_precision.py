"""How many weights one GACATrainer iteration at the paper's lr 1e-6 changes, by storage precision (CPU, seconds).

    python scripts/bench_precision.py

Trains one iteration (CriticalChain, 2 tasks x 4 rollouts) of the tests' warm-started tiny model in
Qwen2 layout, once as the paper configs set it (``dtype: float32`` master weights, ``bf16: true``
autocast) and once stored in bf16 (the setting ``GACATrainer`` now refuses: its check is bypassed
here, and only here, to measure what that setting did). Prints, per setting, the fraction of weights
that changed, the fraction of RMSNorm weights that changed, and the stalled fraction that
``gaca_train.training.precision.stalled_fraction`` predicts before the update.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from unittest import mock

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the tests' tiny set-up (tests/gaca_train/tiny_setup.py)


def one_iteration(dtype: str, learning_rate: float, out: Path) -> dict[str, float]:
    """Fractions of changed weights after one iteration with the policy stored in ``dtype``."""
    from gaca_train.experiments.tiny import as_qwen2, save_tiny_model
    from gaca_train.training.precision import stalled_fraction
    from gaca_train.training.trainer import GACATrainer
    from tests.gaca_train.tiny_setup import tiny_config, warm_started_model_and_tokenizer

    llama, tokenizer = warm_started_model_and_tokenizer()
    model_dir = save_tiny_model(as_qwen2(llama), tokenizer, out / "model")
    config = tiny_config(
        out, learning_rate=learning_rate, bf16=True, beta=0.01, model_init_kwargs={"dtype": dtype},
        tasks_per_iteration=2, rollouts_per_task=4, max_completion_length=16,
    )  # fmt: skip
    patched = "gaca_train.training.trainer.check_update_precision"
    bypass = mock.patch(patched) if dtype != "float32" else mock.MagicMock()
    with bypass:
        trainer = GACATrainer(model=str(model_dir), args=config, processing_class=tokenizer)
    predicted = stalled_fraction(trainer.model.parameters(), learning_rate)
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    trainer.train()
    after = dict(trainer.model.named_parameters())

    def changed(names: list[str]) -> float:
        moved = sum(int((after[n].detach() != before[n]).sum()) for n in names)
        return moved / sum(before[n].numel() for n in names)

    norms = [n for n in before if "norm" in n]
    return {"changed": changed(list(before)), "norms_changed": changed(norms), "predicted_stalled": predicted}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--learning-rate", type=float, default=1e-6, help="the paper configs' learning rate")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    print("| storage | weights changed | RMSNorm weights changed | predicted stalled |\n|---|---|---|---|")
    for dtype in ("float32", "bfloat16"):
        with tempfile.TemporaryDirectory() as tmp:
            r = one_iteration(dtype, args.learning_rate, Path(tmp))
        label = "float32 + bf16 autocast (paper configs)" if dtype == "float32" else "bfloat16 (refused)"
        print(f"| {label} | {r['changed']:.2%} | {r['norms_changed']:.2%} | {r['predicted_stalled']:.2%} |")


if __name__ == "__main__":
    main()
