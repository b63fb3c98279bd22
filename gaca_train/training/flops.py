"""FLOPs of a causal LM's passes over step rows, and this machine's matmul peak to compare them with.

The work of a pass is counted per row, as the row needs it: every token through the linear layers,
causal attention over the row's own context, and the LM head at the scored positions. Padding and
prefixes that a layout computes once for several rows are not counted: the same rows cost the same
FLOPs in every layout, so FLOP/s compares layouts and samplers on equal work. A backward pass counts
twice its forward. Element-wise work (norms, activations, softmax) is not counted.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import torch


@dataclass(frozen=True)
class ModelShape:
    """The matmul sizes of a decoder-only transformer (LLaMA / Qwen2 layout: gated MLP, grouped KV heads)."""

    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int

    @classmethod
    def from_config(cls, config: Any) -> ModelShape:
        config = config.get_text_config() if hasattr(config, "get_text_config") else config
        heads = config.num_attention_heads
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
        return cls(
            layers=config.num_hidden_layers,
            hidden=config.hidden_size,
            heads=heads,
            kv_heads=getattr(config, "num_key_value_heads", None) or heads,
            head_dim=head_dim,
            intermediate=config.intermediate_size,
            vocab=config.vocab_size,
        )

    @property
    def linear_per_token(self) -> int:
        """FLOPs of one token through every layer's projections (q, k, v, o) and gated MLP (3 matmuls)."""
        attention = self.hidden * self.head_dim * (2 * self.heads + 2 * self.kv_heads)
        return 2 * self.layers * (attention + 3 * self.hidden * self.intermediate)

    @property
    def attention_per_pair(self) -> int:
        """FLOPs of one (query, key) pair over every layer: its score and its share of the weighted values."""
        return 2 * 2 * self.layers * self.heads * self.head_dim

    @property
    def head_per_token(self) -> int:
        """FLOPs of the LM head at one scored position."""
        return 2 * self.hidden * self.vocab


def forward_flops(shape: ModelShape, tokens: float, token_squares: float, scored: float) -> float:
    """One forward pass over rows with these totals: tokens, sum of squared row lengths, scored positions.

    Causal attention over a row of T tokens takes T (T + 1) / 2 pairs, counted as T^2 / 2.
    """
    linear = shape.linear_per_token * tokens
    return linear + shape.attention_per_pair * token_squares / 2 + shape.head_per_token * scored


def matmul_peak(shape: ModelShape, rows: int = 2048, seconds: float = 1.0) -> dict[str, float]:
    """Float32 GFLOP/s of ``torch.mm`` on this machine at the torch thread count in force.

    Measured at the model's own layer shapes (``rows`` tokens times each projection) and at a square
    1024 x 1024 product; each shape repeats for about ``seconds / 3`` and keeps its best time.
    """
    shapes = {
        "square": (1024, 1024, 1024),
        "mlp": (rows, shape.hidden, shape.intermediate),
        "projection": (rows, shape.hidden, shape.heads * shape.head_dim),
    }
    out = {}
    for name, (m, k, n) in shapes.items():
        a, b = torch.randn(m, k), torch.randn(k, n)
        torch.mm(a, b)  # warm-up
        best, deadline = float("inf"), time.perf_counter() + seconds / len(shapes)
        while time.perf_counter() < deadline:
            tic = time.perf_counter()
            torch.mm(a, b)
            best = min(best, time.perf_counter() - tic)
        out[name] = 2 * m * k * n / best / 1e9
    out["peak"] = max(out.values())
    return out
