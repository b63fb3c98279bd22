from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM, TrainerCallback

from gaca_envs.task_env import split_task_ids
from gaca_train.estimators.advantages import compute_advantages
from gaca_train.experiments.tiny import save_tiny_model
from gaca_train.training.trainer import GACATrainer, env_reward, resolve_task_ids, tasks_dataset
from tests.gaca_train.tiny_setup import tiny_config, tiny_model_and_tokenizer, warm_started_model_and_tokenizer


def _snapshot(model):
    return {n: p.detach().clone() for n, p in model.named_parameters()}


@pytest.mark.parametrize("estimator", ["grpo", "gigpo", "gaca", "reweight"])
def test_one_real_iteration_per_estimator_logs_loss_and_moves_parameters(tmp_path, estimator):
    # Warm-started, the policy answers in format on some steps only, so returns differ within a group.
    model, tokenizer = warm_started_model_and_tokenizer()
    trainer = GACATrainer(
        model=model,
        args=tiny_config(tmp_path, estimator=estimator, rollouts_per_task=4),
        processing_class=tokenizer,
    )
    before = _snapshot(model)
    trainer.train()
    logs = trainer.state.log_history[0]
    assert torch.isfinite(torch.tensor(logs["loss"])) and logs["grad_norm"] > 0
    assert 0.0 < logs["rollout/invalid_rate"] < 1.0
    for key in (
        "rollout/success_rate",
        "rollout/score",
        "rollout/episode_length",
        "rollout/invalid_rate",
        "advantage/step_signal_share",
        "nll/mean",
        "time/rollout",
        "time/generation",
        "time/env",
    ):
        assert key in logs, key
    if estimator == "gaca":
        assert "advantage/lambda_mean" in logs and "advantage/lambda_std" in logs
    changed = [n for n, p in model.named_parameters() if not torch.equal(before[n], p)]
    assert changed, "no parameter changed"
    assert trainer._pools == {}  # env pools closed after train


def test_rows_become_advantages_then_per_token_tensors(tmp_path):
    model, tokenizer = tiny_model_and_tokenizer()
    args = tiny_config(tmp_path, estimator="gaca", eta=1.0)
    trainer = GACATrainer(model=model, args=args, processing_class=tokenizer)
    inputs = [{"task_id": t} for t in ["train-0", "train-0", "train-1", "train-1"]]
    iteration = trainer._generate_and_score_completions(inputs)
    result = trainer.last_rollout
    expected = compute_advantages(result.to_step_rows(), **args.estimator_kwargs()).advantage
    by_key = {(s.env_index, s.step): float(a) for s, a in zip(result.steps, expected, strict=True)}
    # Rows in global order (episode, then step), each with its own advantage.
    keys = [(s.env_index, s.step) for s in iteration.steps]
    assert keys == sorted(by_key) and len(keys) == 16
    assert iteration.advantage == pytest.approx([by_key[k] for k in keys])
    assert (iteration.offset, iteration.total) == (0, 16)
    rows = [3, 0, 9]
    batch = trainer._batch(iteration, rows)
    for j, i in enumerate(rows):
        step, length = iteration.steps[i], len(iteration.steps[i].completion_ids)
        assert batch["completion_ids"][j, :length].tolist() == step.completion_ids
        assert batch["prompt_ids"][j, -len(step.prompt_ids) :].tolist() == step.prompt_ids
        assert torch.allclose(batch["advantages"][j, :length], torch.tensor(iteration.advantage[i]).expand(length))
        assert (batch["advantages"][j, length:] == 0).all() and batch["completion_mask"][j].sum() == length
    empty = trainer._batch(iteration, rows, real=False)
    assert empty["completion_mask"].sum() == 0 and empty["advantages"].abs().sum() == 0
    # Old-policy log-probs, recomputed by token-budgeted forward passes, match those recorded while sampling.
    trainer._add_policy_logps(iteration, need_old=True)
    assert iteration.ref_logps is None
    for step, old in zip(iteration.steps, iteration.old_logps, strict=True):
        torch.testing.assert_close(old, torch.tensor(step.logps), atol=1e-4, rtol=1e-4)
    trainer.close_envs()


def test_completion_tables_get_one_entry_per_step(tmp_path):
    model, tokenizer = tiny_model_and_tokenizer()
    args = tiny_config(tmp_path, log_completions=True, num_completions_to_print=2)
    trainer = GACATrainer(model=model, args=args, processing_class=tokenizer)
    trainer.train()
    table = sorted((tmp_path / "out" / "completions").glob("*.parquet"))
    assert len(table) == 1
    import pandas as pd

    frame = pd.read_parquet(table[0])
    assert len(frame) == len(trainer.last_rollout.steps) == 16
    assert list(frame["completion"]) == [s.response for s in trainer.last_rollout.steps]
    assert set(frame.columns) >= {"prompt", "completion", "env_reward", "advantage"}


def test_evaluate_plays_the_eval_tasks_at_the_eval_temperature_and_logs_eval_metrics(tmp_path):
    model, tokenizer = warm_started_model_and_tokenizer()
    args = tiny_config(tmp_path, eval_splits=["valid"], eval_rollouts_per_task=3, eval_temperature=0.4)
    trainer = GACATrainer(model=model, args=args, processing_class=tokenizer)
    temperatures, results = [], []
    real_rollout = trainer._rollout

    def spy(task_ids, mode, env_kwargs=None, temperature=None):
        temperatures.append((mode, temperature, trainer.temperature))
        results.append(real_rollout(task_ids, mode, env_kwargs, temperature))
        return results[-1]

    trainer._rollout = spy
    rng = torch.get_rng_state()
    metrics = trainer.evaluate()
    trainer.close_envs()
    assert temperatures == [("eval", 0.4, 1.0)] and trainer.temperature == 1.0  # restored after validation
    assert torch.equal(torch.get_rng_state(), rng)  # validation leaves training's random stream alone
    (result,) = results
    episodes = result.episodes
    assert [e.task_id for e in episodes] == ["valid-0"] * 3 + ["valid-1"] * 3  # 2 valid tasks x 3
    assert metrics["eval/episodes"] == 6.0
    assert metrics["eval/success_rate"] == sum(e.won for e in episodes) / 6
    assert metrics["eval/episode_length"] == sum(e.length for e in episodes) / 6
    steps = result.steps
    assert metrics["eval/malformed_rate"] == pytest.approx(sum(not s.valid for s in steps) / len(steps))
    assert trainer.state.log_history[-1]["eval/success_rate"] == metrics["eval/success_rate"]
    assert trainer.model.training  # back in training mode


def test_validation_runs_before_and_every_eval_steps_iterations(tmp_path):
    model, tokenizer = warm_started_model_and_tokenizer()
    args = tiny_config(tmp_path, eval_splits=["valid"], max_steps=3, eval_strategy="steps", eval_steps=2,
                       eval_on_start=True)  # fmt: skip
    trainer = GACATrainer(model=model, args=args, processing_class=tokenizer)
    trainer.train()
    evals = [log["step"] for log in trainer.state.log_history if "eval/success_rate" in log]
    assert evals == [0, 2, 3]  # before the first iteration, every 2 iterations, and after the last
    train_logs = [log for log in trainer.state.log_history if "loss" in log]
    assert len(train_logs) == 3 and all("eval/success_rate" not in log for log in train_logs)


def test_kl_to_a_reference_model_loaded_from_a_path(tmp_path):
    model, tokenizer = tiny_model_and_tokenizer()
    path = tmp_path / "tiny"
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    args = tiny_config(tmp_path, beta=0.01, mini_batch_rows=5)
    trainer = GACATrainer(model=str(path), args=args, processing_class=tokenizer)
    trainer.train()
    logs = trainer.state.log_history[0]
    assert "kl" in logs and torch.isfinite(torch.tensor(logs["loss"]))


class _StopAfter(TrainerCallback):
    """Interrupts training after ``step`` optimiser steps, as a crash or pre-emption would."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step >= self.step:
            control.should_training_stop = True
        return control


def test_resume_from_checkpoint_continues_where_it_stopped(tmp_path):
    def run(out, callbacks=None, resume=None):
        model, tokenizer = tiny_model_and_tokenizer()
        args = tiny_config(
            tmp_path,
            output_dir=str(tmp_path / out),
            max_steps=2,
            save_strategy="steps",
            save_steps=1,
            learning_rate=5e-2,
            tasks_per_iteration=1,
            rollouts_per_task=2,
        )
        trainer = GACATrainer(model=model, args=args, processing_class=tokenizer, callbacks=callbacks)
        trainer.train(resume_from_checkpoint=resume)
        return trainer, model

    straight, model_a = run("a")
    interrupted, _ = run("b", callbacks=[_StopAfter(1)])
    assert interrupted.state.global_step == 1
    resumed, model_b = run("b", resume=str(tmp_path / "b" / "checkpoint-1"))
    assert resumed.state.global_step == 2
    # Model, optimiser, scheduler, RNG and task order were restored: the second iteration played the same
    # tasks with the same samples, and the weights end equal.
    assert [s.completion_ids for s in straight.last_rollout.steps] == [
        s.completion_ids for s in resumed.last_rollout.steps
    ]
    assert straight.last_rollout.episodes[0].task_id == resumed.last_rollout.episodes[0].task_id
    for (name, p), q in zip(model_a.named_parameters(), model_b.parameters(), strict=True):
        torch.testing.assert_close(p, q, msg=name)
    assert straight.state.log_history[1]["learning_rate"] == resumed.state.log_history[-2]["learning_rate"]


def test_task_ids_come_from_the_env_or_the_config(tmp_path):
    assert resolve_task_ids(tiny_config(tmp_path)) == ["train-0", "train-1"]
    assert resolve_task_ids(tiny_config(tmp_path, task_split="valid", max_tasks=1)) == ["valid-0"]
    assert resolve_task_ids(tiny_config(tmp_path, task_ids=["test-3"])) == ["test-3"]
    assert tasks_dataset(["a", "b"])["task_id"] == ["a", "b"]
    with pytest.raises(RuntimeError, match="takes rewards from the environment"):
        env_reward(["x"])


def test_task_ids_of_a_split_bound_env_come_from_its_own_split(tmp_path):
    """ALFWorld plays one split: the trainer takes that split's ids and refuses another task_split."""
    from gaca_envs.alfworld.generate import generate

    generate(tmp_path / "games", 2, seed=0, split="valid_seen", difficulty="easy", engine="native")
    kwargs = {"data_path": str(tmp_path / "games"), "split": "valid_seen", "engine": "native"}
    args = tiny_config(tmp_path, env_id="GACA-ALFWorld-v0", env_kwargs=kwargs, task_split="valid_seen")
    ids = resolve_task_ids(args)
    assert len(ids) == 2
    with pytest.raises(ValueError, match="built for split 'valid_seen'"):
        resolve_task_ids(tiny_config(tmp_path, env_id="GACA-ALFWorld-v0", env_kwargs=kwargs, task_split="train"))
    assert split_task_ids("GACA-ALFWorld-v0", kwargs, "valid_seen") == (kwargs, ids)


def test_fewer_tasks_than_an_iteration_needs_is_an_error(tmp_path):
    model, tokenizer = tiny_model_and_tokenizer()
    with pytest.raises(ValueError, match="tasks_per_iteration=3 needs at least 3 task ids, got 2"):
        GACATrainer(model=model, args=tiny_config(tmp_path, tasks_per_iteration=3), processing_class=tokenizer)


def test_split_groups_are_rejected(tmp_path):
    model, tokenizer = tiny_model_and_tokenizer()
    trainer = GACATrainer(model=model, args=tiny_config(tmp_path), processing_class=tokenizer)
    with pytest.raises(ValueError, match="must hold whole groups of 2 equal task ids in a row"):
        trainer._generate_and_score_completions([{"task_id": t} for t in ["train-0", "train-1", "train-0", "train-1"]])


class _HFInPlaceOfVLLM:
    """Stands in for TRL's ``VLLMGeneration`` (vLLM needs a GPU): its ``generate``/``sync_weights``
    contract, sampling with the trainer's own model through the HF path."""

    mode, enable_sleep_mode = "server", False

    def __init__(self, trainer: GACATrainer, logprob_shift: float = 0.0) -> None:
        self.trainer, self.shift, self.synced = trainer, logprob_shift, []

    def sync_weights(self) -> None:
        self.synced.append(self.trainer.state.global_step)

    def generate(self, prompts, images, num_generations, profiler=None):
        from gaca_train.rollout.policy import generate_with_logprobs

        t = self.trainer
        ids, logps = generate_with_logprobs(
            t.model,
            prompts,
            pad_token_id=t.processing_class.pad_token_id,
            eos_token_ids=t.eos_token_ids,
            generation_config=t.generation_config,
            temperature=t.temperature,
        )
        # vLLM's shape: per token, a list whose first entry is the sampled token's log-prob
        return prompts, ids, [[[lp + self.shift] for lp in seq] for seq in logps], [[[i] for i in seq] for seq in ids]


def _vllm_trainer(tmp_path, shift: float = 0.0, warm: bool = False, **overrides):
    # warm: a model that mostly answers in format, so a group's rows differ and carry advantages (a random
    # model's responses are all malformed, and such a group gets none: docs/method.md section 6).
    model, tokenizer = warm_started_model_and_tokenizer() if warm else tiny_model_and_tokenizer()
    trainer = GACATrainer(model=model, args=tiny_config(tmp_path, **overrides), processing_class=tokenizer)
    stand_in = _HFInPlaceOfVLLM(trainer, shift)
    trainer.use_vllm, trainer.vllm_generation, trainer._last_loaded_step = True, stand_in, -1
    trainer.vllm_importance_sampling_correction = True
    return trainer, stand_in


@pytest.mark.parametrize("mode", ["sequence_mask", "token_truncate"])
def test_vllm_path_records_sampling_logps_and_the_importance_ratio(tmp_path, mode):
    trainer, stand_in = _vllm_trainer(tmp_path, vllm_importance_sampling_mode=mode)
    inputs = [{"task_id": t} for t in ["train-0", "train-0", "train-1", "train-1"]]
    iteration = trainer._generate_and_score_completions(inputs)
    assert stand_in.synced == [0]  # weights pushed once for the step
    trainer._add_policy_logps(iteration, need_old=True)
    steps = iteration.steps
    out = trainer._batch(iteration, list(range(len(steps))))
    mask = out["completion_mask"]
    for i, step in enumerate(steps):
        n = len(step.logps)
        assert out["sampling_per_token_logps"][i, :n].tolist() == pytest.approx(step.logps)
    ratio = out["importance_sampling_ratio"]
    assert ratio.shape == ((len(mask), 1) if mode == "sequence_mask" else mask.shape)
    # The stand-in samples with the trained weights, so train and sampling log-probs agree: ratio 1.
    torch.testing.assert_close(ratio, torch.ones_like(ratio), atol=1e-3, rtol=1e-3)
    trainer.close_envs()


def test_vllm_importance_ratio_truncates_or_masks_a_sampling_mismatch(tmp_path):
    # The sampler's log-probs 0.5 nats too high per token: pi_train / pi_vLLM = exp(-0.5) per token.
    trainer, _ = _vllm_trainer(tmp_path, shift=0.5, vllm_importance_sampling_mode="token_truncate")
    old = torch.zeros(2, 3)
    sampling = torch.full((2, 3), 0.5)
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    token = trainer._vllm_importance_ratio(old, sampling, mask)
    expected = torch.where(mask.bool(), torch.tensor(-0.5).exp(), torch.tensor(1.0))
    torch.testing.assert_close(token, expected)
    trainer.vllm_importance_sampling_mode = "sequence_mask"
    trainer.vllm_importance_sampling_clip_min = 0.5
    seq = trainer._vllm_importance_ratio(old, sampling, mask)  # exp(-1.0) = 0.37 < 0.5 is masked, exp(-0.5) kept
    torch.testing.assert_close(seq, torch.tensor([[0.0], [float(torch.tensor(-0.5).exp())]]))
    trainer.vllm_importance_sampling_mode = "tokens_please"
    with pytest.raises(ValueError, match="vllm_importance_sampling_mode"):
        trainer._vllm_importance_ratio(old, sampling, mask)


def test_vllm_path_trains_with_trl_loss_and_syncs_weights_each_step(tmp_path):
    trainer, stand_in = _vllm_trainer(tmp_path, warm=True, max_steps=2)  # a rollout per step
    before = _snapshot(trainer.model)
    trainer.train()
    assert stand_in.synced == [0, 1]
    losses = [log["loss"] for log in trainer.state.log_history if "loss" in log]
    assert len(losses) == 2 and all(torch.isfinite(torch.tensor(losses)))
    assert any(not torch.equal(before[n], p) for n, p in trainer.model.named_parameters())


def test_kl_reference_needs_a_model_path(tmp_path):
    """beta > 0: TRL loads the reference model from the policy's path; an in-memory model gets a clear error."""
    model, tokenizer = tiny_model_and_tokenizer()
    model.config._name_or_path = ""
    with pytest.raises(ValueError, match="beta=0.01 needs a KL reference model"):
        GACATrainer(model=model, args=tiny_config(tmp_path, beta=0.01), processing_class=tokenizer)
    save_tiny_model(model, tokenizer, tmp_path / "saved")
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path / "saved")
    trainer = GACATrainer(model=loaded, args=tiny_config(tmp_path, beta=0.01), processing_class=tokenizer)
    assert trainer.ref_model is not None


def test_a_max_prompt_length_below_a_first_prompt_stops_before_any_rollout(tmp_path):
    import gymnasium as gym

    from gaca_train.rollout.policy import check_first_prompts
    from gaca_train.rollout.prompts import PromptBuilder

    model, tokenizer = tiny_model_and_tokenizer()
    args = tiny_config(tmp_path)
    probe = gym.make(args.env_id, **args.env_kwargs)
    longest = check_first_prompts(probe, resolve_task_ids(args), tokenizer, PromptBuilder.from_config(args), None)
    probe.close()
    assert longest > 0
    GACATrainer(model=model, args=tiny_config(tmp_path, max_prompt_length=longest), processing_class=tokenizer)
    with pytest.raises(
        ValueError,
        match=rf"max_prompt_length={longest - 1} is below the first prompt of task '.+' \({longest} tokens\)",
    ):
        GACATrainer(model=model, args=tiny_config(tmp_path, max_prompt_length=longest - 1), processing_class=tokenizer)
