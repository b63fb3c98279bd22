"""Credit-assignment study: GRPO vs GiGPO vs GACA vs NLL reweighting, several seeds each.

Set-up "diagnostic" (``--setup diagnostic``, default): a tabular softmax policy
(``gaca_train.experiments.tabular``; the chosen action's -log pi plays the NLL's role) trained by on-policy
policy gradient on GACA-CriticalChain-v0, from the same initialisation (theta = 0) and with the same sample budget
for every estimator. Only the advantage differs between runs.

Set-up "alfworld" (``--setup alfworld``): the CPU quickstart's tiny LM (``gaca_train.experiments.quickstart``)
on generated easy ALFWorld games. The tiny model is warm-started once by SFT on noisy expert steps;
every run starts from that same checkpoint and trains with ``GACATrainer`` for the same number of
iterations (same episodes per iteration), with the run's seed driving task sampling and generation.
Success is sampled (temperature 1.0) on the held-out ``valid_seen`` games every ``--eval-every``
iterations. The lambda0 x eta sweep runs on ALFWorld only when a grid is given
(``--sweep-lambda0`` / ``--sweep-eta``; 5 runs per point).

On ALFWorld, a rerun with the same --out reuses the warm start and every finished run
(``runs/*/result.json``) whose settings match, so an interrupted study resumes and sweep points
can be added later.

Outputs in --out: ``results.json`` (every curve), ``curves.png`` (greedy success vs training
episodes, mean and 95% t-interval over seeds), ``summary.md`` (final success and area under
the curve with intervals, paired per-seed differences, and the GACA lambda0 x eta sweep; see
``gaca_train.experiments.study_report``).

Usage:
    python scripts/compare_estimators.py --out runs/compare            # full study (~10-20 min, 2 cores)
    python scripts/compare_estimators.py --out runs/smoke --smoke      # seconds, for CI
    python scripts/compare_estimators.py --setup alfworld --out runs/compare-alfworld   # ~3 h, 2 cores
    python scripts/compare_estimators.py --setup alfworld --out runs/smoke-alfworld --smoke
    python scripts/compare_estimators.py --setup alfworld --out runs/compare-alfworld --sweep-eta 0.5 1.0  # +10 runs
    python scripts/compare_estimators.py --out runs/compare-alfworld --report-only   # table + PNG again
    python scripts/compare_estimators.py --out runs/branching --branching nll entropy uniform   # ~20 min, 2 cores
    python scripts/compare_estimators.py --setup coverage --out runs/coverage   # anchor coverage, ALFWorld rooms
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from gaca_train.experiments.cli_utils import add_deprecated_alias, parse_seeds, warn_deprecated
from gaca_train.experiments.study_report import alfworld_report, branching_report, tabular_report

DIAGNOSTIC_ENV = {
    "horizon": 10,
    "num_branches": 3,
    "branch_width": 3,
    "num_distractors": 2,
    "noise": 0.1,
    "hint": False,
}
# label -> (estimator, options) of the main table
ESTIMATOR_RUNS = {
    "GRPO": ("grpo", {}),
    "GiGPO": ("gigpo", {}),
    "GACA": ("gaca", {}),
    "NLL reweight": ("reweight", {}),
}


def run_tabular_job(job: dict) -> dict:
    """One tabular run (a :class:`~gaca_train.experiments.tabular.StudyConfig` as ``job["config"]``), with its curves.

    Module-level so that ``ProcessPoolExecutor`` workers can unpickle it.
    """
    import gaca_envs  # noqa: F401  (registers the env ids in the worker process)
    from gaca_train.experiments.tabular import StudyConfig, train_tabular

    start = time.perf_counter()
    curves = train_tabular(StudyConfig(**job["config"]))
    return {**job, "curves": curves, "seconds": time.perf_counter() - start}


# The ALFWorld study trains the quickstart's YAML (every setting but the iteration count) for 72
# iterations, the count its figures were measured at; `make demo` runs the YAML's own 60 to stay within
# 12 minutes on 2 cores (docs/BENCHMARKS.md).
ALFWORLD_ITERATIONS = 72


def run_alfworld_job(job: dict) -> dict:
    """One GACATrainer run from the shared warm start; held-out success every ``eval_every`` iterations.

    Writes the result to ``<job["out"]>/result.json`` too, where a rerun of the study finds it
    (:func:`finished_result`). Module-level so that ``ProcessPoolExecutor`` workers can unpickle it.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback

    import gaca_envs  # noqa: F401  (registers the env ids in the worker process)
    from gaca_train.experiments import quickstart as quickstart_cpu
    from gaca_train.training.config import GACAConfig
    from gaca_train.training.trainer import GACATrainer

    torch.set_num_threads(job["threads"])
    start = time.perf_counter()
    out = Path(job["out"])
    fields, env_kwargs, warm = dict(job["fields"]), job["env_kwargs"], job["warm"]
    tokenizer = AutoTokenizer.from_pretrained(warm, padding_side="left")
    model = AutoModelForCausalLM.from_pretrained(warm)
    curves = {"episodes": [0], "eval_success": [job["before"]], "rollout_success": []}

    class HeldOut(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step % job["eval_every"] == 0 or state.global_step == state.max_steps:
                rng = torch.get_rng_state()  # the evaluation seeds torch; training sampling must not notice
                report = quickstart_cpu.measure(
                    model, tokenizer, env_kwargs, fields, job["eval_episodes"], "valid_seen", None
                )
                torch.set_rng_state(rng)
                curves["episodes"].append(state.global_step * job["episodes_per_iteration"])
                curves["eval_success"].append(report["success_rate"])

    torch.manual_seed(fields["seed"])
    trainer = GACATrainer(model=model, args=GACAConfig(**fields), processing_class=tokenizer, callbacks=[HeldOut()])
    trainer.train()
    curves["rollout_success"] = [
        log["rollout/success_rate"] for log in trainer.state.log_history if "rollout/success_rate" in log
    ]
    result = {**job, "curves": curves, "seconds": time.perf_counter() - start}
    (out / "result.json").write_text(json.dumps(result))  # a rerun of the study reuses it
    return result


def current_spelling(settings: dict) -> dict:
    """``settings`` (a job, a saved result or a warm-start key) with the names of earlier releases renamed.

    The episode cap was the env kwarg ``max_steps`` and the template field ``{max_steps}``; it is
    ``max_env_steps`` now (the GACAConfig field ``max_steps``, TRL's iterations, keeps its name).
    Runs and warm starts saved before the rename compare equal to the same settings spelled today,
    so a study resumed with the current config reuses them. ``env_kwargs`` compare as dicts.
    """
    out = dict(settings)
    kwargs = out.get("env_kwargs")
    if isinstance(kwargs, str):
        kwargs = json.loads(kwargs)
    if isinstance(kwargs, dict):
        out["env_kwargs"] = {("max_env_steps" if k == "max_steps" else k): v for k, v in kwargs.items()}
    if isinstance(out.get("prompt_template"), str):
        out["prompt_template"] = out["prompt_template"].replace("{max_steps}", "{max_env_steps}")
    if isinstance(out.get("fields"), dict):
        out["fields"] = current_spelling(out["fields"])
    return out


def finished_result(job: dict) -> dict | None:
    """The saved result of an identical earlier run of ``job`` (same fields, warm start and evaluation).

    Settings are compared through :func:`current_spelling`: a run saved before a rename still matches.
    """
    path = os.path.join(job["out"], "result.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        result = json.load(f)
    same = ("fields", "env_kwargs", "warm", "before", "eval_every", "eval_episodes", "episodes_per_iteration")
    saved = current_spelling({k: result.get(k) for k in same})
    return result if saved == current_spelling(json.loads(json.dumps({k: job[k] for k in same}))) else None


def tabular_base(args: argparse.Namespace) -> dict:
    """The :class:`~gaca_train.experiments.tabular.StudyConfig` fields every tabular run of the study shares."""
    return {
        "env_kwargs": DIAGNOSTIC_ENV,
        "task_pool": args.task_pool,
        "iterations": args.iterations,
        "tasks_per_iteration": 8,
        "rollouts_per_task": 8,
        "lr": args.lr,
        "eval_every": args.eval_every,
    }


def tabular_jobs(args: argparse.Namespace) -> list[dict]:
    """One job per estimator (and sweep point) x seed, each a tabular run on :data:`DIAGNOSTIC_ENV`."""
    base = tabular_base(args)
    jobs = []
    for seed in args.seeds:
        for label, (estimator, options) in ESTIMATOR_RUNS.items():
            cfg = {**base, "estimator": estimator, "estimator_options": options, "seed": seed}
            jobs.append({"study": "main", "label": label, "config": cfg})
        for lambda0, eta in itertools.product(args.sweep_lambda0, args.sweep_eta):
            cfg = {**base, "estimator": "gaca", "estimator_options": {"lambda0": lambda0, "eta": eta}, "seed": seed}
            jobs.append({"study": "sweep", "label": f"lambda0={lambda0}, eta={eta}", "config": cfg})
    return jobs


# label -> estimator of the branching study (each independent and branching)
BRANCHING_RUNS = {"GRPO": "grpo", "GiGPO": "gigpo", "GACA": "gaca"}


def branching_jobs(args: argparse.Namespace) -> list[dict]:
    """Independent vs branching (the first ``--branching`` criterion) per estimator and seed; the criterion ablation.

    Every run has the same iterations and slots per iteration; branching runs use the ``env_steps``
    budget, so their env steps per iteration stay near the independent runs' (the report gives both).
    """
    base = {
        **tabular_base(args),
        "branch_roots": args.branch_roots,
        "branch_points": args.branch_points,
        "branch_budget": "env_steps",
    }
    main_criterion, *others = args.branching
    jobs = []
    for seed in args.seeds:
        for label, estimator in BRANCHING_RUNS.items():
            for criterion, name in (("off", label), (main_criterion, f"{label} + branching")):
                cfg = {**base, "estimator": estimator, "estimator_options": {}, "seed": seed, "branching": criterion}
                jobs.append({"study": "branching", "label": name, "config": cfg})
        for criterion in others:
            for label in ("GiGPO", "GACA"):
                cfg = {**base, "estimator": BRANCHING_RUNS[label], "estimator_options": {}, "seed": seed,
                       "branching": criterion}  # fmt: skip
                jobs.append({"study": "ablation", "label": f"{label} + branching ({criterion})", "config": cfg})
    return jobs


def tabular_study(args: argparse.Namespace) -> str:
    """The diagnostic set-up: every estimator x seed on CriticalChain; writes ``--out``, returns the summary."""
    import multiprocessing

    jobs = branching_jobs(args) if args.branching else tabular_jobs(args)
    start = time.perf_counter()
    # spawn: a forked worker of a process with torch's threads running can deadlock (as under pytest)
    with ProcessPoolExecutor(max_workers=args.workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        results = list(pool.map(run_tabular_job, jobs))
    wall = time.perf_counter() - start
    data = {"args": vars(args), "env_kwargs": DIAGNOSTIC_ENV, "results": results}
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(data, f)
    return branching_report(args.out, data, wall) if args.branching else tabular_report(args.out, data, wall)


def shared_warm_start(args: argparse.Namespace, fields: dict, env_kwargs: dict, qargs: argparse.Namespace) -> dict:
    """SFT warm start in ``--out/warm`` (reused when its inputs match); returns its ``warm.json`` info."""
    from gaca_train.experiments import quickstart as quickstart_cpu
    from gaca_train.experiments.tiny import save_tiny_model

    start = time.perf_counter()
    warm_dir = Path(args.out) / "warm"
    # what the warm start depends on: a rerun with the same key reuses it
    key = {"train_games": args.train_games, "eval_games": args.eval_games, "sft_steps": args.sft_steps}
    key["fields"] = {k: v for k, v in sorted(fields.items()) if k not in ("output_dir", "max_steps", "seed")}
    info = json.loads((warm_dir / "warm.json").read_text()) if (warm_dir / "warm.json").exists() else {}
    # A warm start saved before a rename (current_spelling) is reused too.
    same_key = current_spelling(info.get("key") or {}) == current_spelling(json.loads(json.dumps(key)))
    if same_key and (warm_dir / "model" / "config.json").exists():
        return {**info, "reused": True}
    model, tokenizer, n_pairs = quickstart_cpu.warm_start(fields, env_kwargs, qargs, warm_dir)
    save_tiny_model(model, tokenizer, warm_dir / "model")
    before = quickstart_cpu.measure(
        model, tokenizer, env_kwargs, fields, args.eval_rollouts_per_task, "valid_seen", None
    )
    info = {"key": key, "sft_pairs": n_pairs, "before": before["success_rate"], "seconds": time.perf_counter() - start}
    (warm_dir / "warm.json").write_text(json.dumps(info))
    return {**info, "reused": False}


def alfworld_jobs(args: argparse.Namespace, fields: dict, env_kwargs: dict, before: float) -> list[dict]:
    """One job per estimator (and sweep point) x seed, all from ``--out/warm/model``."""
    out = Path(args.out)
    runs = [("main", label, estimator, options, estimator) for label, (estimator, options) in ESTIMATOR_RUNS.items()]
    if args.branching:  # and with branching (the first criterion) for GRPO, GiGPO and GACA (reweight: independent)
        crit = args.branching[0]
        roots = min(args.branch_roots, max(1, fields["rollouts_per_task"] // 2))  # the budget needs spare slots
        branch = {"branching": crit, "branch_points": args.branch_points, "branch_roots": roots}
        branched = args.branch_estimators or args.estimators
        runs += [("main", f"{label} + branching", estimator, branch, f"{estimator}-branch-{crit}")
                 for label, estimator in BRANCHING_RUNS.items() if estimator in branched]  # fmt: skip
    runs = [run for run in runs if run[2] in args.estimators]
    for lambda0, eta in itertools.product(args.sweep_lambda0, args.sweep_eta):
        options = {"lambda0": lambda0, "eta": eta}
        runs.append(("sweep", f"lambda0={lambda0}, eta={eta}", "gaca", options, f"gaca-l{lambda0}-e{eta}"))
    jobs = []
    for seed in args.seeds:
        for study, label, estimator, options, name in runs:
            run_out = out / "runs" / f"{name}-{seed}"
            output_dir = str(run_out / "tr")
            jobs.append(
                {
                    "study": study,
                    "label": label,
                    "fields": {**fields, **options, "estimator": estimator, "seed": seed, "output_dir": output_dir},
                    "env_kwargs": env_kwargs,
                    "warm": str(out / "warm" / "model"),
                    "before": before,
                    "eval_every": args.eval_every,
                    "eval_episodes": args.eval_rollouts_per_task,
                    "episodes_per_iteration": fields["tasks_per_iteration"] * fields["rollouts_per_task"],
                    "threads": max(1, (os.cpu_count() or 1) // args.workers),
                    "out": str(run_out),
                }
            )
    return jobs


def alfworld_study(args: argparse.Namespace) -> str:
    """The ALFWorld set-up: one shared warm start, then every estimator x seed from it; returns the summary."""
    import multiprocessing

    from gaca_train.experiments import quickstart as quickstart_cpu

    out = Path(args.out)
    qargs = quickstart_cpu.parse_args(
        ["--out", str(out / "warm"), "--train-games", str(args.train_games), "--eval-games", str(args.eval_games)]
        + ["--sft-steps", str(args.sft_steps)]
    )
    overrides = {"max_steps": args.iterations, "seed": 0}
    if args.smoke:
        overrides.update(tasks_per_iteration=2, rollouts_per_task=2)
    fields, env_kwargs = quickstart_cpu.load_config(Path(qargs.config), out, overrides)
    quickstart_cpu.alfworld_games(out / "games", env_kwargs, qargs.train_games, qargs.eval_games, 0)
    fields["env_kwargs"] = json.dumps(env_kwargs)
    start = time.perf_counter()
    warm = shared_warm_start(args, fields, env_kwargs, qargs)
    jobs = alfworld_jobs(args, fields, env_kwargs, warm["before"])
    done = {i: r for i, job in enumerate(jobs) if (r := finished_result(job)) is not None}
    todo = [job for i, job in enumerate(jobs) if i not in done]
    # spawn: the parent has torch loaded (and its thread pools started) by the warm start
    with ProcessPoolExecutor(max_workers=args.workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        fresh = iter(list(pool.map(run_alfworld_job, todo)))
    results = [done[i] if i in done else next(fresh) for i in range(len(jobs))]
    meta = {
        "sft_pairs": warm["sft_pairs"],
        "warm_seconds": warm["seconds"],
        "wall_seconds": time.perf_counter() - start,
        "warm_reused": warm["reused"],
        "reused_runs": len(done),
        "run_seconds": sum(r["seconds"] for r in results),
    }
    data = {"args": vars(args), "env_kwargs": env_kwargs, "meta": meta, "results": results}
    with open(out / "results.json", "w") as f:
        json.dump(data, f)
    return alfworld_report(out, data)


def make_parser() -> argparse.ArgumentParser:
    """The study's command line (``scripts/compare_estimators.py``)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--setup",
        choices=("diagnostic", "alfworld", "coverage"),
        default="diagnostic",
        help="the tabular study on CriticalChain, the tiny LM on ALFWorld, or anchor coverage (default: diagnostic)",
    )
    parser.add_argument("--coverage-games", type=int, default=24, help="coverage: generated games per setting")
    parser.add_argument("--coverage-rollouts", type=int, default=8, help="coverage: rollouts per game")
    parser.add_argument("--out", default="runs/compare", help="output folder (default: %(default)s)")
    parser.add_argument(
        "--seeds",
        default="0-4",
        help="the seeds: a range 0-4, a list 0,2,7 or one seed 3 (default: %(default)s; a bare N > 0 still means "
        "0 to N-1, deprecated)",
    )
    parser.add_argument(
        "--iterations",
        type=int,
        default=None,
        help="training iterations (max_steps; diagnostic 100, alfworld 72, the quickstart YAML's 60 + 12)",
    )
    parser.add_argument("--task-pool", type=int, default=16, help="diagnostic: training tasks")
    parser.add_argument("--lr", type=float, default=0.05, help="diagnostic: learning rate")
    parser.add_argument("--eval-every", type=int, default=None, help="iterations (diagnostic 5, alfworld 24)")
    parser.add_argument(
        "--sweep-lambda0",
        type=float,
        nargs="*",
        default=None,
        help="GACA sweep grid (diagnostic default 0.3 0.5 0.7; alfworld: no sweep unless a grid is given, 0.5)",
    )
    parser.add_argument(
        "--sweep-eta", type=float, nargs="*", default=None, help="GACA sweep grid (diagnostic default 0 0.25 0.5 1)"
    )
    parser.add_argument("--train-games", type=int, default=400, help="alfworld: generated train games")
    parser.add_argument(
        "--eval-games", type=int, default=128, help="alfworld: generated held-out games (the quickstart's 128)"
    )
    parser.add_argument(
        "--eval-rollouts-per-task",
        type=int,
        default=2,
        help="alfworld: sampled episodes per held-out game (default: %(default)s)",
    )
    add_deprecated_alias(parser, "--eval-episodes", "--eval-rollouts-per-task")
    parser.add_argument("--sft-steps", type=int, default=1000, help="alfworld: warm-start SFT steps")
    parser.add_argument(
        "--branching",
        nargs="*",
        choices=("nll", "entropy", "uniform"),
        default=None,
        help="branching rollouts vs independent for GRPO, GiGPO and GACA with the first criterion, then the other "
        "criteria for GiGPO and GACA (diagnostic: e.g. --branching nll entropy uniform; alfworld: the first)",
    )
    parser.add_argument(
        "--estimators",
        nargs="+",
        choices=("grpo", "gigpo", "gaca", "reweight"),
        default=["grpo", "gigpo", "gaca", "reweight"],
        help="alfworld: the estimators to run (default: all; with --branching, reweight runs independent only)",
    )
    parser.add_argument(
        "--branch-estimators",
        nargs="+",
        choices=("grpo", "gigpo", "gaca"),
        default=None,
        help="alfworld with --branching: the estimators that also run with branching (default: --estimators)",
    )
    parser.add_argument("--branch-roots", type=int, default=4, help="branching: root rollouts per group")
    parser.add_argument("--branch-points", type=int, default=2, help="branching: branch points per group")
    parser.add_argument(
        "--workers", type=int, default=os.cpu_count() or 1, help="parallel runs (default: the CPU count)"
    )
    parser.add_argument("--smoke", action="store_true", help="2 seeds, a few iterations, one sweep point (CI)")
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="alfworld: rewrite summary.md and curves.png from --out/results.json",
    )
    return parser


def study_seeds(text: str) -> list[int]:
    """The seeds of ``--seeds`` (:func:`~gaca_train.experiments.cli_utils.parse_seeds`); a lone N > 0: 0..N-1 (old).

    Raises:
        ValueError: for a value that names no seeds (the message shows the accepted forms).
    """
    text = str(text).strip()
    if text.isdigit() and int(text) > 0:  # the previous release's count
        n = int(text)
        warn_deprecated(f"--seeds {n} (a count)", f"--seeds 0-{n - 1} (the same seeds)", stacklevel=4)
        return list(range(n))
    return parse_seeds(text)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The study's options, with the per-set-up defaults (and ``--smoke``'s settings) filled in."""
    parser = make_parser()
    args = parser.parse_args(argv)
    try:
        args.seeds = study_seeds(args.seeds)
    except ValueError as e:
        parser.error(str(e))
    if args.report_only:
        return args
    if args.iterations is None:
        args.iterations = 100 if args.setup == "diagnostic" else ALFWORLD_ITERATIONS
    if args.eval_every is None:
        args.eval_every = 5 if args.setup == "diagnostic" else 24
    if args.setup == "diagnostic":
        args.sweep_lambda0 = [0.3, 0.5, 0.7] if args.sweep_lambda0 is None else args.sweep_lambda0
        args.sweep_eta = [0.0, 0.25, 0.5, 1.0] if args.sweep_eta is None else args.sweep_eta
    elif args.sweep_lambda0 is None and args.sweep_eta is None:
        args.sweep_lambda0, args.sweep_eta = [], []  # the sweep is opt-in on ALFWorld (5 runs per point)
    else:  # a grid on one axis: the other at METHOD.md's default
        args.sweep_lambda0 = [0.5] if args.sweep_lambda0 is None else args.sweep_lambda0
        args.sweep_eta = [0.25] if args.sweep_eta is None else args.sweep_eta
    if args.branching == []:  # --branching alone: every criterion, nll first
        args.branching = ["nll", "entropy", "uniform"]
    if args.smoke:
        args.seeds, args.iterations, args.eval_every = [0, 1], 4, 2
        if args.setup == "diagnostic":
            args.sweep_lambda0, args.sweep_eta = [0.5], [0.5]
        if args.setup == "alfworld":
            args.iterations, args.eval_every, args.eval_rollouts_per_task = 2, 1, 1
            args.train_games, args.eval_games, args.sft_steps = 6, 3, 2
    return args


def main(argv: list[str] | None = None) -> str:
    """Runs the study (or, with ``--report-only``, rewrites an ALFWorld study's report); prints the summary."""
    args = parse_args(argv)
    if args.report_only:
        with open(os.path.join(args.out, "results.json")) as f:
            summary = alfworld_report(args.out, json.load(f))
    else:
        os.makedirs(args.out, exist_ok=True)
        if args.setup == "coverage":
            from gaca_train.experiments.study_coverage import coverage_report, coverage_results

            results = coverage_results(args.coverage_games, args.coverage_rollouts, seed=0)
            summary = coverage_report(args.out, results, args)
        else:
            summary = alfworld_study(args) if args.setup == "alfworld" else tabular_study(args)
    print(summary, end="")
    return summary
