"""Reports of the oracle studies (:mod:`gaca_train.experiments.oracle_study`): tables in summary.md, one PNG each.

Conventions: a figure is the mean over seeds with its 95% t-interval (``mean ± half-width``); the rows of
every oracle pass of one seed are pooled before a statistic is taken, so a seed is one sample. Risks are
on the GRPO scale (A* divided by its group's std of episode returns) and noise-corrected (docs/method.md
section 8); ``nmse`` is the scale-free error 1 - E[A A*]^2 / (E[A^2] E[A*^2]). Learning is compared at equal
env steps: the area under greedy success against env steps, up to the fewest env steps any compared run
played, divided by that budget (a mean success over the budget).
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path

import numpy as np
import torch

from gaca_train.experiments.study_report import mean_ci
from gaca_train.oracle.metrics import alignment, mixture_decomposition, quality

ESTIMATORS = ("grpo", "gigpo", "gaca", "reweight")
NAMES = {"grpo": "GRPO", "gigpo": "GiGPO", "gaca": "GACA", "reweight": "NLL reweight"}
STEP_BINS = ((0, 1), (2, 4), (5, 9), (10, 10**9))


def _fmt(mean: float, half: float, digits: int = 3) -> str:
    if not math.isfinite(mean):
        return "n/a"
    return f"{mean:+.{digits}f} ± {half:.{digits}f}"


def _ci(values: list[float]) -> tuple[float, float]:
    arr = np.array([v for v in values if math.isfinite(v)], dtype=float)
    if arr.size == 0:
        return math.nan, math.nan
    mean, half = mean_ci(arr[:, None])
    return float(mean[0]), float(half[0])


def records(result: dict) -> list[dict]:
    """Every oracle row of one run, with its pass's iteration."""
    return [{**r, "iteration": p["iteration"]} for p in result["curves"].get("oracle", []) for r in p["records"]]


def _col(rows: list[dict], key: str) -> torch.Tensor:
    return torch.tensor([float(r[key]) for r in rows], dtype=torch.float64)


def _weight(rows: list[dict]) -> torch.Tensor:
    """Each row's weight: the batch rows it stands for (pick_weight), 1 for rows recorded without one."""
    return torch.tensor([float(r.get("pick_weight", 1.0)) for r in rows], dtype=torch.float64)


def _quality(rows: list[dict], column: str) -> dict[str, float]:
    if len(rows) < 3:
        return dict.fromkeys(("risk", "nmse", "pearson", "spearman", "sign"), math.nan)
    return quality(_col(rows, column), _col(rows, "a_star"), _col(rows, "variance"), _weight(rows))


def _theory(rows: list[dict]) -> dict[str, float]:
    """The decomposition and the alignment of pooled rows (lambda0 0.5, linear: the studies' GACA)."""
    cols = {
        k: _col(rows, k)
        for k in ("episode_advantage", "step_advantage", "z", "z_group_mean", "a_star", "variance", "weight")
    }
    signal = torch.tensor([bool(r["has_step_signal"]) for r in rows])
    w = _weight(rows)
    dec = mixture_decomposition(
        cols["episode_advantage"], cols["step_advantage"], cols["weight"], cols["a_star"], cols["variance"], 0.5, w
    )
    al = alignment(
        cols["episode_advantage"],
        cols["step_advantage"],
        signal,
        cols["z"],
        cols["z_group_mean"],
        cols["a_star"],
        cols["variance"],
        0.5,
        row_weight=w,
    )
    return {**dec, **al, "predicted_risk_025": dec["risk_fixed"] - 0.5 * al["rho"] + 0.0625 * al["kappa"]}


def exact_truth(rows: list[dict]) -> list[dict]:
    """The rows with the exact A* (dynamic programming) as their A* and no noise, where the study computed it."""
    return [{**r, "a_star": r["exact_scaled"], "variance": 0.0} if "exact_scaled" in r else r for r in rows]


def by_seed(results: list[dict], **match: object) -> dict[int, list[dict]]:
    """Pooled oracle rows per seed of the runs whose fields equal ``match``."""
    out: dict[int, list[dict]] = defaultdict(list)
    for res in results:
        if all(res.get(k) == v for k, v in match.items()):
            out[res["config"]["seed"]] += records(res)
    return dict(out)


def auc_at(curves: dict, budget: float) -> float:
    """Mean greedy success over the first ``budget`` env steps (linear interpolation of the evaluations)."""
    x, y = np.asarray(curves["env_steps"], dtype=float), np.asarray(curves["eval_success"], dtype=float)
    grid = np.linspace(0.0, budget, 201)
    return float(np.trapezoid(np.interp(grid, x, y), grid) / budget)


def _quality_table(seeds: dict[int, list[dict]], columns: dict[str, str], strata=None) -> list[str]:
    lines = ["| estimator | risk | nmse | Pearson | Spearman | sign agreement |", "|---|---|---|---|---|---|"]
    for name, column in columns.items():
        per = [_quality([r for r in rows if strata is None or strata(r)], column) for rows in seeds.values()]
        cells = [_fmt(*_ci([p[k] for p in per])) for k in ("risk", "nmse", "pearson", "spearman", "sign")]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def _stratum_table(seeds: dict[int, list[dict]], strata: list[tuple[str, object]], metric: str) -> list[str]:
    lines = [
        "| stratum | rows | " + " | ".join(NAMES[e] for e in ESTIMATORS) + " |",
        "|---|---|" + "---|" * len(ESTIMATORS),
    ]
    for label, keep in strata:
        n = sum(1 for rows in seeds.values() for r in rows if keep(r))
        cells = []
        for e in ESTIMATORS:
            per = [_quality([r for r in rows if keep(r)], f"est_{e}")[metric] for rows in seeds.values()]
            cells.append(_fmt(*_ci(per), digits=2))
        lines.append(f"| {label} | {n} | " + " | ".join(cells) + " |")
    return lines


def _decile_strata(seeds: dict[int, list[dict]]) -> list[tuple[str, object]]:
    z = np.array([r["z"] for rows in seeds.values() for r in rows])
    edges = np.quantile(z, np.linspace(0, 1, 11)) if z.size else np.zeros(11)

    def keep(lo: float, hi: float, last: bool):
        return lambda r: lo <= r["z"] <= hi if last else lo <= r["z"] < hi

    return [
        (f"z decile {d + 1} [{edges[d]:+.2f}, {edges[d + 1]:+.2f}]", keep(edges[d], edges[d + 1], d == 9))
        for d in range(10)
    ]


def _step_strata() -> list[tuple[str, object]]:
    return [
        (f"steps {lo}-{hi}" if hi < 10**9 else f"steps {lo}+", lambda r, lo=lo, hi=hi: lo <= r["step"] <= hi)
        for lo, hi in STEP_BINS
    ]


def _theory_lines(seeds: dict[int, list[dict]]) -> list[str]:
    per = [_theory(rows) for rows in seeds.values() if len(rows) >= 3]
    keys = [
        ("rho", "alignment rho = E[z D (A* - A_0)]"),
        ("slope", "dR/deta at 0 = -2 rho"),
        ("kappa", "kappa = E[z^2 D^2]"),
        ("eta_star", "best eta = rho / kappa"),
        ("gain", "best gain of mixing, rho^2 / kappa"),
        ("gain_reweight", "best gain of reweighting A_0 (section 8.3)"),
        ("mixing_adds", "mixing adds beyond reweighting"),
        ("risk_fixed", "R_0 (GiGPO, omega 1)"),
        ("predicted_risk_025", "R(0.25) by the quadratic"),
        ("risk_gaca", "R of GACA (eta 0.25, exact)"),
    ]
    lines = ["| quantity | value |", "|---|---|"]
    lines += [f"| {label} | {_fmt(*_ci([p[k] for p in per]), digits=4)} |" for k, label in keys]
    return lines


def _plot(path: Path, draw) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    draw(ax)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def estimators_report(out: str, data: dict) -> str:
    """Study (a): Monte-Carlo A* against exact A*, each estimator's error, and whether lower error learns faster."""
    results = data["results"]
    seeds = by_seed(results)
    exact = [r for res in results for r in records(res) if "exact_a_star" in r]
    lines = [
        f"# Oracle study (a): the estimators against true advantages on CriticalChain ({len(results)} runs, "
        f"{data['wall_seconds']:.0f} s)",
        "",
    ]
    if exact:
        noisy = [r for r in exact if r["mc_variance"] > 0]
        z = np.array([(r["mc_a_star"] - r["exact_a_star"]) / math.sqrt(r["mc_variance"]) for r in noisy])
        lines += [
            "## Monte-Carlo A* against exact A* (dynamic programming), the GACA runs' rows",
            "",
            f"- rows: {len(exact)}; inside the bounded 95% interval: "
            f"**{np.mean([r['inside_bounded'] for r in exact]):.3f}**;"
            f" inside the normal interval: {np.mean([r['inside_normal'] for r in exact]):.3f}",
            f"- rows whose continuations varied ({len(noisy)}): normal interval {np.mean(np.abs(z) <= 1.96):.3f}, "
            f"standardised error mean {z.mean():+.3f}, std {z.std(ddof=1):.3f}",
            f"- mean |A*hat - A*| {np.mean([abs(r['mc_a_star'] - r['exact_a_star']) for r in exact]):.3f} "
            "(return units)",
            "",
        ]
    columns = {NAMES[e]: f"est_{e}" for e in ESTIMATORS}
    lines += ["## Every estimator on the same rows (all runs' oracle rows, pooled per seed)", ""]
    lines += _quality_table(seeds, columns) + [""]
    silent = {e: np.mean([r[f"est_{e}"] == 0 for rows in seeds.values() for r in rows]) for e in ESTIMATORS}
    clear = np.mean([abs(r["a_star"]) > 1.96 * math.sqrt(r["variance"]) for rows in seeds.values() for r in rows])
    lines += ["Rows where the estimator is exactly 0 (no signal in its group): "
              + ", ".join(f"{NAMES[e]} {silent[e]:.2f}" for e in ESTIMATORS)
              + f". Rows whose A*hat is clear of 0 (|A*hat| > 1.96 se): {clear:.3f}.", ""]  # fmt: skip
    lines += ["### Scale-free error (nmse) by NLL decile (z within the group)", ""]
    lines += _stratum_table(seeds, _decile_strata(seeds), "nmse") + [""]
    lines += ["### Scale-free error (nmse) by step", ""]
    lines += _stratum_table(seeds, _step_strata(), "nmse") + [""]
    lines += ["## The paper's quantities on these rows (GACA lambda0 0.5, eta 0.25)", ""]
    lines += _theory_lines(seeds) + [""]
    # Over training, each estimator in its own runs; then: does lower error learn faster?
    iterations = sorted({r["iteration"] for res in results for r in records(res)})
    own: dict[str, np.ndarray] = {}
    lines += ["## Oracle error over training (each estimator in its own runs: risk; Pearson)", "",
              "| iteration | " + " | ".join(NAMES.values()) + " |", "|---|" + "---|" * 4]  # fmt: skip
    pearson: dict[str, np.ndarray] = {}
    for e in ESTIMATORS:
        runs = [res for res in results if res["label"] == NAMES[e]]
        per = [[_quality([r for r in records(res) if r["iteration"] == it], f"est_{e}") for it in iterations]
               for res in runs]  # fmt: skip
        own[e] = np.array([[q["risk"] for q in run] for run in per])
        pearson[e] = np.array([[q["pearson"] for q in run] for run in per])
    for j, it in enumerate(iterations):
        cells = [f"{_fmt(*_ci(list(own[e][:, j])), digits=2)}; {_fmt(*_ci(list(pearson[e][:, j])), digits=2)}"
                 for e in ESTIMATORS]  # fmt: skip
        lines.append(f"| {it} | " + " | ".join(cells) + " |")
    budget = min(res["curves"]["env_steps"][-1] for res in results)
    lines += ["", "## Lower oracle error, faster learning? (per seed, each estimator in its own run)", "",
              f"Error: Pearson correlation with A*hat over the run's oracle rows (higher is better; nmse beside it). "
              f"Learning: mean greedy success over the first {budget:,} env steps.", "",
              "| seed | " + " | ".join(f"{NAMES[e]} Pearson / nmse / success" for e in ESTIMATORS)
              + " | best correlated | fastest |", "|---|" + "---|" * 6]  # fmt: skip
    agree = 0
    seed_list = sorted({res["config"]["seed"] for res in results})
    for seed in seed_list:
        corr, err, auc = {}, {}, {}
        for e in ESTIMATORS:
            res = next(r for r in results if r["label"] == NAMES[e] and r["config"]["seed"] == seed)
            q = _quality(records(res), f"est_{e}")
            corr[e], err[e], auc[e] = q["pearson"], q["nmse"], auc_at(res["curves"], budget)
        known = {e: v for e, v in corr.items() if math.isfinite(v)}
        best, fast = (max(known, key=known.get) if known else None), max(auc, key=auc.get)
        agree += best == fast
        cells = " | ".join(f"{corr[e]:+.3f} / {err[e]:.3f} / {auc[e]:.3f}" for e in ESTIMATORS)
        lines.append(f"| {seed} | {cells} | {NAMES.get(best, 'n/a')} | {NAMES[fast]} |")
    lines += ["", f"The best-correlated estimator was the fastest learner in {agree} of {len(seed_list)} seeds.", ""]

    def draw(ax) -> None:
        for e in ESTIMATORS:
            mean, half = mean_ci(own[e])
            ax.errorbar(iterations, mean, yerr=half, label=NAMES[e], capsize=3, marker="o")
        ax.set_xlabel("iteration")
        ax.set_ylabel("oracle risk, GRPO scale (lower is better)")
        ax.set_title("CriticalChain: estimator error against oracle A*")
        ax.legend()

    _plot(Path(out) / "oracle_estimators.png", draw)
    return "\n".join(lines)


def alignment_report(out: str, data: dict) -> str:
    """Study (b): per setting the measured alignment and GACA - GiGPO learning at equal env steps."""
    results = data["results"]
    lines = [
        f"# Oracle study (b): alignment dialled ({len(results)} runs, {data['wall_seconds']:.0f} s)",
        "",
        "| setting | rho (x1e3) | dR/deta at 0 (x1e3) | R_GACA - R_GiGPO | GACA - GiGPO, mean success "
        "(equal env steps) | seeds GACA ahead | sign follows |",
        "|---|---|---|---|---|---|---|",
    ]
    bars = []
    for setting in sorted({res["setting"] for res in results}):
        seeds = by_seed(results, setting=setting)
        theory = [_theory(exact_truth(rows)) for rows in seeds.values()]
        rho = _ci([1e3 * t["rho"] for t in theory])
        slope = _ci([1e3 * t["slope"] for t in theory])
        gap = _ci([t["risk_gaca"] - t["risk_fixed"] for t in theory])
        mine = [res for res in results if res["setting"] == setting]
        budget = min(res["curves"]["env_steps"][-1] for res in mine)
        diffs = []
        for seed in sorted(seeds):
            auc = {res["label"]: auc_at(res["curves"], budget) for res in mine if res["config"]["seed"] == seed}
            diffs.append(auc["GACA"] - auc["GiGPO"])
        learn = _ci(diffs)
        follows = "yes" if np.sign(learn[0]) == np.sign(rho[0]) else "no"
        ahead = sum(d > 0 for d in diffs)
        lines.append(
            f"| {setting} | {_fmt(*rho)} | {_fmt(*slope)} | {_fmt(*gap, digits=4)} | {_fmt(*learn)} | "
            f"{ahead}/{len(diffs)} | {follows} |"
        )
        bars.append((setting, rho, learn))
    lines += [
        "",
        "rho > 0 predicts that a small eta > 0 lowers the risk below fixed mixing (GiGPO); a learning "
        "difference whose interval excludes 0 is marked by its interval alone.",
        "",
    ]

    def draw(ax) -> None:
        x = np.arange(len(bars))
        ax.bar(x - 0.2, [b[1][0] for b in bars], 0.4, yerr=[b[1][1] for b in bars], label="rho (x1e3)", capsize=3)
        ax2 = ax.twinx()
        ax2.bar(
            x + 0.2,
            [b[2][0] for b in bars],
            0.4,
            yerr=[b[2][1] for b in bars],
            color="tab:orange",
            label="GACA - GiGPO success",
            capsize=3,
        )
        ax.set_xticks(x, [b[0] for b in bars])
        ax.axhline(0, color="grey", lw=0.5)
        ax.set_ylabel("alignment rho (x1e3)")
        ax2.set_ylabel("GACA - GiGPO, mean success")
        ax.set_title("CriticalChain: alignment against the learning difference")
        ax.legend(loc="upper left")
        ax2.legend(loc="upper right")

    _plot(Path(out) / "oracle_alignment.png", draw)
    return "\n".join(lines)


def branching_report(out: str, data: dict) -> str:
    """Study (d): branching against independent rollouts at equal env steps and tuned learning rates."""
    results = data["results"]
    budget = min(res["curves"]["env_steps"][-1] for res in results)
    labels = sorted({res["label"] for res in results})
    seeds = sorted({res["config"]["seed"] for res in results})
    auc: dict[tuple[str, float], dict[int, float]] = defaultdict(dict)
    steps: dict[str, list[int]] = defaultdict(list)
    for res in results:
        auc[(res["label"], res["lr_scale"])][res["config"]["seed"]] = auc_at(res["curves"], budget)
        steps[res["label"]].append(res["curves"]["env_steps"][-1])
    lines = [
        f"# Oracle study (d): branching re-judged ({len(results)} runs, {data['wall_seconds']:.0f} s)",
        "",
        f"Mean greedy success over the first {budget:,} env steps (every run played at least that many).",
        "",
        "| arm | env steps played | lr x0.77 | lr x1 | lr x1.3 | best |",
        "|---|---|---|---|---|---|",
    ]
    best: dict[str, float] = {}
    for label in labels:
        cells = {s: _ci(list(auc[(label, s)].values())) for s in (0.77, 1.0, 1.3)}
        best[label] = max(cells, key=lambda s: cells[s][0])
        lines.append(
            f"| {label} | {np.mean(steps[label]):,.0f} | "
            + " | ".join(_fmt(*cells[s]) for s in cells)
            + f" | x{best[label]} |"
        )
    lines += ["", "| comparison (paired by seed) | difference | seeds ahead |", "|---|---|---|"]
    for base in ("GiGPO", "GACA"):
        branch = f"{base} + branching"
        if branch not in best:
            continue
        for b_scale, i_scale, what in (
            (best[branch], best[base], "each at its best lr"),
            (1.0, 1.3, "branching x1 vs independent x1.3"),
            (1.0, 1.0, "both x1"),
        ):
            d = [auc[(branch, b_scale)][s] - auc[(base, i_scale)][s] for s in seeds]
            lines.append(f"| {branch} - {base}, {what} | {_fmt(*_ci(d))} | {sum(x > 0 for x in d)}/{len(d)} |")
    # The oracle at branch points: the same rows estimated with the continuations (tree) and from the roots alone.
    branch_seeds = {
        s: [r for r in rows if r["at_branch"] and r.get("roots_gaca") is not None]
        for s, rows in by_seed([r for r in results if "branching" in r["label"]]).items()
    }
    n = sum(len(v) for v in branch_seeds.values())
    lines += [
        "",
        f"## Oracle error at branch points ({n} rows), with the continuations' evidence and without",
        "",
        "| estimator | nmse with tree | nmse roots only | paired difference | Pearson with tree | Pearson roots only "
        "| paired difference |",
        "|---|---|---|---|---|---|---|",
    ]
    for e in ("grpo", "gigpo", "gaca"):
        tree = [_quality(rows, f"est_{e}") for rows in branch_seeds.values()]
        alone = [_quality(rows, f"roots_{e}") for rows in branch_seeds.values()]
        cells = []
        for k in ("nmse", "pearson"):
            with_tree, roots_only = [q[k] for q in tree], [q[k] for q in alone]
            diff = [a - b for a, b in zip(with_tree, roots_only, strict=True)]
            cells += [_fmt(*_ci(with_tree)), _fmt(*_ci(roots_only)), _fmt(*_ci(diff))]
        lines.append(f"| {NAMES[e]} | " + " | ".join(cells) + " |")

    def draw(ax) -> None:
        x = np.arange(len(labels))
        for k, s in enumerate((0.77, 1.0, 1.3)):
            cells = [_ci(list(auc[(label, s)].values())) for label in labels]
            ax.bar(
                x + (k - 1) * 0.27,
                [c[0] for c in cells],
                0.27,
                yerr=[c[1] for c in cells],
                label=f"lr x{s}",
                capsize=3,
            )
        ax.set_xticks(x, labels, fontsize=8)
        ax.set_ylabel(f"mean success over {budget:,} env steps")
        ax.set_title("CriticalChain: branching vs independent, equal env steps")
        ax.legend()

    _plot(Path(out) / "oracle_branching.png", draw)
    return "\n".join(lines)


def alfworld_report(out: str, data: dict) -> str:
    """Study (c): the ALFWorld quickstart's estimators against the oracle early, in the middle and late in training.

    ``data`` holds the quickstart's ``log_history`` (its ``oracle/*`` passes during training) and the
    ``oracle.json`` of ``scripts/oracle.py`` on the warm start (``early``) and the trained model (``late``).
    """
    stages = [("early: warm start (iteration 0)", data["early"]["metrics"], data["early"])]
    # A pass runs in the iteration before the one its log names (log steps count finished iterations).
    stages += [(f"iteration {p['step'] - 1} (in training)", p, None) for p in data["passes"]]
    stages.append(("late: after RL (iteration 60)", data["late"]["metrics"], data["late"]))
    lines = ["# Oracle study (c): the ALFWorld quickstart against the oracle", "",
             "| stage | rows x continuations | success | "
             + " | ".join(f"{NAMES[e]} Pearson / nmse" for e in ESTIMATORS)
             + " | rho | R_GACA - R_GiGPO | gain of mixing / of reweighting |",
             "|---|---|---|" + "---|" * len(ESTIMATORS) + "---|---|---|"]  # fmt: skip
    for label, m, full in stages:
        size = f"{int(m['oracle/rows'])} x {full['continuations'] if full else data['continuations']}"
        success = f"{full['success_rate']:.3f}" if full else f"{m.get('rollout/success_rate', math.nan):.3f}"
        cells = [f"{_num(m[f'oracle/{e}/pearson'])} / {_num(m[f'oracle/{e}/nmse'])}" for e in ESTIMATORS]
        gap = m["oracle/decomposition/risk_gaca"] - m["oracle/decomposition/risk_fixed"]
        gains = f"{_num(m['oracle/alignment/gain'])} / {_num(m['oracle/alignment/gain_reweight'])}"
        lines.append(f"| {label} | {size} | {success} | " + " | ".join(cells)
                     + f" | {_num(m['oracle/alignment/rho'])} | {gap:+.4f} | {gains} |")  # fmt: skip

    def draw(ax) -> None:
        x = np.arange(len(stages))
        for k, e in enumerate(ESTIMATORS):
            ax.bar(x + (k - 1.5) * 0.2, [_value(m[f"oracle/{e}/pearson"]) for _, m, _ in stages], 0.2, label=NAMES[e])
        ax.set_xticks(x, [label.split(" (")[0].split(":")[0] for label, _, _ in stages], fontsize=8)
        ax.axhline(0, color="grey", lw=0.5)
        ax.set_ylabel("Pearson correlation with oracle A*")
        ax.set_title("ALFWorld quickstart: estimators against the oracle over training")
        ax.legend(fontsize=8)

    _plot(Path(out) / "oracle_alfworld.png", draw)
    return "\n".join(lines)


def _value(v: object) -> float:
    return float("nan") if v is None else float(v)


def _num(v: object) -> str:
    x = _value(v)
    return "n/a" if not math.isfinite(x) else f"{x:+.3f}"


REPORTS = {
    "estimators": estimators_report,
    "alignment": alignment_report,
    "branching": branching_report,
    "alfworld": alfworld_report,
}
