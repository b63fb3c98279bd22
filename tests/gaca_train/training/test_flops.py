"""FLOP accounting: the shape's counts equal what torch counts on the model itself."""

from __future__ import annotations

import torch
from torch.utils.flop_counter import FlopCounterMode

from gaca_train.experiments.tiny import build_tiny_model, build_tokenizer
from gaca_train.training.flops import ModelShape, forward_flops, matmul_peak


def _model():
    tokenizer = build_tokenizer(["take the road to the mill", "walk to the old yard and look around"])
    return build_tiny_model(tokenizer, hidden_size=32, num_layers=3, num_heads=4)


def test_linear_and_head_flops_equal_torchs_count_of_the_models_matmuls():
    model = _model().eval()
    shape = ModelShape.from_config(model.config)
    assert (shape.layers, shape.heads, shape.kv_heads, shape.head_dim) == (3, 4, 2, 8)
    tokens = 11
    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter:
        model(torch.arange(1, tokens + 1).unsqueeze(0))
    counts = counter.get_flop_counts()["Global"]
    matmuls = sum(v for op, v in counts.items() if "mm" in str(op) and "bmm" not in str(op))
    # Every position goes through the LM head in a plain forward (no scored-only head).
    assert matmuls == shape.linear_per_token * tokens + shape.head_per_token * tokens
    # forward_flops: the same plus causal attention, T^2 / 2 pairs of a row of T tokens.
    expected = shape.linear_per_token * tokens + shape.attention_per_pair * tokens**2 / 2 + shape.head_per_token * 3
    assert forward_flops(shape, tokens, tokens**2, 3) == expected


def test_attention_flops_of_a_pair_match_torchs_count_of_full_attention():
    model = _model().eval()
    model.config._attn_implementation = "eager"  # plain matmuls, which torch's counter sees (not CPU flash's)
    shape = ModelShape.from_config(model.config)
    tokens = 16
    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter:
        model(torch.arange(1, tokens + 1).unsqueeze(0))
    counts = counter.get_flop_counts()["Global"]
    attention = sum(v for op, v in counts.items() if "attention" in str(op) or "bmm" in str(op))
    # torch counts the full (non-causal) T x T scores and values; the accounting counts a causal half.
    assert attention == shape.attention_per_pair * tokens**2


def test_matmul_peak_reports_each_shape_and_the_best():
    peak = matmul_peak(ModelShape(2, 64, 4, 2, 16, 128, 100), rows=256, seconds=0.3)
    assert set(peak) == {"square", "mlp", "projection", "peak"}
    assert peak["peak"] == max(peak["square"], peak["mlp"], peak["projection"]) > 0
