"""Warm starts: expert demonstrations of an env rendered as chat prompts, and SFT on them.

:func:`expert_steps` plays an env's expert (``expert=True``), optionally with noise that a policy
will meet (random admissible actions, rejected actions, a searching demonstrator); :func:`sft_warm_start`
fine-tunes a model on the pairs with TRL's ``SFTTrainer``. ``scripts/make_tiny_model.py`` and the
CPU quickstart (:mod:`gaca_train.experiments.quickstart`) use both.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import gymnasium as gym

import gaca_envs  # noqa: F401  (registers the GACA env ids)
from gaca_train.rollout.episodes import Decision, EnvList, Turn, play
from gaca_train.rollout.prompts import PromptBuilder, template_for


def expert_steps(
    env_id: str,
    env_kwargs: dict[str, Any],
    task_ids: list[str],
    history_length: int,
    max_env_steps: int,
    seed: int,
    fork_noise: float = 0.0,
    step_noise: float = 0.0,
    prompts: PromptBuilder | None = None,
    train_on_noise: bool = True,
    invalid_noise: float = 0.0,
    searching: float = 0.0,
    demos_per_task: int = 1,
    demonstrator: str | None = None,
) -> list[tuple[list[dict[str, str]], str]]:
    """(chat messages, response) per step of expert episodes; random admissible actions if no expert.

    With ``fork_noise`` p, at states the env marks ``info["fork"]`` the demonstrated action is a random
    admissible one with probability p: the warm-started policy then walks well but guesses at forks,
    which leaves RL a credit-assignment problem to solve. With ``step_noise`` p, any step's demonstration
    is a random admissible action with probability p (the expert then recovers from the state it leads to).
    ``prompts`` renders the steps (default: the env family's template with ``history_length``), so the
    demonstrations look exactly like the prompts of the run that uses them. With ``train_on_noise=False``
    a random step is played but not kept as a demonstration: the data then shows recovering from a
    random action (in the history) without teaching to take one. With ``invalid_noise`` p, before a
    step the episode plays, with probability p, an action the env rejects (the previous action again,
    or one that was admissible a step ago and is not now), never kept as a demonstration: the next
    demonstration then shows what to do after the env's "Nothing happens.", the state a policy's own
    mistakes lead to and that experts never reach. With ``searching`` q (ALFWorld), a share q of the
    games is demonstrated by :class:`~gaca_envs.alfworld.baseline.SearchingAgent` in a random search
    order instead of the privileged expert (no noise in those games): it reads only the text, so its
    demonstrations show looking for the object, and taking it only where it is seen. Each task is
    played ``demos_per_task`` times, each episode with its own noise draws: with one episode per task
    and few tasks, a tiny model memorises the one noisy choice made at each fork, its policy is then
    deterministic per task, every rollout of a group ends alike and RL has no advantage to learn from.

    With ``demonstrator`` (WebShop: a name of :data:`gaca_envs.webshop.baselines.POLICIES` other than
    ``expert``, e.g. ``"reader"``) the demonstrations come from that page-only policy instead of the
    env's privileged expert: it reads only the observation and the admissible actions, as the agent
    does, and writes its own search queries; the env is then made without ``expert=True``.

    Raises:
        ValueError: if ``demos_per_task`` is below 1, or ``demonstrator`` names no page-only policy.
    """
    if demos_per_task < 1:
        raise ValueError(f"demos_per_task must be at least 1, got {demos_per_task}")
    if demonstrator is not None:
        from gaca_envs.webshop.baselines import POLICIES

        if demonstrator not in POLICIES or demonstrator == "expert":
            names = ", ".join(n for n in POLICIES if n != "expert")
            raise ValueError(f"demonstrator must be a page-only WebShop policy ({names}), got {demonstrator!r}")
    if prompts is None:
        system, template = template_for(env_id)
        prompts = PromptBuilder(system, template, history_length, max_env_steps)
    env = gym.make(env_id, **{**env_kwargs, "expert": demonstrator is None})
    player = _Demonstrator(prompts, random.Random(seed), fork_noise, step_noise, train_on_noise, invalid_noise,
                           searching, demonstrator)  # fmt: skip
    pairs = []
    for task in task_ids:
        for _ in range(demos_per_task):
            played = play(EnvList([env]), [task], player, max_env_steps, seed=seed)
            pairs += [t.decision.data for t in played.transitions if t.decision.data is not None]
    env.close()
    return pairs


class _Demonstrator:
    """The expert with the noise of :func:`expert_steps`, as an episode-loop policy (one env at a time).

    A decision's ``data`` is the (messages, response) pair to keep, or None for a step not demonstrated.
    """

    def __init__(
        self, prompts: PromptBuilder, rng: random.Random, fork_noise: float, step_noise: float,
        train_on_noise: bool, invalid_noise: float, searching: float, policy: str | None = None,
    ) -> None:  # fmt: skip
        self.prompts, self.rng = prompts, rng
        self.fork_noise, self.step_noise, self.train_on_noise = fork_noise, step_noise, train_on_noise
        self.invalid_noise, self.searching = invalid_noise, searching
        self.policy: Any = None
        if policy is not None:
            from gaca_envs.webshop.baselines import make_policy

            self.policy = make_policy(policy)
        self.searcher: Any = None
        self.previous: list[str] = []  # the admissible actions one step ago

    def start(self, index: int, observation: str, info: dict[str, Any]) -> None:  # noqa: ARG002
        self.searcher, self.previous = None, []
        if self.policy is not None:
            self.policy.reset(info["task"], random.Random(self.rng.random()))
        if self.searching and self.rng.random() < self.searching:
            from gaca_envs.alfworld.baseline import SearchingAgent

            self.searcher = SearchingAgent(observation, rng=random.Random(self.rng.random()))

    def act(self, turns: list[Turn]) -> list[Decision]:
        (t,) = turns
        info, rng, history = t.info, self.rng, t.history
        action, keep = None, True
        if self.searcher is not None:
            action = self.searcher.act(t.observation if t.step else None)
        elif self.invalid_noise and history and rng.random() < self.invalid_noise:
            now = set(info["admissible_actions"])
            rejected = [history[-1][1]] if history[-1][1] not in now else sorted(set(self.previous) - now)
            if rejected:  # played, never demonstrated
                action, keep = rng.choice(rejected), False
        if action is None and self.policy is not None:  # a page-only policy, with random clicks as its noise
            concrete = [a for a in info["admissible_actions"] if "<" not in a]  # not the search[<query>] placeholder
            noise = bool(self.step_noise and concrete and rng.random() < self.step_noise)
            action = rng.choice(concrete) if noise else self.policy.act(t.observation, info)
            keep = self.train_on_noise or not noise
        elif action is None:
            action = info.get("expert_action") or rng.choice(info["admissible_actions"])
            noise = False
            if info.get("fork") and rng.random() < self.fork_noise:
                action = rng.choice([a for a in info["admissible_actions"] if a.startswith("take")] or [action])
            elif self.step_noise and rng.random() < self.step_noise:
                action, noise = rng.choice(info["admissible_actions"]), True
            keep = self.train_on_noise or not noise
        pair = None
        if keep:
            messages = self.prompts.messages(info["task"], t.step, t.observation, info["admissible_actions"], history)
            pair = (messages, f"<think> </think> <action> {action} </action>")
        self.previous = info["admissible_actions"]
        return [Decision(action, data=pair)]


class LengthWindowSampler:
    """Shuffled batches that pad less: each window of ``window`` batches is sorted by length.

    Every epoch draws a fresh permutation (from ``seed``), cuts it into windows of
    ``window * batch_size`` pairs, sorts each window by length (longest first) and cuts it into
    ``window`` batches; the full batches are then shuffled, and the pairs of the short ones (a
    window's remainder) come last, so that the data loader's batches are these batches. A batch
    is thus drawn from a random window of pairs (diverse steps and states), and a long prompt pads
    only the batch of its window's longest pairs. ``window=1`` is plain shuffling. (transformers'
    ``group_by_length`` sorts windows of 50 batches: on the quickstart's demonstrations its batches
    became so uniform that SFT ended at a far higher loss, docs/BENCHMARKS.md.)
    """

    def __init__(self, lengths: list[int], batch_size: int, window: int, seed: int) -> None:
        import torch

        self.lengths, self.batch_size, self.window = lengths, batch_size, window
        self.generator = torch.Generator().manual_seed(seed)

    def __len__(self) -> int:
        return len(self.lengths)

    def __iter__(self):
        import torch

        order = torch.randperm(len(self.lengths), generator=self.generator).tolist()
        size = self.window * self.batch_size
        batches = []
        for start in range(0, len(order), size):
            chunk = sorted(order[start : start + size], key=lambda i: -self.lengths[i])
            batches += [chunk[k : k + self.batch_size] for k in range(0, len(chunk), self.batch_size)]
        full = [b for b in batches if len(b) == self.batch_size]
        rest = [i for b in batches if len(b) < self.batch_size for i in b]  # last, so batches stay aligned
        for b in torch.randperm(len(full), generator=self.generator).tolist():
            yield from full[b]
        yield from rest


def sft_warm_start(
    model: Any,
    tokenizer: Any,
    pairs: list[tuple[list[dict[str, str]], str]],
    out: str | Path,
    *,
    steps: int,
    lr: float = 3e-3,
    seed: int = 0,
    cpu: bool = True,
    length_window: int = 4,
    completion_only: bool = True,
) -> None:
    """Supervised fine-tuning on the demonstrations with TRL's SFTTrainer.

    ``steps`` optimiser steps of 16 pairs at the constant learning rate ``lr``; TRL's output (logs)
    goes to ``<out>/sft``. Batches come from :class:`LengthWindowSampler` with
    ``length_window`` (1: plain shuffling). With ``completion_only`` (default) the loss covers the
    responses only; without it, the whole text, prompt included: a model built from scratch then
    also learns to model what it reads (the room listing and the admissible actions that repeat
    it), which a pretrained LLM brings with it.
    """
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    prompts = [tokenizer.apply_chat_template(m, add_generation_prompt=True, tokenize=False) for m, _ in pairs]
    data = Dataset.from_dict({"prompt": prompts, "completion": [r for _, r in pairs]})
    config = SFTConfig(
        output_dir=str(Path(out) / "sft"),
        max_steps=steps,
        per_device_train_batch_size=min(16, len(pairs)),
        learning_rate=lr,
        lr_scheduler_type="constant",
        logging_steps=max(1, steps // 5),
        save_strategy="no",
        report_to="none",
        bf16=False,
        use_cpu=cpu,
        activation_checkpointing=False,  # transformers 5 deprecates the old name
        seed=seed,
        completion_only_loss=completion_only,
        disable_tqdm=True,
    )

    class _Trainer(SFTTrainer):
        def _get_train_sampler(self, train_dataset=None):  # noqa: ANN001, ANN202
            dataset = self.train_dataset if train_dataset is None else train_dataset
            lengths = [len(ids) for ids in dataset["input_ids"]]
            return LengthWindowSampler(lengths, self.args.train_batch_size, length_window, seed)

    _Trainer(model=model, args=config, train_dataset=data, processing_class=tokenizer).train()
