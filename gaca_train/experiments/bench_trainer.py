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

With ``--branching nll`` the rollouts branch (:mod:`gaca_train.rollout.branching`) and the snapshots' save and
restore time (part of env) is reported as a share of the iteration, with their number and size.

Also the update phase's rows/s, the tokens the rows hold and the tokens the passes computed
(``rollout/row_tokens``, ``rollout/computed_tokens``, ``train/row_tokens``, ``train/computed_tokens``),
the FLOP/s of generation, update and the whole iteration against a float32 matmul peak measured in the
same run (:mod:`gaca_train.training.flops`: each row's own work, so layouts compare on equal FLOPs), and the
process's peak resident memory. The target of issue 6 is env + advantage + other under 10% of the
iteration.

With ``--profile N`` each run also profiles its last iteration (``torch.profiler``, CPU) and prints the N
operators that took the most of its CPU time, with their share (``profile`` in the JSON's runs).

With ``--compare`` each repeat also times the layout and sampler of before the packed update (``update_layout:
padded``, ``hf_sampler: generate``), alternating with the current defaults, and prints the medians and
their ratio::

    python scripts/bench_trainer.py --config configs/quickstart_cpu_alfworld.yaml --model <warm start> \
        --env-kwargs '{"data_path": "<games>"}' --compare --repeats 3
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

from gaca_train.experiments.tiny import build_tiny_model, build_tokenizer, cpu_run_defaults, torch_threads
from gaca_train.rollout.episodes import BaselinePolicy, EnvList, play
from gaca_train.rollout.prompts import prompt_templates
from gaca_train.training.config import GACAConfig
from gaca_train.training.flops import ModelShape, forward_flops, matmul_peak
from gaca_train.training.trainer import GACATrainer


class _LastIterationProfile(TrainerCallback):
    """``torch.profiler`` over the last iteration: the ``top`` operators by self CPU time and their share."""

    def __init__(self, last: int, top: int) -> None:
        self.last, self.top = last, top
        self.table: list[dict[str, Any]] = []
        self._profiler: Any = None

    def on_step_begin(self, args, state, control, **kwargs):
        if state.global_step == self.last - 1:
            from torch.profiler import ProfilerActivity, profile

            self._profiler = profile(activities=[ProfilerActivity.CPU])
            self._profiler.__enter__()

    def on_step_end(self, args, state, control, **kwargs):
        if self._profiler is None:
            return
        self._profiler.__exit__(None, None, None)
        events = self._profiler.key_averages()
        total = sum(e.self_cpu_time_total for e in events) or 1.0
        ranked = sorted(events, key=lambda e: e.self_cpu_time_total, reverse=True)[: self.top]
        self.table = [{"op": e.key, "seconds": e.self_cpu_time_total / 1e6, "share": e.self_cpu_time_total / total}
                      for e in ranked]  # fmt: skip
        self._profiler = None


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


# What the trainer ran before the packed update layout and the lean sampler (--compare).
BEFORE = {"update_layout": "padded", "hf_sampler": "generate"}


def _from_config(
    args: argparse.Namespace, micro_batch_tokens: int | None, out: str, overrides: dict[str, Any]
) -> tuple[Any, Any, GACAConfig]:
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
    fields.update(overrides)
    tokenizer = AutoTokenizer.from_pretrained(model_path, padding_side="left")
    return AutoModelForCausalLM.from_pretrained(model_path), tokenizer, GACAConfig(**fields)


def run(args: argparse.Namespace, micro_batch_tokens: int | None, overrides: dict[str, Any] | None = None) -> dict:
    """Trains for ``args.iterations + 1`` iterations and returns mean seconds per component.

    ``overrides``: GACAConfig fields set over the bench's (or the YAML's). Runs at ``args.threads`` torch
    threads and gives the process its thread count back afterwards.
    """
    with torch_threads(args.threads):
        return _run(args, micro_batch_tokens, overrides or {})


def _run(args: argparse.Namespace, micro_batch_tokens: int | None, overrides: dict[str, Any]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as out:
        if getattr(args, "config", None):
            model, tokenizer, config = _from_config(args, micro_batch_tokens, out, overrides)
            return _timed(model, tokenizer, config, getattr(args, "profile", 0))
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
            **{**cpu_run_defaults(), **overrides},
        )
        return _timed(model, tokenizer, config, getattr(args, "profile", 0))


def _timed(model: Any, tokenizer: Any, config: GACAConfig, profile: int = 0) -> dict[str, Any]:
    """Trains ``model`` under ``config``; mean seconds per component over the iterations after the first.

    ``profile``: also profile the last iteration and keep its ``profile`` top operators.
    """
    timer = _IterationTimer()
    profiler = _LastIterationProfile(config.max_steps, profile) if profile else None
    callbacks = [timer] + ([profiler] if profiler else [])
    trainer = GACATrainer(model=model, args=config, processing_class=tokenizer, callbacks=callbacks)
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
    parts.update(_work(trainer.model.config, config, logs, parts))
    parts["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if profiler is not None:
        parts["profile"] = profiler.table
    if config.branching != "off":  # snapshots saved in wave 1 and restored in wave 2 (part of env)
        parts["snapshot"] = statistics.mean(log["branch/snapshot_seconds"] for log in logs)
        parts["snapshots_per_iteration"] = statistics.mean(log["branch/snapshots"] for log in logs)
        parts["snapshot_bytes_max"] = max(log["branch/snapshot_bytes_max"] for log in logs)
    return parts


def _work(model_config: Any, config: GACAConfig, logs: list[dict], parts: dict[str, Any]) -> dict[str, float]:
    """Tokens and FLOPs per iteration, and the GFLOP/s of generation, update and the whole iteration.

    Generation samples each row once (one forward pass's work); the update makes the reference pass
    (``beta``), the old-policy pass (``old_logps: recompute`` with several updates) and, per PPO epoch, the
    loss's forward and backward (3 forward passes' work).
    """
    shape = ModelShape.from_config(model_config)
    mean = {k: statistics.mean(log.get(k, 0.0) for log in logs) for k in (
        "rollout/row_tokens", "rollout/row_token_squares", "rollout/completion_tokens", "rollout/computed_tokens",
        "train/row_tokens", "train/computed_tokens",
    )}  # fmt: skip
    one_pass = forward_flops(
        shape, mean["rollout/row_tokens"], mean["rollout/row_token_squares"], mean["rollout/completion_tokens"]
    )
    passes = (config.beta != 0.0) + (config.old_logps == "recompute" and parts["updates"] > 1) + 3 * config.ppo_epochs
    flops = {"generation": one_pass, "train": passes * one_pass}
    out = {
        "generation_row_tokens": mean["rollout/row_tokens"],
        "generation_computed_tokens": mean["rollout/computed_tokens"],
        "train_row_tokens": mean["train/row_tokens"],
        "train_computed_tokens": mean["train/computed_tokens"],
        "generation_gflops": flops["generation"] / 1e9,
        "train_gflops": flops["train"] / 1e9,
    }
    for phase in ("generation", "train"):
        out[f"{phase}_gflop_per_s"] = flops[phase] / 1e9 / parts[phase]
    out["iteration_gflop_per_s"] = (flops["generation"] + flops["train"]) / 1e9 / parts["iteration"]
    return out


def _report(parts: dict[str, Any], peak: dict[str, float], label: str) -> None:
    total = parts["iteration"]
    print(f"\n{label}: rows per iteration {parts['rows_per_iteration']:.0f}, {parts['updates']:.0f} update(s) of "
          f"{parts['micro_batches']:.1f} micro-batches")  # fmt: skip
    print("| part | seconds / iteration | share |")
    print("|---|---|---|")
    for name in ("generation", "env", "advantage", "train", "other"):
        print(f"| {name} | {parts[name]:.3f} | {parts[name] / total:.1%} |")
    print(f"| **iteration** | {total:.3f} | 100% |")
    overhead = (parts["env"] + parts["advantage"] + parts["other"]) / total
    print(f"env + advantage + other = {overhead:.1%} of the iteration (target < 10%)")
    print(f"update phase: {parts['update_rows_per_s']:.0f} rows/s, {parts['update_tokens_per_s']:.0f} computed "
          f"tokens/s; peak RSS {parts['peak_rss_mb']:.0f} MB")  # fmt: skip
    print("| phase | row tokens | computed tokens | GFLOP (rows' own work) | GFLOP/s | of matmul peak |")
    print("|---|---|---|---|---|---|")
    for phase in ("generation", "train"):
        print(f"| {phase} | {parts[f'{phase}_row_tokens']:.0f} | {parts[f'{phase}_computed_tokens']:.0f} | "
              f"{parts[f'{phase}_gflops']:.1f} | {parts[f'{phase}_gflop_per_s']:.1f} | "
              f"{parts[f'{phase}_gflop_per_s'] / peak['peak']:.0%} |")  # fmt: skip
    print(f"| iteration | | | {parts['generation_gflops'] + parts['train_gflops']:.1f} | "
          f"{parts['iteration_gflop_per_s']:.1f} | {parts['iteration_gflop_per_s'] / peak['peak']:.0%} |")  # fmt: skip


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
    parser.add_argument(
        "--compare",
        action="store_true",
        help="also time update_layout: padded with hf_sampler: generate, alternating with the defaults",
    )
    parser.add_argument("--repeats", type=int, default=1, help="runs of each setting, medians reported")
    parser.add_argument(
        "--profile",
        type=int,
        default=0,
        metavar="N",
        help="print the N operators with most CPU time of each run's last iteration",
    )
    args = parser.parse_args(argv)
    if args.micro_batch_tokens is None:
        args.micro_batch_tokens = [None] if args.config else [512, 4096]
    variants = {"current": {}, **({"before": BEFORE} if args.compare else {})}
    with torch_threads(args.threads):
        peak = matmul_peak(_shape_of(args))
    print(f"float32 matmul GFLOP/s at {args.threads} threads: " + ", ".join(f"{k} {v:.1f}" for k, v in peak.items()))
    results: dict[str, Any] = {"matmul_gflop_per_s": peak}
    for budget in args.micro_batch_tokens:
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in variants}
        for _ in range(args.repeats):
            for name, overrides in variants.items():
                runs[name].append(run(args, budget, overrides))
                for row in runs[name][-1].get("profile", []):
                    print(f"profile, {name}: {row['op']:<60} {row['seconds']:8.3f} s {row['share']:6.1%}")
        for name, parts_list in runs.items():
            parts = _median(parts_list)
            results[f"{budget}/{name}"] = {"median": parts, "runs": parts_list}
            label = f"micro_batch_tokens={budget or 'from config'}, {name} (median of {len(parts_list)})"
            _report(parts, peak, label)
            _extras(parts, args)
        if args.compare:
            now, before = results[f"{budget}/current"]["median"], results[f"{budget}/before"]["median"]
            keys = ("iteration", "generation", "train", "train_computed_tokens", "generation_computed_tokens")
            ratios = ", ".join(f"{k} {now[k] / before[k]:.2f}x" for k in keys if before[k])
            print(f"\ncurrent / before (medians): {ratios}; iteration GFLOP/s "
                  f"{before['iteration_gflop_per_s']:.1f} -> {now['iteration_gflop_per_s']:.1f}")  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


def _shape_of(args: argparse.Namespace) -> ModelShape:
    """The timed model's shape (the YAML's model, or the bench's tiny one) for the matmul peak's shapes."""
    if args.config:
        import yaml
        from transformers import AutoConfig

        path = args.model or yaml.safe_load(Path(args.config).read_text()).get("model_name_or_path")
        return ModelShape.from_config(AutoConfig.from_pretrained(path))
    # build_tiny_model: 4 heads, 2 key/value heads, a gated MLP twice as wide, about 256 words
    return ModelShape(args.num_layers, args.hidden_size, 4, 2, args.hidden_size // 4, 2 * args.hidden_size, 256)


def _median(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per figure, the median over runs (the run with the median iteration time for the figures of one run)."""
    return {
        k: statistics.median(r[k] for r in runs)
        for k in runs[0]
        if all(isinstance(r.get(k), float | int) for r in runs)
    }


def _extras(parts: dict[str, Any], args: argparse.Namespace) -> None:
    if "oracle" in parts:
        print(f"oracle: {parts['oracle']:.2f} s a pass; every {args.oracle_every} iterations that is "
              f"{parts['oracle_share']:.1%} of training time")  # fmt: skip
    if "snapshot" in parts:
        print(f"snapshots (save + restore, within env): {parts['snapshot']:.4f} s = "
              f"{parts['snapshot'] / parts['iteration']:.2%} of the iteration; {parts['snapshots_per_iteration']:.0f} "
              f"saved per iteration, at most {parts['snapshot_bytes_max']:.0f} bytes each as JSON")  # fmt: skip
