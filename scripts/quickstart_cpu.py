"""CPU quickstart: warm-start a tiny local model on expert steps, train it with GACA, compare success.

    python scripts/quickstart_cpu.py                       # minutes on 2 idle cores (see docs/BENCHMARKS.md)
    python scripts/quickstart_cpu.py --estimator gigpo --iterations 40

1. Builds a tiny LLaMA-architecture model and word-level tokenizer for GACA-CriticalChain-v0
   (no download) and fine-tunes it with TRL's SFTTrainer on expert steps whose fork choices are
   random (``--fork-noise 1``): the warm-started policy walks the routine stages but guesses at the
   fork, whose consequence shows only at the goal.
2. Measures its success rate (sampled episodes of the training tasks; the tiny model memorises
   place names, so unseen tasks are not a fair test of it).
3. Trains it with ``GACATrainer`` (settings in ``configs/quickstart_cpu.yaml``).
4. Measures success again and writes ``<out>/learning_curve.png`` and ``<out>/summary.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import yaml

SCRIPTS = Path(__file__).resolve().parent
sys.path.insert(0, str(SCRIPTS))

import evaluate  # noqa: E402  (sibling script)
import make_tiny_model  # noqa: E402  (sibling script)


def load_config(path: Path, out: Path, overrides: dict) -> tuple[dict, dict]:
    """The quickstart YAML split into GACAConfig fields and the env kwargs, with overrides applied."""
    fields = yaml.safe_load(path.read_text())
    fields.pop("model_name_or_path", None)
    fields.update(overrides, output_dir=str(out / "rl"))
    return fields, json.loads(fields["env_kwargs"])


def measure(model_dir: Path, env_kwargs: dict, fields: dict, episodes: int, out: Path) -> dict:
    """Success of sampled episodes on the training tasks (``episodes`` per task)."""
    n_tasks = env_kwargs["num_tasks"]
    records = []
    for repeat in range(episodes):
        report = evaluate.main(
            [
                "--model", str(model_dir), "--env-kwargs", json.dumps(env_kwargs), "--split", "train",
                "--num-episodes", str(n_tasks), "--batch-size", str(n_tasks), "--max-steps",
                str(fields["max_env_steps"]), "--max-new-tokens", str(fields["max_completion_length"]),
                "--temperature", str(fields.get("temperature", 1.0)), "--seed", str(1000 + repeat),
                "--out", str(out),
            ]
        )  # fmt: skip
        records += report["episodes"]
    return evaluate.summarise(records)


def plot(log_history: list[dict], before: float, after: float, path: Path, estimator: str) -> None:
    """Learning curve: per-iteration rollout success and its running mean, with before/after marks."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    success = [log["rollout/success_rate"] for log in log_history if "rollout/success_rate" in log]
    window = 5
    running = [sum(success[max(0, i - window + 1) : i + 1]) / len(success[max(0, i - window + 1) : i + 1])
               for i in range(len(success))]  # fmt: skip
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(range(1, len(success) + 1), success, alpha=0.35, label="rollout success (per iteration)")
    ax.plot(range(1, len(success) + 1), running, label=f"running mean ({window})")
    ax.axhline(before, color="grey", linestyle="--", label=f"before RL: {before:.2f}")
    ax.axhline(after, color="green", linestyle=":", label=f"after RL: {after:.2f}")
    ax.set(xlabel="iteration", ylabel="success rate", ylim=(0, 1), title=f"{estimator.upper()} on CriticalChain")
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default=str(SCRIPTS.parent / "configs" / "quickstart_cpu.yaml"))
    parser.add_argument("--out", default="outputs/quickstart")
    parser.add_argument("--estimator", default=None, help="override the config's estimator")
    parser.add_argument("--iterations", type=int, default=None, help="override the config's max_steps")
    parser.add_argument("--sft-steps", type=int, default=300)
    parser.add_argument("--eval-episodes", type=int, default=4, help="sampled episodes per task per measurement")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    import torch

    from gaca_train.config import GACAConfig
    from gaca_train.tiny import build_tiny_model, build_tokenizer, save_tiny_model
    from gaca_train.trainer import GACATrainer

    tic = time.perf_counter()
    out = Path(args.out)
    overrides = {"seed": args.seed}
    if args.estimator:
        overrides["estimator"] = args.estimator
    if args.iterations:
        overrides["max_steps"] = args.iterations
    fields, env_kwargs = load_config(Path(args.config), out, overrides)

    # 1. Tiny model, warm-started on expert steps with random fork choices.
    n_tasks = env_kwargs["num_tasks"]
    task_ids = [f"train-{i}" for i in range(n_tasks)]
    pairs = make_tiny_model.expert_steps(
        fields["env_id"], env_kwargs, task_ids, fields["history_length"], fields["max_env_steps"], args.seed, 1.0
    )
    tokenizer = build_tokenizer([m["content"] for msgs, _ in pairs for m in msgs] + [r for _, r in pairs])
    model = build_tiny_model(tokenizer, hidden_size=128, num_layers=2, seed=args.seed)
    sft_args = argparse.Namespace(out=str(out), sft_steps=args.sft_steps, sft_lr=3e-3, cpu=True, seed=args.seed)
    make_tiny_model.sft_warm_start(model, tokenizer, pairs, sft_args)
    warm_dir = save_tiny_model(model, tokenizer, out / "warm_start")

    # 2. Success before RL.
    before = measure(warm_dir, env_kwargs, fields, args.eval_episodes, out / "eval_before")

    # 3. RL.
    torch.manual_seed(args.seed)
    trainer = GACATrainer(model=model, args=GACAConfig(**fields), processing_class=tokenizer)
    trainer.train()
    rl_dir = save_tiny_model(model, tokenizer, out / "after_rl")

    # 4. Success after RL, curve and summary.
    after = measure(rl_dir, env_kwargs, fields, args.eval_episodes, out / "eval_after")
    plot(trainer.state.log_history, before["success_rate"], after["success_rate"], out / "learning_curve.png",
         fields["estimator"])  # fmt: skip
    summary = {
        "estimator": fields["estimator"],
        "iterations": fields["max_steps"],
        "before": before,
        "after": after,
        "seconds": time.perf_counter() - tic,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    print(
        f"\nsuccess before RL: {before['success_rate']:.3f}   after {fields['max_steps']} iterations of "
        f"{fields['estimator'].upper()}: {after['success_rate']:.3f}   "
        f"({before['episodes']} sampled episodes each; {summary['seconds']:.0f} s)\n"
        f"learning curve: {out / 'learning_curve.png'}"
    )
    return summary


if __name__ == "__main__":
    main()
