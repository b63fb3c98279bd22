"""Branching rollouts: trees played from env snapshots through the one episode loop, both pools, the LLM rollout."""

from __future__ import annotations

import random

import gymnasium as gym
import pytest
import torch

import gaca_envs  # noqa: F401  (registers the env ids)
from gaca_train.estimators.advantages import compute_advantages
from gaca_train.rollout.branching import Branching, play_tree
from gaca_train.rollout.episodes import BaselinePolicy, EnvList, play
from gaca_train.rollout.policy import generate_with_logprobs, run_rollout
from gaca_train.rollout.prompts import PromptBuilder, template_for
from gaca_train.rollout.vector import RolloutPool
from tests.gaca_train.rollout.test_rollout import _generation_config
from tests.gaca_train.tiny_setup import ENV_KWARGS, tiny_config, tiny_model_and_tokenizer

CHAIN = {"horizon": 6, "num_branches": 2, "branch_width": 3, "num_distractors": 2, "noise": 0.1}


def _envs(n: int, kwargs=CHAIN) -> EnvList:
    return EnvList([gym.make("GACA-CriticalChain-v0", **kwargs) for _ in range(n)])


def _check_tree(played, task_ids, branching):
    """Every continuation starts in its parent's state at its branch step and plays only its own steps."""
    by_traj: dict[int, list] = {}
    for t in played.transitions:
        by_traj.setdefault(t.env_index, []).append(t)
    n_roots = sum(p < 0 for p in played.parents)
    assert n_roots == branching.roots * len(set(task_ids))
    for traj, parent in enumerate(played.parents):
        steps = by_traj.get(traj, [])
        if parent < 0:
            assert played.branch_steps[traj] == 0 and [t.step for t in steps] == list(range(len(steps)))
            continue
        start = played.branch_steps[traj]
        assert [t.step for t in steps] == list(range(start, start + len(steps)))  # no prefix row repeated
        at_branch = next(t for t in by_traj[parent] if t.step == start)
        assert steps[0].observation == at_branch.observation
        assert steps[0].info["anchor_key"] == at_branch.info["anchor_key"]
        assert played.episodes[traj].task_id == played.episodes[parent].task_id
        assert played.episodes[traj].length == start + len(steps)
    return by_traj


def test_play_tree_continues_root_steps_from_snapshots_with_fixed_budget():
    task_ids = ["train-0"] * 6 + ["train-1"] * 6
    branching = Branching("uniform", roots=2, points=2, continuations=2, budget="fixed")
    played = play_tree(_envs(12), task_ids, BaselinePolicy("random", random.Random(1)), 20, branching, seed=5)
    by_traj = _check_tree(played, task_ids, branching)
    assert sum(p >= 0 for p in played.parents) == 2 * 2 * 2  # 2 groups x 2 points x 2 continuations
    assert played.snapshots == sum(len(by_traj[i]) for i in range(4))  # one per root step
    assert played.snapshot_bytes > 0 and played.snapshot_seconds > 0
    # The same seed replays the same tree.
    again = play_tree(_envs(12), task_ids, BaselinePolicy("random", random.Random(1)), 20, branching, seed=5)
    assert [(t.env_index, t.step, t.decision.action) for t in again.transitions] == [
        (t.env_index, t.step, t.decision.action) for t in played.transitions
    ]


def test_env_step_budget_matches_the_independent_setting():
    task_ids = ["train-0"] * 8 + ["train-1"] * 8 + ["train-2"] * 8
    branching = Branching("uniform", roots=4, points=2, budget="env_steps")
    played = play_tree(_envs(24), task_ids, BaselinePolicy("random", random.Random(0)), 30, branching, seed=1)
    _check_tree(played, task_ids, branching)
    for task in set(task_ids):
        trajs = [i for i, e in enumerate(played.episodes) if e.task_id == task]
        roots = [i for i in trajs if played.parents[i] < 0]
        steps = sum(t.env_index in trajs for t in played.transitions)
        root_mean = sum(played.episodes[i].length for i in roots) / len(roots)
        assert len(trajs) - len(roots) <= 8  # the group's slots
        # Continuations are added while the estimate is below 8 x the roots' mean length (the last may go over).
        assert steps <= 8 * root_mean + max(played.episodes[i].length for i in roots)


def test_async_pool_restores_snapshots_in_subprocesses_as_the_sync_pool_does():
    task_ids = ["train-0"] * 3 + ["train-1"] * 3
    branching = Branching("uniform", roots=1, points=2, continuations=1, budget="fixed")
    out = {}
    for mode in ("sync", "async"):
        pool = RolloutPool("GACA-CriticalChain-v0", 6, CHAIN, mode=mode)
        try:
            out[mode] = play_tree(pool, task_ids, BaselinePolicy("random", random.Random(2)), 20, branching, seed=3)
        finally:
            pool.close()
        _check_tree(out[mode], task_ids, branching)
    key = [(t.env_index, t.step, t.observation, t.reward) for t in out["sync"].transitions]
    assert key == [(t.env_index, t.step, t.observation, t.reward) for t in out["async"].transitions]
    assert out["sync"].parents == out["async"].parents


def test_nll_and_entropy_criteria_need_a_policy_that_reports_them():
    branching = Branching("nll", roots=1, points=1, continuations=1, budget="fixed")
    with pytest.raises(ValueError, match="branching criterion 'nll' needs the policy's nll per step"):
        play_tree(_envs(2), ["train-0"] * 2, BaselinePolicy("random"), 10, branching, seed=0)
    with pytest.raises(ValueError, match="play_tree needs a branching criterion other than 'off'"):
        play_tree(_envs(2), ["train-0"] * 2, BaselinePolicy("random"), 10, Branching("off"), seed=0)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"criterion": "loss"}, r"branching must be one of \('off', 'nll', 'entropy', 'uniform'\), got 'loss'"),
        ({"budget": "tokens"}, r"branch_budget must be one of \('env_steps', 'fixed'\), got 'tokens'"),
        ({"points": 0}, "branch_points must be an int >= 1, got 0"),
    ],
)
def test_bad_branching_is_a_clear_error(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Branching(**kwargs)


def test_config_fields_and_their_errors(tmp_path):
    cfg = tiny_config(tmp_path, rollouts_per_task=4, branching="nll", branch_points=1)
    assert cfg.branching_spec() == Branching("nll", roots=2, points=1, continuations=2, budget="env_steps")
    assert tiny_config(tmp_path).branching_spec() is None
    with pytest.raises(ValueError, match="branch_roots=5 exceeds rollouts_per_task=4"):
        tiny_config(tmp_path, rollouts_per_task=4, branching="nll", branch_roots=5)
    with pytest.raises(ValueError, match="branch_points \\* branch_continuations = 6 exceeds rollouts_per_task=4"):
        tiny_config(tmp_path, rollouts_per_task=4, branching="uniform", branch_budget="fixed", branch_points=3)
    with pytest.raises(ValueError, match="branch_roots=4 equals rollouts_per_task: the env-step budget leaves no"):
        tiny_config(tmp_path, rollouts_per_task=4, branching="nll", branch_roots=4)
    with pytest.raises(ValueError, match="branching='entropy' needs the policy's entropy per step"):
        tiny_config(tmp_path, branching="entropy")
    with pytest.raises(ValueError, match="branch_roots must be an int >= 1, got 0"):
        tiny_config(tmp_path, branching="nll", branch_roots=0)
    with pytest.raises(ValueError, match="preset='verl-agent' has no branching rollouts"):
        tiny_config(tmp_path, branching="nll", preset="verl-agent")


def _llm_rollout(branching, mode="sync"):
    torch.manual_seed(0)
    model, tokenizer = tiny_model_and_tokenizer()
    tasks = ["train-0"] * 4 + ["train-1"] * 4
    pool = RolloutPool("GACA-CriticalChain-v0", len(tasks), ENV_KWARGS, mode=mode)
    system, template = template_for("GACA-CriticalChain-v0")
    builder = PromptBuilder(system, template, history_length=2, max_env_steps=4)

    def generate(prompt_ids):
        return generate_with_logprobs(model, prompt_ids, pad_token_id=tokenizer.pad_token_id,
                                      eos_token_ids=[tokenizer.eos_token_id],
                                      generation_config=_generation_config(tokenizer))  # fmt: skip

    try:
        return run_rollout(pool, tasks, generate, tokenizer, builder, seed=3, batch_size=5, branching=branching)
    finally:
        pool.close()


def test_llm_continuation_prompt_is_byte_identical_to_the_parent_prompt_and_rows_form_a_tree():
    branching = Branching("nll", roots=2, points=2, continuations=2, budget="fixed")
    result = _llm_rollout(branching)
    assert result.parents is not None and sum(p >= 0 for p in result.parents) == 8
    first: dict[int, object] = {}
    for s in result.steps:
        first.setdefault(s.env_index, s)
    for traj, parent in enumerate(result.parents):
        if parent < 0:
            continue
        mine = first[traj]
        twin = next(s for s in result.steps if s.env_index == parent and s.step == mine.step)
        assert mine.prompt_ids == twin.prompt_ids  # env restored and history restored: the same prompt
        assert mine.anchor_key == twin.anchor_key
    # The branch points are the roots' highest-NLL later steps of their group.
    rows = result.to_step_rows(traj_offset=100)
    parent = result.parent_rows(traj_offset=100)
    assert len(rows) == len(result.steps)
    assert {p for p in parent if p >= 0} <= set(rows.traj.tolist()) and len(parent) == len(rows)
    out = compute_advantages(rows, "gaca", parent=parent)
    assert torch.isfinite(out.advantage).all()
    assert result.group_of_env == [0, 0, 1, 1] + [0] * 4 + [1] * 4
    metrics = result.metrics()
    assert metrics["branch/continuations"] == 8.0 and metrics["branch/snapshot_bytes_max"] > 0


def test_branching_off_plays_exactly_the_independent_rollout():
    off = _llm_rollout(Branching("off"))
    none = _llm_rollout(None)
    assert off.parents is None and off.parent_rows() is None
    assert [(s.env_index, s.step, s.prompt_ids, s.completion_ids) for s in off.steps] == [
        (s.env_index, s.step, s.prompt_ids, s.completion_ids) for s in none.steps
    ]


def test_play_with_idle_slots_and_starts_keeps_other_envs_unchanged():
    envs = _envs(3)
    full = play(envs, ["train-0", "train-1", "train-2"], BaselinePolicy("random", random.Random(4)), 10, seed=2)
    part = play(_envs(3), [None, "train-1", None], BaselinePolicy("random", random.Random(4)), 10, seed=2)
    assert {t.env_index for t in part.transitions} == {1}
    assert part.episodes[0].length == 0 and part.episodes[1].task_id == "train-1"
    assert all(t.info["task_id"] == "train-1" for t in part.transitions)
    assert len(full.transitions) > len(part.transitions)


def test_async_pool_plays_a_second_rollout_as_the_sync_pool_does():
    # Gymnasium's async worker keeps its automatic-reset flag through a reset: without the pool's clearing
    # step, an env whose episode ended on the last turn would answer the next rollout's first action with a reset.
    runs = {}
    for mode in ("sync", "async"):
        pool = RolloutPool("GACA-CriticalChain-v0", 3, CHAIN, mode=mode)
        try:
            policy = BaselinePolicy("random", random.Random(7))
            runs[mode] = [play(pool, ["train-0", "train-1", "train-2"], policy, 30, seed=s) for s in (1, 2)]
        finally:
            pool.close()
    for first, second in zip(runs["sync"], runs["async"], strict=True):
        assert [(t.env_index, t.step, t.observation) for t in first.transitions] == [
            (t.env_index, t.step, t.observation) for t in second.transitions
        ]


def test_a_reduced_branching_training_run_trains_every_row_once(tmp_path):
    from gaca_train.training.trainer import GACATrainer
    from tests.gaca_train.tiny_setup import warm_started_model_and_tokenizer

    model, tokenizer = warm_started_model_and_tokenizer()
    args = tiny_config(tmp_path, rollouts_per_task=4, max_steps=2, branching="nll", branch_points=1,
                       branch_continuations=2, branch_budget="fixed")  # fmt: skip
    trainer = GACATrainer(model=model, args=args, processing_class=tokenizer)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    trainer.train()
    logs = [log for log in trainer.state.log_history if "loss" in log]
    assert len(logs) == 2 and all(torch.isfinite(torch.tensor(log["loss"])) for log in logs)
    assert all(log["branch/continuations"] == 2 * 1 * 2 for log in logs)  # 2 groups x 1 point x 2 continuations
    assert all(log["train/rows"] == log["rollout/steps"] for log in logs)  # each step one row: prefixes once
    assert any(not torch.equal(before[n], p) for n, p in model.named_parameters())
    result = trainer.last_rollout
    assert result.parents is not None and len(result.episodes) == 2 * 2 + 4


def test_vllm_backend_plays_branching_rollouts(tmp_path):
    from tests.gaca_train.training.test_trainer import _vllm_trainer

    trainer, stand_in = _vllm_trainer(tmp_path, rollouts_per_task=4, branching="uniform", branch_points=2,
                                      branch_continuations=1, branch_budget="fixed")  # fmt: skip
    inputs = [{"task_id": t} for t in ["train-0"] * 4 + ["train-1"] * 4]
    iteration = trainer._generate_and_score_completions(inputs)
    result = trainer.last_rollout
    assert stand_in.synced == [0] and sum(p >= 0 for p in result.parents) == 4
    assert len(iteration.steps) == len(result.steps) and iteration.total == len(result.steps)
    trainer.close_envs()


@pytest.mark.slow
def test_two_ranks_with_unequal_episodes_play_branching_rollouts_in_lockstep(tmp_path):
    # As tests/gaca_train/rollout/test_rollout_distributed.py, each rank's group a tree: both waves are collective.
    import json
    import socket
    import subprocess
    import sys
    from pathlib import Path

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = str(probe.getsockname()[1])
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_addr", "127.0.0.1",
               "--master_port", port, "-m", "tests.gaca_train.lockstep_worker", str(tmp_path)]  # fmt: skip
    command.append("--branching")
    root = Path(__file__).resolve().parents[3]
    result = subprocess.run(command, cwd=root, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    rank0, rank1 = (json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1))
    assert rank0["parents"] == [-1, 0] and rank1["parents"] == [-1, 0]  # 1 root, 1 continuation each
    assert rank0["answers_match"] and rank1["answers_match"]  # every completion answers its own prompt
    assert len(rank0["calls"]) == len(rank1["calls"]) and rank0["calls"] == rank1["calls"]  # equal collective calls
