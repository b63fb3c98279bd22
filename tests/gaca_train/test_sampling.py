"""The lean sampler: generate's distribution and the policy's log-probs, without its padded layout."""

from __future__ import annotations

import copy

import pytest
import torch
from transformers import GenerationConfig

from gaca_train.rollout import generate_with_logprobs
from gaca_train.sampling import prefill_buckets, sample_with_logprobs, supports
from tests.gaca_train.tiny_setup import warm_started_model_and_tokenizer


@pytest.fixture(scope="module")
def model_and_tokenizer():
    # Trained weights: a random tiny model attends almost uniformly, so positions would hardly show in its logits.
    model, tokenizer = warm_started_model_and_tokenizer()
    return model.eval(), tokenizer


def _config(tokenizer, **overrides) -> GenerationConfig:
    fields = dict(max_new_tokens=8, do_sample=True, temperature=1.0, top_k=0, top_p=1.0,
                  pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id)  # fmt: skip
    return GenerationConfig(**{**fields, **overrides})


def _prompts(tokenizer) -> list[list[int]]:
    texts = ["walk to the mill", "take the road to the old mill and then <action>", "go", "look around the yard"]
    ids = [tokenizer(t)["input_ids"] for t in texts]
    return [ids[0]] * 3 + ids[1:] + [ids[1]] * 2  # shared prompts, three lengths apart


def _teacher_forced(model, prompt, completion, temperature):
    with torch.no_grad():
        logits = model(torch.tensor([prompt + completion])).logits[0, len(prompt) - 1 : -1].float() / temperature
    return torch.log_softmax(logits, -1).gather(1, torch.tensor(completion)[:, None]).squeeze(1)


def test_prefill_buckets_hold_prompts_of_similar_length_longest_first():
    lengths = [100, 40, 95, 38, 200, 86, 170]
    buckets = prefill_buckets(lengths, ratio=0.85)
    assert sorted(i for b in buckets for i in b) == list(range(len(lengths)))
    assert buckets == [[4, 6], [0, 2, 5], [1, 3]]
    for bucket in buckets:
        assert all(lengths[i] >= 0.85 * lengths[bucket[0]] for i in bucket)


def test_recorded_log_probs_are_the_policys_for_every_row_including_rows_that_stop_early(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    prompts = _prompts(tokenizer)
    # A third of the vocabulary ends a completion, so rows stop at different steps and leave the decode batch.
    stop = list(range(0, model.config.vocab_size, 3))[1:]
    torch.manual_seed(0)
    ids, logps = sample_with_logprobs(
        model, prompts, pad_token_id=tokenizer.pad_token_id, eos_token_ids=stop,
        generation_config=_config(tokenizer, eos_token_id=stop), temperature=0.7,
    )  # fmt: skip
    assert len({len(c) for c in ids}) > 1  # rows stopped at different steps
    for prompt, completion, recorded in zip(prompts, ids, logps, strict=True):
        assert 1 <= len(completion) == len(recorded) <= 8
        assert all(t not in stop for t in completion[:-1])  # cut at the first stop token, kept
        expected = _teacher_forced(model, prompt, completion, 0.7)
        torch.testing.assert_close(torch.tensor(recorded), expected, atol=1e-4, rtol=1e-4)


def test_the_first_token_is_drawn_from_the_tempered_policy(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    model = copy.deepcopy(model)
    with torch.no_grad():  # a peaked policy (the random one is near uniform, where temperature hardly shows)
        model.lm_head.weight.mul_(8.0)
    prompt = tokenizer("take the road <action>")["input_ids"]
    with torch.no_grad():
        probs = torch.softmax(model(torch.tensor([prompt])).logits[0, -1].float() / 0.7, -1)
    torch.manual_seed(1)
    n = 3000
    ids, _ = sample_with_logprobs(
        model, [prompt] * n, pad_token_id=tokenizer.pad_token_id, eos_token_ids=[tokenizer.eos_token_id],
        generation_config=_config(tokenizer, max_new_tokens=1, temperature=0.7), temperature=0.7,
    )  # fmt: skip
    counts = torch.bincount(torch.tensor([c[0] for c in ids]), minlength=probs.numel()).float() / n
    # Each frequency within 4.5 standard errors of its probability (and the untempered policy is further off).
    error = (probs * (1 - probs) / n).sqrt()
    assert ((counts - probs).abs() <= 4.5 * error + 1e-3).all()
    untempered = torch.softmax(probs.log() * 0.7, -1)
    assert ((counts - untempered).abs() > 4.5 * error + 1e-3).any()


def test_generates_logits_processors_apply_top_k_one_samples_generates_tokens(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    prompts = _prompts(tokenizer)
    config = _config(tokenizer, top_k=1)
    kwargs = dict(pad_token_id=tokenizer.pad_token_id, eos_token_ids=[tokenizer.eos_token_id])
    kwargs["generation_config"] = config
    lean, _ = generate_with_logprobs(model, prompts, **kwargs)
    plain, _ = generate_with_logprobs(model, prompts, **kwargs, sampler="generate")
    assert lean == plain  # top-k 1: the argmax at each step, whatever the draws


def test_greedy_and_beam_configs_go_to_generate(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    assert supports(model, _config(tokenizer))
    assert not supports(model, _config(tokenizer, do_sample=False))
    assert not supports(model, _config(tokenizer, num_beams=2))
    assert not supports(model, _config(tokenizer, cache_implementation="static"))
    with pytest.raises(ValueError, match="sampler"):
        generate_with_logprobs(model, [[1]], pad_token_id=0, eos_token_ids=[1], generation_config=None, sampler="x")
