"""Peak per-device memory of a training config's largest micro-batch: an estimate before any GPU is used.

The formula (docs/training.md, "Memory plan"), in bytes, for a decoder of ``P`` parameters, hidden
size ``h``, ``L`` layers, MLP width ``I``, key/value width ``k`` and vocabulary ``V``, a micro-batch
of ``T`` padded tokens of which ``C`` are completion tokens, and ``b`` bytes per activation (2 in
bf16):

* weights ``b x P`` (a ZeRO-3 run over ``n`` GPUs: ``b x P / n`` plus one gathered layer);
* gradients and AdamW's two moments, in the parameter dtype as the HF Trainer keeps them:
  ``3 x b x P_trained`` (``P_trained``: all parameters, or the LoRA adapters' ``2 x r x (h_in + h_out)``
  per adapted matrix), divided by ``n`` under ZeRO-3;
* activations kept for the backward pass: with gradient checkpointing one hidden state per layer,
  ``b x T x h x L``, plus one layer recomputed in full; without, every layer in full:
  ``b x T x (8h + 2k + 4I) x L`` (the inputs and outputs of the norms, projections and SwiGLU MLP);
* completion logits and their log-softmax: ``C x V x (b + 4)`` (logits in the model dtype, one fp32
  copy for the log-probs), as TRL scores only completion tokens.

The total leaves out the CUDA context and allocator fragmentation (allow ~10%), and a colocated vLLM
engine, which is added as ``vllm_gpu_memory_utilization x GPU memory`` unless its sleep mode frees it
during the update phase.
"""

from __future__ import annotations

from dataclasses import dataclass

GB = 1024**3


@dataclass(frozen=True)
class Architecture:
    """The sizes of a decoder-only transformer that set its memory."""

    hidden_size: int
    num_layers: int
    intermediate_size: int
    num_heads: int
    num_kv_heads: int
    vocab_size: int
    tie_word_embeddings: bool

    @property
    def kv_size(self) -> int:
        """Width of the key (or value) projection."""
        return self.num_kv_heads * self.hidden_size // self.num_heads

    @property
    def num_parameters(self) -> int:
        """Parameters, biases of q/k/v included (the Qwen2 layout)."""
        h, k, i = self.hidden_size, self.kv_size, self.intermediate_size
        attention = h * h + h + 2 * (h * k + k) + h * h
        layer = attention + 3 * h * i + 2 * h
        embeddings = self.vocab_size * h * (1 if self.tie_word_embeddings else 2)
        return embeddings + self.num_layers * layer + h

    def lora_parameters(self, rank: int, targets: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj")) -> int:
        """Trainable parameters of LoRA adapters of ``rank`` on the ``targets`` of every layer."""
        h, k, i = self.hidden_size, self.kv_size, self.intermediate_size
        shapes = {"q_proj": (h, h), "k_proj": (h, k), "v_proj": (h, k), "o_proj": (h, h),
                  "gate_proj": (h, i), "up_proj": (h, i), "down_proj": (i, h)}  # fmt: skip
        return self.num_layers * sum(rank * (a + b) for a, b in (shapes[t] for t in targets))


# Published configs (config.json of each model); plan_memory.py and gpu_smoke.sh use them offline.
ARCHITECTURES: dict[str, Architecture] = {
    "Qwen/Qwen2.5-0.5B-Instruct": Architecture(896, 24, 4864, 14, 2, 151936, True),
    "Qwen/Qwen2.5-1.5B-Instruct": Architecture(1536, 28, 8960, 12, 2, 151936, True),
    "Qwen/Qwen2.5-3B-Instruct": Architecture(2048, 36, 11008, 16, 2, 151936, True),
    "Qwen/Qwen2.5-7B-Instruct": Architecture(3584, 28, 18944, 28, 4, 152064, False),
}


def architecture_of(name_or_path: str) -> Architecture:
    """The architecture of a known model id, or read from a local folder's ``config.json``.

    Raises:
        ValueError: for an unknown id without a local config.
    """
    import json
    from pathlib import Path

    if name_or_path in ARCHITECTURES:
        return ARCHITECTURES[name_or_path]
    config_file = Path(name_or_path) / "config.json"
    if not config_file.is_file():
        raise ValueError(
            f"no architecture for {name_or_path!r}: not one of {sorted(ARCHITECTURES)} and no config.json in that "
            "folder; pass a local model folder"
        )
    c = json.loads(config_file.read_text())
    return Architecture(
        c["hidden_size"], c["num_hidden_layers"], c["intermediate_size"], c["num_attention_heads"],
        c.get("num_key_value_heads", c["num_attention_heads"]), c["vocab_size"], c.get("tie_word_embeddings", False),
    )  # fmt: skip


def plan_memory(
    arch: Architecture,
    *,
    micro_batch_tokens: int,
    completion_tokens: int,
    gradient_checkpointing: bool,
    bytes_per_value: int = 2,
    lora_rank: int | None = None,
    lora_targets: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj"),
    zero3_gpus: int = 1,
    vllm_gb: float = 0.0,
) -> dict[str, float]:
    """Peak memory of one device in GiB, by part (see the module docstring for the formula).

    Args:
        arch: the model's sizes.
        micro_batch_tokens: padded tokens of the largest micro-batch (``T``).
        completion_tokens: completion tokens among them (``C``).
        gradient_checkpointing: recompute layer activations in the backward pass.
        bytes_per_value: 2 for bf16/fp16, 4 for fp32.
        lora_rank: train LoRA adapters of this rank instead of every weight.
        lora_targets: the adapted projections.
        zero3_gpus: shard weights, gradients and optimiser states over this many GPUs (1: no sharding).
        vllm_gb: memory a colocated vLLM engine holds during the update phase.

    Returns:
        GiB per part (``weights``, ``gradients_and_optimizer``, ``activations``, ``logits``, ``vllm``)
        and their ``total``.
    """
    b, h, layers = bytes_per_value, arch.hidden_size, arch.num_layers
    params = arch.num_parameters
    trained = params if lora_rank is None else arch.lora_parameters(lora_rank, lora_targets)
    layer_params = (params - arch.vocab_size * h) / layers
    weights = b * params / zero3_gpus + (b * layer_params if zero3_gpus > 1 else 0)
    states = 3 * b * trained / (zero3_gpus if lora_rank is None else 1)
    full_layer = b * micro_batch_tokens * (8 * h + 2 * arch.kv_size + 4 * arch.intermediate_size)
    kept = b * micro_batch_tokens * h * layers + full_layer  # one hidden state per layer + one layer recomputed
    activations = kept if gradient_checkpointing else full_layer * layers
    logits = completion_tokens * arch.vocab_size * (b + 4)
    parts = {
        "weights": weights / GB,
        "gradients_and_optimizer": states / GB,
        "activations": activations / GB,
        "logits": logits / GB,
        "vllm": vllm_gb,
    }
    parts["total"] = sum(parts.values())
    return parts
