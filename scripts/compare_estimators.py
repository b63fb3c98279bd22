"""Credit-assignment study: GRPO vs GiGPO vs GACA vs NLL reweighting, several seeds each.

Set-up "diagnostic" (``--setup diagnostic``, default): a tabular softmax policy (``gaca_train.tabular``; the
chosen action's -log pi plays the NLL's role) trained by on-policy policy gradient on
GACA-CriticalChain-v0, from the same initialisation (theta = 0) and with the same sample budget
for every estimator. Only the advantage differs between runs.

Set-up "alfworld" (``--setup alfworld``): the CPU quickstart's tiny LM (``scripts/quickstart_cpu.py``)
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
the curve with intervals, paired per-seed differences, and the GACA lambda0 x eta sweep).

Usage:
    python scripts/compare_estimators.py --out runs/compare            # full study (~10-20 min, 2 cores)
    python scripts/compare_estimators.py --out runs/smoke --smoke      # seconds, for CI
    python scripts/compare_estimators.py --setup alfworld --out runs/compare-alfworld   # ~90 min, 2 cores
    python scripts/compare_estimators.py --setup alfworld --out runs/smoke-alfworld --smoke
    python scripts/compare_estimators.py --setup alfworld --out runs/compare-alfworld --sweep-eta 0.5 1.0  # +10 runs
    python scripts/compare_estimators.py --out runs/compare-alfworld --report-only   # table + PNG again
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from gaca_train.eval_report import t975

DIAGNOSTIC_ENV = {
    "horizon": 10,
    "num_branches": 3,
    "branch_width": 3,
    "num_distractors": 2,
    "noise": 0.1,
    "hint": False,
}
ESTIMATOR_RUNS = {
    "GRPO": ("grpo", {}),
    "GiGPO": ("gigpo", {}),
    "GACA": ("gaca", {}),
    "NLL reweight": ("reweight", {}),
}


def _run(job: dict) -> dict:
    import gaca_envs  # noqa: F401  (registers the env ids in the worker process)
    from gaca_train.tabular import StudyConfig, train_tabular

    start = time.perf_counter()
    curves = train_tabular(StudyConfig(**job["config"]))
    return {**job, "curves": curves, "seconds": time.perf_counter() - start}


def _run_alfworld(job: dict) -> dict:
    """One GACATrainer run from the shared warm start; held-out success every ``eval_every`` iterations."""
    from pathlib import Path

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback

    import gaca_envs  # noqa: F401  (registers the env ids in the worker process)
    from gaca_train.config import GACAConfig
    from gaca_train.experiments import quickstart as quickstart_cpu
    from gaca_train.trainer import GACATrainer

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


def _finished(job: dict) -> dict | None:
    """The saved result of an identical earlier run of ``job`` (same fields, warm start and evaluation)."""
    path = os.path.join(job["out"], "result.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        result = json.load(f)
    same = ("fields", "env_kwargs", "warm", "before", "eval_every", "eval_episodes", "episodes_per_iteration")
    return result if all(result.get(k) == json.loads(json.dumps(job[k])) for k in same) else None


def mean_ci(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean over axis 0 and the half-width of its 95% t-interval (0 for a single seed)."""
    n = values.shape[0]
    mean = values.mean(axis=0)
    if n < 2:
        return mean, np.zeros_like(mean)
    return mean, t975(n - 1) * values.std(axis=0, ddof=1) / math.sqrt(n)


def _jobs(args: argparse.Namespace) -> list[dict]:
    base = {
        "env_kwargs": DIAGNOSTIC_ENV,
        "task_pool": args.task_pool,
        "iterations": args.iterations,
        "tasks_per_iteration": 8,
        "rollouts_per_task": 8,
        "lr": args.lr,
        "eval_every": args.eval_every,
    }
    jobs = []
    for seed in range(args.seeds):
        for label, (estimator, options) in ESTIMATOR_RUNS.items():
            cfg = {**base, "estimator": estimator, "estimator_options": options, "seed": seed}
            jobs.append({"study": "main", "label": label, "config": cfg})
        for lambda0, eta in itertools.product(args.sweep_lambda0, args.sweep_eta):
            cfg = {**base, "estimator": "gaca", "estimator_options": {"lambda0": lambda0, "eta": eta}, "seed": seed}
            jobs.append({"study": "sweep", "label": f"lambda0={lambda0}, eta={eta}", "config": cfg})
    return jobs


def _table(results: list[dict], study: str) -> tuple[list[str], dict[str, dict[str, np.ndarray]]]:
    by_label: dict[str, list[dict]] = {}
    for r in results:
        if r["study"] == study:
            by_label.setdefault(r["label"], []).append(r)
    rows, stats = [], {}
    for label, runs in by_label.items():
        success = np.array([r["curves"]["eval_success"] for r in runs])
        final, final_ci = mean_ci(success[:, -1])
        auc, auc_ci = mean_ci(success.mean(axis=1))
        stats[label] = {"success": success, "episodes": np.array(runs[0]["curves"]["episodes"])}
        rows.append(f"| {label} | {len(runs)} | {final:.3f} ± {final_ci:.3f} | {auc:.3f} ± {auc_ci:.3f} |")
    return rows, stats


# Paired comparisons: runs with the same seed share the initialisation, the task order and (for their
# first iteration) the rollouts, so per-seed differences remove most of the between-seed noise.
PAIRS = [("GiGPO", "GRPO"), ("GACA", "GRPO"), ("NLL reweight", "GRPO"), ("GACA", "GiGPO")]


def _seed(result: dict) -> int:
    return int((result.get("config") or result["fields"])["seed"])


def _paired_rows(results: list[dict], pairs: list[tuple[str, str]] = PAIRS) -> list[str]:
    """Markdown rows: per-seed difference (a - b) of final success and AUC for each pair of labels."""
    curves = {(r["label"], _seed(r)): np.asarray(r["curves"]["eval_success"]) for r in results}
    rows = []
    for a, b in pairs:
        seeds = sorted(s for (label, s) in curves if label == a and (b, s) in curves)
        if not seeds:
            continue
        final = np.array([curves[a, s][-1] - curves[b, s][-1] for s in seeds])
        auc = np.array([curves[a, s].mean() - curves[b, s].mean() for s in seeds])
        (fm, fci), (am, aci) = mean_ci(final), mean_ci(auc)
        rows.append(
            f"| {a} − {b} | {len(seeds)} | {fm:+.3f} ± {fci:.3f} | {int((final > 0).sum())}/{len(seeds)} "
            f"| {am:+.3f} ± {aci:.3f} |"
        )
    return rows


PAIRED_HEADER = [
    "Paired by seed (same initialisation and task order); difference, mean ± 95% t-interval:",
    "",
    "| comparison | seeds | final success | seeds ahead | area under curve |",
    "|---|---|---|---|---|",
]


def _plot(
    stats: dict[str, dict[str, np.ndarray]],
    path: str,
    title: str,
    ylabel: str = "greedy success on the task pool",
    ylim: tuple[float, float] | None = (-0.02, 1.02),
) -> None:
    """Mean success per estimator with its 95% band; ``ylim=None`` fits the axis to the data."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=120)
    for label, s in stats.items():
        mean, ci = mean_ci(s["success"])
        marker = "o" if len(s["episodes"]) <= 10 else None  # few evaluation points: show where they are
        ax.plot(s["episodes"], mean, label=label, marker=marker, markersize=4)
        ax.fill_between(s["episodes"], mean - ci, mean + ci, alpha=0.2)
    ax.set_xlabel("training episodes")
    ax.set_ylabel(ylabel)
    if ylim is not None:
        ax.set_ylim(*ylim)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(loc="best")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _shared_warm_start(args: argparse.Namespace, fields: dict, env_kwargs: dict, qargs: argparse.Namespace) -> dict:
    """SFT warm start in ``--out/warm`` (reused when its inputs match); returns its ``warm.json`` info."""
    from pathlib import Path

    from gaca_train.experiments import quickstart as quickstart_cpu
    from gaca_train.tiny import save_tiny_model

    start = time.perf_counter()
    warm_dir = Path(args.out) / "warm"
    # what the warm start depends on: a rerun with the same key reuses it
    key = {"train_games": args.train_games, "eval_games": args.eval_games, "sft_steps": args.sft_steps}
    key["fields"] = {k: v for k, v in sorted(fields.items()) if k not in ("output_dir", "max_steps", "seed")}
    info = json.loads((warm_dir / "warm.json").read_text()) if (warm_dir / "warm.json").exists() else {}
    if info.get("key") == key and (warm_dir / "model" / "config.json").exists():
        return {**info, "reused": True}
    model, tokenizer, n_pairs = quickstart_cpu.warm_start(fields, env_kwargs, qargs, warm_dir)
    save_tiny_model(model, tokenizer, warm_dir / "model")
    before = quickstart_cpu.measure(model, tokenizer, env_kwargs, fields, args.eval_episodes, "valid_seen", None)
    info = {"key": key, "sft_pairs": n_pairs, "before": before["success_rate"], "seconds": time.perf_counter() - start}
    (warm_dir / "warm.json").write_text(json.dumps(info))
    return {**info, "reused": False}


def _alfworld_jobs(args: argparse.Namespace, fields: dict, env_kwargs: dict, before: float) -> list[dict]:
    """One job per estimator (and sweep point) x seed, all from ``--out/warm/model``."""
    from pathlib import Path

    out = Path(args.out)
    runs = [("main", label, estimator, options, estimator) for label, (estimator, options) in ESTIMATOR_RUNS.items()]
    for lambda0, eta in itertools.product(args.sweep_lambda0, args.sweep_eta):
        options = {"lambda0": lambda0, "eta": eta}
        runs.append(("sweep", f"lambda0={lambda0}, eta={eta}", "gaca", options, f"gaca-l{lambda0}-e{eta}"))
    jobs = []
    for seed in range(args.seeds):
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
                    "eval_episodes": args.eval_episodes,
                    "episodes_per_iteration": fields["tasks_per_iteration"] * fields["rollouts_per_task"],
                    "threads": max(1, (os.cpu_count() or 1) // args.workers),
                    "out": str(run_out),
                }
            )
    return jobs


def alfworld_study(args: argparse.Namespace) -> None:
    """The ALFWorld set-up: one shared warm start, then every estimator x seed from it (see the docstring)."""
    import multiprocessing
    from pathlib import Path

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
    warm = _shared_warm_start(args, fields, env_kwargs, qargs)
    jobs = _alfworld_jobs(args, fields, env_kwargs, warm["before"])
    done = {i: r for i, job in enumerate(jobs) if (r := _finished(job)) is not None}
    todo = [job for i, job in enumerate(jobs) if i not in done]
    # spawn: the parent has torch loaded (and its thread pools started) by the warm start
    with ProcessPoolExecutor(max_workers=args.workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        fresh = iter(list(pool.map(_run_alfworld, todo)))
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
    alfworld_report(out, data)


def alfworld_report(out: str | os.PathLike[str], data: dict) -> None:
    """Writes ``summary.md`` and ``curves.png`` of the ALFWorld set-up from its ``results.json`` data."""
    from pathlib import Path

    out, args, results, meta = Path(out), data["args"], data["results"], data.get("meta", {})
    fields = results[0]["fields"]
    per_iteration = results[0]["episodes_per_iteration"]
    rows, stats = _table(results, "main")
    n_eval = args["eval_games"] * args["eval_episodes"]
    title = f"Easy ALFWorld, tiny LM from one SFT warm start, {args['seeds']} seeds"
    _plot(stats, str(out / "curves.png"), title, ylabel=f"held-out success ({n_eval} sampled episodes)", ylim=None)
    rollout_rows = []
    for label in stats:
        curves = np.array([r["curves"]["rollout_success"] for r in results if r["label"] == label])
        first, first_ci = mean_ci(curves[:, : args["eval_every"]].mean(axis=1))
        last, last_ci = mean_ci(curves[:, -args["eval_every"] :].mean(axis=1))
        whole, whole_ci = mean_ci(curves.mean(axis=1))
        rollout_rows.append(
            f"| {label} | {first:.3f} ± {first_ci:.3f} | {last:.3f} ± {last_ci:.3f} | {whole:.3f} ± {whole_ci:.3f} |"
        )
    pairs = f" on {meta['sft_pairs']} noisy expert steps" if "sft_pairs" in meta else ""
    lines = [
        f"# Credit-assignment study: {title}",
        "",
        f"{args['train_games']} train / {args['eval_games']} held-out (valid_seen) generated easy games; warm start: "
        f"{args['sft_steps']} SFT steps{pairs} (held-out success {results[0]['before']:.3f}). "
        f"Each run: {args['iterations']} iterations x {per_iteration} episodes of GACATrainer "
        f"(`configs/quickstart_cpu_alfworld.yaml`). Held-out success every {args['eval_every']} iterations over "
        f"{n_eval} sampled episodes (temperature {fields['temperature']}). Mean ± 95% t-interval over seeds; area "
        "under the curve is the mean held-out success over the evaluation points (the warm start included).",
        "",
        "| run | seeds | final success | area under curve |",
        "|---|---|---|---|",
        *rows,
        "",
        *PAIRED_HEADER,
        *_paired_rows(results),
        "",
        f"Rollout success on the training games ({per_iteration} sampled episodes per iteration), mean over "
        f"the first and the last {args['eval_every']} iterations and over all {args['iterations']}:",
        "",
        f"| run | first {args['eval_every']} | last {args['eval_every']} | all |",
        "|---|---|---|---|",
        *rollout_rows,
    ]
    sweep_labels = list(dict.fromkeys(r["label"] for r in results if r["study"] == "sweep"))
    if sweep_labels:
        sweep_rows, _ = _table(results, "sweep")
        lines += [
            "",
            "GACA sweep (eta = 0 is GiGPO with omega = lambda0 / (1 - lambda0); the main table's GACA is "
            "lambda0 = 0.5, eta = 0.25):",
            "",
            "| run | seeds | final success | area under curve |",
            "|---|---|---|---|",
            *sweep_rows,
            "",
            *PAIRED_HEADER,
            *_paired_rows(results, [(label, "GiGPO") for label in sweep_labels]),
        ]
    if meta.get("reused_runs") or meta.get("warm_reused"):
        lines += [
            "",
            f"{len(results)} runs, {meta['reused_runs']} of them finished by an earlier invocation of the study; "
            f"the runs took {meta['run_seconds']:.0f} s of worker time in all (warm start "
            f"{meta['warm_seconds']:.0f} s); this invocation {meta['wall_seconds']:.0f} s with {args['workers']} "
            "worker(s).",
        ]
    elif "wall_seconds" in meta:
        lines += [
            "",
            f"Warm start {meta['warm_seconds']:.0f} s; {len(results)} runs in "
            f"{meta['wall_seconds'] - meta['warm_seconds']:.0f} s with {args['workers']} worker(s); "
            f"{meta['wall_seconds']:.0f} s in all.",
        ]
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--setup", choices=("diagnostic", "alfworld"), default="diagnostic")
    parser.add_argument("--out", default="runs/compare")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--iterations", type=int, default=None, help="diagnostic 100, alfworld 30")
    parser.add_argument("--task-pool", type=int, default=16, help="diagnostic: training tasks")
    parser.add_argument("--lr", type=float, default=0.05, help="diagnostic: learning rate")
    parser.add_argument("--eval-every", type=int, default=None, help="iterations (diagnostic 5, alfworld 10)")
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
    parser.add_argument("--eval-games", type=int, default=64, help="alfworld: generated held-out games")
    parser.add_argument("--eval-episodes", type=int, default=2, help="alfworld: sampled episodes per held-out game")
    parser.add_argument("--sft-steps", type=int, default=1000, help="alfworld: warm-start SFT steps")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--smoke", action="store_true", help="2 seeds, a few iterations, one sweep point (CI)")
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="alfworld: rewrite summary.md and curves.png from --out/results.json",
    )
    args = parser.parse_args()
    if args.report_only:
        with open(os.path.join(args.out, "results.json")) as f:
            alfworld_report(args.out, json.load(f))
        return
    if args.iterations is None:
        args.iterations = 100 if args.setup == "diagnostic" else 30
    if args.eval_every is None:
        args.eval_every = 5 if args.setup == "diagnostic" else 10
    if args.setup == "diagnostic":
        args.sweep_lambda0 = [0.3, 0.5, 0.7] if args.sweep_lambda0 is None else args.sweep_lambda0
        args.sweep_eta = [0.0, 0.25, 0.5, 1.0] if args.sweep_eta is None else args.sweep_eta
    elif args.sweep_lambda0 is None and args.sweep_eta is None:
        args.sweep_lambda0, args.sweep_eta = [], []  # the sweep is opt-in on ALFWorld (5 runs per point)
    else:  # a grid on one axis: the other at METHOD.md's default
        args.sweep_lambda0 = [0.5] if args.sweep_lambda0 is None else args.sweep_lambda0
        args.sweep_eta = [0.25] if args.sweep_eta is None else args.sweep_eta
    if args.smoke:
        args.seeds, args.iterations, args.eval_every = 2, 4, 2
        if args.setup == "diagnostic":
            args.sweep_lambda0, args.sweep_eta = [0.5], [0.5]
        if args.setup == "alfworld":
            args.iterations, args.eval_every, args.eval_episodes = 2, 1, 1
            args.train_games, args.eval_games, args.sft_steps = 6, 3, 2
    os.makedirs(args.out, exist_ok=True)
    if args.setup == "alfworld":
        alfworld_study(args)
        return

    jobs = _jobs(args)
    start = time.perf_counter()
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        results = list(pool.map(_run, jobs))
    wall = time.perf_counter() - start

    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump({"args": vars(args), "env_kwargs": DIAGNOSTIC_ENV, "results": results}, f)
    header = ["| run | seeds | final success | area under curve |", "|---|---|---|---|"]
    main_rows, main_stats = _table(results, "main")
    sweep_rows, _ = _table(results, "sweep")
    episodes = args.iterations * 8 * 8
    title = (
        f"CriticalChain (h={DIAGNOSTIC_ENV['horizon']}, {DIAGNOSTIC_ENV['num_branches']} forks), {args.seeds} seeds"
    )
    _plot(main_stats, os.path.join(args.out, "curves.png"), title)
    lines = [
        f"# Credit-assignment study: {title}",
        "",
        f"Tabular softmax policy, {args.iterations} iterations x 8 tasks x 8 rollouts = {episodes} episodes per run, "
        f"lr {args.lr}, task pool {args.task_pool}. Mean ± 95% t-interval over seeds; area under the curve is the "
        "mean greedy success over the evaluation points.",
        "",
        *header,
        *main_rows,
        "",
        *PAIRED_HEADER,
        *_paired_rows(results),
        "",
        "GACA sweep:",
        "",
        *header,
        *sweep_rows,
        "",
        f"{len(jobs)} runs in {wall:.0f} s with {args.workers} worker(s).",
    ]
    with open(os.path.join(args.out, "summary.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
