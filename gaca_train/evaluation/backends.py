"""Generation backends of the evaluation (``gaca_train.experiments.evaluate``): HF model, vLLM, chat endpoint.

Every backend samples with the :class:`Sampling` settings and nothing else: the model's own
``generation_config.json`` (e.g. Qwen2.5-Instruct's ``repetition_penalty: 1.05``, ``top_k: 20``) is
not consulted, so a number measured here does not depend on which defaults a checkpoint ships.
"""

from __future__ import annotations

import importlib.util
from dataclasses import asdict, dataclass
from typing import Any

from gaca_train.evaluation.endpoint import ChatEndpoint, RetryPolicy
from gaca_train.rollout.prompts import GenerateFn


@dataclass(frozen=True)
class Sampling:
    """The generation settings of an evaluation.

    Args:
        temperature: sampling temperature (ignored when ``greedy``).
        top_p: nucleus sampling mass (1.0: off).
        top_k: keep the ``top_k`` likeliest tokens (None or 0: off).
        max_new_tokens: most tokens per response.
        greedy: decode greedily (temperature 0).
    """

    temperature: float = 0.4
    top_p: float = 1.0
    top_k: int | None = None
    max_new_tokens: int = 512
    greedy: bool = False

    def __post_init__(self) -> None:
        if self.temperature <= 0 and not self.greedy:
            raise ValueError(f"temperature must be > 0 when sampling, got {self.temperature}; use --greedy instead")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")

    def describe(self) -> str:
        """One line with every setting, e.g. for the start of a run's log."""
        if self.greedy:
            decoding = "greedy"
        else:
            decoding = f"temperature={self.temperature} top_p={self.top_p} top_k={self.top_k or 'off'}"
        return f"{decoding} max_new_tokens={self.max_new_tokens} repetition_penalty=1.0 (model defaults not used)"

    def as_dict(self) -> dict[str, Any]:
        """The settings as a dict (for the report and the episode log)."""
        return asdict(self)

    def hf_generation_config(self, pad_token_id: int, eos_token_ids: list[int]) -> Any:
        """A ``transformers.GenerationConfig`` of exactly these settings."""
        from transformers import GenerationConfig

        sampled = (
            {} if self.greedy else {"temperature": self.temperature, "top_p": self.top_p, "top_k": self.top_k or 0}
        )
        return GenerationConfig(
            max_new_tokens=self.max_new_tokens,
            do_sample=not self.greedy,
            repetition_penalty=1.0,
            pad_token_id=pad_token_id,
            eos_token_id=eos_token_ids,
            **sampled,
        )

    def request_fields(self) -> dict[str, Any]:
        """The sampling fields of an OpenAI-compatible chat request (``top_k`` only when set: vLLM reads it)."""
        fields: dict[str, Any] = {"max_tokens": self.max_new_tokens}
        if self.greedy:
            return {**fields, "temperature": 0.0}
        fields.update(temperature=self.temperature, top_p=self.top_p)
        if self.top_k:
            fields["top_k"] = self.top_k
        return fields


def pick_device() -> str:
    """``"cuda"`` when a CUDA device is available, else ``"cpu"``."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def vllm_available() -> bool:
    """Whether the ``vllm`` package is installed."""
    return importlib.util.find_spec("vllm") is not None


def hf_backend(
    model_path: str, sampling: Sampling, *, device: str | None = None, seed: int = 0
) -> tuple[GenerateFn, Any]:
    """A causal LM on ``device`` (default: CUDA when present) as a :data:`GenerateFn`, and its tokenizer.

    The model's ``generation_config`` is replaced by one of :class:`Sampling`'s settings only
    (transformers fills unset fields of a passed config from the model's own).
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from gaca_train.rollout.policy import generate_with_logprobs

    torch.manual_seed(seed)
    device = device or pick_device()
    tokenizer = AutoTokenizer.from_pretrained(model_path, padding_side="left")
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype="auto").to(device).eval()
    shipped = model.generation_config.eos_token_id
    eos = [tokenizer.eos_token_id] + ([shipped] if isinstance(shipped, int) else list(shipped or []))
    eos = list(dict.fromkeys(i for i in eos if i is not None))
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos[0]
    config = sampling.hf_generation_config(pad, eos)
    model.generation_config = config

    def generate(prompt_ids: list[list[int]]) -> tuple[list[list[int]], list[list[float]]]:
        return generate_with_logprobs(
            model,
            prompt_ids,
            pad_token_id=pad,
            eos_token_ids=eos,
            generation_config=config,
            temperature=1.0 if sampling.greedy else sampling.temperature,
        )

    return generate, tokenizer


def vllm_backend(model_path: str, sampling: Sampling, *, seed: int = 0) -> tuple[GenerateFn, Any]:
    """vLLM's offline engine (``vllm.LLM``) as a :data:`GenerateFn`, and the model's tokenizer.

    The engine ignores the checkpoint's sampling defaults (``generation_config="vllm"``) and samples
    with :class:`Sampling`'s settings only. Log-probs are not requested (evaluation does not use
    them); the returned ones are zeros. The tests run this function with a stand-in ``vllm`` module
    (its ``LLM`` / ``SamplingParams`` contract, generating with a tiny HF model); it has not been
    run with real vLLM.
    """
    from transformers import AutoTokenizer
    from vllm import LLM, SamplingParams

    tokenizer = AutoTokenizer.from_pretrained(model_path)
    llm = LLM(model=model_path, seed=seed, generation_config="vllm")  # "vllm": ignore the model's sampling defaults
    params = SamplingParams(
        n=1,
        temperature=0.0 if sampling.greedy else sampling.temperature,
        top_p=1.0 if sampling.greedy else sampling.top_p,
        top_k=(sampling.top_k or -1) if not sampling.greedy else -1,
        repetition_penalty=1.0,
        max_tokens=sampling.max_new_tokens,
    )

    def generate(prompt_ids: list[list[int]]) -> tuple[list[list[int]], list[list[float]]]:
        outputs = llm.generate([{"prompt_token_ids": ids} for ids in prompt_ids], params, use_tqdm=False)
        ids = [list(out.outputs[0].token_ids) for out in outputs]
        return ids, [[0.0] * len(i) for i in ids]

    return generate, tokenizer


def endpoint_backend(
    base_url: str,
    model: str,
    sampling: Sampling,
    *,
    api_key: str | None = None,
    retry: RetryPolicy | None = None,
    max_rps: float | None = None,
) -> ChatEndpoint:
    """An OpenAI-compatible chat endpoint as a chat-level policy (messages in, response text out)."""
    return ChatEndpoint(base_url, model, sampling.request_fields(), api_key=api_key, retry=retry or RetryPolicy(),
                        max_rps=max_rps)  # fmt: skip
