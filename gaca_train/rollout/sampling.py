"""Sampling with log-probs without the waste of one padded ``model.generate`` call.

:func:`sample_with_logprobs` draws from the same distribution as ``model.generate`` with the same
generation config (transformers' own logits processors, in its order, then a multinomial draw), and
records each sampled token's log-prob as :func:`gaca_train.rollout.policy.generate_with_logprobs` does
(``log_softmax(raw logits / temperature)``). What it does not compute:

* a prompt that several rows share (the siblings of a task group start from one first prompt) is
  prefilled once, and its KV cache is shared by those rows;
* prompts are prefilled in buckets of similar length, so a short prompt is not padded to the
  longest of the batch;
* a row that has sampled an end-of-sequence token leaves the decode batch.

The random draws differ from ``generate``'s (other rows share each step's draw), so a seed gives
other tokens, with the same distribution.

Generation options. The config is prepared as ``generate`` prepares it, on a copy: the model's own
generation config fills the unset fields, then transformers' defaults (``top_k=50`` where unset);
the special tokens become tensors; ``max_length`` and ``min_length`` count from the width of the
left-padded prompts, as ``generate`` counts them for the same batch. transformers then builds the
processors from it (``model._get_logits_processor``) with the padded prompts and their mask, as
``generate`` passes them, and builds them again for the rows left when rows finish (some hold a
tensor per row). So every option that adds a logits processor is taken, with ``generate``'s
processed scores at every step (``tests/gaca_train/rollout/test_sampling.py`` checks each):

* ``temperature``, ``top_k``, ``top_p``, ``min_p``, ``top_h``, ``typical_p``, ``epsilon_cutoff``,
  ``eta_cutoff``, ``renormalize_logits``, ``remove_invalid_values``;
* ``repetition_penalty`` (the prompt's padding is not penalised), ``no_repeat_ngram_size``,
  ``encoder_repetition_penalty`` and ``encoder_no_repeat_ngram_size`` (a decoder-only ``generate``
  applies them to the left-padded prompt ids, and so does this sampler), ``bad_words_ids``,
  ``sequence_bias``, ``suppress_tokens``, ``begin_suppress_tokens``;
* ``min_length``, ``min_new_tokens``, ``exponential_decay_length_penalty``, ``forced_bos_token_id``,
  ``forced_eos_token_id``, ``watermarking_config``.

Falls back to ``generate`` (:func:`supports` is False) where ``generate`` runs another algorithm
than multinomial sampling with a dynamic KV cache, which it then runs exactly: greedy, beam,
assisted (``prompt_lookup_num_tokens``, ``use_mtp``, ``assistant_early_exit``), DoLa or constrained
decoding; a static, quantized or offloaded cache, or none (``use_cache=False``); a chunked prefill
(``prefill_chunk_size``); encoder-decoder models and models without transformers' dynamic cache; a
config without ``max_new_tokens``.

Refuses with a ValueError (:func:`check_generation_config`: at start-up, from ``GACAConfig``, and at
each call, on the prepared config) a sampling option it cannot reproduce, rather than drop it or
change sampler unannounced: ``max_time`` (fix: ``hf_sampler: generate``); ``guidance_scale``,
``token_healing``, ``stop_strings``, ``num_return_sequences`` > 1 and the ``output_*`` /
``return_dict_in_generate`` outputs, which no sampler of the rollout can take (classifier-free
guidance runs forward passes of its own inside a logits processor, which ``generate``'s log-prob
hook would record too; healing and stop strings need the tokenizer; a rollout samples one completion
per prompt and returns only tokens and log-probs): fix, remove them.

Other fields do nothing in this mode, for ``generate`` as here: beam-only ones (``length_penalty``,
``early_stopping``, ``num_beam_groups``, ``diversity_penalty``, ``low_memory``), ``penalty_alpha``
without greedy decoding, assistant settings without an assistant, cache settings of other caches
(``cache_config``, ``max_cache_len``), compilation (``generate`` compiles static caches only),
``continuous_batching_config`` and ``decoder_start_token_id``. The ``eos_token_id`` of the config
feeds the processors (``min_new_tokens``, ...); rows end at ``eos_token_ids``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import torch
from transformers import DynamicCache, GenerationConfig
from transformers.generation import GenerationMode

# A prefill bucket holds prompts at least this fraction of its longest one's length.
BUCKET_RATIO = 0.85

_GENERATE = "set hf_sampler: generate, or remove it from generation_kwargs"
_REMOVE = "remove it from generation_kwargs (neither hf_sampler can take it)"
_OUTPUTS = ("output_scores", "output_logits", "output_attentions", "output_hidden_states", "return_dict_in_generate")


class ComputedTokens:
    """Positions the sampling forward passes ran in this process (prefill padding and finished rows included).

    Both samplers add to :data:`COMPUTED`; the trainer logs the difference over a rollout
    (``rollout/computed_tokens``).
    """

    def __init__(self) -> None:
        self.total = 0


COMPUTED = ComputedTokens()


def supports(model: Any, generation_config: Any) -> bool:
    """Whether :func:`sample_with_logprobs` covers this model and config (else ``model.generate``).

    The config is judged as ``generate`` would run it: after the model's own generation config has
    filled its unset fields (see the module docstring for what falls back).
    """
    needed = ("_get_logits_processor", "_prepare_generation_config", "_prepare_special_tokens")
    if not all(hasattr(model, name) for name in needed):
        return False
    if getattr(getattr(model, "config", None), "is_encoder_decoder", False):
        return False
    default_cache = getattr(model, "_supports_default_dynamic_cache", None)  # False where a model brings its own
    if default_cache is not None and not default_cache():
        return False
    return _samples(_merged_config(model, generation_config))


def _samples(generation_config: GenerationConfig) -> bool:
    """Whether ``generate`` would sample this config multinomially, with a dynamic KV cache (the lean sampler's)."""
    return (
        generation_config.get_generation_mode() == GenerationMode.SAMPLE
        and generation_config.cache_implementation in (None, "dynamic")
        and generation_config.use_cache is not False
        and generation_config.prefill_chunk_size is None
        and generation_config.max_new_tokens is not None
    )


def check_generation_config(generation_config: GenerationConfig) -> None:
    """Raises for a sampling option the lean sampler cannot reproduce (the module docstring lists them).

    Args:
        generation_config: the config the lean sampler would run.

    Raises:
        ValueError: naming the option, its value, why it is refused, and the fix.
    """
    config = generation_config
    refused: list[tuple[str, Any, str, str]] = []  # (option, value, why, fix)
    if config.max_time is not None:
        refused.append(("max_time", config.max_time, "it has no time limit", _GENERATE))
    if config.guidance_scale is not None and config.guidance_scale != 1:
        why = (
            "classifier-free guidance runs forward passes of its own inside a logits processor, whose logits "
            "the samplers would take for the policy's"
        )
        refused.append(("guidance_scale", config.guidance_scale, why, _REMOVE))
    if config.token_healing:
        why = "token healing needs the tokenizer, which the samplers are not given"
        refused.append(("token_healing", config.token_healing, why, _REMOVE))
    if config.stop_strings is not None:
        why = "stop strings need the tokenizer, which the samplers are not given (end completions with eos_token_id)"
        refused.append(("stop_strings", config.stop_strings, why, _REMOVE))
    if (config.num_return_sequences or 1) != 1:
        why = "a rollout samples one completion per prompt (rollouts_per_task sets the samples per task)"
        refused.append(("num_return_sequences", config.num_return_sequences, why, _REMOVE))
    for name in _OUTPUTS:
        if getattr(config, name, None):
            why = "the samplers return only token ids and their log-probs"
            refused.append((name, getattr(config, name), why, _REMOVE))
    if refused:
        name, value, why, fix = refused[0]
        raise ValueError(
            f"generation option {name}={value!r} is not supported by the lean sampler (hf_sampler: lean): {why}; {fix}"
        )


def check_generation_kwargs(generation_kwargs: dict[str, Any] | None) -> None:
    """Start-up check of ``GRPOConfig.generation_kwargs`` for the lean sampler (see :func:`check_generation_config`).

    Options that make ``generate`` run another algorithm (greedy, beam, ...) fall back to it, so are not
    refused; the model's own generation config is checked at the first call.

    Raises:
        ValueError: naming a refused option, its value, why, and the fix.
    """
    # As TRL builds it (it samples, to max_completion_length), then the user's options on top.
    config = GenerationConfig(**{"do_sample": True, "max_new_tokens": 1, **(generation_kwargs or {})})
    if _samples(config):
        check_generation_config(config)


def _merged_config(model: Any, generation_config: Any) -> GenerationConfig:
    """A copy of ``generation_config`` as ``generate`` prepares it: unset fields from the model's, then defaults."""
    return model._prepare_generation_config(generation_config)[0]


def _prepare_for_width(model: Any, generation_config: GenerationConfig, width: int, device: torch.device) -> None:
    """Completes a merged config in place as ``generate`` does for left-padded prompts ``width`` tokens wide.

    The special tokens become tensors (``_eos_token_tensor``, ... which some processors read), and
    ``max_length`` / ``min_length`` count from ``width`` (``generate``'s ``_prepare_generated_length``
    with ``max_new_tokens`` set, which :func:`supports` requires).
    """
    model._prepare_special_tokens(generation_config, kwargs_has_attention_mask=True, device=device)
    generation_config.max_length = generation_config.max_new_tokens + width
    if generation_config.min_new_tokens is not None:
        generation_config.min_length = generation_config.min_new_tokens + width


def _logits_processors(
    model: Any, generation_config: GenerationConfig, prompts: torch.Tensor, prompt_mask: torch.Tensor
) -> Any:
    """transformers' processors for rows whose left-padded prompts are ``prompts`` ([rows, width]), as generate's.

    ``generate`` passes its padded prompts as ``encoder_input_ids`` (the encoder penalties of a
    decoder-only model read them) and their mask (the repetition penalty skips each row's padding).
    """
    return model._get_logits_processor(
        generation_config=generation_config,
        input_ids_seq_length=prompts.shape[1],
        encoder_input_ids=prompts,
        device=prompts.device,
        model_kwargs={"attention_mask": prompt_mask},
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
        generation_config: a ``transformers.GenerationConfig`` (sampling settings, ``max_new_tokens``); not modified.
        temperature: the sampling temperature, applied to the recorded log-probs.

    Returns:
        Per prompt, the completion token ids (up to and including the first EOS) and their log-probs.

    Raises:
        ValueError: for an option the lean sampler refuses (:func:`check_generation_config`).
    """
    device = next(model.parameters()).device
    with torch.no_grad():
        return _sample(model, prompt_ids, pad_token_id, eos_token_ids, generation_config, temperature, device)


def _draw(_rows: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
    return torch.multinomial(torch.softmax(scores, dim=-1), num_samples=1).squeeze(1)


def _sample(
    model,
    prompt_ids,
    pad_token_id,
    eos_token_ids,
    generation_config,
    temperature,
    device,
    choose: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = _draw,
):
    """:func:`sample_with_logprobs` under ``no_grad``; ``choose`` picks each step's tokens.

    ``choose(rows, scores)`` gets the indices of the rows still decoding (into ``prompt_ids``) and
    their processed scores ([rows, vocab]) and returns a token per row: a multinomial draw here, the
    given tokens in the tests that teacher-force both samplers to compare their scores.
    """
    config = _merged_config(model, generation_config)  # a copy: the caller's config stays as it was
    check_generation_config(config)
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
    _prepare_for_width(model, config, width, device)
    processors = _logits_processors(model, config, sequences, mask)
    positions = torch.tensor([len(p) for p in prompt_ids], device=device)
    eos = torch.tensor(list(eos_token_ids), device=device)
    cache_argument = _cache_argument(model)  # once, not at every decode step (inspect.signature is slow)
    active = torch.arange(len(prompt_ids), device=device)  # the rows still sampling, in the decode batch's order
    tokens: list[list[int]] = [[] for _ in prompt_ids]
    logps: list[list[float]] = [[] for _ in prompt_ids]
    for step in range(config.max_new_tokens):
        scores = processors(sequences, logits.clone())
        chosen = choose(active, scores)
        logp = torch.log_softmax(logits / temperature, dim=-1).gather(1, chosen.unsqueeze(1)).squeeze(1)
        for row, token, value in zip(active.tolist(), chosen.tolist(), logp.tolist(), strict=True):
            tokens[row].append(token)
            logps[row].append(value)
        going = ~torch.isin(chosen, eos)
        if step == config.max_new_tokens - 1 or not bool(going.any()):
            break
        if not bool(going.all()):  # finished rows leave the decode batch
            keep = going.nonzero().squeeze(1)
            cache.batch_select_indices(keep)
            active, chosen, mask, sequences, positions = (
                x[keep] for x in (active, chosen, mask, sequences, positions)
            )
            # Some processors hold a tensor per row (the prompt's padding, its ids): built again for the rows left.
            processors = _logits_processors(model, config, sequences[:, :width], mask[:, :width])
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
