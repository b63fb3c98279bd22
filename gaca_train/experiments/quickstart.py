"""CPU quickstart: warm-start a tiny local model on expert steps, train it with GACA, compare success.

    python scripts/quickstart_cpu.py                       # ALFWorld; minutes on 2 cores (docs/BENCHMARKS.md)
    python scripts/quickstart_cpu.py --env GACA-CriticalChain-v0 --estimator gigpo --iterations 40

``--env GACA-ALFWorld-v0`` (default; settings in ``configs/quickstart_cpu_alfworld.yaml``):

1. Generates easy ALFWorld games (pick-and-place in rooms of 5 receptacles) for ``train`` and
   the held-out ``valid_seen`` split into ``<out>/games`` with the native engine.
2. Builds a tiny LLaMA-architecture model and a word-level tokenizer over the games' words (no
   download) and fine-tunes it with TRL's SFTTrainer on expert steps of the train games, a share
   ``--step-noise`` of them replaced by random admissible actions (the expert recovers after them),
   half of the games shown by a text-only searching agent (``--searching``), with the loss on the
   whole text, prompts too (``--sft-loss full``): a model built from scratch learns to read the
   room only if it is asked to predict what it reads, as a pretrained LLM was.
3. Measures success on held-out ``valid_seen`` games and on the train games (sampled episodes),
   trains with ``GACATrainer``, measures again, writes ``<out>/learning_curve.png`` and
   ``<out>/summary.json``.

``--env GACA-CriticalChain-v0`` (``configs/quickstart_cpu.yaml``): the diagnostic GACA-CriticalChain-v0;
the expert's fork choices are random (``--fork-noise 1``), in 8 demonstrated episodes per task
(``--demos-per-task``): the warm-started policy walks the routine stages but guesses at the fork,
whose consequence shows only at the goal. Success is measured on
the training tasks only (the tiny model memorises place names, so unseen tasks are not a fair test).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path
from typing import Any

import yaml
from tqdm.auto import tqdm
from transformers import TrainerCallback
from transformers.trainer_callback import PrinterCallback

import gaca_envs  # noqa: F401  (registers the GACA env ids)
from gaca_envs.task_env import split_task_ids
from gaca_train.experiments.cli_utils import add_deprecated_alias, parse_seeds, warn_deprecated
from gaca_train.experiments.seed_tables import compare_with_reference, machine, seed_table, seeds_markdown
from gaca_train.experiments.warm_start import expert_steps, sft_warm_start
from gaca_train.rollout.prompts import PromptBuilder

# The repository checkout this module runs from (configs/ and docs/ live there, not in the wheel).
ROOT = Path(__file__).resolve().parents[2]

_MEASURE_BATCH = 64  # prompts per generate call in measurements
CONFIGS = {"alfworld": "quickstart_cpu_alfworld.yaml", "criticalchain": "quickstart_cpu.yaml"}
# --env takes the env's Gymnasium id, as every other script does; the short names are deprecated.
ENV_IDS = {"GACA-ALFWorld-v0": "alfworld", "GACA-CriticalChain-v0": "criticalchain"}
# Per-env defaults of the options left unset on the command line.
ENV_DEFAULTS = {
    "alfworld": {"fork_noise": 0.0, "eval_episodes": 4, "sft_steps": 1000, "searching": 0.5, "invalid_noise": 0.2,
                 "step_noise": 0.2, "demos_per_task": 1, "sft_loss": "full"},
    "criticalchain": {"fork_noise": 1.0, "eval_episodes": 16, "sft_steps": 600, "searching": 0.0, "invalid_noise": 0.0,
                      "step_noise": 0.0, "demos_per_task": 8, "sft_loss": "completion"},
}  # fmt: skip
# What makes two runs comparable with the reference table (everything but the seed and the output folder).
_SETTINGS = ("env", "config", "estimator", "iterations", "sft_steps", "sft_lr", "sft_loss", "hidden_size",
             "eval_episodes", "train_games", "eval_games", "train_eval_tasks", "fork_noise", "step_noise",
             "train_on_noise", "invalid_noise", "searching", "demos_per_task", "warm_start")  # fmt: skip


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


def prompt_builder(fields: dict) -> PromptBuilder:
    """The prompts of the run, as its trainer builds them (SFT demonstrations and measurements use them too)."""
    return PromptBuilder.from_config(fields)


def measure(
    model: Any, tokenizer: Any, env_kwargs: dict, fields: dict, episodes: int, split: str, max_tasks: int | None
) -> dict:
    """Success of sampled episodes on the (first ``max_tasks``) tasks of ``split``, ``episodes`` per task.

    The episodes are played as training plays them (same prompts, sampling temperature and parsing),
    all tasks of a repeat at once; repeat ``r`` seeds torch with ``1000 + r`` and resets env ``i`` with
    seed ``1000 + r + i``, so a measurement does not depend on what ran before it.
    """
    import torch
    from transformers import GenerationConfig

    from gaca_train.rollout.policy import generate_with_logprobs, run_rollout
    from gaca_train.rollout.vector import RolloutPool

    env_kwargs, task_ids = split_task_ids(fields["env_id"], env_kwargs, split)
    task_ids = task_ids[: max_tasks or len(task_ids)]
    eos = [tokenizer.eos_token_id]
    temperature = fields.get("temperature", 1.0)
    config = GenerationConfig(max_new_tokens=fields["max_completion_length"], do_sample=True, temperature=temperature,
                              top_k=0, top_p=1.0, pad_token_id=tokenizer.pad_token_id, eos_token_id=eos)  # fmt: skip

    def generate(prompt_ids: list[list[int]]) -> tuple[list[list[int]], list[list[float]]]:
        return generate_with_logprobs(model, prompt_ids, pad_token_id=tokenizer.pad_token_id, eos_token_ids=eos,
                                      generation_config=config, temperature=temperature)  # fmt: skip

    was_training = model.training
    model.eval()
    records = []
    pool = RolloutPool(fields["env_id"], len(task_ids), env_kwargs, mode="sync")
    try:
        for repeat in range(episodes):
            torch.manual_seed(1000 + repeat)
            result = run_rollout(pool, task_ids, generate, tokenizer, prompt_builder(fields), seed=1000 + repeat,
                                 batch_size=_MEASURE_BATCH)  # fmt: skip
            invalid = [0] * len(task_ids)
            for step in result.steps:
                invalid[step.env_index] += not step.env_valid
            records += [{"won": e.won, "score": e.score, "length": e.length, "invalid": invalid[e.env_index]}
                        for e in result.episodes]  # fmt: skip
    finally:
        pool.close()
        model.train(was_training)
    steps = max(sum(r["length"] for r in records), 1)
    return {
        "episodes": len(records),
        "success_rate": sum(r["won"] for r in records) / len(records),
        "score": sum(r["score"] for r in records) / len(records),
        "episode_length": sum(r["length"] for r in records) / len(records),
        "invalid_rate": sum(r["invalid"] for r in records) / steps,
    }


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
    from gaca_envs.task_env import NOTHING_HAPPENS
    from gaca_train.experiments.tiny import build_tiny_model, build_tokenizer
    from gaca_train.rollout.prompts import prompt_templates

    env_id, steps = fields["env_id"], fields["max_env_steps"]
    train_ids = split_task_ids(env_id, env_kwargs, "train")[1]
    prompts = prompt_builder(fields)
    pairs = expert_steps(
        env_id, env_kwargs, train_ids, fields["history_length"], steps, args.seed, args.fork_noise, args.step_noise,
        prompts=prompts, train_on_noise=args.train_on_noise, invalid_noise=args.invalid_noise,
        searching=args.searching, demos_per_task=args.demos_per_task,
    )  # fmt: skip
    corpus = [m["content"] for msgs, _ in pairs for m in msgs] + [r for _, r in pairs]
    if args.env == "alfworld":  # the env's vocabulary: words of the held-out games too (they are not trained on)
        eval_kwargs, eval_ids = split_task_ids(env_id, env_kwargs, "valid_seen")
        eval_pairs = expert_steps(
            env_id, eval_kwargs, eval_ids, fields["history_length"], steps, args.seed,
            prompts=prompts,
        )  # fmt: skip
        corpus += [m["content"] for msgs, _ in eval_pairs for m in msgs] + [" ".join(t) for t in prompt_templates()]
    corpus.append(NOTHING_HAPPENS)  # every env's answer to an invalid action: experts never see it, the policy does
    tokenizer = build_tokenizer(corpus)
    model = build_tiny_model(tokenizer, hidden_size=args.hidden_size, num_layers=2, seed=args.seed)
    sft_warm_start(model, tokenizer, pairs, out, steps=args.sft_steps, lr=args.sft_lr, seed=args.seed,
                   completion_only=args.sft_loss == "completion")  # fmt: skip
    return model, tokenizer, len(pairs)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Command line of the quickstart."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--env",
        choices=[*ENV_IDS, *sorted(CONFIGS)],
        default="GACA-ALFWorld-v0",
        help="the env's Gymnasium id (default: %(default)s); the short names alfworld and criticalchain are "
        "deprecated",
    )
    parser.add_argument("--config", default=None, help="YAML of GACAConfig fields (default: the --env one)")
    parser.add_argument("--out", default=None, help="output folder (default: outputs/quickstart-<env>)")
    parser.add_argument("--estimator", default=None, help="override the config's estimator")
    parser.add_argument(
        "--iterations", type=int, default=None, help="training iterations (the config's max_steps; default: its own)"
    )
    parser.add_argument("--sft-steps", type=int, default=None, help="SFT steps (ALFWorld 1000, CriticalChain 600)")
    parser.add_argument("--sft-lr", type=float, default=3e-3, help="SFT learning rate (constant)")
    parser.add_argument(
        "--sft-loss",
        choices=("completion", "full"),
        default=None,
        help="SFT loss on the responses only, or on the whole text, prompt too, as pretraining reads text "
        "(ALFWorld full, CriticalChain completion)",
    )
    parser.add_argument("--hidden-size", type=int, default=128, help="tiny model width")
    parser.add_argument(
        "--eval-rollouts-per-task",
        dest="eval_episodes",
        type=int,
        default=None,
        help="sampled episodes per task per measurement (ALFWorld 4, CriticalChain 16)",
    )
    add_deprecated_alias(parser, "--eval-episodes", "--eval-rollouts-per-task")
    parser.add_argument("--train-games", type=int, default=400, help="ALFWorld: generated train games")
    parser.add_argument("--eval-games", type=int, default=128, help="ALFWorld: generated held-out valid_seen games")
    parser.add_argument(
        "--train-eval-tasks", type=int, default=32, help="ALFWorld: train games measured (the first N)"
    )
    parser.add_argument("--fork-noise", type=float, default=None, help="CriticalChain: random fork demos (default 1)")
    parser.add_argument("--step-noise", type=float, default=None, help="random demos per step (ALFWorld default 0.2)")
    parser.add_argument(
        "--invalid-noise",
        type=float,
        default=None,
        help="demos that first play a rejected action, then recover (ALFWorld default 0.2)",
    )
    parser.add_argument(
        "--searching",
        type=float,
        default=None,
        help="ALFWorld: share of train games demonstrated by the text-only searching agent (default 0.5)",
    )
    parser.add_argument(
        "--demos-per-task",
        type=int,
        default=None,
        help="demonstrated episodes per train task, each with its own noise (ALFWorld 1, CriticalChain 8)",
    )
    parser.add_argument(
        "--warm-start", default=None, help="load this saved warm start instead of running SFT (same games and seed)"
    )
    parser.add_argument(
        "--train-on-noise",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="train on the random steps of --step-noise (default: yes; they are what teaches copying an action)",
    )
    parser.add_argument(
        "--oracle-every",
        type=int,
        default=0,
        help="measure the estimators against oracle advantages every N iterations (oracle/* in log_history.json; "
        "training is unchanged); 0: never",
    )
    parser.add_argument("--oracle-rows", type=int, default=16, help="oracle: rows per pass")
    parser.add_argument("--oracle-continuations", type=int, default=4, help="oracle: continuations per row, Q and V")
    parser.add_argument("--seed", type=int, default=0, help="seed of the model, SFT, RL and games")
    parser.add_argument(
        "--seeds",
        default=None,
        help="run these seeds one after another (a range 0-4, a list 0,2,7 or one seed 3) and write "
        "<out>/seeds.{md,json}",
    )
    args = parser.parse_args(argv)
    if args.env in CONFIGS:
        env_id = next(i for i, short in ENV_IDS.items() if short == args.env)
        warn_deprecated(f"--env {args.env}", f"--env {env_id}")
    if args.seeds is not None:
        try:
            parse_seeds(args.seeds)
        except ValueError as e:
            parser.error(str(e))
    args.env = ENV_IDS.get(args.env, args.env)  # the short name names the config, output folder and settings
    if args.demos_per_task is not None and args.demos_per_task < 1:
        parser.error(f"--demos-per-task must be at least 1, got {args.demos_per_task}")
    args.config = args.config or str(ROOT / "configs" / CONFIGS[args.env])
    args.out = args.out or f"outputs/quickstart-{args.env}"
    for name, value in ENV_DEFAULTS[args.env].items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    return args


def write_summary(
    fields: dict, before: dict, after: dict, n_pairs: int, seconds: float, out: Path, run_settings: dict
) -> dict:
    """Writes ``<out>/summary.json`` (headline split first in ``before``) and prints the before/after lines.

    The summary records the run's seed and :func:`~gaca_train.experiments.seed_tables.machine` (CPU model and
    capability, torch threads, versions), on which its digits depend.
    """
    splits = list(before)
    summary = {
        "env": fields["env_id"],
        "estimator": fields["estimator"],
        "seed": fields["seed"],
        "iterations": fields["max_steps"],
        "sft_pairs": n_pairs,
        "before": before[splits[0]],
        "after": after[splits[0]],
        "by_split": {s: {"before": before[s], "after": after[s]} for s in splits},
        "seconds": seconds,
        "settings": run_settings,
        "machine": machine(),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    lines = [
        f"{s:>10} success before RL: {before[s]['success_rate']:.3f}   after {fields['max_steps']} iterations of "
        f"{fields['estimator'].upper()}: {after[s]['success_rate']:.3f}   ({before[s]['episodes']} episodes; "
        f"invalid actions {before[s]['invalid_rate']:.2f} -> {after[s]['invalid_rate']:.2f})"
        for s in splits
    ]
    if run_settings["env"] == "alfworld":
        lines.append(compare_with_reference(summary))
    print("\n" + "\n".join(lines) + f"\n{seconds:.0f} s; learning curve: {out / 'learning_curve.png'}")
    return summary


def phase(message: str, tic: float) -> None:
    """One progress line: elapsed seconds since ``tic`` and what the quickstart does now."""
    print(f"[{time.perf_counter() - tic:6.0f} s] {message}", flush=True)


class ProgressBar(TrainerCallback):
    """A tqdm bar over the RL iterations with the latest rollout success (the trainer's own bar is off)."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.bar = None

    def on_train_begin(self, args, state, control, **kwargs):  # noqa: D102
        self.bar = tqdm(total=self.total, desc="RL iterations", unit="it", dynamic_ncols=True)

    def on_log(self, args, state, control, logs=None, **kwargs):  # noqa: D102
        if self.bar is not None and logs and "rollout/success_rate" in logs:
            self.bar.set_postfix(success=f"{logs['rollout/success_rate']:.2f}", refresh=False)

    def on_step_end(self, args, state, control, **kwargs):  # noqa: D102
        if self.bar is not None:
            self.bar.update(1)

    def on_train_end(self, args, state, control, **kwargs):  # noqa: D102
        if self.bar is not None:
            self.bar.close()


def settings(args: argparse.Namespace) -> dict:
    """The run settings that a comparison with the reference table must share.

    The config is named and hashed (``config_sha256``, the first 16 hex digits of its bytes), so an
    edited YAML under the same name (another learning rate or iteration count) does not compare.
    """
    config = Path(args.config)
    digest = hashlib.sha256(config.read_bytes()).hexdigest()[:16]
    return {k: getattr(args, k) for k in _SETTINGS} | {"config": config.name, "config_sha256": digest}


def sweep(argv: list[str], seeds: list[int], out: Path) -> dict:
    """Runs the quickstart once per seed, one after another; writes ``<out>/seeds.{json,md}``."""
    runs = []
    for seed in seeds:
        print(f"\n=== seed {seed} ({len(runs) + 1} of {len(seeds)}) ===", flush=True)
        summary = main([*argv, "--seed", str(seed), "--out", str(out / f"seed{seed}")])
        runs.append({"seed": seed, "before": summary["before"]["success_rate"],
                     "after": summary["after"]["success_rate"], "seconds": summary["seconds"]})  # fmt: skip
    # The warm start's float kernels, and so every digit, depend on the machine: the table records it.
    table = seed_table(runs, summary["settings"], summary["before"]["episodes"], summary.get("machine") or machine())
    out.mkdir(parents=True, exist_ok=True)
    (out / "seeds.json").write_text(json.dumps(table, indent=2))
    (out / "seeds.md").write_text(seeds_markdown(table))
    print("\n" + seeds_markdown(table))
    return table


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    if args.seeds:
        argv = list(sys.argv[1:] if argv is None else argv)
        rest = [a for i, a in enumerate(argv) if a != "--seeds" and (i == 0 or argv[i - 1] != "--seeds")]
        rest = [a for a in rest if not a.startswith("--seeds=")]
        return sweep(rest, parse_seeds(args.seeds), Path(args.out))

    import torch

    from gaca_train.experiments.tiny import save_tiny_model
    from gaca_train.training.config import GACAConfig
    from gaca_train.training.trainer import GACATrainer

    tic = time.perf_counter()
    out = Path(args.out)
    overrides = {"seed": args.seed}
    if args.estimator:
        overrides["estimator"] = args.estimator
    if args.iterations:
        overrides["max_steps"] = args.iterations
    if args.oracle_every:
        overrides.update(oracle_every=args.oracle_every, oracle_rows=args.oracle_rows,
                         oracle_continuations=args.oracle_continuations)  # fmt: skip
    fields, env_kwargs = load_config(Path(args.config), out, overrides)
    splits = ["train"]
    if args.env == "alfworld":
        phase(f"games: {args.train_games} train + {args.eval_games} valid_seen easy ALFWorld games", tic)
        alfworld_games(out / "games", env_kwargs, args.train_games, args.eval_games, args.seed)
        fields["env_kwargs"] = json.dumps(env_kwargs)
        splits = ["valid_seen", "train"]

    # 1. Tiny model, warm-started on noisy expert steps (or loaded from --warm-start).
    if args.warm_start:
        phase(f"warm start: loading {args.warm_start}", tic)
        model, tokenizer, n_pairs = load_warm_start(Path(args.warm_start))
    else:
        phase(f"warm start: SFT, {args.sft_steps} steps on demonstrations of the train games", tic)
        model, tokenizer, n_pairs = warm_start(fields, env_kwargs, args, out)
    save_tiny_model(model, tokenizer, out / "warm_start")
    # Go on from the saved copy (the same weights): TRL loads the KL reference model from its path.
    model, tokenizer, _ = load_warm_start(out / "warm_start")

    # 2. Success before RL.
    cap = {"train": args.train_eval_tasks} if args.env == "alfworld" else {}

    def measure_all(when: str) -> dict:
        results = {}
        for s in splits:
            phase(f"evaluation {when} RL: {s}, {args.eval_episodes} sampled episodes per game", tic)
            results[s] = measure(model, tokenizer, env_kwargs, fields, args.eval_episodes, s, cap.get(s))
            print(f"         success {results[s]['success_rate']:.3f} ({results[s]['episodes']} episodes), invalid "
                  f"actions {results[s]['invalid_rate']:.2f}", flush=True)  # fmt: skip
        return results

    before = measure_all("before")

    # 3. RL.
    phase(f"RL: {fields['max_steps']} iterations of {fields['estimator'].upper()}", tic)
    torch.manual_seed(args.seed)
    trainer = GACATrainer(model=model, args=GACAConfig(**fields), processing_class=tokenizer,
                          callbacks=[ProgressBar(fields["max_steps"])])  # fmt: skip
    trainer.remove_callback(PrinterCallback)  # the bar replaces the per-iteration log dicts; they are in log_history
    trainer.train()
    save_tiny_model(model, tokenizer, out / "after_rl")

    # 4. Success after RL, curve and summary.
    after = measure_all("after")
    head = splits[0]
    title = f"{fields['estimator'].upper()} on {fields['env_id']} ({head} success before/after)"
    plot(trainer.state.log_history, before[head]["success_rate"], after[head]["success_rate"],
         out / "learning_curve.png", title)  # fmt: skip
    (out / "log_history.json").write_text(json.dumps(trainer.state.log_history, indent=1))
    summary = write_summary(fields, before, after, n_pairs, time.perf_counter() - tic, out, settings(args))
    return summary


def load_warm_start(path: Path) -> tuple:
    """A saved warm start (``<out>/warm_start`` of an earlier run with the same games) as (model, tokenizer, pairs)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path, padding_side="left")
    return AutoModelForCausalLM.from_pretrained(path), tokenizer, 0
