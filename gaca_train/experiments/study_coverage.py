"""Anchor coverage of independent rollouts on generated ALFWorld rooms (``compare_estimators.py --setup coverage``).

How often does a step of a group stand in a state a sibling rollout also visits? Per room
difficulty and horizon (``easy`` rooms with the quickstart's 10 steps, ``real``-statistics rooms with
the paper's 50), ``--coverage-games`` generated games are each played by ``rollouts_per_task`` = 8
independent rollouts of a scripted policy: at each step the expert's action with probability
``p_expert``, else a uniformly random admissible one (``p_expert`` 0: a random agent; the trained
LLM lies between). The share of rows with an anchor partner and the mean anchor-group size are
reported by step index (:func:`gaca_train.experiments.study_report.coverage_rows`).

Each setting is also played as branching rollouts (:mod:`gaca_train.rollout.branching`): half the slots are roots,
2 branch points per group chosen at random (``uniform``: a scripted policy has no NLL), continuations
restored from env snapshots within the independent setting's env steps. Their rows add a column: the
coverage at branch points (a continuation's first row and its parent's row at that step).
"""

from __future__ import annotations

import json
import random
import tempfile
from pathlib import Path
from typing import Any

from gaca_train.estimators.advantages import compute_advantages
from gaca_train.estimators.rows import StepRows
from gaca_train.rollout.branching import Branching, play_tree
from gaca_train.rollout.episodes import Decision, EnvList, Turn, play

SETTINGS = (("easy", 10), ("real", 50))  # (room difficulty, horizon)
P_EXPERT = (0.0, 0.5)


class _NoisyExpert:
    """The expert's action with probability ``p``, else a random admissible action."""

    def __init__(self, p: float, rng: random.Random) -> None:
        self.p, self.rng = p, rng

    def act(self, turns: list[Turn]) -> list[Decision]:  # noqa: D102
        expert = [self.rng.random() < self.p for _ in turns]
        return [
            Decision(t.info["expert_action"] if e else self.rng.choice(t.info["admissible_actions"]))
            for t, e in zip(turns, expert, strict=True)
        ]


def coverage_results(games: int, rollouts: int, seed: int) -> list[dict[str, Any]]:
    """One result per (difficulty, horizon, p_expert): its label and summed coverage (see the module docstring)."""
    import gymnasium as gym

    import gaca_envs  # noqa: F401  (registers the ids)
    from gaca_envs.alfworld.generate import generate
    from gaca_train.experiments.tabular import add_coverage, new_coverage

    results = []
    for difficulty, horizon in SETTINGS:
        with tempfile.TemporaryDirectory() as tmp:
            generate(tmp, games, seed=seed, split="train", difficulty=difficulty)
            files = sorted(str(f) for f in Path(tmp, "json_2.1.1", "train").glob("*/*/game.tw-pddl"))
            kwargs = {"game_files": files, "expert": True, "max_env_steps": horizon}
            envs = EnvList([gym.make("GACA-ALFWorld-v0", **kwargs) for _ in range(rollouts)])
            task_ids = list(envs.envs[0].unwrapped.task_ids)
            for p in P_EXPERT:
                for branching in (None, Branching("uniform", max(1, rollouts // 2), 2, 2, "env_steps")):
                    coverage, rng = new_coverage(), random.Random(seed)
                    for g, task in enumerate(task_ids):
                        policy, tasks = _NoisyExpert(p, rng), [task] * rollouts
                        if branching is None:
                            played, parents = play(envs, tasks, policy, horizon, seed=seed + g), [-1] * rollouts
                        else:
                            played = play_tree(envs, tasks, policy, horizon, branching, seed=seed + g, rng=rng)
                            parents = played.parents
                        rows = StepRows.from_steps(
                            [{"group": 0, "traj": t.env_index, "step": t.step, "anchor_key": t.info["anchor_key"],
                              "reward": t.reward, "nll": 1.0, "valid": True} for t in played.transitions]
                        )  # fmt: skip
                        parent = [parents[t.env_index] for t in played.transitions]
                        add_coverage(coverage, rows, compute_advantages(rows, "gigpo", parent=parent), parent)
                    label = f"{difficulty} rooms, {horizon} steps, p_expert {p}" + (", branching" if branching else "")
                    results.append({"label": label, "curves": {"coverage": coverage}, "games": len(task_ids)})
    return results


def coverage_report(out: str, results: list[dict[str, Any]], args: Any) -> str:
    """Writes ``summary.md`` with the coverage table; returns it."""
    from gaca_train.experiments.study_report import coverage_rows

    lines = [
        "# Anchor coverage of independent and branching rollouts on generated ALFWorld rooms",
        "",
        f"{results[0]['games']} games per setting x {args.coverage_rollouts} rollouts; expert action with "
        "probability p_expert, else a random admissible one; `branching`: half the slots roots, 2 random branch "
        "points per group, continuations within the independent env steps. Share of rows with an anchor partner / "
        "mean anchor-group size of the rows, by step index and at branch points:",
        "",
        *coverage_rows(results),
    ]
    text = "\n".join(lines) + "\n"
    Path(out, "summary.md").write_text(text)
    Path(out, "results.json").write_text(json.dumps(results))
    return text
