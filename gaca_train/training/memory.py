"""Peak per-device memory of a training config's largest micro-batch: an estimate before any GPU is used.

The formula (docs/training.md, "Precision and memory"), in bytes, for a decoder of ``P`` parameters
(``P_t`` of them trained: all, or the LoRA adapters), hidden size ``h``, ``L`` layers, MLP width ``I``,
key/value width ``k``, vocabulary ``V``, a micro-batch of ``T`` padded tokens of which ``C`` are
completion tokens, weights stored in ``w`` bytes (4: float32 master weights) and computed in ``c`` bytes
(2: bf16 autocast):

* ``weights``: ``w x P``;
* ``autocast_copy``: ``c x P`` when ``c < w`` (autocast caches the bf16 copy of every weight it casts
  during the forward pass);
* ``gradients``: ``w x P_t`` (a float32 LoRA adapter: ``4 x P_t``);
* ``optimizer``: AdamW's two moments in the parameters' dtype, ``2 x w x P_t``;
* ``reference_model``: TRL's KL reference, loaded like the policy, ``w x P`` when ``beta > 0`` without
  LoRA (with LoRA the reference is the base model with the adapter off: no copy);
* ``activations`` kept for the backward pass. The residual stream keeps the embeddings' dtype (``w``
  bytes under autocast). With gradient checkpointing one hidden state per layer, ``w x T x h x L``, plus
  one layer recomputed in full; without, every layer in full: ``c x T x (8h + 2k + 4I) x L`` (the inputs
  and outputs of the norms, projections and SwiGLU MLP);
* ``row_attention``: the packed update layout (``update_layout: packed``, the default) with SDPA runs
  attention by rows (:mod:`gaca_train.training.packing`): each layer gathers its rows' queries, keys and values
  and SDPA's output before scattering it back, ``c x T x (2h + 2k)`` per layer kept for the backward pass
  (one layer with gradient checkpointing); a micro-batch's rows hold at most ``T`` tokens in full, and
  as rows that share a prompt hold it once, up to all ``T`` computed tokens can be completion tokens
  (``C = T``);
* ``packed_mask``: with eager attention the packed layout stacks sequences of at most ``pack_length``
  (``l``) positions with a boolean tree mask of ``T x l`` bytes;
* ``lm_head``: TRL 1.16 scores completion tokens with a chunked LM head that never materialises the
  ``C x V`` logits. Its peak is the backward pass: a ``min(C, 4096) x 32768`` tile and a ``32768 x h``
  weight slice in ``c`` bytes, and float32 gradients of the hidden states (``4 x C x h``) and of the head
  (``4 x V x h``);
* ``vllm``: a colocated vLLM engine holds ``vllm_gpu_memory_utilization x GPU memory`` (weights, KV cache,
  activations; since vLLM 0.21 its CUDA graphs too) unless sleep mode frees it for the update;
  ``vllm_cuda_graphs`` is an allowance for the graphs' pool, which vLLM keeps while asleep and, with
  ``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0``, outside that share.

ZeRO-3 over ``n`` GPUs (DeepSpeed, bf16): bf16 weights ``2P / n`` plus the largest gathered parameter
group (a layer, or the ``V x h`` embedding), bf16 gradients ``2P_t / n``, and float32 master weights and
moments ``12P_t / n``: 16 bytes per parameter over ``n``. The reference model is sharded the same way.

The total leaves out the CUDA context and allocator fragmentation (allow ~10%).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

GB = 1024**3
# TRL 1.16's chunked LM head (trl/kernels/chunked_logprob.py): token tile x vocabulary tile.
LM_HEAD_TOKEN_TILE = 4096
LM_HEAD_VOCAB_TILE = 32768
# Allowance for vLLM's CUDA-graph pool (a few hundred MiB for 0.5-7B models at TRL's batch sizes).
VLLM_CUDA_GRAPHS_GB = 1.0


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
    weight_bytes: int = 4,
    compute_bytes: int = 2,
    lora_rank: int | None = None,
    lora_targets: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj"),
    zero3_gpus: int = 1,
    reference_model: bool = False,
    vllm_gb: float = 0.0,
    vllm_cuda_graphs_gb: float = 0.0,
    pack_length: int | None = None,
    row_attention: bool = False,
) -> dict[str, float]:
    """Peak memory of one device in GiB, by part (see the module docstring for each formula).

    Args:
        arch: the model's sizes.
        micro_batch_tokens: padded tokens of the largest micro-batch (``T``).
        completion_tokens: completion tokens among them (``C``).
        gradient_checkpointing: recompute layer activations in the backward pass.
        weight_bytes: bytes per stored weight (4: float32 master weights; 2: weights stored in bf16).
        compute_bytes: bytes per value of the forward pass (2 under bf16 autocast, 4 in float32).
        lora_rank: train LoRA adapters of this rank (kept in float32) instead of every weight.
        lora_targets: the adapted projections.
        zero3_gpus: DeepSpeed ZeRO-3 over this many GPUs (1: no sharding).
        reference_model: TRL keeps a KL reference copy of the model (``beta`` > 0 without LoRA).
        vllm_gb: memory a colocated vLLM engine holds during the update phase.
        vllm_cuda_graphs_gb: vLLM's CUDA-graph pool, kept even while the engine sleeps.
        pack_length: the packed layout's longest sequence under eager attention (None: no tree mask).
        row_attention: the packed layout under SDPA (attention by rows).

    Returns:
        GiB per part (``weights``, ``autocast_copy``, ``gradients``, ``optimizer``, ``reference_model``,
        ``activations``, ``row_attention``, ``packed_mask``, ``lm_head``, ``vllm``, ``vllm_cuda_graphs``) and
        their ``total``.
    """
    h, layers, vocab = arch.hidden_size, arch.num_layers, arch.vocab_size
    params = arch.num_parameters
    lora = lora_rank is not None
    trained = arch.lora_parameters(lora_rank, lora_targets) if lora else params
    if zero3_gpus > 1:
        layer_params = (params - vocab * h * (1 if arch.tie_word_embeddings else 2)) / layers
        gathered = 2 * max(layer_params, vocab * h)
        weights = 2 * params / zero3_gpus + gathered
        sharded = 1 if lora else zero3_gpus  # ZeRO-3 shards the frozen base, not the (replicated, small) adapters
        autocast_copy, gradients, optimizer = 0.0, 2 * trained / sharded, 12 * trained / sharded
        reference = weights if reference_model and not lora else 0.0
        residual_bytes = 2
    else:
        state_bytes = 4 if lora else weight_bytes  # PEFT keeps adapters in float32
        weights = weight_bytes * params
        autocast_copy = compute_bytes * params if compute_bytes < weight_bytes else 0.0
        gradients, optimizer = state_bytes * trained, 2 * state_bytes * trained
        reference = weight_bytes * params if reference_model and not lora else 0.0
        residual_bytes = weight_bytes
    c, tokens = compute_bytes, micro_batch_tokens
    full_layer = c * tokens * (8 * h + 2 * arch.kv_size + 4 * arch.intermediate_size)
    kept = residual_bytes * tokens * h * layers + full_layer  # one hidden state per layer + one layer recomputed
    activations = kept if gradient_checkpointing else full_layer * layers
    rows_layer = c * tokens * (2 * h + 2 * arch.kv_size)  # gathered queries, keys, values; SDPA's output
    head_trained = not lora
    lm_head = (
        c * min(completion_tokens, LM_HEAD_TOKEN_TILE) * LM_HEAD_VOCAB_TILE
        + c * LM_HEAD_VOCAB_TILE * h
        + 4 * completion_tokens * h
        + (4 * vocab * h if head_trained else 0)
    )
    parts = {
        "weights": weights / GB,
        "autocast_copy": autocast_copy / GB,
        "gradients": gradients / GB,
        "optimizer": optimizer / GB,
        "reference_model": reference / GB,
        "activations": activations / GB,
        "row_attention": (rows_layer * (1 if gradient_checkpointing else layers) if row_attention else 0) / GB,
        "packed_mask": (tokens * pack_length if pack_length else 0) / GB,
        "lm_head": lm_head / GB,
        "vllm": vllm_gb,
        "vllm_cuda_graphs": vllm_cuda_graphs_gb,
    }
    parts["total"] = sum(parts.values())
    return parts


# GACAConfig's defaults for the fields the plan reads (tests/scripts/test_plan_memory_and_dry_run.py
# checks them against the dataclass, which this module does not import: it would pull in TRL).
CONFIG_DEFAULTS: dict[str, Any] = {
    "beta": 0.0,
    "max_completion_length": 512,
    "gradient_checkpointing": True,
    "use_vllm": False,
    "vllm_mode": "colocate",
    "vllm_gpu_memory_utilization": 0.3,
    "vllm_enable_sleep_mode": False,
    "use_peft": False,
    "lora_r": 16,
    "update_layout": "packed",
    "pack_length": None,
}
# The packed layout's sequence length under eager attention when pack_length is None (GACATrainer's).
DEFAULT_PACK_LENGTH = 512


def pack_length_for(pack_length: int | None, attention: str | None) -> int | None:
    """The packed layout's most positions per sequence: as set, else none under SDPA (attention by rows
    needs no [L, L] mask), else :data:`DEFAULT_PACK_LENGTH`."""
    if pack_length is not None:
        return pack_length
    return None if attention in (None, "sdpa") else DEFAULT_PACK_LENGTH


_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


def storage_bytes(dtype: str | None) -> int:
    """Bytes per stored weight for a ``dtype`` setting (``None``/``auto``: the checkpoint's, bf16 for Qwen2.5).

    Raises:
        ValueError: for a dtype the plan does not know.
    """
    name = "bfloat16" if dtype in (None, "auto") else str(dtype).removeprefix("torch.")
    if name not in _BYTES:
        raise ValueError(f"dtype={dtype!r}: expected one of {sorted(_BYTES)} or 'auto'")
    return _BYTES[name]


def plan_for_fields(
    fields: dict[str, Any],
    *,
    gpu_mem_gb: float = 80.0,
    min_prompt_tokens: int = 256,
    model: str | None = None,
    zero3_gpus: int = 1,
    lora_rank: int | None = None,
) -> dict[str, float]:
    """GiB per part for a training YAML's fields (GACAConfig + ModelConfig), as :func:`plan_memory` returns.

    The largest micro-batch holds ``micro_batch_tokens`` computed tokens. In the padded layout the most
    completion tokens among them come from rows of the shortest prompt (``min_prompt_tokens``) and a full
    ``max_completion_length``; in the packed layout (the default) rows that share a prompt hold it once, so
    up to all of them.

    Args:
        fields: the YAML's settings; missing ones take GACAConfig's defaults (:data:`CONFIG_DEFAULTS`).
        gpu_mem_gb: memory of one GPU in GiB (sizes a colocated vLLM engine).
        min_prompt_tokens: the shortest prompt of a micro-batch.
        model: overrides ``model_name_or_path`` (a known id or a local folder).
        zero3_gpus: DeepSpeed ZeRO-3 over this many GPUs (1: none).
        lora_rank: train LoRA adapters of this rank (overrides ``use_peft``/``lora_r``).

    Raises:
        ValueError: without ``micro_batch_tokens`` (unbounded micro-batches), or for an unknown model or dtype.
    """
    get = lambda name: fields.get(name, CONFIG_DEFAULTS.get(name))  # noqa: E731
    arch = architecture_of(model or fields["model_name_or_path"])
    budget = fields.get("micro_batch_tokens")
    if budget is None:
        raise ValueError("the config has no micro_batch_tokens: its micro-batches are unbounded; set one")
    completion = int(get("max_completion_length"))
    rows = max(1, budget // (min_prompt_tokens + completion))
    packed = get("update_layout") == "packed"
    attention = fields.get("attn_implementation")
    weight_bytes = storage_bytes(fields.get("dtype"))
    compute_bytes = 2 if fields.get("bf16") or fields.get("fp16") else weight_bytes
    lora_rank = lora_rank or (int(get("lora_r")) if get("use_peft") else None)
    colocated = bool(get("use_vllm")) and get("vllm_mode") == "colocate"
    asleep = bool(get("vllm_enable_sleep_mode"))
    return plan_memory(
        arch,
        micro_batch_tokens=budget,
        completion_tokens=budget if packed else min(budget, rows * completion),
        pack_length=pack_length_for(get("pack_length"), attention) if packed and attention == "eager" else None,
        row_attention=packed and attention in (None, "sdpa"),
        gradient_checkpointing=bool(get("gradient_checkpointing")),
        weight_bytes=weight_bytes,
        compute_bytes=compute_bytes,
        lora_rank=lora_rank,
        zero3_gpus=zero3_gpus,
        reference_model=float(get("beta")) > 0,
        vllm_gb=float(get("vllm_gpu_memory_utilization")) * gpu_mem_gb if colocated and not asleep else 0.0,
        vllm_cuda_graphs_gb=VLLM_CUDA_GRAPHS_GB if colocated else 0.0,
    )


def format_plan(parts: dict[str, float], gpu_mem_gb: float, label: str) -> tuple[str, bool]:
    """The plan as a Markdown table with a verdict line, and whether it fits ``gpu_mem_gb`` with 10% headroom."""
    lines = [f"memory plan of {label} (GiB per device):", "| part | GiB |", "|---|---|"]
    lines += [f"| {name} | {value:.2f} |" for name, value in parts.items()]
    fits = parts["total"] <= gpu_mem_gb * 0.9  # ~10% for the CUDA context and fragmentation
    lines.append(f"{'fits' if fits else 'does NOT fit'} a {gpu_mem_gb:.0f} GiB GPU (with 10% headroom)")
    return "\n".join(lines), fits
