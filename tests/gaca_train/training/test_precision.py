"""Precision that trains: the paper configs' float32 master weights move at lr 1e-6; bf16 storage is refused."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml
from transformers import Qwen2ForCausalLM

from gaca_train.experiments.tiny import as_qwen2, save_tiny_model
from gaca_train.training.precision import (
    TYPICAL_WEIGHT,
    check_precision_config,
    check_update_precision,
    half_ulp,
    stalled_fraction,
)
from tests.gaca_train.tiny_setup import tiny_config, warm_started_model_and_tokenizer

ROOT = Path(__file__).resolve().parents[3]
PAPER_CONFIGS = sorted(p for p in (ROOT / "configs").rglob("*.yaml") if not p.name.startswith("quickstart"))
PRECISION_FIELDS = ("dtype", "bf16", "fp16", "learning_rate", "use_peft", "beta")


def _precision(path: Path) -> tuple:
    fields = yaml.safe_load(path.read_text())
    return tuple(fields.get(name) for name in PRECISION_FIELDS)


def test_paper_configs_store_float32_master_weights_and_compute_in_bf16():
    assert len(PAPER_CONFIGS) == 12
    for path in PAPER_CONFIGS:
        fields = yaml.safe_load(path.read_text())
        assert fields["dtype"] == "float32" and fields["bf16"] is True, path
        check_precision_config(fields["dtype"], float(fields["learning_rate"]), peft=False, deepspeed=False)


def test_half_ulp_is_the_smallest_change_that_survives_rounding():
    # bf16 keeps 8 significant bits: around 1.0 the spacing is 2^-7, half of it 2^-8 = 0.00390625.
    assert float(half_ulp(torch.tensor([1.0]), torch.bfloat16)) == 2**-8
    assert float(half_ulp(torch.tensor([0.02]), torch.bfloat16)) == 2**-14  # 0.02 = 1.28 x 2^-6
    assert float(half_ulp(torch.tensor([1.0]), torch.float16)) == 2**-11
    assert float(half_ulp(torch.tensor([0.0]), torch.bfloat16)) == 0.0
    with pytest.raises(ValueError, match="half_ulp takes a bfloat16 or float16 dtype, got torch.float32"):
        half_ulp(torch.tensor([1.0]))


@pytest.mark.parametrize("learning_rate", [1e-6, 1e-5, 1e-4, 1e-3])
def test_stalled_fraction_predicts_which_bf16_weights_an_adamw_step_leaves_unchanged(learning_rate):
    generator = torch.Generator().manual_seed(0)
    weights = (torch.randn(50_000, generator=generator) * TYPICAL_WEIGHT).to(torch.bfloat16).requires_grad_()
    before = weights.detach().clone()
    weights.grad = torch.randn(weights.shape, generator=generator).to(torch.bfloat16)
    predicted = stalled_fraction([weights], learning_rate)
    torch.optim.AdamW([weights], lr=learning_rate).step()  # first step: lr x sign(grad) per weight
    unchanged = float((weights.detach() == before).float().mean())
    assert unchanged == pytest.approx(predicted, abs=0.002)
    float32 = before.float().requires_grad_()
    assert stalled_fraction([float32], learning_rate) == 0.0


def _qwen2_model_dir(tmp_path: Path) -> tuple[Path, object]:
    """A tiny Qwen2-architecture model (the warm-started tiny model's weights, zero q/k/v biases), saved."""
    llama, tokenizer = warm_started_model_and_tokenizer()
    qwen2 = as_qwen2(llama)
    ids = torch.tensor([tokenizer("<think> </think> <action> look </action>")["input_ids"]])
    assert torch.allclose(qwen2(ids).logits, llama(ids).logits, atol=1e-5)  # the same network
    return save_tiny_model(qwen2, tokenizer, tmp_path / "qwen2"), tokenizer


def _trainer(tmp_path: Path, model_dir: Path, tokenizer, settings: dict):
    from gaca_train.training.trainer import GACATrainer

    config = tiny_config(
        tmp_path,
        learning_rate=float(settings["learning_rate"]),
        bf16=bool(settings["bf16"]),
        beta=float(settings["beta"]),
        model_init_kwargs={"dtype": settings["dtype"]},
        tasks_per_iteration=2,
        # 8 rollouts a task: the iteration has a success to credit (at 4, some sampling seeds gave every episode
        # of both groups the same return, hence no advantage and no gradient, whatever the precision)
        rollouts_per_task=8,
        max_completion_length=16,
    )
    return GACATrainer(model=str(model_dir), args=config, processing_class=tokenizer)


@pytest.mark.slow
@pytest.mark.parametrize("settings", sorted({_precision(p) for p in PAPER_CONFIGS}, key=str))
def test_one_iteration_at_a_paper_configs_precision_changes_almost_every_weight(tmp_path, settings):
    settings = dict(zip(PRECISION_FIELDS, settings, strict=True))
    model_dir, tokenizer = _qwen2_model_dir(tmp_path)
    trainer = _trainer(tmp_path, model_dir, tokenizer, settings)
    assert trainer.accelerator.mixed_precision == "bf16" and trainer.ref_model is not None
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    assert all(p.dtype == torch.float32 for p in before.values())
    trainer.train()
    assert trainer.state.log_history[0]["advantage/abs_mean"] > 0  # a gradient to apply
    changed = sum(int((p.detach() != before[n]).sum()) for n, p in trainer.model.named_parameters())
    total = sum(p.numel() for p in before.values())
    assert changed / total >= 0.9, f"an iteration at lr {settings['learning_rate']} changed {changed / total:.1%}"


@pytest.mark.slow
def test_bf16_storage_without_a_master_copy_is_refused_before_any_rollout(tmp_path):
    settings = dict(zip(PRECISION_FIELDS, _precision(PAPER_CONFIGS[0]), strict=True))
    model_dir, tokenizer = _qwen2_model_dir(tmp_path)
    bf16_model = Qwen2ForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16)
    # What the old setting would do: one AdamW step at lr 1e-6 leaves almost every bf16 weight as it was.
    assert stalled_fraction(bf16_model.parameters(), 1e-6) > 0.9
    with pytest.raises(
        ValueError,
        match=r"learning_rate=1e-06 cannot train this model: its weights are stored in "
        r"bfloat16 and the optimiser keeps no float32 master copy.*dtype: float32 with bf16: true",
    ):
        _trainer(tmp_path, model_dir, tokenizer, {**settings, "dtype": "bfloat16"})
    with pytest.raises(ValueError, match=r"dtype=bfloat16 with learning_rate=1e-06 would not train"):
        check_precision_config("bfloat16", 1e-6, peft=False, deepspeed=False)
    check_precision_config("bfloat16", 1e-6, peft=True, deepspeed=False)  # LoRA adapters stay float32
    check_precision_config("bfloat16", 1e-6, peft=False, deepspeed=True)  # DeepSpeed keeps a master copy
    assert check_update_precision(bf16_model, 1e-6, master_copy=True) == 0.0
