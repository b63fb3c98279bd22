"""Whether an optimiser step can move the weights: 16-bit storage without float32 master weights.

An AdamW step moves each weight by about the learning rate (exactly ``lr`` on the first step, where
``m / sqrt(v)`` is the sign of the gradient). A weight stored in bfloat16 keeps 8 significant bits, so a
step smaller than half the spacing of bfloat16 numbers around the weight (half an *ulp*) rounds back
to the same value. At the paper's ``lr = 1e-6`` that is every weight with ``|w| > ~3e-4``: almost the
whole model. The HF/TRL remedy is float32 storage (master weights, gradients and optimiser state) with
bf16 autocast compute (``dtype: float32`` with ``bf16: true``), or DeepSpeed, which keeps a float32
master copy of bf16 weights. docs/training.md, "Precision and memory", gives the numbers.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

# Explicit mantissa bits of the 16-bit float formats (float32 has 23: its ulp is 2^-23 relative).
_MANTISSA_BITS = {torch.bfloat16: 7, torch.float16: 10}
# A typical trained weight magnitude of the Qwen2.5 / Llama families (their configs' initializer_range):
# the start-up check, which runs before the model is loaded, judges the learning rate against it.
TYPICAL_WEIGHT = 0.02
# More stalled weights than this and the run is refused.
MAX_STALLED_FRACTION = 0.5


def half_ulp(weights: torch.Tensor, dtype: torch.dtype | None = None) -> torch.Tensor:
    """Half the spacing of ``dtype`` numbers at each weight: the smallest change that is not rounded away.

    Args:
        weights: any shape; its values (read in float32).
        dtype: the storage format (default: ``weights.dtype``); bfloat16 or float16.

    Returns:
        A float32 tensor of ``weights``' shape. A weight ``|w| = m * 2^e`` with ``m`` in [0.5, 1) has an
        ulp of ``2^(e - 1 - mantissa_bits)``; zero is given 0 (any step moves it).

    Raises:
        ValueError: for a dtype other than bfloat16 or float16.
    """
    dtype = weights.dtype if dtype is None else dtype
    if dtype not in _MANTISSA_BITS:
        raise ValueError(f"half_ulp takes a bfloat16 or float16 dtype, got {dtype}")
    values = weights.detach().to(torch.float32)
    _, exponent = torch.frexp(values)
    half = torch.ldexp(torch.ones_like(values), exponent - 2 - _MANTISSA_BITS[dtype])
    return torch.where(values == 0, torch.zeros_like(values), half)


def stalled_fraction(parameters: Iterable[torch.Tensor], learning_rate: float) -> float:
    """The fraction of trainable weights that a step of size ``learning_rate`` cannot change.

    Only 16-bit parameters can stall here (a float32 weight moves for any step above 2^-24 of
    itself); parameters without ``requires_grad`` are skipped.

    Args:
        parameters: the model's parameters (e.g. ``model.parameters()``).
        learning_rate: the optimiser's step size.

    Returns:
        Stalled weights over trainable weights, in [0, 1] (0 with no trainable weight).
    """
    stalled = total = 0
    for p in parameters:
        if not p.requires_grad:
            continue
        total += p.numel()
        if p.dtype in _MANTISSA_BITS:
            stalled += int((half_ulp(p) >= learning_rate).sum())
    return stalled / total if total else 0.0


def _fix(dtype_name: str) -> str:
    return (
        f"load the weights in float32 and compute in bf16 (dtype: float32 with bf16: true, as the paper configs do), "
        f"train LoRA adapters (use_peft: true; PEFT keeps them in float32), or use DeepSpeed (it keeps float32 master "
        f"weights of {dtype_name} ones)"
    )


def check_update_precision(model: torch.nn.Module, learning_rate: float, *, master_copy: bool) -> float:
    """Refuses a model whose stored weights an optimiser step at ``learning_rate`` would not change.

    Args:
        model: the policy as it will be trained (its trainable parameters as stored).
        learning_rate: the peak learning rate.
        master_copy: whether the optimiser keeps float32 master weights of 16-bit ones (DeepSpeed).

    Returns:
        The stalled fraction (0 with a master copy).

    Raises:
        ValueError: if more than ``MAX_STALLED_FRACTION`` of the trainable weights would stall.
    """
    if master_copy:
        return 0.0
    params = [p for p in model.parameters() if p.requires_grad]
    fraction = stalled_fraction(params, learning_rate)
    if fraction > MAX_STALLED_FRACTION:
        dtype = next(p.dtype for p in params if p.dtype in _MANTISSA_BITS)
        name = str(dtype).removeprefix("torch.")
        raise ValueError(
            f"learning_rate={learning_rate:g} cannot train this model: its weights are stored in {name} and the "
            f"optimiser keeps no float32 master copy, so a step of that size is below half the {name} spacing of "
            f"{fraction:.1%} of the trainable weights and rounds away; {_fix(name)}"
        )
    return fraction


def check_precision_config(dtype: str | None, learning_rate: float, *, peft: bool, deepspeed: bool) -> None:
    """The start-up form of :func:`check_update_precision`, before the model is loaded.

    Judges ``learning_rate`` against a weight of magnitude :data:`TYPICAL_WEIGHT` stored in ``dtype``.

    Args:
        dtype: the load dtype of the policy (``ModelConfig.dtype``/``model_init_kwargs``), e.g. ``"bfloat16"``.
        learning_rate: the peak learning rate.
        peft: LoRA adapters are trained (they are kept in float32), not the stored weights.
        deepspeed: DeepSpeed trains the run (float32 master weights).

    Raises:
        ValueError: for full fine-tuning of 16-bit weights without a master copy at a learning rate below
            half the 16-bit spacing at :data:`TYPICAL_WEIGHT`.
    """
    torch_dtype = {"bfloat16": torch.bfloat16, "float16": torch.float16}.get(str(dtype).removeprefix("torch."))
    if torch_dtype is None or peft or deepspeed:
        return
    resolution = float(half_ulp(torch.tensor([TYPICAL_WEIGHT]), torch_dtype))
    if learning_rate <= resolution:
        raise ValueError(
            f"dtype={dtype} with learning_rate={learning_rate:g} would not train: the weights would be stored in "
            f"{dtype} without a float32 master copy, and a step of {learning_rate:g} is below half the {dtype} "
            f"spacing ({resolution:.2g}) of a weight of {TYPICAL_WEIGHT}: most updates round away; {_fix(str(dtype))}"
        )
