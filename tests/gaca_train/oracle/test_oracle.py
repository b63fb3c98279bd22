"""The Monte-Carlo oracle: row picks, Q / V / A* through the episode loop, exact values, the trainer's pass."""

from __future__ import annotations

import math
import random

import gymnasium as gym
import pytest
import torch

import gaca_envs  # noqa: F401  (registers the env ids)
from gaca_train.experiments.tabular import StudyConfig, TabularSoftmaxPolicy, train_tabular
from gaca_train.oracle.exact import ExactValues
from gaca_train.oracle.monte_carlo import ForcedFirst, OracleConfig, OracleTarget, estimate_advantages, pick_rows
from gaca_train.rollout.episodes import BaselinePolicy, Decision, EnvList, play
from gaca_train.rollout.vector import RolloutPool
from gaca_train.training.trainer import GACATrainer
from tests.gaca_train.tiny_setup import tiny_config, tiny_model_and_tokenizer

CHAIN = {"horizon": 4, "num_branches": 1, "branch_width": 3, "num_distractors": 1, "expert": True}


def test_picks_cover_every_nll_decile_and_step_bin_and_repeat_with_the_seed():
    rng = random.Random(0)
    nll = [rng.random() for _ in range(400)]
    step = [i % 20 for i in range(400)]
    eligible = [i % 7 != 0 for i in range(400)]
    picked = list(pick_rows(nll, step, 40, random.Random(1), eligible=eligible))
    assert len(picked) == 40 and len(set(picked)) == 40 and all(eligible[i] for i in picked)
    assert picked == list(pick_rows(nll, step, 40, random.Random(1), eligible=eligible)) == sorted(picked)
    rows = [i for i in range(400) if eligible[i]]
    rank = {i: r for r, i in enumerate(sorted(rows, key=lambda i: nll[i]))}
    deciles = {rank[i] * 10 // len(rows) for i in picked}
    assert deciles == set(range(10))  # 40 picks over 40 cells: each decile at least once
    assert {step[i] // 5 for i in picked} == {0, 1, 2, 3}  # and each quarter of the steps
    assert list(pick_rows(nll, step, 1000, random.Random(1), eligible=eligible)) == rows  # more asked than there are
    assert pick_rows(nll, step, 5, random.Random(1), eligible=[False] * 400) == {}


def test_pick_weights_make_weighted_means_estimate_the_batch_mean():
    # NLL grows with the step, so some cells are small: plain means over the picks over-weigh them, weighted
    # means (each pick standing for its cell's rows) land on the batch mean over many draws.
    nll = [i / 640 + (0.5 if i % 9 == 0 else 0.0) for i in range(640)]
    step = [i // 32 for i in range(640)]
    value = [float(i % 9 == 0) * 3.0 + i / 640 for i in range(640)]
    plain, weighted = [], []
    for draw in range(300):
        w = pick_rows(nll, step, 32, random.Random(draw))
        plain.append(sum(value[i] for i in w) / len(w))
        weighted.append(sum(value[i] * x for i, x in w.items()) / sum(w.values()))
    truth = sum(value) / len(value)
    assert abs(sum(weighted) / 300 - truth) < 0.02 < abs(sum(plain) / 300 - truth)


def test_oracle_config_names_the_bad_field():
    with pytest.raises(ValueError, match="oracle_continuations must be an int >= 2, got 1"):
        OracleConfig(continuations=1)
    with pytest.raises(ValueError, match="oracle_gamma must be in \\[0, 1\\], got 1.5"):
        OracleConfig(gamma=1.5)


def _expert_targets(pool_envs: int = 1):
    """Rows of one expert episode (deterministic env and policy), with snapshots and histories."""
    env = gym.make("GACA-CriticalChain-v0", **CHAIN).unwrapped
    played = play(EnvList([env]), ["train-0"], BaselinePolicy("expert"), None, seed=0, save_snapshots=True)
    return played, [OracleTarget.from_transition(k, t, played.histories[0]) for k, t in enumerate(played.transitions)]


@pytest.mark.parametrize("pool_kind", ["list", "sync", "async"])
def test_expert_values_are_exact_in_every_pool(pool_kind):
    # The expert wins from every state: V = 10 everywhere, Q of its own action 10 (A* = 0); a wrong road at the
    # fork loses (Q = 0, A* = -10) and a distractor only costs a step (A* = 0); every continuation agrees.
    played, targets = _expert_targets()
    fork = next(k for k, t in enumerate(played.transitions) if t.info["fork"])
    wrong = next(a for a in played.transitions[fork].info["admissible_actions"]
                 if a.startswith("take") and a != played.transitions[fork].decision.action)  # fmt: skip
    distractor = next(a for a in played.transitions[0].info["admissible_actions"] if "walk" not in a and "go" not in a)
    targets.append(
        OracleTarget(99, targets[fork].snapshot, targets[fork].step, targets[fork].history, Decision(wrong))
    )
    targets.append(OracleTarget(98, targets[0].snapshot, 0, (), Decision(distractor)))
    if pool_kind == "list":
        pool = EnvList([gym.make("GACA-CriticalChain-v0", **CHAIN).unwrapped for _ in range(6)])
    else:
        pool = RolloutPool("GACA-CriticalChain-v0", 6, CHAIN, mode=pool_kind)
    try:
        est = estimate_advantages(pool, targets, BaselinePolicy("expert"), None, continuations=3)
    finally:
        if pool_kind != "list":
            pool.close()
    n = len(played.transitions)
    assert est.v == [10.0] * (n + 2)
    assert est.q == [10.0] * n + [0.0, 10.0]
    assert est.advantage == [0.0] * n + [-10.0, 0.0]
    assert est.variance == [0.0] * (n + 2)
    assert est.rows == list(range(n)) + [99, 98]


def test_forced_first_decision_is_taken_once_then_the_policy_acts():
    played, targets = _expert_targets()
    env = gym.make("GACA-CriticalChain-v0", **CHAIN).unwrapped
    distractor = next(a for a in played.transitions[0].info["admissible_actions"] if "walk" not in a and "go" not in a)
    policy = ForcedFirst(BaselinePolicy("expert"), {0: Decision(distractor)})
    again = play(EnvList([env]), ["train-0"], policy, None, seed=0)
    actions = [t.decision.action for t in again.transitions]
    assert actions[0] == distractor and actions[1:] == [t.decision.action for t in played.transitions]


def test_the_penalty_and_discount_enter_the_returns():
    # Every continuation of the distractor target answers with an invalid first step (penalty 0.5); gamma 0.5
    # discounts the success reward by the steps after the target.
    played, targets = _expert_targets()
    pool = EnvList([gym.make("GACA-CriticalChain-v0", **CHAIN).unwrapped for _ in range(4)])
    bad = OracleTarget(0, targets[0].snapshot, 0, (), Decision("dance", valid=False))
    est = estimate_advantages(pool, [bad], BaselinePolicy("expert"), None, continuations=2, gamma=0.5,
                              invalid_action_penalty=0.5)  # fmt: skip
    n = len(played.transitions)  # the expert's episode: success on its n-th step
    assert est.v == [10.0 * 0.5 ** (n - 1)] * 1
    assert est.q == [-0.5 + 10.0 * 0.5**n]


def test_exact_values_match_monte_carlo_on_criticalchain():
    # Reduced form of the study's check: a tabular policy part-trained, noisy moves; Monte-Carlo A* (32
    # continuations) against exact A* by dynamic programming on every measured row.
    env_kwargs = {"horizon": 6, "num_branches": 2, "branch_width": 3, "num_distractors": 2, "noise": 0.1,
                  "hint": False}  # fmt: skip
    curves = train_tabular(StudyConfig(env_kwargs=env_kwargs, task_pool=4, tasks_per_iteration=2, iterations=9,
                                       estimator="gigpo", oracle_every=4, oracle_rows=24, oracle_continuations=32,
                                       oracle_exact=True, lr=0.2))  # fmt: skip
    records = [r for p in curves["oracle"] for r in p["records"]]
    assert len(records) == 72
    inside = sum(r["inside_bounded"] for r in records) / len(records)
    assert inside >= 0.93
    # The estimate is unbiased: the standardised errors of rows with noise average near 0.
    z = [(r["mc_a_star"] - r["exact_a_star"]) / math.sqrt(r["mc_variance"]) for r in records if r["mc_variance"] > 0]
    assert len(z) >= 20 and abs(sum(z) / len(z)) < 0.5
    assert all(math.isfinite(p["metrics"]["oracle/gaca/risk"]) for p in curves["oracle"])


def test_exact_values_need_an_outcome_table():
    with pytest.raises(TypeError, match="has no step_outcomes"):
        ExactValues(object(), TabularSoftmaxPolicy(16).distribution)


@pytest.mark.slow
def test_a_reduced_oracle_run_logs_its_metrics_and_leaves_training_unchanged(tmp_path):
    # One of the two iterations runs the oracle; the torch RNG is restored, so the run trains exactly as
    # without it (same losses, same final parameters).
    def run(every: int):
        model, tokenizer = tiny_model_and_tokenizer(seed=0)
        torch.manual_seed(0)
        config = tiny_config(tmp_path / str(every), max_steps=2, oracle_every=every, oracle_rows=4,
                             oracle_continuations=2, logging_steps=1)  # fmt: skip
        trainer = GACATrainer(model=model, args=config, processing_class=tokenizer)
        trainer.train()
        return trainer, [p.detach().clone() for p in model.parameters()]

    with_oracle, params = run(2)
    without, params_without = run(0)
    logs = [h for h in with_oracle.state.log_history if "loss" in h]
    assert "oracle/gaca/risk" in logs[0] and "oracle/gaca/risk" not in logs[1]  # iterations 0 and 1; every 2
    assert logs[0]["oracle/rows"] == 4 and logs[0]["oracle/env_steps"] > 0
    assert all("oracle/rows" not in h for h in without.state.log_history)
    assert [h["loss"] for h in logs] == [h["loss"] for h in without.state.log_history if "loss" in h]
    assert all(torch.equal(a, b) for a, b in zip(params, params_without, strict=True))
    assert with_oracle.last_oracle is not None and len(with_oracle.last_oracle.targets) == 4


def test_vllm_backend_measures_the_oracle(tmp_path):
    # TRL's vLLM generation (a stand-in with its contract, no GPU) plays the continuations as it plays the rollout.
    from tests.gaca_train.training.test_trainer import _vllm_trainer

    trainer, stand_in = _vllm_trainer(tmp_path, rollouts_per_task=2, oracle_every=1, oracle_rows=3,
                                      oracle_continuations=2)  # fmt: skip
    trainer._generate_and_score_completions([{"task_id": t} for t in ["train-0"] * 2 + ["train-1"] * 2])
    done = trainer.last_oracle
    assert done is not None and len(done.targets) == 3 and done.estimates.env_steps > 0
    assert stand_in.synced == [0]  # the weights reached vLLM once for the rollout and its oracle
    assert all(len(q) == 2 for q in done.estimates.q_returns)
    trainer.close_envs()
