"""Statistics and reports of the estimator study (:mod:`gaca_train.experiments.study`).

Every figure is a mean over seeds with the half-width of its 95% Student t-interval
(:func:`mean_ci`, t quantiles from :func:`gaca_train.evaluation.report.t975`). Runs that share a seed
share the initialisation and the task order, so :func:`paired_rows` compares estimators by
per-seed differences, which removes most of the between-seed noise.

A run's result (a dict) carries ``study`` (``"main"`` or ``"sweep"``), ``label``, its seed under
``config`` (tabular set-up) or ``fields`` (ALFWorld set-up), and ``curves["eval_success"]`` (one
success rate per evaluation point), with ``curves["episodes"]`` the training episodes at each.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np

from gaca_train.evaluation.report import t975

# Paired comparisons (a, b): a row of the per-seed difference a - b.
PAIRS = [("GiGPO", "GRPO"), ("GACA", "GRPO"), ("NLL reweight", "GRPO"), ("GACA", "GiGPO")]
# The ALFWorld study's: also each estimator with branching against itself, and GACA against GiGPO with branching.
ALFWORLD_PAIRS = [
    *PAIRS,
    *((f"{label} + branching", label) for label in ("GRPO", "GiGPO", "GACA")),
    ("GACA + branching", "GiGPO + branching"),
]
TABLE_HEADER = ["| run | seeds | final success | area under curve |", "|---|---|---|---|"]
PAIRED_HEADER = [
    "Paired by seed (same initialisation and task order); difference, mean ± 95% t-interval:",
    "",
    "| comparison | seeds | final success | seeds ahead | area under curve |",
    "|---|---|---|---|---|",
]


def mean_ci(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean over axis 0 and the half-width of its 95% t-interval (0 for a single seed).

    Args:
        values: ``(seeds, ...)`` array, one row per seed.

    Returns:
        The mean and the half-width, each of shape ``values.shape[1:]``.
    """
    n = values.shape[0]
    mean = values.mean(axis=0)
    if n < 2:
        return mean, np.zeros_like(mean)
    return mean, t975(n - 1) * values.std(axis=0, ddof=1) / math.sqrt(n)


def table(results: list[dict], study: str) -> tuple[list[str], dict[str, dict[str, np.ndarray]]]:
    """Markdown rows (final success and area under the curve per label) of one study's runs.

    Args:
        results: run results (see the module docstring).
        study: ``"main"`` or ``"sweep"``; runs of the other study are left out.

    Returns:
        The rows, in the order the labels first appear, and per label its ``success`` curves
        ``(seeds, points)`` and their ``episodes`` ``(points,)``, for :func:`plot_curves`.
    """
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


def _seed_count(args: dict) -> int:
    """How many seeds a study ran: ``args["seeds"]`` lists them (results of earlier releases hold a count)."""
    seeds = args["seeds"]
    return len(seeds) if isinstance(seeds, list) else int(seeds)


def _eval_rollouts_per_task(args: dict) -> int:
    """Sampled episodes per held-out game (``--eval-rollouts-per-task``; ``eval_episodes`` in earlier results)."""
    return args["eval_rollouts_per_task"] if "eval_rollouts_per_task" in args else args["eval_episodes"]


def _seed(result: dict) -> int:
    return int((result.get("config") or result["fields"])["seed"])


def paired_rows(results: list[dict], pairs: list[tuple[str, str]] = PAIRS) -> list[str]:
    """Markdown rows: per-seed difference (a - b) of final success and AUC for each pair of labels.

    Only seeds that both labels ran are paired; a pair with no common seed gets no row.
    """
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


def plot_curves(
    stats: dict[str, dict[str, np.ndarray]],
    path: str | os.PathLike[str],
    title: str,
    ylabel: str = "greedy success on the task pool",
    ylim: tuple[float, float] | None = (-0.02, 1.02),
    xlabel: str = "training episodes",
) -> None:
    """Writes a PNG of the mean success per estimator with its 95% band; ``ylim=None`` fits the axis to the data.

    ``stats[label]["episodes"]`` are the x values (training episodes, or env steps with ``xlabel``).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=120)
    for label, s in stats.items():
        mean, ci = mean_ci(s["success"])
        marker = "o" if len(s["episodes"]) <= 10 else None  # few evaluation points: show where they are
        ax.plot(s["episodes"], mean, label=label, marker=marker, markersize=4)
        ax.fill_between(s["episodes"], mean - ci, mean + ci, alpha=0.2)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if ylim is not None:
        ax.set_ylim(*ylim)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(loc="best")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def tabular_report(out: str | os.PathLike[str], data: dict, wall_seconds: float) -> str:
    """Writes ``summary.md`` and ``curves.png`` of the tabular set-up; returns the summary text.

    Args:
        out: the study's output folder.
        data: what the study wrote to ``results.json``: ``args`` (the study's options as a dict),
            ``env_kwargs`` (of GACA-CriticalChain-v0) and ``results``.
        wall_seconds: how long the runs took, for the last line.
    """
    out, args, env, results = Path(out), data["args"], data["env_kwargs"], data["results"]
    main_rows, main_stats = table(results, "main")
    sweep_rows, _ = table(results, "sweep")
    episodes = args["iterations"] * 8 * 8
    title = f"CriticalChain (h={env['horizon']}, {env['num_branches']} forks), {_seed_count(args)} seeds"
    plot_curves(main_stats, out / "curves.png", title)
    lines = [
        f"# Credit-assignment study: {title}",
        "",
        f"Tabular softmax policy, {args['iterations']} iterations x 8 tasks x 8 rollouts = {episodes} episodes per "
        f"run, lr {args['lr']}, task pool {args['task_pool']}. Mean ± 95% t-interval over seeds; area under the "
        "curve is the mean greedy success over the evaluation points.",
        "",
        *TABLE_HEADER,
        *main_rows,
        "",
        *PAIRED_HEADER,
        *paired_rows(results),
        "",
        "GACA sweep:",
        "",
        *TABLE_HEADER,
        *sweep_rows,
        "",
        f"{len(results)} runs in {wall_seconds:.0f} s with {args['workers']} worker(s).",
    ]
    text = "\n".join(lines) + "\n"
    (out / "summary.md").write_text(text)
    return text


def _rollout_rows(results: list[dict], labels: list[str], eval_every: int) -> list[str]:
    """Rollout success on the training games per label: first and last ``eval_every`` iterations, and all."""
    rows = []
    for label in labels:
        curves = np.array([r["curves"]["rollout_success"] for r in results if r["label"] == label])
        first, first_ci = mean_ci(curves[:, :eval_every].mean(axis=1))
        last, last_ci = mean_ci(curves[:, -eval_every:].mean(axis=1))
        whole, whole_ci = mean_ci(curves.mean(axis=1))
        rows.append(
            f"| {label} | {first:.3f} ± {first_ci:.3f} | {last:.3f} ± {last_ci:.3f} | {whole:.3f} ± {whole_ci:.3f} |"
        )
    return rows


def _sweep_lines(results: list[dict]) -> list[str]:
    """The ALFWorld report's GACA sweep section; none without sweep runs."""
    sweep_labels = list(dict.fromkeys(r["label"] for r in results if r["study"] == "sweep"))
    if not sweep_labels:
        return []
    sweep_rows, _ = table(results, "sweep")
    return [
        "",
        "GACA sweep (eta = 0 is GiGPO with omega = lambda0 / (1 - lambda0); the main table's GACA is "
        "lambda0 = 0.5, eta = 0.25):",
        "",
        *TABLE_HEADER,
        *sweep_rows,
        "",
        *PAIRED_HEADER,
        *paired_rows(results, [(label, "GiGPO") for label in sweep_labels]),
    ]


def _timing_lines(meta: dict, runs: int, workers: int) -> list[str]:
    """The ALFWorld report's last paragraph: time taken, and how much an earlier invocation had done."""
    if meta.get("reused_runs") or meta.get("warm_reused"):
        return [
            "",
            f"{runs} runs, {meta['reused_runs']} of them finished by an earlier invocation of the study; "
            f"the runs took {meta['run_seconds']:.0f} s of worker time in all (warm start "
            f"{meta['warm_seconds']:.0f} s); this invocation {meta['wall_seconds']:.0f} s with {workers} "
            "worker(s).",
        ]
    if "wall_seconds" in meta:
        return [
            "",
            f"Warm start {meta['warm_seconds']:.0f} s; {runs} runs in "
            f"{meta['wall_seconds'] - meta['warm_seconds']:.0f} s with {workers} worker(s); "
            f"{meta['wall_seconds']:.0f} s in all.",
        ]
    return []


def alfworld_report(out: str | os.PathLike[str], data: dict) -> str:
    """Writes ``summary.md`` and ``curves.png`` of the ALFWorld set-up from its ``results.json`` data.

    Args:
        out: the study's output folder.
        data: the content of ``results.json``: ``args`` (the study's options as a dict), ``results``
            and, when written by a study run, ``meta`` (timings and what was reused).

    Returns:
        The summary text.
    """
    out, args, results, meta = Path(out), data["args"], data["results"], data.get("meta", {})
    fields = results[0]["fields"]
    per_iteration = results[0]["episodes_per_iteration"]
    rows, stats = table(results, "main")
    n_eval = args["eval_games"] * _eval_rollouts_per_task(args)
    title = f"Easy ALFWorld, tiny LM from one SFT warm start, {_seed_count(args)} seeds"
    plot_curves(stats, out / "curves.png", title, ylabel=f"held-out success ({n_eval} sampled episodes)", ylim=None)
    pairs = f" on {meta['sft_pairs']} noisy expert steps" if "sft_pairs" in meta else ""
    every = args["eval_every"]
    lines = [
        f"# Credit-assignment study: {title}",
        "",
        f"{args['train_games']} train / {args['eval_games']} held-out (valid_seen) generated easy games; warm start: "
        f"{args['sft_steps']} SFT steps{pairs} (held-out success {results[0]['before']:.3f}). "
        f"Each run: {args['iterations']} iterations x {per_iteration} episodes of GACATrainer "
        f"(`configs/quickstart_cpu_alfworld.yaml`). Held-out success every {every} iterations over "
        f"{n_eval} sampled episodes (temperature {fields['temperature']}). Mean ± 95% t-interval over seeds; area "
        "under the curve is the mean held-out success over the evaluation points (the warm start included).",
        "",
        *TABLE_HEADER,
        *rows,
        "",
        *PAIRED_HEADER,
        *paired_rows(results, ALFWORLD_PAIRS),
        "",
        f"Rollout success on the training games ({per_iteration} sampled episodes per iteration), mean over "
        f"the first and the last {every} iterations and over all {args['iterations']}:",
        "",
        f"| run | first {every} | last {every} | all |",
        "|---|---|---|---|",
        *_rollout_rows(results, list(stats), every),
        *_sweep_lines(results),
        *_timing_lines(meta, len(results), args["workers"]),
    ]
    text = "\n".join(lines) + "\n"
    (out / "summary.md").write_text(text)
    return text


def coverage_rows(results: list[dict], branch_points: bool = True) -> list[str]:
    """Markdown rows: per label, the share of rows with an anchor partner and the mean anchor-group size,
    by step index (first steps, then in bands) and at branch points, summed over seeds and iterations."""
    by_label: dict[str, list[dict]] = {}
    for r in results:
        by_label.setdefault(r["label"], []).append(r["curves"]["coverage"])
    bands = [(0, 0), (1, 1), (2, 3), (4, 7), (8, 15), (16, 31), (32, 10**9)]
    head = " | ".join(f"steps {a}" if a == b else (f"steps {a}+" if b > 10**8 else f"steps {a}-{b}") for a, b in bands)
    tail = " branch points |" if branch_points else ""
    rows = [f"| run | {head} |{tail}", "|---" * (len(bands) + 1 + branch_points) + "|"]
    for label, covs in by_label.items():
        cells = []
        for a, b in bands:
            n = sum(sum(c["rows"][a : b + 1]) for c in covs)
            p = sum(sum(c["partnered"][a : b + 1]) for c in covs)
            size = sum(sum(c["group_size"][a : b + 1]) for c in covs)
            cells.append(f"{p / n:.2f} / {size / n:.1f}" if n else "-")
        n = sum(c["branch_rows"][0] for c in covs)
        branch = (f"{sum(c['branch_partnered'][0] for c in covs) / n:.2f} / "
                  f"{sum(c['branch_group_size'][0] for c in covs) / n:.1f}") if n else "-"  # fmt: skip
        rows.append(f"| {label} | {' | '.join(cells)} |" + (f" {branch} |" if branch_points else ""))
    return rows


def _steps_to_match(results: list[dict], target: str, runs: list[str]) -> list[str]:
    """Markdown rows: env steps a run needs to reach ``target``'s final success (same seed), a share of target's."""
    by = {(r["label"], _seed(r)): r["curves"] for r in results}
    rows = []
    for label in runs:
        ratios, reached = [], 0
        seeds = sorted(s for (lab, s) in by if lab == label and (target, s) in by)
        for s in seeds:
            goal, total = by[target, s]["eval_success"][-1], by[target, s]["env_steps"][-1]
            hit = [e for e, v in zip(by[label, s]["env_steps"], by[label, s]["eval_success"]) if v >= goal]
            if hit:
                reached += 1
                ratios.append(hit[0] / total)
        share = f"{np.median(ratios):.2f}" if ratios else "-"
        rows.append(f"| {label} | {reached}/{len(seeds)} | {share} |")
    return rows


def branching_report(out: str | os.PathLike[str], data: dict, wall_seconds: float) -> str:
    """Writes ``summary.md`` and ``curves.png`` (success vs env steps) of the branching study; returns the summary.

    Args:
        out: the study's output folder.
        data: ``args``, ``env_kwargs`` and ``results`` as :func:`tabular_report` takes them; each result's
            curves carry ``env_steps`` and ``coverage`` (see :func:`gaca_train.experiments.tabular.train_tabular`).
        wall_seconds: how long the runs took.
    """
    out, args, env, results = Path(out), data["args"], data["env_kwargs"], data["results"]
    lines = [
        "# Branching rollouts vs independent rollouts (tabular softmax policy, GACA-CriticalChain-v0)",
        "",
        f"CriticalChain {env}; {_seed_count(args)} seeds x {args['iterations']} iterations x 8 tasks x 8 slots, "
        f"lr {args['lr']}; branching: {args['branch_roots']} roots, {args['branch_points']} branch points per group, "
        f"env-step budget; criterion {args['branching'][0]} (ablation: {', '.join(args['branching'][1:]) or 'none'}).",
        "",
        "| run | seeds | final success | area under curve | env steps per run | run seconds |",
        "|---|---|---|---|---|---|",
    ]
    by_label: dict[str, list[dict]] = {}
    for r in results:
        by_label.setdefault(r["label"], []).append(r)
    stats = {}
    for label, runs in by_label.items():
        success = np.array([r["curves"]["eval_success"] for r in runs])
        (fm, fci), (am, aci) = mean_ci(success[:, -1]), mean_ci(success.mean(axis=1))
        steps = np.array([r["curves"]["env_steps"][-1] for r in runs], dtype=float)
        seconds = np.array([r["seconds"] for r in runs])
        lines.append(f"| {label} | {len(runs)} | {fm:.3f} ± {fci:.3f} | {am:.3f} ± {aci:.3f} | {steps.mean():,.0f} "
                     f"| {seconds.mean():.1f} |")  # fmt: skip
        stats[label] = {"success": success, "episodes": np.mean([r["curves"]["env_steps"] for r in runs], axis=0)}
    pairs = [(f"{lab} + branching", lab) for lab in ("GRPO", "GiGPO", "GACA")]
    pairs += [("GACA + branching", "GiGPO"), ("GACA + branching", "GiGPO + branching")]
    ablation = [r["label"] for r in results if r["study"] == "ablation"]
    pairs += [(lab, lab.split(" (")[0]) for lab in dict.fromkeys(ablation)]
    lines += ["", *PAIRED_HEADER, *paired_rows(results, list(dict.fromkeys(pairs))), ""]
    lines += ["Env steps to reach independent GiGPO's final success (per seed; median share of GiGPO's env steps):",
              "", "| run | seeds that reach it | env steps / GiGPO's |", "|---|---|---|"]  # fmt: skip
    lines += _steps_to_match(results, "GiGPO", list(by_label))  # GiGPO itself: where it first reached its final
    lines += ["", "Anchor coverage (share of rows with an anchor partner / mean anchor-group size of the rows):", ""]
    lines += coverage_rows(results)
    lines += ["", f"Wall time {wall_seconds:.0f} s for {len(results)} runs."]
    plot_curves(stats, out / "curves.png", "Branching vs independent (CriticalChain)", xlabel="env steps")
    text = "\n".join(lines) + "\n"
    (out / "summary.md").write_text(text)
    return text
