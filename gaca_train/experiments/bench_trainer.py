"""Time per GACATrainer iteration, split into generation, env, advantage, train and other.

    python scripts/bench_trainer.py --iterations 5 --micro-batch-tokens 512 4096
    python scripts/bench_trainer.py --config configs/quickstart_cpu_alfworld.yaml \
        --model runs/compare-alfworld/warm/model --env-kwargs '{"data_path": "runs/compare-alfworld/games"}'

Builds a tiny model locally (no download) and trains it with GACA on GACA-CriticalChain-v0, once
per token budget given (``micro_batch_tokens``, padded tokens per micro-batch). With ``--config`` it
times a training YAML's own set-up instead (env, prompts, batch sizes, estimator and token budget;
``--model`` a local model folder, e.g. the ALFWorld quickstart's warm start, which
``compare_estimators.py --setup alfworld`` saves in ``<out>/warm/model``). Per iteration (the
first is a warm-up and not counted):

* generation: ``model.generate`` with log-prob recording, and decoding the responses;
* env: resets and steps of the vector env;
* advantage: step rows -> ``compute_advantages``;
* train: the update phase: old-policy log-probs when needed, the loss forward/backward passes of
  every micro-batch and the optimiser steps (``time/update``);
* other: prompt rendering and tokenising, logging and the rest.

With ``--oracle-every N`` the trainer's oracle (``oracle_every``, docs/training.md) runs every N iterations: its
seconds a pass are taken out of the iteration times and reported with their share of training time,
pass / (N x iteration + pass).

With ``--branching nll`` the rollouts branch (:mod:`gaca_train.branching`) and the snapshots' save and
restore time (part of env) is reported as a share of the iteration, with their number and size.

Also the update phase's rows/s and padded tokens/s, and the process's peak resident memory. The
target of issue 6 is env + advantage + other under 10% of the iteration.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from gaca_train.config import GACAConfig
from gaca_train.episodes import BaselinePolicy, EnvList, play
from gaca_train.rollout import prompt_templates
from gaca_train.tiny import build_tiny_model, build_tokenizer, cpu_run_defaults, torch_threads
from gaca_train.trainer import GACATrainer


class _IterationTimer(TrainerCallback):
    """Wall time of each optimiser step (one rollout iteration here)."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self._start = 0.0

    def on_step_begin(self, args, state, control, **kwargs):
        self._start = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        self.times.append(time.perf_counter() - self._start)


def _corpus(env_kwargs: dict[str, Any]) -> list[str]:
    from gaca_envs.criticalchain import CriticalChainEnv

    env = CriticalChainEnv(**{**env_kwargs, "expert": True})
    texts = [" ".join(t) for t in prompt_templates()]
    texts.append("' [ ] 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 Step Observation Action Your last")
    for task in env.task_ids("train")[:50]:
        played = play(EnvList([env]), [task], BaselinePolicy("expert"), None)
        texts += [x for t in played.transitions for x in (t.observation, " ".join(t.info["admissible_actions"]))]
    return texts


def _from_config(args: argparse.Namespace, micro_batch_tokens: int | None, out: str) -> tuple[Any, Any, GACAConfig]:
    """Model, tokenizer and GACAConfig of a training YAML (``--config``), run for the bench's iterations."""
    import yaml
    from transformers import AutoModelForCausalLM, AutoTokenizer

    fields = yaml.safe_load(Path(args.config).read_text())
    model_path = args.model or fields.get("model_name_or_path")
    if not model_path or not Path(model_path).is_dir():
        raise SystemExit(
            f"bench_trainer: --model {model_path!r} is not a local model folder; build one first (for the ALFWorld "
            "quickstart: python scripts/compare_estimators.py --setup alfworld --smoke, or scripts/make_tiny_model.py)"
        )
    fields.pop("model_name_or_path", None)
    env_kwargs = fields.get("env_kwargs") or {}
    env_kwargs = json.loads(env_kwargs) if isinstance(env_kwargs, str) else dict(env_kwargs)
    env_kwargs.update(json.loads(args.env_kwargs))
    fields.update(output_dir=str(Path(out) / "run"), env_kwargs=json.dumps(env_kwargs), max_steps=args.iterations + 1)
    fields.update(logging_steps=1, save_strategy="no", report_to="none", disable_tqdm=True)
    if micro_batch_tokens is not None:
        fields["micro_batch_tokens"] = micro_batch_tokens
    if args.branching != "off":
        fields.update(branching=args.branching, branch_budget="env_steps")
    if args.oracle_every:
        fields.update(oracle_every=args.oracle_every, oracle_rows=args.oracle_rows,
                      oracle_continuations=args.oracle_continuations)  # fmt: skip
    tokenizer = AutoTokenizer.from_pretrained(model_path, padding_side="left")
    return AutoModelForCausalLM.from_pretrained(model_path), tokenizer, GACAConfig(**fields)


def run(args: argparse.Namespace, micro_batch_tokens: int | None) -> dict[str, Any]:
    """Trains for ``args.iterations + 1`` iterations and returns mean seconds per component.

    Runs at ``args.threads`` torch threads and gives the process its thread count back afterwards.
    """
    with torch_threads(args.threads):
        return _run(args, micro_batch_tokens)


def _run(args: argparse.Namespace, micro_batch_tokens: int | None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as out:
        if getattr(args, "config", None):
            model, tokenizer, config = _from_config(args, micro_batch_tokens, out)
            return _timed(model, tokenizer, config)
        env_kwargs = {"horizon": args.horizon, "num_branches": 2, "num_tasks": 100}
        tokenizer = build_tokenizer(_corpus(env_kwargs))
        model = build_tiny_model(tokenizer, hidden_size=args.hidden_size, num_layers=args.num_layers)
        config = GACAConfig(
            output_dir=str(Path(out) / "run"),
            env_id="GACA-CriticalChain-v0",
            env_kwargs=env_kwargs,
            vector_env=args.vector_env,
            estimator="gaca",
            tasks_per_iteration=args.tasks,
            rollouts_per_task=args.rollouts,
            mini_batch_rows=args.mini_batch_rows,
            micro_batch_tokens=micro_batch_tokens,
            max_env_steps=args.max_env_steps,
            max_completion_length=args.max_completion_length,
            max_steps=args.iterations + 1,
            learning_rate=1e-3,
            branching=args.branching,
            branch_budget="env_steps",
            oracle_every=args.oracle_every,
            oracle_rows=args.oracle_rows,
            oracle_continuations=args.oracle_continuations,
            **cpu_run_defaults(),
        )
        return _timed(model, tokenizer, config)


def _timed(model: Any, tokenizer: Any, config: GACAConfig) -> dict[str, Any]:
    """Trains ``model`` under ``config``; mean seconds per component over the iterations after the first."""
    timer = _IterationTimer()
    trainer = GACATrainer(model=model, args=config, processing_class=tokenizer, callbacks=[timer])
    trainer.train()
    every = [log for log in trainer.state.log_history if "time/rollout" in log]
    logs = every[1:]
    # An oracle pass runs inside its iteration: the iteration's own time leaves it out, the pass is timed apart.
    iterations = [t - log.get("oracle/seconds", 0.0) for t, log in zip(timer.times[1:], logs, strict=True)]
    parts = {"iteration": statistics.mean(iterations)}
    passes = [log["oracle/seconds"] for log in logs if "oracle/seconds" in log] or [
        log["oracle/seconds"] for log in every if "oracle/seconds" in log
    ]
    if passes:
        parts["oracle"] = statistics.mean(passes)
        parts["oracle_share"] = parts["oracle"] / (config.oracle_every * parts["iteration"] + parts["oracle"])
    parts["generation"] = statistics.mean(log["time/generation"] for log in logs)
    parts["env"] = statistics.mean(log["time/env"] for log in logs)
    parts["advantage"] = statistics.mean(log["time/advantage"] for log in logs)
    rollout = statistics.mean(log["time/rollout"] for log in logs)
    parts["train"] = statistics.mean(log["time/update"] for log in logs)
    parts["other"] = parts["iteration"] - rollout - parts["advantage"] - parts["train"]
    parts["other"] += rollout - parts["generation"] - parts["env"]
    parts["rows_per_iteration"] = statistics.mean(log["rollout/steps"] for log in logs)
    parts["updates"] = statistics.mean(log["train/updates"] for log in logs)
    parts["micro_batches"] = statistics.mean(log["train/micro_batches"] for log in logs)
    parts["update_rows_per_s"] = statistics.mean(log["throughput/update_rows_per_s"] for log in logs)
    parts["update_tokens_per_s"] = statistics.mean(log["throughput/update_tokens_per_s"] for log in logs)
    parts["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if config.branching != "off":  # snapshots saved in wave 1 and restored in wave 2 (part of env)
        parts["snapshot"] = statistics.mean(log["branch/snapshot_seconds"] for log in logs)
        parts["snapshots_per_iteration"] = statistics.mean(log["branch/snapshots"] for log in logs)
        parts["snapshot_bytes_max"] = max(log["branch/snapshot_bytes_max"] for log in logs)
    return parts


def main(argv: list[str] | None = None) -> None:
    """Command line entry point: one run per token budget, a Markdown table of each."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--iterations",
        type=int,
        default=5,
        help="training iterations timed, after one warm-up (the config's max_steps is this + 1)",
    )
    parser.add_argument("--tasks", type=int, default=4, help="tasks per iteration")
    parser.add_argument("--rollouts", type=int, default=8, help="rollouts per task")
    parser.add_argument("--mini-batch-rows", type=int, default=None, help="rows per update (default: all)")
    parser.add_argument(
        "--micro-batch-tokens",
        type=int,
        nargs="+",
        default=None,
        help="token budgets to compare (default: 512 4096; with --config, the config's)",
    )
    parser.add_argument("--horizon", type=int, default=10, help="CriticalChain stages")
    parser.add_argument("--max-env-steps", type=int, default=15, help="episode step limit (default: %(default)s)")
    parser.add_argument(
        "--max-completion-length", type=int, default=24, help="most tokens of a response (default: %(default)s)"
    )
    parser.add_argument("--hidden-size", type=int, default=64, help="tiny model width")
    parser.add_argument("--num-layers", type=int, default=2, help="tiny model layers")
    parser.add_argument("--vector-env", choices=("sync", "async"), default="sync", help="the rollout pool's mode")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    parser.add_argument(
        "--branching",
        choices=("off", "nll", "uniform"),
        default="off",
        help="branching rollouts (env-step budget): also time the snapshots' save and restore",
    )
    parser.add_argument(
        "--oracle-every",
        type=int,
        default=0,
        help="also run the oracle every N iterations and report its cost as a share of training time",
    )
    parser.add_argument("--oracle-rows", type=int, default=16, help="oracle rows per pass (default: %(default)s)")
    parser.add_argument(
        "--oracle-continuations", type=int, default=4, help="oracle continuations per row (default: %(default)s)"
    )
    parser.add_argument("--config", help="time this training YAML's set-up instead (its env, prompts and batches)")
    parser.add_argument("--model", help="with --config: local model folder (default: the config's)")
    parser.add_argument(
        "--env-kwargs", default="{}", help="with --config: JSON object merged into the config's env_kwargs"
    )
    parser.add_argument("--json", help="also write the figures to this JSON file")
    args = parser.parse_args(argv)
    if args.micro_batch_tokens is None:
        args.micro_batch_tokens = [None] if args.config else [512, 4096]
    results = {}
    for budget in args.micro_batch_tokens:
        parts = run(args, budget)
        results[budget] = parts
        total = parts["iteration"]
        print(f"\nmicro_batch_tokens={budget or 'from config'}: rows per iteration {parts['rows_per_iteration']:.0f}, "
              f"{parts['updates']:.0f} update(s) of {parts['micro_batches']:.1f} micro-batches")  # fmt: skip
        print("| part | seconds / iteration | share |")
        print("|---|---|---|")
        for name in ("generation", "env", "advantage", "train", "other"):
            print(f"| {name} | {parts[name]:.3f} | {parts[name] / total:.1%} |")
        print(f"| **iteration** | {total:.3f} | 100% |")
        overhead = (parts["env"] + parts["advantage"] + parts["other"]) / total
        print(f"env + advantage + other = {overhead:.1%} of the iteration (target < 10%)")
        print(f"update phase: {parts['update_rows_per_s']:.0f} rows/s, {parts['update_tokens_per_s']:.0f} padded "
              f"tokens/s; peak RSS {parts['peak_rss_mb']:.0f} MB")  # fmt: skip
        if "oracle" in parts:
            print(f"oracle: {parts['oracle']:.2f} s a pass; every {args.oracle_every} iterations that is "
                  f"{parts['oracle_share']:.1%} of training time")  # fmt: skip
        if "snapshot" in parts:
            print(f"snapshots (save + restore, within env): {parts['snapshot']:.4f} s = "
                  f"{parts['snapshot'] / total:.2%} of the iteration; {parts['snapshots_per_iteration']:.0f} saved "
                  f"per iteration, at most {parts['snapshot_bytes_max']:.0f} bytes each as JSON")  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
