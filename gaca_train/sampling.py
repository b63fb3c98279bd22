"""Sampling with log-probs without the waste of one padded ``model.generate`` call.

:func:`sample_with_logprobs` draws from the same distribution as ``model.generate`` with the same
generation config (transformers' own logits processors, in its order, then a multinomial draw), and
records each sampled token's log-prob as :func:`gaca_train.rollout.generate_with_logprobs` does
(``log_softmax(raw logits / temperature)``). What it does not compute:

* a prompt that several rows share (the siblings of a task group start from one first prompt) is
  prefilled once, and its KV cache is shared by those rows;
* prompts are prefilled in buckets of similar length, so a short prompt is not padded to the
  longest of the batch;
* a row that has sampled an end-of-sequence token leaves the decode batch.

The random draws differ from ``generate``'s (other rows share each step's draw), so a seed gives
other tokens, with the same distribution. Falls back to ``generate`` for what it does not cover:
beam search or greedy decoding, encoder-decoder models, a static or other non-dynamic cache.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

import torch
from transformers import DynamicCache

# A prefill bucket holds prompts at least this fraction of its longest one's length.
BUCKET_RATIO = 0.85


class ComputedTokens:
    """Positions the sampling forward passes ran in this process (prefill padding and finished rows included).

    Both samplers add to :data:`COMPUTED`; the trainer logs the difference over a rollout
    (``rollout/computed_tokens``).
    """

    def __init__(self) -> None:
        self.total = 0


COMPUTED = ComputedTokens()


def supports(model: Any, generation_config: Any) -> bool:
    """Whether :func:`sample_with_logprobs` covers this model and config (else ``model.generate``)."""
    config = getattr(model, "config", None)
    return (
        bool(generation_config.do_sample)
        and (generation_config.num_beams or 1) == 1
        and not getattr(config, "is_encoder_decoder", False)
        and generation_config.cache_implementation in (None, "dynamic")
        and generation_config.max_new_tokens is not None
        and hasattr(model, "_get_logits_processor")
    )


def _cache_argument(model: Any) -> str:
    """The forward's name for the KV cache: ``cache`` (transformers >= 5.25) or ``past_key_values``."""
    forward = type(model.get_base_model() if hasattr(model, "get_base_model") else model).forward
    return "cache" if "cache" in inspect.signature(forward).parameters else "past_key_values"


def prefill_buckets(lengths: Sequence[int], ratio: float = BUCKET_RATIO) -> list[list[int]]:
    """Indices of prompts grouped by length, longest first: each bucket's prompts >= ratio x its longest."""
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    buckets: list[list[int]] = []
    for i in order:
        if buckets and lengths[i] >= ratio * lengths[buckets[-1][0]]:
            buckets[-1].append(i)
        else:
            buckets.append([i])
    return buckets


def _prefill(model: Any, prompts: list[list[int]], pad_token_id: int, device: torch.device):
    """KV cache ([prompts, heads, width, dim] per layer, left-padded), mask and last logits of ``prompts``."""
    width = max(len(p) for p in prompts)
    layers: list[list[tuple[torch.Tensor, torch.Tensor]]] = []
    masks, logits, order = [], [], []
    for bucket in prefill_buckets([len(p) for p in prompts]):
        longest = len(prompts[bucket[0]])
        ids = torch.full((len(bucket), longest), pad_token_id, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for row, i in enumerate(bucket):
            ids[row, longest - len(prompts[i]) :] = torch.tensor(prompts[i])
            mask[row, longest - len(prompts[i]) :] = 1
        positions = (mask.cumsum(1) - 1).clamp(min=0)
        COMPUTED.total += ids.numel()
        out = model(
            input_ids=ids.to(device),
            attention_mask=mask.to(device),
            position_ids=positions.to(device),
            use_cache=True,
            logits_to_keep=1,
        )
        pad = width - longest
        cache = getattr(out, "cache", None) or out.past_key_values
        layers.append(
            [
                (
                    torch.nn.functional.pad(layer.keys, (0, 0, pad, 0)),
                    torch.nn.functional.pad(layer.values, (0, 0, pad, 0)),
                )
                for layer in cache.layers
            ]
        )
        masks.append(torch.nn.functional.pad(mask, (pad, 0)))
        logits.append(out.logits[:, -1, :].float())
        order += bucket
    back = torch.empty(len(order), dtype=torch.long)
    back[torch.tensor(order)] = torch.arange(len(order))
    back = back.to(device)
    keys_values = [
        (torch.cat([b[k][0] for b in layers])[back], torch.cat([b[k][1] for b in layers])[back])
        for k in range(len(layers[0]))
    ]
    return keys_values, torch.cat(masks)[back.cpu()], torch.cat(logits)[back]


def sample_with_logprobs(
    model: Any,
    prompt_ids: list[list[int]],
    *,
    pad_token_id: int,
    eos_token_ids: Sequence[int],
    generation_config: Any,
    temperature: float = 1.0,
) -> tuple[list[list[int]], list[list[float]]]:
    """Samples a completion per prompt and the log-prob of each sampled token (see the module docstring).

    Args:
        model: a causal LM (unwrapped for generation) whose config :func:`supports`.
        prompt_ids: token ids per prompt (unpadded).
        pad_token_id: id of padding.
        eos_token_ids: ids that end a completion (kept as its last token).
        generation_config: a ``transformers.GenerationConfig`` (sampling settings, ``max_new_tokens``).
        temperature: the sampling temperature, applied to the recorded log-probs.

    Returns:
        Per prompt, the completion token ids (up to and including the first EOS) and their log-probs.
    """
    device = next(model.parameters()).device
    with torch.no_grad():
        return _sample(model, prompt_ids, pad_token_id, eos_token_ids, generation_config, temperature, device)


def _sample(model, prompt_ids, pad_token_id, eos_token_ids, generation_config, temperature, device):
    distinct: dict[tuple[int, ...], int] = {}
    owner = torch.tensor([distinct.setdefault(tuple(p), len(distinct)) for p in prompt_ids], dtype=torch.long)
    prompts = [list(p) for p in distinct]
    keys_values, prompt_mask, logits = _prefill(model, prompts, pad_token_id, device)
    rows = owner.to(device)
    cache = DynamicCache(ddp_cache_data=[(k[rows], v[rows]) for k, v in keys_values], config=model.config)
    mask = prompt_mask[owner].to(device)
    logits = logits[rows]
    width = mask.shape[1]
    # The processors see each row as generate does: its left-padded prompt and the tokens so far.
    sequences = torch.full((len(prompt_ids), width), pad_token_id, dtype=torch.long, device=device)
    for i, p in enumerate(prompt_ids):
        sequences[i, width - len(p) :] = torch.tensor(p, device=device)
    processors = model._get_logits_processor(
        generation_config=generation_config, input_ids_seq_length=width, device=device
    )
    positions = torch.tensor([len(p) for p in prompt_ids], device=device)
    eos = torch.tensor(list(eos_token_ids), device=device)
    cache_argument = _cache_argument(model)  # once, not at every decode step (inspect.signature is slow)
    active = torch.arange(len(prompt_ids), device=device)  # the rows still sampling, in the decode batch's order
    tokens: list[list[int]] = [[] for _ in prompt_ids]
    logps: list[list[float]] = [[] for _ in prompt_ids]
    for step in range(generation_config.max_new_tokens):
        scores = processors(sequences, logits.clone())
        chosen = torch.multinomial(torch.softmax(scores, dim=-1), num_samples=1).squeeze(1)
        logp = torch.log_softmax(logits / temperature, dim=-1).gather(1, chosen.unsqueeze(1)).squeeze(1)
        for row, token, value in zip(active.tolist(), chosen.tolist(), logp.tolist(), strict=True):
            tokens[row].append(token)
            logps[row].append(value)
        going = ~torch.isin(chosen, eos)
        if step == generation_config.max_new_tokens - 1 or not bool(going.any()):
            break
        if not bool(going.all()):  # finished rows leave the decode batch
            keep = going.nonzero().squeeze(1)
            cache.batch_select_indices(keep)
            active, chosen, mask, sequences, positions = (
                x[keep] for x in (active, chosen, mask, sequences, positions)
            )
        mask = torch.cat([mask, mask.new_ones((len(active), 1))], dim=1)
        sequences = torch.cat([sequences, chosen.unsqueeze(1)], dim=1)
        COMPUTED.total += len(active)
        out = model(
            input_ids=chosen.unsqueeze(1),
            attention_mask=mask,
            position_ids=positions.unsqueeze(1),
            use_cache=True,
            **{cache_argument: cache},
        )
        positions = positions + 1
        logits = out.logits[:, -1, :].float()
    return tokens, logps
