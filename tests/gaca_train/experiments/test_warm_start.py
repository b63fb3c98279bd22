"""The SFT warm start's batch sampler: every pair once per epoch, less padding than plain shuffling."""

from __future__ import annotations

import random

from gaca_train.experiments.warm_start import LengthWindowSampler


def _batches(order: list[int], size: int) -> list[list[int]]:
    return [order[k : k + size] for k in range(0, len(order), size)]


def _padded(lengths: list[int], order: list[int], size: int) -> int:
    return sum(len(b) * max(lengths[i] for i in b) for b in _batches(order, size))


def test_length_window_sampler_draws_each_pair_once_per_epoch_in_sorted_batches():
    rng = random.Random(0)
    lengths = [rng.choice([120, 150, 180, 200, 460]) for _ in range(203)]  # a long tail, as ALFWorld's lists
    sampler = LengthWindowSampler(lengths, batch_size=16, window=4, seed=0)
    first, second = list(sampler), list(sampler)
    assert sorted(first) == sorted(second) == list(range(203))
    assert first != second  # a fresh permutation every epoch
    for batch in _batches(first, 16)[:-1]:  # a window's remainder can split a batch across windows
        assert [lengths[i] for i in batch] == sorted((lengths[i] for i in batch), reverse=True)
    assert list(LengthWindowSampler(lengths, 16, 4, seed=0)) == first  # seeded


def test_length_window_sampler_pads_less_than_plain_shuffling():
    rng = random.Random(1)
    lengths = [rng.choice([120, 150, 180, 200, 460]) for _ in range(640)]
    plain = list(LengthWindowSampler(lengths, batch_size=16, window=1, seed=0))
    windowed = list(LengthWindowSampler(lengths, batch_size=16, window=4, seed=0))
    assert _padded(lengths, windowed, 16) < 0.8 * _padded(lengths, plain, 16)


def _prompt_nll(model, tokenizer, pairs) -> float:
    """Mean next-token NLL over the prompt tokens of ``pairs`` (the text a completion-only loss ignores)."""
    import torch

    total, count = 0.0, 0
    for messages, _ in pairs:
        ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=False)
        ids = torch.tensor([ids])
        with torch.no_grad():
            logits = model(ids).logits[0, :-1]
        total += torch.nn.functional.cross_entropy(logits, ids[0, 1:], reduction="sum").item()
        count += ids.shape[1] - 1
    return total / count


def test_sft_full_loss_learns_the_prompt_text_and_completion_only_does_not(tmp_path):
    from gaca_train.experiments.tiny import build_tiny_model, build_tokenizer
    from gaca_train.experiments.warm_start import sft_warm_start

    rng = random.Random(0)
    places = ["desk", "shelf", "drawer", "sidetable", "bed", "garbagecan"]
    pairs = []
    for _ in range(16):
        room = rng.sample(places, 4)
        listing = ", ".join(f"a {p} 1" for p in room)
        prompt = f"You see {listing}. Admissible actions: " + ", ".join(f"go to {p} 1" for p in room)
        pairs.append(([{"role": "user", "content": prompt}], f"<think> </think> <action> go to {room[0]} 1 </action>"))
    tokenizer = build_tokenizer([m[0]["content"] for m, _ in pairs] + [r for _, r in pairs])
    nll = {}
    for loss in ("completion", "full"):
        model = build_tiny_model(tokenizer, hidden_size=32, seed=0)
        start = _prompt_nll(model, tokenizer, pairs)
        only = loss == "completion"
        sft_warm_start(model, tokenizer, pairs, tmp_path / loss, steps=30, seed=0, completion_only=only)
        nll[loss] = _prompt_nll(model, tokenizer, pairs)
    # The same steps on the same data: only the full loss models the prompts (the room listing, its copy).
    assert nll["full"] < 0.6 * start
    assert nll["full"] < 0.6 * nll["completion"]


def test_a_page_only_webshop_demonstrator_shows_its_own_actions_and_never_reads_the_expert(tmp_path):
    import gymnasium as gym
    import pytest

    from gaca_envs.webshop.baselines import run_policy
    from gaca_train.experiments.warm_start import expert_steps
    from gaca_train.rollout.prompts import PromptBuilder, parse_response

    env_kwargs = {"shop_config": {"n_products": 600, "cache_dir": str(tmp_path), "title_nouns": "fallback"},
                  "split": "all"}  # fmt: skip
    prompts = PromptBuilder.from_config({"env_id": "GACA-WebShop-v1", "history_length": 0, "max_env_steps": 15})
    goals = ["fixed_0", "fixed_1", "fixed_2"]
    pairs = expert_steps("GACA-WebShop-v1", env_kwargs, goals, 0, 15, seed=0, prompts=prompts,
                         demonstrator="rule_options")  # fmt: skip
    env = gym.make("GACA-WebShop-v1", **env_kwargs)
    played = [a for e in run_policy(env, "rule_options", goals) for a in e.actions]
    shown = [parse_response(response).action for _, response in pairs]
    assert shown == played  # the policy's own queries (the instruction), not the expert's title search
    expert = gym.make("GACA-WebShop-v1", **env_kwargs, expert=True)
    assert shown[0] != expert.reset(options={"task_id": "fixed_0"})[1]["expert_action"]  # the expert searches titles
    # With step noise, some demonstrations are random clicks among the page's concrete actions.
    noisy = expert_steps("GACA-WebShop-v1", env_kwargs, goals, 0, 15, seed=0, prompts=prompts, step_noise=0.5,
                         demonstrator="rule_options")  # fmt: skip
    assert [parse_response(r).action for _, r in noisy] != played
    assert all("<query>" not in r for _, r in noisy)
    with pytest.raises(ValueError, match="demonstrator must be a page-only WebShop policy"):
        expert_steps("GACA-WebShop-v1", env_kwargs, goals, 0, 15, seed=0, demonstrator="expert")
