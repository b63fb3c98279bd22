"""CPU quickstart: warm-start a tiny local model on expert steps, train it with GACA, compare success.

    python scripts/quickstart_cpu.py                       # ALFWorld; minutes on 2 cores (docs/BENCHMARKS.md)
    python scripts/quickstart_cpu.py --env criticalchain --estimator gigpo --iterations 40

``--env alfworld`` (default; settings in ``configs/quickstart_cpu_alfworld.yaml``):

1. Generates easy ALFWorld games (pick-and-place in rooms of 5 receptacles) for ``train`` and
   the held-out ``valid_seen`` split into ``<out>/games`` with the native engine.
2. Builds a tiny LLaMA-architecture model and a word-level tokenizer over the games' words (no
   download) and fine-tunes it with TRL's SFTTrainer on expert steps of the train games, a share
   ``--step-noise`` of them replaced by random admissible actions (the expert recovers after them).
3. Measures success on held-out ``valid_seen`` games and on the train games (sampled episodes),
   trains with ``GACATrainer``, measures again, writes ``<out>/learning_curve.png`` and
   ``<out>/summary.json``.

``--env criticalchain`` (``configs/quickstart_cpu.yaml``): the diagnostic GACA-CriticalChain-v0;
the expert's fork choices are random (``--fork-noise 1``): the warm-started policy walks the routine
stages but guesses at the fork, whose consequence shows only at the goal. Success is measured on
the training tasks only (the tiny model memorises place names, so unseen tasks are not a fair test).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import gymnasium as gym
import yaml

SCRIPTS = Path(__file__).resolve().parent
sys.path.insert(0, str(SCRIPTS))

import evaluate  # noqa: E402  (sibling script)
import make_tiny_model  # noqa: E402  (sibling script)

import gaca_envs  # noqa: E402, F401  (registers the GACA env ids)

CONFIGS = {"alfworld": "quickstart_cpu_alfworld.yaml", "criticalchain": "quickstart_cpu.yaml"}


def load_config(path: Path, out: Path, overrides: dict) -> tuple[dict, dict]:
    """The quickstart YAML split into GACAConfig fields and the env kwargs, with overrides applied."""
    fields = yaml.safe_load(path.read_text())
    fields.pop("model_name_or_path", None)
    fields.update(overrides, output_dir=str(out / "rl"))
    return fields, json.loads(fields["env_kwargs"])


def alfworld_games(out: Path, env_kwargs: dict, num_train: int, num_eval: int, seed: int) -> None:
    """Generates easy train and valid_seen games into ``out`` and points ``env_kwargs`` at them."""
    from gaca_envs.alfworld.generate import generate

    engine = env_kwargs.get("engine", "native")
    generate(out, num_train, seed=seed, split="train", difficulty="easy", engine=engine)
    generate(out, num_eval, seed=seed, split="valid_seen", difficulty="easy", engine=engine)
    env_kwargs["data_path"] = str(out)


def measure(
    model_dir: Path,
    env_kwargs: dict,
    fields: dict,
    episodes: int,
    out: Path,
    split: str = "train",
    max_tasks: int | None = None,
) -> dict:
    """Success of sampled episodes on the (first ``max_tasks``) tasks of ``split``, ``episodes`` per task."""
    env_kwargs = {**env_kwargs, "split": split} if "split" in env_kwargs else env_kwargs
    n_tasks = env_kwargs["num_tasks"] if "num_tasks" in env_kwargs else len(_split_ids(fields["env_id"], env_kwargs))
    n_tasks = min(n_tasks, max_tasks or n_tasks)
    records = []
    for repeat in range(episodes):
        report = evaluate.main(
            [
                "--env", fields["env_id"], "--model", str(model_dir), "--env-kwargs", json.dumps(env_kwargs),
                "--split", split,
                "--num-episodes", str(n_tasks), "--batch-size", str(min(n_tasks, 64)), "--max-steps",
                str(fields["max_env_steps"]), "--max-new-tokens", str(fields["max_completion_length"]),
                "--temperature", str(fields.get("temperature", 1.0)), "--seed", str(1000 + repeat),
                "--out", str(out),
            ]
        )  # fmt: skip
        records += report["episodes"]
    return evaluate.summarise(records)


def _split_ids(env_id: str, env_kwargs: dict) -> list[str]:
    probe = gym.make(env_id, **env_kwargs)
    ids = list(probe.unwrapped.task_ids)
    probe.close()
    return ids


def plot(log_history: list[dict], before: float, after: float, path: Path, title: str) -> None:
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
    ax.set(xlabel="iteration", ylabel="success rate", ylim=(0, 1), title=title)
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def warm_start(fields: dict, env_kwargs: dict, args: argparse.Namespace, out: Path) -> tuple:
    """Tiny model and word-level tokenizer, fine-tuned on (noisy) expert steps of the train tasks."""
    from gaca_train.rollout import TEMPLATES
    from gaca_train.tiny import build_tiny_model, build_tokenizer

    env_id, steps = fields["env_id"], fields["max_env_steps"]
    if "num_tasks" in env_kwargs:  # CriticalChain: task ids per split come from a method
        train_ids = [f"train-{i}" for i in range(env_kwargs["num_tasks"])]
    else:
        train_ids = _split_ids(env_id, {**env_kwargs, "split": "train"})
    pairs = make_tiny_model.expert_steps(
        env_id, env_kwargs, train_ids, fields["history_length"], steps, args.seed, args.fork_noise, args.step_noise
    )
    corpus = [m["content"] for msgs, _ in pairs for m in msgs] + [r for _, r in pairs]
    if args.env == "alfworld":  # the env's vocabulary: words of the held-out games too (they are not trained on)
        eval_kwargs = {**env_kwargs, "split": "valid_seen"}
        eval_pairs = make_tiny_model.expert_steps(
            env_id, eval_kwargs, _split_ids(env_id, eval_kwargs), fields["history_length"], steps, args.seed
        )
        corpus += [m["content"] for msgs, _ in eval_pairs for m in msgs] + [" ".join(t) for t in TEMPLATES.values()]
    tokenizer = build_tokenizer(corpus)
    model = build_tiny_model(tokenizer, hidden_size=args.hidden_size, num_layers=2, seed=args.seed)
    sft_args = argparse.Namespace(out=str(out), sft_steps=args.sft_steps, sft_lr=3e-3, cpu=True, seed=args.seed)
    make_tiny_model.sft_warm_start(model, tokenizer, pairs, sft_args)
    return model, tokenizer, len(pairs)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Command line of the quickstart."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", choices=sorted(CONFIGS), default="alfworld")
    parser.add_argument("--config", default=None, help="YAML of GACAConfig fields (default: the --env one)")
    parser.add_argument("--out", default=None, help="output folder (default: outputs/quickstart-<env>)")
    parser.add_argument("--estimator", default=None, help="override the config's estimator")
    parser.add_argument("--iterations", type=int, default=None, help="override the config's max_steps")
    parser.add_argument("--sft-steps", type=int, default=None, help="SFT steps (ALFWorld 1000, CriticalChain 300)")
    parser.add_argument("--hidden-size", type=int, default=128)
    parser.add_argument(
        "--eval-episodes",
        type=int,
        default=None,
        help="sampled episodes per task per measurement (ALFWorld 2, CriticalChain 4)",
    )
    parser.add_argument("--train-games", type=int, default=400, help="ALFWorld: generated train games")
    parser.add_argument("--eval-games", type=int, default=64, help="ALFWorld: generated held-out valid_seen games")
    parser.add_argument(
        "--train-eval-tasks", type=int, default=64, help="ALFWorld: train games measured (the first N)"
    )
    parser.add_argument("--fork-noise", type=float, default=None, help="CriticalChain: random fork demos (default 1)")
    parser.add_argument("--step-noise", type=float, default=None, help="random demos per step (ALFWorld default 0.2)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    args.config = args.config or str(SCRIPTS.parent / "configs" / CONFIGS[args.env])
    args.out = args.out or f"outputs/quickstart-{args.env}"
    if args.fork_noise is None:
        args.fork_noise = 1.0 if args.env == "criticalchain" else 0.0
    if args.eval_episodes is None:
        args.eval_episodes = 2 if args.env == "alfworld" else 4
    if args.sft_steps is None:
        args.sft_steps = 1000 if args.env == "alfworld" else 300
    if args.step_noise is None:
        args.step_noise = 0.2 if args.env == "alfworld" else 0.0
    return args


def write_summary(fields: dict, before: dict, after: dict, n_pairs: int, seconds: float, out: Path) -> dict:
    """Writes ``<out>/summary.json`` (headline split first in ``before``) and prints the before/after lines."""
    splits = list(before)
    summary = {
        "env": fields["env_id"],
        "estimator": fields["estimator"],
        "iterations": fields["max_steps"],
        "sft_pairs": n_pairs,
        "before": before[splits[0]],
        "after": after[splits[0]],
        "by_split": {s: {"before": before[s], "after": after[s]} for s in splits},
        "seconds": seconds,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    lines = [
        f"{s:>10} success before RL: {before[s]['success_rate']:.3f}   after {fields['max_steps']} iterations of "
        f"{fields['estimator'].upper()}: {after[s]['success_rate']:.3f}   ({before[s]['episodes']} episodes)"
        for s in splits
    ]
    print("\n" + "\n".join(lines) + f"\n{seconds:.0f} s; learning curve: {out / 'learning_curve.png'}")
    return summary


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)

    import torch

    from gaca_train.config import GACAConfig
    from gaca_train.tiny import save_tiny_model
    from gaca_train.trainer import GACATrainer

    tic = time.perf_counter()
    out = Path(args.out)
    overrides = {"seed": args.seed}
    if args.estimator:
        overrides["estimator"] = args.estimator
    if args.iterations:
        overrides["max_steps"] = args.iterations
    fields, env_kwargs = load_config(Path(args.config), out, overrides)
    splits = ["train"]
    if args.env == "alfworld":
        alfworld_games(out / "games", env_kwargs, args.train_games, args.eval_games, args.seed)
        fields["env_kwargs"] = json.dumps(env_kwargs)
        splits = ["valid_seen", "train"]

    # 1. Tiny model, warm-started on noisy expert steps.
    model, tokenizer, n_pairs = warm_start(fields, env_kwargs, args, out)
    warm_dir = save_tiny_model(model, tokenizer, out / "warm_start")

    # 2. Success before RL.
    cap = {"train": args.train_eval_tasks} if args.env == "alfworld" else {}
    before = {
        s: measure(warm_dir, env_kwargs, fields, args.eval_episodes, out / f"eval_before_{s}", s, cap.get(s))
        for s in splits
    }

    # 3. RL.
    torch.manual_seed(args.seed)
    trainer = GACATrainer(model=model, args=GACAConfig(**fields), processing_class=tokenizer)
    trainer.train()
    rl_dir = save_tiny_model(model, tokenizer, out / "after_rl")

    # 4. Success after RL, curve and summary.
    after = {
        s: measure(rl_dir, env_kwargs, fields, args.eval_episodes, out / f"eval_after_{s}", s, cap.get(s))
        for s in splits
    }
    head = splits[0]
    title = f"{fields['estimator'].upper()} on {fields['env_id']} ({head} success before/after)"
    plot(trainer.state.log_history, before[head]["success_rate"], after[head]["success_rate"],
         out / "learning_curve.png", title)  # fmt: skip
    summary = write_summary(fields, before, after, n_pairs, time.perf_counter() - tic, out)
    return summary


if __name__ == "__main__":
    main()
