"""The lean sampler: generate's distribution and the policy's log-probs, without its padded layout."""

from __future__ import annotations

import copy
import re

import pytest
import torch
from transformers import GenerationConfig, LogitsProcessor
from transformers.generation import WatermarkingConfig

from gaca_train.rollout import sampling
from gaca_train.rollout.policy import generate_with_logprobs
from gaca_train.rollout.sampling import prefill_buckets, sample_with_logprobs, supports
from tests.gaca_train.tiny_setup import tiny_config, warm_started_model_and_tokenizer


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
    assert not supports(model, _config(tokenizer, use_cache=False))
    assert not supports(model, _config(tokenizer, prefill_chunk_size=4))
    assert not supports(model, _config(tokenizer, prompt_lookup_num_tokens=3))  # assisted decoding
    assert not supports(model, GenerationConfig(max_new_tokens=8))  # generate's default: do_sample=False
    with pytest.raises(ValueError, match="sampler"):
        generate_with_logprobs(model, [[1]], pad_token_id=0, eos_token_ids=[1], generation_config=None, sampler="x")


# --- Generation options: both samplers teacher-forced on the same tokens, compared step by step ---


@pytest.fixture(scope="module")
def double_model(model_and_tokenizer):
    # Float64 weights: both samplers' logits then round to the same float32 values (in float32 the bucketed prefill
    # and generate's padded one differ by rounding), so a threshold (top-p, epsilon, ...) keeps the same tokens.
    return copy.deepcopy(model_and_tokenizer[0]).double()


def _forced_completions(prompts, eos) -> list[list[int]]:
    """Per row, its prompt's tokens over and over (repeats for the n-gram and repetition options), cut at its length.

    Rows end at different steps (EOS after 1, 4, ... tokens; one runs to max_new_tokens=8 without EOS), so they
    leave the lean decode batch at different steps.
    """
    lengths = [1, 4, 8, 2, 6, 0, 3, 5]
    return [(p * 8)[:n] + ([eos] if n < 8 else []) for p, n in zip(prompts, lengths, strict=True)]


class _TeacherForcing(LogitsProcessor):
    """Appended last to generate's processors: records each step's processed scores, then forces the given tokens."""

    def __init__(self, forced: list[list[int]], width: int, pad: int):
        self.forced, self.width, self.pad, self.scores = forced, width, pad, []

    def __call__(self, input_ids, scores):
        step = input_ids.shape[1] - self.width
        self.scores.append(scores.clone())
        out = torch.full_like(scores, -float("inf"))
        for row, tokens in enumerate(self.forced):
            out[row, tokens[step] if step < len(tokens) else self.pad] = 0.0  # a finished row gets padding anyway
        return out


def _generate_scores(model, prompts, forced, config, tokenizer, temperature):
    """generate's processed scores per row and step ([steps, vocab] each) and its log-probs, teacher-forced."""
    width = max(len(p) for p in prompts)
    forcing = _TeacherForcing(forced, width, tokenizer.pad_token_id)
    build = model._get_logits_processor

    def with_forcing(*args, **kwargs):
        processors = build(*args, **kwargs)
        processors.append(forcing)
        return processors

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(model, "_get_logits_processor", with_forcing)
        ids, logps = generate_with_logprobs(
            model, prompts, pad_token_id=tokenizer.pad_token_id, eos_token_ids=[tokenizer.eos_token_id],
            generation_config=config, temperature=temperature, sampler="generate",
        )  # fmt: skip
    assert ids == forced
    scores = [torch.stack([s[row] for s in forcing.scores[: len(f)]]) for row, f in enumerate(forced)]
    return scores, logps


def _lean_scores(model, prompts, forced, config, tokenizer, temperature):
    """The lean sampler's processed scores per row and step and its log-probs, teacher-forced through ``choose``."""
    scores: list[list[torch.Tensor]] = [[] for _ in prompts]

    def choose(rows, step_scores):
        for row, score in zip(rows.tolist(), step_scores, strict=True):
            scores[row].append(score.clone())
        return torch.tensor([forced[row][len(scores[row]) - 1] for row in rows.tolist()])

    assert supports(model, config)
    with torch.no_grad():
        ids, logps = sampling._sample(
            model, prompts, tokenizer.pad_token_id, [tokenizer.eos_token_id], config, temperature,
            torch.device("cpu"), choose=choose,
        )  # fmt: skip
    assert ids == forced
    return [torch.stack(s) for s in scores], logps


def _assert_parity(model, tokenizer, config, temperature=1.0):
    """Both samplers' scores and log-probs on the same given tokens; returns the lean scores."""
    prompts = _prompts(tokenizer)
    forced = _forced_completions(prompts, tokenizer.eos_token_id)
    plain_scores, plain_logps = _generate_scores(model, prompts, forced, config, tokenizer, temperature)
    lean_scores, lean_logps = _lean_scores(model, prompts, forced, config, tokenizer, temperature)
    for row in range(len(prompts)):
        torch.testing.assert_close(lean_scores[row], plain_scores[row], msg=lambda m, row=row: f"row {row}: {m}")
        torch.testing.assert_close(torch.tensor(lean_logps[row]), torch.tensor(plain_logps[row]))
    return lean_scores


def _min_length(tokenizer):
    # min_length counts the left-padded prompt (generate's padded width): 3 new tokens past the widest prompt.
    return max(len(p) for p in _prompts(tokenizer)) + 3


# Every GenerationConfig option that adds one of transformers' logits processors (generate's
# `_get_logits_processor`): (option, value(prompts, tokenizer), no_op). The value changes some score of this
# batch, except where no_op is True: forced_bos_token_id acts on a one-token sequence only, remove_invalid_values
# on inf or nan logits only. Token ids come from the prompts, which the forced completions repeat.
PROCESSOR_OPTIONS = [
    ("exponential_decay_length_penalty", lambda p, t: (2, 1.6), False),
    ("min_length", lambda p, t: _min_length(t), False),
    ("min_new_tokens", lambda p, t: 3, False),
    ("repetition_penalty", lambda p, t: 1.6, False),
    ("encoder_repetition_penalty", lambda p, t: 1.6, False),
    ("no_repeat_ngram_size", lambda p, t: 2, False),
    ("encoder_no_repeat_ngram_size", lambda p, t: 2, False),
    ("bad_words_ids", lambda p, t: [[p[1][-1]], [p[0][0], p[0][1]]], False),
    ("sequence_bias", lambda p, t: {(p[1][-1],): -3.0, (p[0][0], p[0][1]): 4.0}, False),
    ("suppress_tokens", lambda p, t: [p[0][0], p[5][0]], False),
    ("begin_suppress_tokens", lambda p, t: [p[0][0], p[3][0]], False),
    ("forced_bos_token_id", lambda p, t: p[0][0], True),
    ("forced_eos_token_id", lambda p, t: t.eos_token_id, False),
    ("remove_invalid_values", lambda p, t: True, True),
    ("top_k", lambda p, t: 5, False),
    ("top_p", lambda p, t: 0.6, False),
    ("min_p", lambda p, t: 0.05, False),
    ("top_h", lambda p, t: 0.4, False),
    ("typical_p", lambda p, t: 0.6, False),
    ("epsilon_cutoff", lambda p, t: 0.01, False),
    ("eta_cutoff", lambda p, t: 0.01, False),
    ("temperature", lambda p, t: 0.6, False),
    ("renormalize_logits", lambda p, t: True, False),
    ("watermarking_config", lambda p, t: WatermarkingConfig(bias=2.0), False),
]


@pytest.mark.parametrize(("option", "value", "no_op"), PROCESSOR_OPTIONS, ids=[o[0] for o in PROCESSOR_OPTIONS])
def test_each_processor_option_gives_generates_scores_and_log_probs_on_the_same_tokens(
    model_and_tokenizer, double_model, option, value, no_op
):
    _, tokenizer = model_and_tokenizer
    config = _config(tokenizer, **{option: value(_prompts(tokenizer), tokenizer)})
    temperature = config.temperature
    scores = _assert_parity(double_model, tokenizer, config, temperature)
    # The option is in effect: some processed score differs from the plain config's.
    baseline, _ = _lean_scores(
        double_model, _prompts(tokenizer), _forced_completions(_prompts(tokenizer), tokenizer.eos_token_id),
        _config(tokenizer), tokenizer, 1.0,
    )  # fmt: skip
    changed = any(not torch.equal(a, b) for a, b in zip(scores, baseline, strict=True))
    assert changed != no_op


def test_unset_options_come_from_the_models_generation_config_as_in_generate(model_and_tokenizer, double_model):
    _, tokenizer = model_and_tokenizer
    model = copy.deepcopy(double_model)
    model.generation_config.repetition_penalty = 1.6  # as a checkpoint's generation_config.json would set them
    model.generation_config.top_k = 5
    config = _config(tokenizer, top_k=None)  # unset: generate takes the model's 5
    scores = _assert_parity(model, tokenizer, config)
    prompts = _prompts(tokenizer)
    forced = _forced_completions(prompts, tokenizer.eos_token_id)
    baseline, _ = _lean_scores(double_model, prompts, forced, _config(tokenizer), tokenizer, 1.0)
    assert all((s == -float("inf")).sum(-1).min() > 0 for s in scores)  # top-k 5 of 131 tokens at every step
    assert all((b > -float("inf")).all() for b in baseline)


def test_the_callers_generation_config_is_left_as_it_was(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    config = _config(tokenizer, min_new_tokens=2, exponential_decay_length_penalty=(2, 1.6), bad_words_ids=[[5]])
    before = config.to_dict()
    torch.manual_seed(0)
    sample_with_logprobs(
        model, _prompts(tokenizer), pad_token_id=tokenizer.pad_token_id, eos_token_ids=[tokenizer.eos_token_id],
        generation_config=config,
    )  # fmt: skip
    assert config.to_dict() == before
    assert not hasattr(config, "_eos_token_tensor")  # generate's preparation ran on a copy


REFUSED = [
    ("max_time", 5.0, "it has no time limit; set hf_sampler: generate, or remove it from generation_kwargs"),
    (
        "guidance_scale",
        1.5,
        "classifier-free guidance runs forward passes of its own inside a logits processor, whose logits the samplers "
        "would take for the policy's; remove it from generation_kwargs (neither hf_sampler can take it)",
    ),
    (
        "token_healing",
        True,
        "token healing needs the tokenizer, which the samplers are not given; remove it from generation_kwargs "
        "(neither hf_sampler can take it)",
    ),
    (
        "stop_strings",
        ["</action>"],
        "stop strings need the tokenizer, which the samplers are not given (end completions with eos_token_id); "
        "remove it from generation_kwargs (neither hf_sampler can take it)",
    ),
    (
        "num_return_sequences",
        2,
        "a rollout samples one completion per prompt (rollouts_per_task sets the samples per task); remove it from "
        "generation_kwargs (neither hf_sampler can take it)",
    ),
    (
        "output_scores",
        True,
        "the samplers return only token ids and their log-probs; remove it from generation_kwargs (neither "
        "hf_sampler can take it)",
    ),
    (
        "return_dict_in_generate",
        True,
        "the samplers return only token ids and their log-probs; remove it from generation_kwargs (neither "
        "hf_sampler can take it)",
    ),
]


@pytest.mark.parametrize(("option", "value", "why"), REFUSED, ids=[r[0] for r in REFUSED])
def test_an_option_the_lean_sampler_cannot_reproduce_is_refused_at_start_up_and_at_the_call(
    model_and_tokenizer, tmp_path, option, value, why
):
    model, tokenizer = model_and_tokenizer
    message = re.escape(
        f"generation option {option}={value!r} is not supported by the lean sampler (hf_sampler: lean): {why}"
    )
    with pytest.raises(ValueError, match=f"^{message}$"):
        tiny_config(tmp_path, generation_kwargs={option: value})
    config = _config(tokenizer, **{option: value})
    assert supports(model, config)  # a sampling config: not a fall-back to generate, a refusal
    with pytest.raises(ValueError, match=f"^{message}$"):
        generate_with_logprobs(
            model, [[5, 6]], pad_token_id=tokenizer.pad_token_id, eos_token_ids=[tokenizer.eos_token_id],
            generation_config=config,
        )  # fmt: skip


def test_the_start_up_check_is_for_the_lean_sampler_only(tmp_path):
    assert tiny_config(tmp_path, generation_kwargs={"max_time": 5.0}, hf_sampler="generate").hf_sampler == "generate"
    # Greedy decoding falls back to generate, which keeps the time limit.
    assert tiny_config(tmp_path, generation_kwargs={"max_time": 5.0, "do_sample": False}).generation_kwargs


def test_grpo_generation_kwargs_reach_the_lean_sampler_of_a_trainer_rollout(tmp_path, monkeypatch):
    # The reported crash: TRL builds the trainer's GenerationConfig from generation_kwargs, and the lean sampler
    # built its processors from it unprepared (no _eos_token_tensor).
    from gaca_train.training.trainer import GACATrainer

    model, tokenizer = warm_started_model_and_tokenizer()
    args = tiny_config(tmp_path, generation_kwargs={"exponential_decay_length_penalty": (2, 1.6)})
    trainer = GACATrainer(model=model, args=args, processing_class=tokenizer)
    assert args.hf_sampler == "lean" and trainer.generation_config.exponential_decay_length_penalty == (2, 1.6)
    built = []  # the processor lists the lean sampler builds
    build = sampling._logits_processors

    def recorded(*args):
        built.append(build(*args))
        return built[-1]

    monkeypatch.setattr(sampling, "_logits_processors", recorded)
    try:
        result = trainer._rollout(["train-0", "train-0", "train-1", "train-1"], "train")
    finally:
        trainer.close_envs()
    assert result.steps and all(1 <= len(s.completion_ids) <= args.max_completion_length for s in result.steps)
    assert built and all(any(type(p).__name__ == "ExponentialDecayLengthPenalty" for p in b) for b in built)
