"""The update schedule: mini-batches of rows, token-budgeted micro-batches, world-size invariance, LoRA, vLLM."""

from __future__ import annotations

import json
import math
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from gaca_train.estimators.advantages import compute_advantages
from gaca_train.training.batching import num_updates, pack_micro_batches, padded_tokens, plan_mini_batches
from gaca_train.training.packing import packed_tokens
from tests.gaca_train.tiny_setup import (
    scripted_generate,
    scripted_trainer_class,
    tiny_config,
    tiny_model_and_tokenizer,
    warm_started_model_and_tokenizer,
)

ROOT = Path(__file__).resolve().parents[3]
GROUPS = [{"task_id": t} for t in ["train-0"] * 4 + ["train-1"] * 4]


def test_plan_covers_every_row_once_per_epoch_in_seeded_mini_batches():
    plan = plan_mini_batches(1500, 512, ppo_epochs=2, seed=7)
    assert [len(u) for u in plan] == [512, 512, 476] * 2  # the WebShop example of docs/training.md
    assert sorted(plan[0] + plan[1] + plan[2]) == list(range(1500)) == sorted(plan[3] + plan[4] + plan[5])
    assert plan[0] != plan[3]  # each epoch reshuffles
    assert plan == plan_mini_batches(1500, 512, ppo_epochs=2, seed=7) != plan_mini_batches(1500, 512, 2, seed=8)
    assert num_updates(1500, 512, 2) == 6 and num_updates(1500, None) == 1
    assert [len(u) for u in plan_mini_batches(10, None)] == [10]
    with pytest.raises(ValueError, match="at least one row"):
        plan_mini_batches(0, 4)


def test_micro_batches_stay_within_the_budget_and_a_long_row_runs_alone():
    lengths = [(30, 10), (50, 20), (12, 4), (300, 40), (31, 9), (45, 5)]
    rows = list(range(len(lengths)))
    bins = pack_micro_batches(lengths, rows, budget=150)
    assert sorted(r for b in bins for r in b) == rows
    for b in bins:
        assert padded_tokens(lengths, b) <= 150 or b == [3]  # row 3 (340 tokens) alone
    assert [3] in bins
    assert pack_micro_batches(lengths, rows, budget=None) == [[3, 1, 5, 4, 0, 2]]  # longest first (ties: later row)
    # Ranks agree on a count: a rank with fewer rows splits its batches, then adds empty ones.
    assert [len(b) for b in pack_micro_batches(lengths, [0, 1], budget=None, min_count=4)] == [1, 1, 0, 0]


def _played(tmp_path, model=None, tokenizer=None, **overrides):
    if model is None:
        model, tokenizer = tiny_model_and_tokenizer()
    args = tiny_config(tmp_path, rollouts_per_task=4, **overrides)
    trainer = scripted_trainer_class()(model=model, args=args, processing_class=tokenizer)
    trainer.model.train()
    iteration = trainer._generate_and_score_completions(GROUPS)
    trainer.close_envs()
    return trainer, iteration


def _gradient(trainer, iteration, budget, layout="packed"):
    trainer.model.zero_grad()
    trainer.args.micro_batch_tokens = budget
    trainer._packed = layout == "packed"
    _, count = trainer._update(trainer.model, iteration, list(range(len(iteration.steps))))
    return count, {n: p.grad.clone() for n, p in trainer.model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("layout", ["packed", "padded"])
@pytest.mark.parametrize("loss_type", ["dapo", "bnpo", "grpo", "dr_grpo"])
def test_one_mini_batch_gradient_equals_the_sum_over_its_micro_batches(tmp_path, loss_type, layout):
    trainer, iteration = _played(tmp_path, loss_type=loss_type)
    assert any(a != 0 for a in iteration.advantage)
    longest = max(p + c for p, c in iteration.lengths)
    budget = 3 * longest if layout == "padded" else 2 * longest
    trainer._pack_length = longest  # packed: sequences of about a row and a few tails that share its prompt
    whole_count, whole = _gradient(trainer, iteration, None, layout)
    split_count, split = _gradient(trainer, iteration, budget, layout)
    assert whole_count == 1 and split_count >= 4
    for name, grad in whole.items():
        torch.testing.assert_close(split[name], grad, atol=1e-6, rtol=1e-5, msg=name)
    assert any(g.abs().sum() > 0 for g in whole.values())
    # No micro-batch over the budget, counted as the layout computes it.
    steps = iteration.steps
    for rows in trainer._synced_bins(iteration, list(range(len(steps)))):
        if layout == "padded":
            assert padded_tokens(iteration.lengths, rows) <= budget
        else:
            assert packed_tokens([(steps[i].prompt_ids, steps[i].completion_ids) for i in rows]) <= budget


def test_an_empty_micro_batch_carries_no_gradient(tmp_path):
    trainer, iteration = _played(tmp_path)
    trainer.model.zero_grad()
    loss, count = trainer._update(trainer.model, iteration, [])  # a rank with no rows in this update
    assert count == 1 and loss.item() == 0.0
    assert all(p.grad is None or p.grad.abs().sum() == 0 for p in trainer.model.parameters())


def test_an_iteration_makes_one_update_per_mini_batch(tmp_path):
    model, tokenizer = tiny_model_and_tokenizer()
    args = tiny_config(tmp_path, rollouts_per_task=4, mini_batch_rows=5, micro_batch_tokens=500, max_steps=1)
    trainer = scripted_trainer_class()(model=model, args=args, processing_class=tokenizer)
    trainer.train()
    rows = len(trainer.last_rollout.steps)
    logs = trainer.state.log_history[0]
    assert trainer.state.global_step == 1  # one TRL step per iteration
    assert logs["train/rows"] == rows and logs["train/updates"] == math.ceil(rows / 5)
    steps = {int(state["step"]) for state in trainer.optimizer.state.values()}
    assert steps == {math.ceil(rows / 5)}  # AdamW stepped once per mini-batch


@pytest.mark.slow
def test_two_ranks_and_one_take_the_same_updates_on_the_same_episodes(tmp_path):
    def run(processes, layout="packed"):
        out = tmp_path / f"np{processes}-{layout}"
        out.mkdir()
        with socket.socket() as probe:  # a free loopback port for the rendezvous
            probe.bind(("127.0.0.1", 0))
            port = str(probe.getsockname()[1])
        launch = ["-m", "torch.distributed.run", "--nproc_per_node", str(processes), "--master_addr", "127.0.0.1",
                  "--master_port", port] if processes > 1 else []  # fmt: skip
        command = [sys.executable, *launch, "-m", "tests.gaca_train.schedule_worker", str(out), layout]
        # A session of its own: on a time-out the whole group goes (the launcher and every rank it started).
        launcher = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                    start_new_session=True)  # fmt: skip
        try:
            _, stderr = launcher.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            os.killpg(launcher.pid, signal.SIGKILL)
            _, stderr = launcher.communicate()
            pytest.fail(f"{processes} rank(s) still running after 300 s:\n{stderr[-3000:]}")
        assert launcher.returncode == 0, stderr[-3000:]
        return json.loads((out / "result.json").read_text())

    one, two, padded = run(1), run(2), run(1, "padded")
    assert (one["world_size"], two["world_size"]) == (1, 2)
    # The packed layout (the default, both runs above) trains the same weights as the padded one.
    assert one["losses"] == pytest.approx(padded["losses"], abs=2e-4) and one["updates"] == padded["updates"]
    torch.testing.assert_close(torch.tensor(padded["params"]), torch.tensor(one["params"]), atol=1e-5, rtol=1e-4)
    assert one["rows"] == two["rows"] and one["updates"] == two["updates"]
    assert all(u > 1 for u in one["updates"])
    assert one["losses"] == pytest.approx(two["losses"], abs=2e-4)  # TRL logs losses rounded to 4 decimals
    torch.testing.assert_close(torch.tensor(two["params"]), torch.tensor(one["params"]), atol=1e-5, rtol=1e-4)
    # Validation: each rank played 3 of the 6 eval episodes; the gathered metrics equal the single process's.
    assert one["validation"]["eval/episodes"] == 6.0
    assert one["validation"] == pytest.approx(two["validation"])


def _lora_trainer(tmp_path, **overrides):
    from peft import LoraConfig

    from gaca_train.training.trainer import GACATrainer

    model, tokenizer = warm_started_model_and_tokenizer()
    lora = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], lora_dropout=0.0)
    args = tiny_config(tmp_path, rollouts_per_task=4, learning_rate=1e-2, **overrides)
    return GACATrainer(model=model, args=args, processing_class=tokenizer, peft_config=lora)


def test_lora_records_log_probs_through_the_adapter(tmp_path):
    trainer = _lora_trainer(tmp_path)
    torch.manual_seed(0)
    for name, param in trainer.model.named_parameters():
        if "lora_B" in name:  # a trained adapter: not the zero initialisation, which equals the base model
            param.data.normal_(0, 0.5)
    trainer.model.train()
    iteration = trainer._generate_and_score_completions(GROUPS)
    trainer.close_envs()
    assert all(len(s.logps) == len(s.completion_ids) > 0 for s in iteration.steps)
    trainer._add_policy_logps(iteration, need_old=True)
    for step, recomputed in zip(iteration.steps, iteration.old_logps, strict=True):
        torch.testing.assert_close(torch.tensor(step.logps), recomputed, atol=1e-4, rtol=1e-4)
    with trainer.model.disable_adapter():  # the base model scores the same tokens differently
        batch = trainer._batch(iteration, [0])
        ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
        mask = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
        width = batch["completion_ids"].size(1)
        with torch.no_grad():
            base_logps, _, _ = trainer._get_per_token_logps_and_entropies(trainer.model, ids, mask, width)
    assert not torch.allclose(base_logps[0], torch.tensor(iteration.steps[0].logps), atol=1e-3)
    rows = trainer.last_rollout.to_step_rows()
    assert rows.nll.std() > 0
    kwargs = trainer.args.estimator_kwargs()
    gaca = compute_advantages(rows, **{**kwargs, "estimator": "gaca", "eta": 1.0}).advantage
    gigpo = compute_advantages(rows, **{**kwargs, "estimator": "gigpo"}).advantage
    assert not torch.allclose(gaca, gigpo)


@pytest.mark.slow
def test_use_peft_trains_two_iterations(tmp_path):
    trainer = _lora_trainer(tmp_path, max_steps=2, mini_batch_rows=8, beta=0.01)
    lora = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if "lora_" in n}
    trainer.train()
    assert trainer.state.global_step == 2
    logs = [log for log in trainer.state.log_history if "loss" in log]
    assert len(logs) == 2 and all(math.isfinite(log["loss"]) and "kl" in log for log in logs)
    changed = [n for n, p in trainer.model.named_parameters() if "lora_" in n and not torch.equal(lora[n], p)]
    assert changed, "no adapter weight changed"


class _FakeLLM:
    """vLLM's ``LLM`` surface that TRL's colocate ``generate`` uses: generate, sleep, wake_up."""

    def __init__(self, tokenizer):
        self.answer = scripted_generate(tokenizer)
        self.calls: list[str] = []

    def generate(self, prompts, sampling_params=None, use_tqdm=False):
        self.calls.append("generate")
        ids, logps = self.answer([p["prompt_token_ids"] for p in prompts])
        return [
            SimpleNamespace(
                prompt_token_ids=p["prompt_token_ids"],
                outputs=[
                    SimpleNamespace(
                        token_ids=i,
                        logprobs=[{t: SimpleNamespace(logprob=lp, rank=1)} for t, lp in zip(i, lps, strict=True)],
                    )
                ],
            )  # fmt: skip
            for p, i, lps in zip(prompts, ids, logps, strict=True)
        ]

    def sleep(self, level):
        self.calls.append(f"sleep{level}")

    def wake_up(self, tags=None):
        self.calls.append("wake_" + "_".join(tags or []))


def test_vllm_colocate_sleep_mode_pushes_weights_once_per_iteration(tmp_path, monkeypatch):
    import trl.generation.vllm_generation as vllm_generation

    from gaca_train.training.trainer import GACATrainer

    monkeypatch.setattr(vllm_generation, "SamplingParams", lambda **kwargs: kwargs, raising=False)

    class ColocateStandIn(vllm_generation.VLLMGeneration):
        """TRL's colocate generation with a stand-in engine; the weight push (GPU only) is counted."""

        def _init_vllm(self):
            self.llm, self.pushes = _FakeLLM(self.processing_class), 0
            self.llm.sleep(level=2)
            self._llm_weights_sleeping = True

        def sync_weights(self):
            self.pushes += 1
            self.llm.wake_up(tags=["weights"])
            self._llm_weights_sleeping = False

    model, tokenizer = tiny_model_and_tokenizer()
    args = tiny_config(tmp_path, max_steps=2, max_env_steps=4)
    trainer = GACATrainer(model=model, args=args, processing_class=tokenizer)
    vllm = ColocateStandIn(model, trainer.accelerator, tokenizer, mode="colocate", enable_sleep_mode=True,
                           max_completion_length=8)  # fmt: skip
    trainer.use_vllm, trainer.vllm_generation, trainer._last_loaded_step = True, vllm, -1
    trainer.train()
    turns = vllm.llm.calls.count("generate")
    assert turns >= 4  # several turns per iteration
    assert vllm.pushes == 2  # once per iteration, not once per turn
    assert vllm.llm.calls.count("sleep2") == 3 and vllm.llm.calls[-1] == "sleep2"  # at start-up, then per iteration


def test_rollout_old_logps_equal_the_recomputed_ones_without_their_forward_pass(tmp_path, monkeypatch):
    from gaca_train.training.trainer import GACATrainer

    model, tokenizer = warm_started_model_and_tokenizer()
    args = tiny_config(tmp_path, rollouts_per_task=4, mini_batch_rows=5, beta=0.0, old_logps="rollout")
    trainer = GACATrainer(model=model, args=args, processing_class=tokenizer)
    trainer.model.train()
    iteration = trainer._generate_and_score_completions(GROUPS)  # real sampling with the model's weights
    trainer.close_envs()
    forward, calls = trainer._get_per_token_logps_and_entropies, []

    def counted(*a, **k):
        calls.append(1)
        return forward(*a, **k)

    monkeypatch.setattr(trainer, "_get_per_token_logps_and_entropies", counted)
    trainer._add_policy_logps(iteration, need_old=True)
    recorded = iteration.old_logps
    assert calls == [] and [len(r) for r in recorded] == [len(s.completion_ids) for s in iteration.steps]
    trainer.args.old_logps = "recompute"
    trainer._add_policy_logps(iteration, need_old=True)
    assert calls and iteration.ref_logps is None
    assert sum(len(r) for r in recorded) > 20
    torch.testing.assert_close(torch.cat(recorded), torch.cat(iteration.old_logps), atol=1e-5, rtol=1e-5)


def test_rollout_old_logps_are_refused_with_vllm(tmp_path):
    with pytest.raises(ValueError, match="old_logps: rollout .* vLLM"):
        tiny_config(tmp_path, old_logps="rollout", use_vllm=True)
    with pytest.raises(ValueError, match="old_logps must be one of"):
        tiny_config(tmp_path, old_logps="sampled")
