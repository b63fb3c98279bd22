"""Oracle studies on CriticalChain: the estimators against true advantages, the paper's theory as numbers.

Every run is a tabular run (:func:`gaca_train.experiments.tabular.train_tabular`) whose oracle measures, every
``--oracle-every`` iterations, 32 stratified rows of the iteration's batch: Monte-Carlo A* from env
snapshots (16 continuations each for Q and V), every estimator on the same rows, the risk
decomposition and the alignment (docs/method.md section 8). Three studies:

* ``estimators`` (study a): GRPO, GiGPO, GACA and NLL reweighting on the diagnostic CriticalChain, 5
  seeds; the GACA runs also compute exact A* by dynamic programming, which checks the Monte-Carlo
  oracle itself (the share of rows whose interval holds the exact value).
* ``alignment`` (study b): three CriticalChain settings where the decisive fork is the high-entropy
  step (``forks-uncertain``), neither (``neutral``), or the routine steps are (``routine-uncertain``);
  GiGPO and GACA, 5 seeds paired; the alignment rho, measured against exact A* (dynamic programming),
  against the learning difference at equal env steps.
* ``branching`` (study d): GiGPO and GACA, independent and branching rollouts (NLL branch points,
  env-step budget), each at learning rates x0.77, x1 and x1.3, 5 seeds; arms compared at equal env steps
  at their best learning rate; the oracle at branch points with and without the continuations' evidence.
* ``alfworld`` (study c): reports the ALFWorld quickstart against the oracle, from three runs it names if
  missing: the quickstart with ``--oracle-every 20`` (passes at iterations 0, 20 and 40) and
  ``scripts/oracle.py`` on its warm start and on its trained model.

Usage:
    python scripts/oracle_study.py --study estimators --out runs/oracle-estimators
    python scripts/oracle_study.py --study alignment --out runs/oracle-alignment
    python scripts/oracle_study.py --study branching --out runs/oracle-branching
    python scripts/oracle_study.py --study alfworld --out runs/oracle-alfworld   # reports the runs it names
    python scripts/oracle_study.py --study estimators --out runs/smoke --smoke   # seconds
    python scripts/oracle_study.py --study estimators --out runs/oracle-estimators --report-only
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import time
from concurrent.futures import ProcessPoolExecutor

from gaca_train.experiments.cli_utils import parse_seeds
from gaca_train.experiments.oracle_report import REPORTS
from gaca_train.experiments.study import run_tabular_job, tabular_base

STUDIES = ("estimators", "alignment", "branching", "alfworld")
# The alignment family: chains of 8 stages with one fork and one distractor at every stage (a wasted step
# risks the step cap), whose admissible actions are dialled so that the uncertain (high-NLL) steps are the
# decisive fork, neither, or the routine steps. At theta = 0 the policy is uniform, so a step's NLL is
# log(its number of actions): fork 7 vs routine 2 (six roads; one way on); 4 vs 4; 3 vs 6 (two roads; five
# equivalent ways on). The oracle is exact here (dynamic programming), so alignment carries no Monte-Carlo noise.
_CHAIN = {"horizon": 8, "num_branches": 1, "noise": 0.1, "hint": False, "num_distractors": 1}
ALIGNMENT_SETTINGS = {
    "forks-uncertain": {**_CHAIN, "branch_width": 6, "move_phrasings": 1},
    "neutral": {**_CHAIN, "branch_width": 3, "move_phrasings": 3},
    "routine-uncertain": {**_CHAIN, "branch_width": 2, "move_phrasings": 5},
}
ESTIMATOR_RUNS = {"GRPO": "grpo", "GiGPO": "gigpo", "GACA": "gaca", "NLL reweight": "reweight"}
LR_SCALES = (0.77, 1.0, 1.3)


def _base(args: argparse.Namespace) -> dict:
    """The diagnostic study's run settings (same env, pool, batch and learning rate) with the oracle's budget."""
    return {
        **tabular_base(args),
        "oracle_every": args.oracle_every,
        "oracle_rows": args.oracle_rows,
        "oracle_continuations": args.oracle_continuations,
    }


def study_jobs(args: argparse.Namespace) -> list[dict]:
    """The runs of ``args.study``, each a job for :func:`~gaca_train.experiments.study.run_tabular_job`."""
    base, jobs = _base(args), []
    for seed in args.seeds:
        if args.study == "estimators":
            for label, estimator in ESTIMATOR_RUNS.items():
                cfg = {**base, "estimator": estimator, "seed": seed, "oracle_exact": estimator == "gaca"}
                jobs.append({"study": args.study, "label": label, "config": cfg})
        elif args.study == "alignment":
            for setting, env_kwargs in ALIGNMENT_SETTINGS.items():
                for label in ("GiGPO", "GACA"):
                    cfg = {**base, "env_kwargs": env_kwargs, "estimator": ESTIMATOR_RUNS[label], "seed": seed,
                           "oracle_exact": True}  # fmt: skip
                    jobs.append({"study": args.study, "setting": setting, "label": label, "config": cfg})
        else:
            for label in ("GiGPO", "GACA"):
                for branching in ("off", "nll"):
                    for scale in LR_SCALES:
                        cfg = {
                            **base,
                            "estimator": ESTIMATOR_RUNS[label],
                            "seed": seed,
                            "branching": branching,
                            "branch_roots": 4,
                            "branch_points": 2,
                            "branch_budget": "env_steps",
                            "lr": args.lr * scale,
                            "oracle_every": args.oracle_every if scale == 1.0 else 0,
                        }
                        name = label + (" + branching" if branching != "off" else "")
                        jobs.append({"study": args.study, "label": name, "lr_scale": scale, "config": cfg})
    return jobs


def alfworld_inputs(out: str) -> dict:
    """Study (c)'s inputs in ``out``: the quickstart's ``log_history.json`` and ``oracle-{early,late}/oracle.json``.

    Raises:
        SystemExit: naming the command that makes a missing input.
    """
    made_by = {
        "log_history.json": f"python scripts/quickstart_cpu.py --out {out} --oracle-every 20 --oracle-rows 32 "
        "--oracle-continuations 4",
        "oracle-early/oracle.json": f"python scripts/oracle.py --model {out}/warm_start --config "
        f'configs/quickstart_cpu_alfworld.yaml --env-kwargs \'{{"data_path": "{out}/games"}}\' --rows 64 '
        f"--continuations 8 --out {out}/oracle-early",
        "oracle-late/oracle.json": f"python scripts/oracle.py --model {out}/after_rl --config "
        f'configs/quickstart_cpu_alfworld.yaml --env-kwargs \'{{"data_path": "{out}/games"}}\' --rows 64 '
        f"--continuations 8 --out {out}/oracle-late",
    }
    for name, command in made_by.items():
        if not os.path.exists(os.path.join(out, name)):
            raise SystemExit(f"oracle_study: {os.path.join(out, name)} is missing; make it with: {command}")
    with open(os.path.join(out, "log_history.json")) as f:
        history = json.load(f)
    data = {"passes": [h for h in history if "oracle/rows" in h], "continuations": 4}
    for stage in ("early", "late"):
        with open(os.path.join(out, f"oracle-{stage}", "oracle.json")) as f:
            data[stage] = json.load(f)
        data[stage]["continuations"] = data[stage].get("continuations", 8)
    return data


def make_parser() -> argparse.ArgumentParser:
    """The command line of ``scripts/oracle_study.py``."""
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--study", choices=STUDIES, required=True, help="which study (see the module docstring)")
    parser.add_argument("--out", required=True, help="output folder: results.json, summary.md, PNGs")
    parser.add_argument("--seeds", default="0-4", help="seeds: a range 0-4, a list 0,2,7 (default %(default)s)")
    parser.add_argument("--iterations", type=int, default=60, help="iterations per run (default %(default)s)")
    parser.add_argument("--task-pool", type=int, default=16, help="training tasks (default %(default)s)")
    parser.add_argument("--lr", type=float, default=0.05, help="learning rate (default %(default)s)")
    parser.add_argument("--eval-every", type=int, default=5, help="iterations between greedy evaluations")
    parser.add_argument("--oracle-every", type=int, default=10, help="iterations between oracle passes")
    parser.add_argument("--oracle-rows", type=int, default=32, help="rows per oracle pass")
    parser.add_argument("--oracle-continuations", type=int, default=16, help="continuations per row, Q and V")
    parser.add_argument("--workers", type=int, default=2, help="parallel runs (default %(default)s)")
    parser.add_argument("--smoke", action="store_true", help="2 seeds, 6 iterations, 8 rows (seconds; for tests)")
    parser.add_argument("--report-only", action="store_true", help="rewrite summary.md and the PNGs from results.json")
    return parser


def main(argv: list[str] | None = None) -> str:
    """Runs (or, with ``--report-only``, re-reports) one study; prints and returns its summary."""
    parser = make_parser()
    args = parser.parse_args(argv)
    try:
        args.seeds = parse_seeds(args.seeds)
    except ValueError as e:
        parser.error(str(e))
    if args.smoke:
        args.seeds, args.iterations, args.oracle_every, args.oracle_rows = args.seeds[:2], 6, 5, 8
        args.oracle_continuations, args.eval_every = 4, 3
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "results.json")
    if args.study == "alfworld":
        data = alfworld_inputs(args.out)
    elif args.report_only:
        with open(path) as f:
            data = json.load(f)
    else:
        import gaca_envs  # noqa: F401  (registers the env ids)

        jobs = study_jobs(args)
        tic = time.perf_counter()
        context = multiprocessing.get_context("spawn")  # a forked worker of a threaded torch process can deadlock
        with ProcessPoolExecutor(max_workers=args.workers, mp_context=context) as pool:
            results = list(pool.map(run_tabular_job, jobs))
        data = {"args": vars(args), "results": results, "wall_seconds": time.perf_counter() - tic}
        with open(path, "w") as f:
            json.dump(data, f)
    summary = REPORTS[args.study](args.out, data)
    with open(os.path.join(args.out, "summary.md"), "w") as f:
        f.write(summary)
    print(summary)
    return summary
