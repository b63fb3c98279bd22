"""Build a tiny local model and tokenizer for an env, optionally warm-started on expert steps.

    python scripts/make_tiny_model.py --env GACA-CriticalChain-v0 --out outputs/tiny-criticalchain \
        --env-kwargs '{"horizon": 6, "num_branches": 2}' --sft-steps 200

The tokenizer's vocabulary is the words of the env's rendered prompts (no download); the model is
a randomly initialised LLaMA-architecture decoder of a few ten thousand parameters. With ``--sft-steps`` it is
fine-tuned with TRL's ``SFTTrainer`` on expert (prompt, response) pairs, rendered exactly as the
rollout renders them, when the env offers ``info["expert_action"]`` (``expert=True``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import gaca_envs  # noqa: F401  (registers the GACA env ids)
from gaca_envs.task_env import NOTHING_HAPPENS, split_task_ids
from gaca_train.experiments import quickstart
from gaca_train.experiments.cli_utils import add_deprecated_alias
from gaca_train.experiments.tiny import build_tiny_model, build_tokenizer, save_tiny_model
from gaca_train.experiments.warm_start import expert_steps, sft_warm_start
from gaca_train.rollout.prompts import prompt_templates


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="GACA-CriticalChain-v0", help="Gymnasium env id")
    parser.add_argument("--env-kwargs", default="{}", help="JSON object of gym.make keyword arguments")
    parser.add_argument("--out", required=True, help="output folder (model + tokenizer)")
    parser.add_argument("--split", default="train", help="task split used for the vocabulary and warm start")
    parser.add_argument("--num-tasks", type=int, default=50, help="tasks rendered for the vocabulary / warm start")
    parser.add_argument("--history-length", type=int, default=2, help="past steps shown in prompts")
    parser.add_argument(
        "--max-env-steps", type=int, default=20, help="episode step limit, played and shown in prompts"
    )
    parser.add_argument("--hidden-size", type=int, default=64, help="model width")
    parser.add_argument("--num-layers", type=int, default=2, help="decoder layers")
    parser.add_argument("--sft-steps", type=int, default=0, help="supervised warm-start steps (0: none)")
    parser.add_argument("--sft-lr", type=float, default=3e-3, help="warm-start learning rate (constant)")
    parser.add_argument(
        "--sft-loss", choices=("completion", "full"), default="completion", help="SFT loss: responses or all text"
    )
    parser.add_argument("--fork-noise", type=float, default=0.0, help="random demonstrations at forks (0-1)")
    parser.add_argument("--step-noise", type=float, default=0.0, help="random demonstrations at any step (0-1)")
    parser.add_argument(
        "--invalid-noise", type=float, default=0.0, help="rejected actions before demonstrations (0-1)"
    )
    parser.add_argument("--searching", type=float, default=0.0, help="ALFWorld: share of games shown by a searcher")
    parser.add_argument(
        "--demos-per-task", type=int, default=1, help="demonstrated episodes per task, each with its own noise"
    )
    parser.add_argument(
        "--config", default=None, help="training YAML whose prompt settings (and max_env_steps) render the SFT data"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the model and the warm start")
    parser.add_argument("--cpu", action="store_true", help="force CPU for the warm start")
    add_deprecated_alias(parser, "--max-steps", "--max-env-steps")
    args = parser.parse_args(argv)
    env_kwargs = json.loads(args.env_kwargs)

    try:
        env_kwargs, task_ids = split_task_ids(args.env, env_kwargs, args.split)
    except ValueError as e:
        raise SystemExit(f"{e}; cannot build a warm start") from e
    task_ids = task_ids[: args.num_tasks]
    prompts = None
    if args.config:
        fields = quickstart.load_config(Path(args.config), Path(args.out), {})[0]
        prompts = quickstart.prompt_builder(fields)
        args.history_length, args.max_env_steps = fields["history_length"], fields["max_env_steps"]
    pairs = expert_steps(
        args.env,
        env_kwargs,
        task_ids,
        args.history_length,
        args.max_env_steps,
        args.seed,
        args.fork_noise,
        args.step_noise,
        prompts=prompts,
        invalid_noise=args.invalid_noise,
        searching=args.searching,
        demos_per_task=args.demos_per_task,
    )
    corpus = [m["content"] for messages, _ in pairs for m in messages] + [r for _, r in pairs]
    corpus += [" ".join(t) for t in prompt_templates()]
    corpus.append(NOTHING_HAPPENS)  # the env's answer to an invalid action: experts never see it, a policy does
    tokenizer = build_tokenizer(corpus)
    model = build_tiny_model(tokenizer, hidden_size=args.hidden_size, num_layers=args.num_layers, seed=args.seed)
    if args.sft_steps:
        only = args.sft_loss == "completion"
        sft_warm_start(
            model, tokenizer, pairs, args.out, steps=args.sft_steps, lr=args.sft_lr, seed=args.seed, cpu=args.cpu,
            completion_only=only,
        )  # fmt: skip
    path = save_tiny_model(model, tokenizer, args.out)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"saved {n_params} parameters, vocabulary {len(tokenizer)}, {len(pairs)} expert steps -> {path}")


if __name__ == "__main__":
    main()
