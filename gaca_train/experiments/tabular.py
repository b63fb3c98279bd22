"""A tabular softmax policy and a policy-gradient loop, for CPU studies of the estimators.

The policy scores each admissible action a in observation o with one parameter,
pi(a | o) proportional to exp(theta[h(o, a)]), where h is a stable hash into a table. The
negative log-likelihood of the chosen action, -log pi(a | o), is recorded at rollout and plays
the role of the LLM response's NLL in GACA. Training is on-policy REINFORCE: for every step row
k with advantage A_k, theta moves by lr * A_k * grad log pi(a_k | o_k); the advantages come
from :func:`gaca_train.estimators.advantages.compute_advantages`, so every estimator sees the same rows.

This is the small-network set-up of the credit-assignment study (:mod:`gaca_train.experiments.study`):
fast enough for many seeds on two cores, and with nothing but the advantage differing between
estimators.
"""

from __future__ import annotations

import hashlib
import random
import time
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from gaca_train.estimators.advantages import compute_advantages
from gaca_train.estimators.options import EstimatorConfig
from gaca_train.estimators.rows import StepRows
from gaca_train.oracle.exact import ExactValues
from gaca_train.oracle.metrics import branch_point_rows, run_oracle_pass
from gaca_train.oracle.monte_carlo import OracleConfig
from gaca_train.rollout.branching import Branching, play_tree
from gaca_train.rollout.episodes import Decision, EnvList, Turn, play

__all__ = ["StudyConfig", "TabularSoftmaxPolicy", "add_coverage", "evaluate_greedy", "new_coverage", "train_tabular"]


def _slot(observation: str, action: str, size: int) -> int:
    digest = hashlib.blake2b(f"{observation}\x00{action}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") % size


class TabularSoftmaxPolicy:
    """pi(a | o) proportional to exp(theta[h(o, a)]) over the admissible actions.

    Args:
        size: number of table entries (hash collisions are rare below ~size / 100 pairs).
    """

    def __init__(self, size: int = 1 << 20) -> None:
        self.size = size
        self.theta = np.zeros(size, dtype=np.float64)

    def distribution(self, observation: str, actions: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """Table slots [A] and probabilities [A] of the actions in this observation."""
        slots = np.fromiter((_slot(observation, a, self.size) for a in actions), dtype=np.int64, count=len(actions))
        logits = self.theta[slots]
        p = np.exp(logits - logits.max())
        return slots, p / p.sum()


@dataclass
class StudyConfig:
    """One training run of the tabular study.

    Attributes mirror the GiGPO reference settings where they apply (N rollouts per task,
    tasks per iteration, gamma via ``estimator_options``); ``lr`` is for plain SGD on theta.
    """

    env_id: str = "GACA-CriticalChain-v0"
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    estimator: str = "gaca"
    estimator_options: dict[str, Any] = field(default_factory=dict)
    task_pool: int = 32
    tasks_per_iteration: int = 8
    rollouts_per_task: int = 8
    iterations: int = 60
    lr: float = 0.1
    eval_every: int = 5
    seed: int = 0
    branching: str = "off"
    branch_roots: int = 4
    branch_points: int = 2
    branch_continuations: int = 2
    branch_budget: str = "env_steps"
    oracle_every: int = 0
    oracle_rows: int = 32
    oracle_continuations: int = 16
    oracle_exact: bool = False

    def oracle_spec(self) -> OracleConfig | None:
        """The run's oracle (:mod:`gaca_train.oracle`), None when ``oracle_every`` is 0."""
        if not self.oracle_every:
            return None
        return OracleConfig(self.oracle_rows, self.oracle_continuations, self.oracle_every, seed=self.seed)

    def branching_spec(self) -> Branching | None:
        """The run's :class:`~gaca_train.rollout.branching.Branching`, None for independent rollouts."""
        if self.branching == "off":
            return None
        spec = Branching(self.branching, self.branch_roots, self.branch_points, self.branch_continuations,
                         self.branch_budget)  # fmt: skip
        spec.check(self.rollouts_per_task)
        return spec


@dataclass
class _Step:
    group: int
    traj: int
    step: int
    anchor_key: str
    reward: float
    nll: float
    slots: np.ndarray
    probs: np.ndarray
    chosen: int


class _Sampler:
    """The tabular policy as an episode-loop policy: samples (or, greedy, takes the argmax)."""

    def __init__(self, policy: TabularSoftmaxPolicy, rng: np.random.Generator | None) -> None:
        self.policy, self.rng = policy, rng

    def act(self, turns: list[Turn]) -> list[Decision]:
        decisions = []
        for t in turns:
            actions = t.info["admissible_actions"]
            slots, probs = self.policy.distribution(t.observation, actions)
            chosen = int(np.argmax(probs)) if self.rng is None else int(self.rng.choice(len(actions), p=probs))
            entropy = -float(np.sum(probs * np.log(np.clip(probs, 1e-300, None))))
            decisions.append(Decision(actions[chosen], data=(slots, probs, chosen), nll=-float(np.log(probs[chosen])),
                                      entropy=entropy))  # fmt: skip
        return decisions


def _rollout(envs: list[gym.Env], task_ids: list[str], policy: TabularSoftmaxPolicy, rng, first_traj: int,
             branching: Branching | None = None, save_snapshots: bool = False):  # fmt: skip
    """Plays the groups (env i on task_ids[i // N]), independently or as branching trees.

    Returns:
        The step records, the episodes' outcomes, per step its trajectory's parent (-1 for a root), and
        what the episode loop played (transitions with their snapshots when ``save_snapshots``, histories).
    """
    n_per_task = len(envs) // len(task_ids)
    seeds = [int(rng.integers(2**31)) for _ in envs]
    slots = [task_ids[i // n_per_task] for i in range(len(envs))]
    sampler = _Sampler(policy, rng)
    if branching is None:
        played = play(EnvList(envs), slots, sampler, None, seed=seeds, save_snapshots=save_snapshots)
        parents = [-1] * len(envs)
    else:
        tree_rng = random.Random(int(rng.integers(2**31)))
        played = play_tree(EnvList(envs), slots, sampler, None, branching, seed=seeds, rng=tree_rng)
        parents = played.parents
    group_of = {t: g for g, t in enumerate(task_ids)}
    steps = [
        _Step(group_of[played.episodes[t.env_index].task_id], first_traj + t.env_index, t.step, t.info["anchor_key"],
              t.reward, t.decision.nll, *t.decision.data)
        for t in played.transitions
    ]  # fmt: skip
    parent = [-1 if parents[t.env_index] < 0 else first_traj + parents[t.env_index] for t in played.transitions]
    return steps, [e.won for e in played.episodes], parent, played


def _policy_gradient(policy: TabularSoftmaxPolicy, steps: list[_Step], advantage: np.ndarray, lr: float) -> None:
    """theta += lr * sum_k A_k grad log pi(a_k | o_k); grad is 1[a = a_k] - pi(a) on the slots."""
    slots = np.concatenate([s.slots for s in steps])
    onehot = np.concatenate([np.eye(len(s.probs))[s.chosen] for s in steps])
    probs = np.concatenate([s.probs for s in steps])
    weight = np.repeat(advantage, [len(s.probs) for s in steps])
    np.add.at(policy.theta, slots, lr * weight * (onehot - probs))


def evaluate_greedy(policy: TabularSoftmaxPolicy, env: gym.Env, task_ids: list[str]) -> float:
    """Success rate of the greedy policy, one episode per task."""
    greedy = _Sampler(policy, None)
    wins = sum(play(EnvList([env]), [t], greedy, None, seed=0).episodes[0].won for t in task_ids)
    return wins / len(task_ids)


def train_tabular(cfg: StudyConfig) -> dict[str, list[float]]:
    """Trains a tabular policy with one estimator; returns the learning curves.

    Returns:
        ``episodes`` (cumulative training episodes at each evaluation; with branching, slots played:
        each iteration counts ``tasks_per_iteration * rollouts_per_task``), ``env_steps`` (cumulative env
        steps at each evaluation), ``eval_success``
        (greedy success on the task pool), ``train_success`` (rollout success per iteration)
        and ``lambda_mean`` / ``step_signal_share`` / ``anchor_group_size_mean`` per iteration.
    """
    rng = np.random.default_rng(cfg.seed)
    options = EstimatorConfig(**cfg.estimator_options)
    pool = [f"train-{i}" for i in range(cfg.task_pool)]
    n_envs = cfg.tasks_per_iteration * cfg.rollouts_per_task
    envs = [gym.make(cfg.env_id, **cfg.env_kwargs).unwrapped for _ in range(n_envs)]
    eval_env = gym.make(cfg.env_id, **cfg.env_kwargs).unwrapped
    policy = TabularSoftmaxPolicy()
    names = ("episodes", "env_steps", "eval_success", "train_success", "lambda_mean", "step_signal_share",
             "anchor_group_size_mean")  # fmt: skip
    curves: dict[str, list[float]] = {k: [] for k in names}
    curves["episodes"].append(0)
    curves["env_steps"].append(0)
    curves["eval_success"].append(evaluate_greedy(policy, eval_env, pool))
    branching, env_steps = cfg.branching_spec(), 0
    coverage = new_coverage()
    oracle, passes = cfg.oracle_spec(), []
    oracle_envs = [] if oracle is None else [gym.make(cfg.env_id, **cfg.env_kwargs).unwrapped for _ in range(128)]
    for it in range(cfg.iterations):
        task_ids = [str(t) for t in rng.choice(pool, size=cfg.tasks_per_iteration, replace=False)]
        oracle_due = oracle is not None and it % oracle.every == 0
        steps, won, parent, played = _rollout(envs, task_ids, policy, rng, 2 * it * n_envs, branching, oracle_due)
        rows = StepRows.from_steps(
            [{"group": s.group, "traj": s.traj, "step": s.step, "anchor_key": s.anchor_key, "reward": s.reward,
              "nll": s.nll, "valid": True} for s in steps], reward_dtype=torch.float64,
        )  # fmt: skip
        out = compute_advantages(rows, cfg.estimator, config=options, parent=parent)
        if oracle_due:  # the rollout's policy, before its update
            passes.append(oracle_pass(cfg, oracle, policy, played, rows, parent, options, it, oracle_envs))
        _policy_gradient(policy, steps, out.advantage.numpy(), cfg.lr)
        env_steps += len(steps)
        curves["train_success"].append(float(np.mean(won)))
        curves["lambda_mean"].append(out.metrics.get("advantage/lambda_mean", float("nan")))
        curves["step_signal_share"].append(out.metrics["advantage/step_signal_share"])
        curves["anchor_group_size_mean"].append(out.metrics["anchor/group_size_mean"])
        add_coverage(coverage, rows, out, parent)
        if (it + 1) % cfg.eval_every == 0 or it + 1 == cfg.iterations:
            curves["episodes"].append((it + 1) * n_envs)
            curves["env_steps"].append(env_steps)
            curves["eval_success"].append(evaluate_greedy(policy, eval_env, pool))
    curves["coverage"] = coverage
    if oracle is not None:
        curves["oracle"] = passes
    return curves


def oracle_pass(
    cfg: StudyConfig,
    oracle: OracleConfig,
    policy: TabularSoftmaxPolicy,
    played: Any,
    rows: StepRows,
    parent: list[int],
    options: EstimatorConfig,
    iteration: int,
    envs: list[gym.Env],
) -> dict[str, Any]:
    """One oracle pass on an iteration's rollout: Monte-Carlo A* of stratified rows (and exact A* by DP).

    Returns:
        ``iteration``, ``metrics`` (:func:`~gaca_train.oracle.metrics.summary_metrics`), ``records`` (per row,
        with ``mc_a_star`` / ``mc_variance`` unscaled and, with ``oracle_exact``, ``exact_a_star``, ``exact_scaled``
        and whether the normal and the bounded Monte-Carlo intervals hold it), ``seconds`` and ``env_steps``.
    """
    tic = time.perf_counter()
    sampler = _Sampler(policy, np.random.default_rng([oracle.seed, iteration, 7]))
    branched = any(p >= 0 for p in parent)
    at_branch = branch_point_rows(rows, parent).tolist() if branched else None
    done = run_oracle_pass(EnvList(envs), played.transitions, played.histories, rows, sampler, options, oracle,
                           max_env_steps=None, iteration=iteration, parent=parent, prefer=at_branch)  # fmt: skip
    est, records = done.estimates, done.rows.to_records()
    for r, a, v in zip(records, est.advantage, est.variance):
        r["mc_a_star"], r["mc_variance"] = a, v
    if branched:  # the same rows estimated from the roots alone, as if the continuations had not been played
        roots = torch.tensor([p < 0 for p in parent])
        index = torch.cumsum(roots.to(torch.int64), 0) - 1
        sub = StepRows(**{f: getattr(rows, f)[roots] for f in ("group", "traj", "step", "anchor", "reward", "nll",
                                                               "valid")})  # fmt: skip
        for name in ("grpo", "gigpo", "gaca", "reweight"):
            alone = compute_advantages(sub, name, config=options).advantage.to(torch.float64)
            for r in records:
                r[f"roots_{name}"] = float(alone[index[r["row"]]]) if bool(roots[r["row"]]) else None
    if cfg.oracle_exact:
        exact = ExactValues(envs[0], lambda obs, actions: policy.distribution(obs, actions)[1], oracle.gamma)
        high = float(cfg.env_kwargs.get("reward_on_success", 10.0))
        normal, bounded = est.interval(), est.interval_bounded(0.0, high)
        for r, t, lo_hi, b in zip(records, done.targets, normal, bounded):
            q, v = exact.q_and_v(t.snapshot, t.decision.action)
            r["exact_a_star"], r["exact_scaled"] = q - v, (q - v) / r["scale"]
            r["inside_normal"] = lo_hi[0] <= q - v <= lo_hi[1]
            r["inside_bounded"] = b[0] <= q - v <= b[1]
    return {"iteration": iteration, "metrics": done.metrics, "records": records,
            "seconds": time.perf_counter() - tic, "env_steps": est.env_steps}  # fmt: skip


def new_coverage() -> dict[str, list[float]]:
    """Empty anchor-coverage sums for :func:`add_coverage`."""
    return {"rows": [], "partnered": [], "group_size": [], "branch_rows": [0.0], "branch_partnered": [0.0],
            "branch_group_size": [0.0]}  # fmt: skip


def add_coverage(coverage: dict[str, list[float]], rows: StepRows, out: Any, parent: list[int]) -> None:
    """Adds the iteration's anchor coverage: per step index, rows, rows with a partner and their anchor-group sizes.

    ``branch_*`` count the rows at branch points: a continuation's first row and its parent's row at that step.
    """
    size = torch.bincount(out.anchor_group)[out.anchor_group].to(torch.float64)
    partnered = out.has_step_signal.to(torch.float64)
    width = int(rows.step.max()) + 1
    for key, values in (("rows", torch.ones_like(size)), ("partnered", partnered), ("group_size", size)):
        per_step = torch.zeros(width, dtype=torch.float64).index_add_(0, rows.step, values).tolist()
        acc = coverage[key]
        acc.extend([0.0] * (width - len(acc)))
        for t, v in enumerate(per_step):
            acc[t] += v
    at_branch = branch_point_rows(rows, parent)
    coverage["branch_rows"][0] += float(at_branch.sum())
    coverage["branch_partnered"][0] += float(partnered[at_branch].sum())
    coverage["branch_group_size"][0] += float(size[at_branch].sum())
