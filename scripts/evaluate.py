"""Evaluate a policy on a GACA env split: a model (checkpoint or id), or a random / expert baseline.

    python scripts/evaluate.py --env GACA-CriticalChain-v0 --policy expert --num-episodes 100
    python scripts/evaluate.py --env GACA-ALFWorld-v0 --split valid_unseen --model outputs/alfworld-gaca \
        --num-episodes 140 --batch-size 16 --temperature 0.4 --out runs/eval-alfworld

Writes ``<out>.json`` (every episode and the aggregates) and ``<out>.md`` (a Markdown table:
success rate, score, episode length, invalid-action rate, and success per task type when the
env reports ``info["task_type"]``). Models play in batches through the same rollout code as
training (same prompts, parsing and log-prob recording); ``--greedy`` decodes greedily.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import gymnasium as gym

import gaca_envs  # noqa: F401  (registers the GACA env ids)
from gaca_train.vector import env_task_ids


def play_baseline(env: gym.Env, task_ids: list[str], policy: str, max_steps: int, seed: int) -> list[dict[str, Any]]:
    """Plays each task once with the random or expert policy; returns one record per episode."""
    rng = random.Random(seed)
    records = []
    for task in task_ids:
        _, info = env.reset(seed=seed, options={"task_id": task})
        record = {"task_id": task, "task_type": info.get("task_type"), "length": 0, "invalid": 0}
        for step in range(max_steps):
            if policy == "expert":
                if "expert_action" not in info:
                    raise ValueError(
                        f"--policy expert needs info['expert_action']; {env.spec.id} did not give one "
                        "(pass --env-kwargs '{\"expert\": true}' if the env supports it)"
                    )
                action = info["expert_action"]
            else:
                action = rng.choice(info["admissible_actions"]) if info["admissible_actions"] else "look"
            _, _, terminated, truncated, info = env.step(action)
            record["length"] = step + 1
            record["invalid"] += not info.get("action_valid", True)
            if terminated or truncated:
                break
        record.update(won=bool(info.get("won", False)), score=float(info.get("score", 0.0)))
        records.append(record)
    return records


def play_model(args: argparse.Namespace, task_ids: list[str]) -> list[dict[str, Any]]:
    """Plays each task once with a causal LM, ``args.batch_size`` envs at a time."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    from gaca_train.rollout import PromptBuilder, generate_with_logprobs, run_rollout, template_for
    from gaca_train.vector import RolloutPool

    torch.manual_seed(args.seed)
    tokenizer = AutoTokenizer.from_pretrained(args.model, padding_side="left")
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype="auto").eval()
    eos = [tokenizer.eos_token_id] + [i for i in [model.generation_config.eos_token_id] if isinstance(i, int)]
    config = GenerationConfig(
        max_new_tokens=args.max_new_tokens,
        do_sample=not args.greedy,
        temperature=None if args.greedy else args.temperature,
        top_k=None if args.greedy else 0,
        top_p=None if args.greedy else 1.0,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=eos,
    )
    system, template = template_for(args.env)
    builder = PromptBuilder(system, template, args.history_length, args.max_steps)

    def generate(prompt_ids: list[list[int]]) -> tuple[list[list[int]], list[list[float]]]:
        temperature = 1.0 if args.greedy else args.temperature
        return generate_with_logprobs(
            model,
            prompt_ids,
            pad_token_id=tokenizer.pad_token_id,
            eos_token_ids=eos,
            generation_config=config,
            temperature=temperature,
        )

    records = []
    for start in range(0, len(task_ids), args.batch_size):
        batch = task_ids[start : start + args.batch_size]
        pool = RolloutPool(args.env, len(batch), json.loads(args.env_kwargs), mode=args.vector_env)
        try:
            result = run_rollout(pool, batch, generate, tokenizer, builder, seed=args.seed + start)
        finally:
            pool.close()
        invalid, malformed = defaultdict(int), defaultdict(int)
        for step in result.steps:
            invalid[step.env_index] += not step.env_valid
            malformed[step.env_index] += not step.valid
        for episode in result.episodes:
            records.append(
                {
                    "task_id": episode.task_id,
                    "task_type": episode.info.get("task_type"),
                    "won": episode.won,
                    "score": episode.score,
                    "length": episode.length,
                    "invalid": invalid[episode.env_index],
                    "malformed": malformed[episode.env_index],
                }
            )
    return records


def summarise(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Aggregates: success rate, mean score, length and invalid-action rate, success per task type."""
    n = max(len(records), 1)
    steps = max(sum(r["length"] for r in records), 1)
    summary = {
        "episodes": len(records),
        "success_rate": sum(r["won"] for r in records) / n,
        "score": sum(r["score"] for r in records) / n,
        "episode_length": sum(r["length"] for r in records) / n,
        "invalid_rate": sum(r["invalid"] for r in records) / steps,
    }
    by_type: dict[str, list[bool]] = defaultdict(list)
    for r in records:
        if r["task_type"] is not None:
            by_type[str(r["task_type"])].append(r["won"])
    if by_type:
        summary["success_by_task_type"] = {k: sum(v) / len(v) for k, v in sorted(by_type.items())}
    return summary


def markdown(name: str, summary: dict[str, Any]) -> str:
    """A Markdown table of the summary."""
    lines = [
        "| policy | episodes | success | score | length | invalid |",
        "|---|---|---|---|---|---|",
        f"| {name} | {summary['episodes']} | {summary['success_rate']:.3f} | {summary['score']:.3f} | "
        f"{summary['episode_length']:.1f} | {summary['invalid_rate']:.3f} |",
    ]
    if "success_by_task_type" in summary:
        lines += ["", "| task type | success |", "|---|---|"]
        lines += [f"| {k} | {v:.3f} |" for k, v in summary["success_by_task_type"].items()]
    return "\n".join(lines) + "\n"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="GACA-CriticalChain-v0", help="Gymnasium env id")
    parser.add_argument("--env-kwargs", default="{}", help="JSON object of gym.make keyword arguments")
    parser.add_argument("--split", default="test", help="task split, read from the env's task_ids(split)")
    parser.add_argument("--num-episodes", type=int, default=100, help="first N tasks of the split, one episode each")
    parser.add_argument("--policy", choices=("model", "random", "expert"), default="model")
    parser.add_argument("--model", help="checkpoint folder or model id (with --policy model)")
    parser.add_argument("--greedy", action="store_true", help="greedy decoding instead of sampling")
    parser.add_argument("--temperature", type=float, default=0.4, help="sampling temperature (paper: 0.4)")
    parser.add_argument("--max-new-tokens", type=int, default=512)
    parser.add_argument("--batch-size", type=int, default=16, help="envs played at once")
    parser.add_argument("--vector-env", choices=("sync", "async"), default="sync")
    parser.add_argument("--max-steps", type=int, default=50, help="agent steps per episode")
    parser.add_argument("--history-length", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="runs/eval", help="output path prefix (.json and .md are added)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    if args.policy == "model" and not args.model:
        raise SystemExit("--model is required with --policy model")
    env_kwargs = json.loads(args.env_kwargs)
    if args.policy == "expert":
        env_kwargs.setdefault("expert", True)
    probe = gym.make(args.env, **env_kwargs)
    if not callable(getattr(type(probe.unwrapped), "task_ids", None)) and hasattr(probe.unwrapped, "split"):
        env_kwargs.setdefault("split", args.split)  # an env built for one split (ALFWorld, WebShop)
    probe.close()
    env = gym.make(args.env, **env_kwargs)
    task_ids = env_task_ids(env.unwrapped, args.split)
    if not task_ids:
        raise SystemExit(f"{args.env} offers no task ids (task_ids or split_range); cannot enumerate {args.split!r}")
    task_ids = task_ids[: args.num_episodes]
    tic = time.perf_counter()
    if args.policy == "model":
        env.close()
        args.env_kwargs = json.dumps(env_kwargs)
        records = play_model(args, task_ids)
    else:
        records = play_baseline(env, task_ids, args.policy, args.max_steps, args.seed)
        env.close()
    summary = summarise(records)
    summary["seconds"] = time.perf_counter() - tic
    name = args.model if args.policy == "model" else args.policy
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    report = {"env": args.env, "split": args.split, "policy": name, "summary": summary, "episodes": records}
    out.with_suffix(".json").write_text(json.dumps(report, indent=2))
    out.with_suffix(".md").write_text(markdown(name, summary))
    print(markdown(name, summary))
    return report


if __name__ == "__main__":
    main()
