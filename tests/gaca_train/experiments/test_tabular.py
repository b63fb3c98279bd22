from __future__ import annotations

import gymnasium as gym
import numpy as np

import gaca_envs  # noqa: F401
from gaca_train.experiments.tabular import (
    StudyConfig,
    TabularSoftmaxPolicy,
    _policy_gradient,
    _Step,
    evaluate_greedy,
    train_tabular,
)

EASY = {"horizon": 4, "num_branches": 1, "branch_width": 3, "num_distractors": 1, "noise": 0.0, "hint": False}


def _step_for(policy: TabularSoftmaxPolicy, chosen: int) -> tuple[_Step, np.ndarray]:
    slots, probs = policy.distribution("obs", ["a", "b", "c"])
    return _Step(0, 0, 0, "k", 0.0, -float(np.log(probs[chosen])), slots, probs, chosen), probs


def test_policy_gradient_moves_probability_with_the_advantage_sign():
    for advantage, direction in ((1.0, 1), (-1.0, -1), (0.0, 0)):
        policy = TabularSoftmaxPolicy(size=1024)
        step, before = _step_for(policy, chosen=1)
        _policy_gradient(policy, [step], np.array([advantage]), lr=0.5)
        _, after = policy.distribution("obs", ["a", "b", "c"])
        assert np.sign(round(after[1] - before[1], 12)) == direction
        assert after.sum() == np.float64(1.0) or abs(after.sum() - 1.0) < 1e-12


def test_recorded_nll_is_minus_log_prob_of_the_chosen_action():
    policy = TabularSoftmaxPolicy(size=1024)
    policy.theta[:] = np.random.default_rng(0).normal(size=1024)
    step, probs = _step_for(policy, chosen=2)
    assert step.nll == -np.log(probs[2])
    assert step.nll > 0


def test_training_beats_the_untrained_policy_on_an_easy_chain():
    env = gym.make("GACA-CriticalChain-v0", **EASY).unwrapped
    pool = [f"train-{i}" for i in range(8)]
    untrained = evaluate_greedy(TabularSoftmaxPolicy(), env, pool)
    curves = train_tabular(
        StudyConfig(env_kwargs=EASY, estimator="gaca", task_pool=8, tasks_per_iteration=4, rollouts_per_task=4,
                    iterations=25, lr=0.1, eval_every=25, seed=0)
    )  # fmt: skip
    assert curves["eval_success"][0] == untrained
    assert curves["eval_success"][-1] >= 0.9 > untrained
    assert curves["episodes"] == [0, 25 * 16]
    assert 0.0 < np.mean(curves["lambda_mean"]) < 1.0
