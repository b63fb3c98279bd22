"""Multi-turn group rollouts of an LLM policy: generation with log-probs, step records, rollout results.

One rollout plays every env of a :class:`~gaca_train.rollout.vector.RolloutPool` to the end of its
episode. Each turn, every live env gets one chat prompt (:class:`~gaca_train.rollout.prompts.PromptBuilder`);
the responses are generated in batches, parsed into actions
(:func:`~gaca_train.rollout.prompts.parse_response`), and stepped. Each step becomes one record
with the prompt and completion token ids and the completion's per-token log-probs as the
policy sampled them, so the step's NLL needs no extra forward pass.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

import torch

from gaca_train.estimators.rows import StepRows
from gaca_train.rollout import sampling
from gaca_train.rollout.branching import Branching, play_tree
from gaca_train.rollout.episodes import Decision, Episode, Transition, Turn, play
from gaca_train.rollout.prompts import HISTORY_CHARS, GenerateFn, ParsedResponse, PromptBuilder, parse_response
from gaca_train.rollout.vector import RolloutPool

# In a distributed run: the largest of its argument over all ranks (a collective call).
LockstepFn = Callable[[int], int]


def max_over_ranks(accelerator: Any) -> LockstepFn | None:
    """The :data:`LockstepFn` of ``accelerator``'s process group; None for a single process."""
    if accelerator.num_processes < 2:
        return None

    def lockstep(n: int) -> int:
        return int(accelerator.gather(torch.tensor([n], device=accelerator.device)).max().item())

    return lockstep


@dataclass
class StepRecord:
    """One agent step: what was seen, generated and returned."""

    env_index: int
    step: int
    anchor_key: str
    anchor_text: str
    reward: float
    valid: bool
    env_valid: bool
    prompt_ids: list[int]
    completion_ids: list[int]
    logps: list[float]
    response: str


@dataclass
class RolloutResult:
    """Everything a rollout recorded; ``steps`` are in play order (turn by turn).

    With branching, ``env_index`` numbers trajectories (roots, then continuations), ``group_of_env``
    and ``episodes`` are per trajectory, and ``parents`` gives each trajectory's parent (-1 for a root);
    without, ``parents`` is None and a trajectory is an env slot.
    """

    steps: list[StepRecord]
    episodes: list[Episode]
    group_of_env: list[int]
    timings: dict[str, float]
    parents: list[int] | None = None
    branching: dict[str, float] | None = None
    transitions: list[Transition] | None = None
    histories: list[list[tuple[str, str]]] | None = None

    def parent_rows(self, traj_offset: int = 0) -> list[int] | None:
        """Per row of :meth:`to_step_rows`, its trajectory's parent id (with ``traj_offset``; -1 a root), or None."""
        if self.parents is None:
            return None
        return [-1 if self.parents[s.env_index] < 0 else traj_offset + self.parents[s.env_index] for s in self.steps]

    def to_step_rows(
        self, *, anchor: str = "state", nll_reduction: str = "mean", reward_scale: float = 1.0, traj_offset: int = 0
    ) -> StepRows:
        """The estimator input (DESIGN.md contract 2), one row per step in ``steps`` order.

        Args:
            anchor: ``"state"`` hashes ``anchor_key``, ``"text"`` hashes ``anchor_text``.
            nll_reduction: step NLL as the ``"mean"`` or ``"sum"`` of the completion's token NLLs.
            reward_scale: multiplies every env reward.
            traj_offset: added to the env index to form trajectory ids (unique across ranks).
        """
        return StepRows.from_steps(
            [
                {"group": self.group_of_env[s.env_index], "traj": traj_offset + s.env_index, "step": s.step,
                 "anchor_key": s.anchor_key if anchor == "state" else s.anchor_text, "reward": s.reward * reward_scale,
                 "nll": -(sum(s.logps) / (len(s.logps) if nll_reduction == "mean" else 1)), "valid": s.valid}
                for s in self.steps
            ]
        )  # fmt: skip

    def metrics(self) -> dict[str, float]:
        """Episode and step statistics (``rollout/*``) and timings (``time/*``)."""
        n_ep = max(len(self.episodes), 1)
        n_steps = max(len(self.steps), 1)
        out = {
            "rollout/success_rate": sum(e.won for e in self.episodes) / n_ep,
            "rollout/score": sum(e.score for e in self.episodes) / n_ep,
            "rollout/episode_length": sum(e.length for e in self.episodes) / n_ep,
            "rollout/truncated_rate": sum(e.truncated for e in self.episodes) / n_ep,
            "rollout/invalid_rate": sum(not s.valid for s in self.steps) / n_steps,
            "rollout/env_invalid_rate": sum(not s.env_valid for s in self.steps) / n_steps,
            "rollout/steps": float(len(self.steps)),
            "rollout/response_length": sum(len(s.completion_ids) for s in self.steps) / n_steps,
            # Per row, prompt + completion: the work of sampling it, or of one forward pass over it (FLOP counts).
            "rollout/row_tokens": float(sum(len(s.prompt_ids) + len(s.completion_ids) for s in self.steps)),
            "rollout/row_token_squares": float(
                sum((len(s.prompt_ids) + len(s.completion_ids)) ** 2 for s in self.steps)
            ),
            "rollout/completion_tokens": float(sum(len(s.completion_ids) for s in self.steps)),
        }
        out.update({f"time/{k}": v for k, v in self.timings.items()})
        out.update({f"branch/{k}": v for k, v in (self.branching or {}).items()})
        return out


def run_rollout(
    pool: RolloutPool,
    task_ids: Sequence[str],
    generate: GenerateFn,
    tokenizer: Any,
    prompts: PromptBuilder,
    *,
    seed: int | None = None,
    branching: Branching | None = None,
    save_snapshots: bool = False,
    **options: Any,
) -> RolloutResult:
    """Plays one episode in every env of ``pool``; env ``i`` plays ``task_ids[i]``.

    With ``branching`` (criterion not ``off``) each group is played as a tree instead (see
    :mod:`gaca_train.rollout.branching`): its roots, then continuations restored from snapshots at its branch
    points, with the parent's history, so a continuation's first prompt is its parent's at that step.

    Distributed generation backends are collective: TRL's vLLM server mode gathers every rank's
    prompts and hands rank ``r`` the slice ``[r * n, (r + 1) * n)`` of the answers, tensor-parallel
    vLLM and FSDP / ZeRO-3 forwards all-gather across ranks. They need every rank to make the
    same number of ``generate`` calls with the same number of prompts, while the ranks' episodes
    end at different turns. With ``lockstep`` (see :func:`max_over_ranks`) each turn pads this
    rank's prompts to the largest live count over the ranks with copies of its first prompt (their
    completions are dropped) and the turns go on until no rank has a live env.

    Args:
        pool: the envs (``len(task_ids) == pool.num_envs``).
        task_ids: one task id per env; equal ids form a group (numbered in order of first appearance).
        generate: generates completions with their token log-probs (see :data:`GenerateFn`).
        tokenizer: renders chat messages with ``apply_chat_template`` and decodes completions.
        prompts: builds each turn's messages.
        seed: reset seed (env ``i`` gets ``seed + i``), for reproducible env randomness.
        branching: how the groups branch (None or criterion ``off``: independent rollouts).
        save_snapshots: keep each step's env snapshot, its transition and the episodes' histories in the
            result (``transitions``, ``histories``, for the oracle); a branching rollout has them for its roots.
        **options: :class:`LLMPolicy`'s keyword arguments (batch size, chat template arguments,
            progress bar, ``lockstep``, ``max_prompt_length``, ``parse``).

    Returns:
        The :class:`RolloutResult`.

    Raises:
        ValueError: if a prompt is longer than ``max_prompt_length``.
    """
    groups: dict[str, int] = {}
    group_of_env = [groups.setdefault(t, len(groups)) for t in task_ids]
    policy = LLMPolicy(generate, tokenizer, prompts, **options)
    collective = policy.lockstep is not None
    parents = stats = None
    if branching is None or branching.criterion == "off":
        played = play(pool, task_ids, policy, prompts.max_env_steps, seed=seed, collective=collective,
                      save_snapshots=save_snapshots)  # fmt: skip
    else:
        played = play_tree(pool, task_ids, policy, prompts.max_env_steps, branching, seed=seed, collective=collective,
                           rng=random.Random(seed))  # fmt: skip
        group_of_env = [groups[e.task_id] for e in played.episodes]
        parents = played.parents
        stats = {
            "continuations": float(sum(p >= 0 for p in parents)),
            "snapshots": float(played.snapshots),
            "snapshot_bytes_max": float(played.snapshot_bytes),
            "snapshot_seconds": played.snapshot_seconds,
        }
    steps = [
        StepRecord(
            env_index=t.env_index,
            step=t.step,
            anchor_key=t.info["anchor_key"],
            anchor_text=t.info["anchor_text"],
            reward=t.reward,
            valid=t.decision.valid,
            env_valid=bool(t.next_info.get("action_valid", True)),
            prompt_ids=t.decision.data[0],
            completion_ids=t.decision.data[1],
            logps=t.decision.data[2],
            response=t.decision.data[3],
        )
        for t in played.transitions
    ]
    timings = {"env": played.env_seconds, **policy.timings}
    kept = (played.transitions, played.histories) if save_snapshots else (None, None)
    return RolloutResult(steps, played.episodes, group_of_env, timings, parents, stats, *kept)


class LLMPolicy:
    """A token-level LLM as a :class:`~gaca_train.rollout.episodes.Policy`: renders, generates, parses.

    Each decision's ``data`` is (prompt ids, completion ids, sampling log-probs, response text);
    ``timings`` sums the generation and tokenize seconds.

    Args:
        generate: generates completions with their token log-probs (see :data:`GenerateFn`).
        tokenizer: renders chat messages with ``apply_chat_template`` and decodes completions.
        prompts: builds each turn's messages.
        batch_size: most prompts per ``generate`` call (None: all live envs at once).
        chat_template_kwargs: extra ``apply_chat_template`` arguments.
        progress: optional tqdm-like bar, advanced once per turn.
        lockstep: in a distributed run, the largest of a count over the ranks (None: one process).
        max_prompt_length: most tokens of a prompt (None: no limit), as verl-agent's ``max_prompt_length``.
        parse: reads a response into an action (:func:`parse_response` with the run's format check).
    """

    def __init__(
        self,
        generate: GenerateFn,
        tokenizer: Any,
        prompts: PromptBuilder,
        *,
        batch_size: int | None = None,
        chat_template_kwargs: dict[str, Any] | None = None,
        progress: Any = None,
        lockstep: LockstepFn | None = None,
        max_prompt_length: int | None = None,
        parse: Callable[[str], ParsedResponse] = parse_response,
    ) -> None:
        self.generate, self.tokenizer, self.prompts = generate, tokenizer, prompts
        self.batch_size, self.chat_template_kwargs, self.progress = batch_size, chat_template_kwargs, progress
        self.lockstep, self.max_prompt_length, self.parse = lockstep, max_prompt_length, parse
        self.timings = {"generation": 0.0, "tokenize": 0.0}
        self._filler: list[int] | None = None  # lockstep padding: this rank's first prompt

    def act(self, turns: list[Turn]) -> list[Decision] | None:
        """One generation round for the live envs (padded to the ranks' largest count in lockstep)."""
        n_calls = self.lockstep(len(turns)) if self.lockstep is not None else len(turns)
        if n_calls == 0:
            return None
        tic = time.perf_counter()
        prompt_ids = [
            _render(self.tokenizer, self.prompts.messages(t.info["task"], t.step, t.observation,
                                                          t.info["admissible_actions"], t.history),
                    self.chat_template_kwargs)
            for t in turns
        ]  # fmt: skip
        _check_prompt_lengths(prompt_ids, self.max_prompt_length, turns[0].step if turns else 0)
        self._filler = self._filler or (prompt_ids[0] if prompt_ids else None)
        self.timings["tokenize"] += time.perf_counter() - tic
        tic = time.perf_counter()
        padded = prompt_ids + [self._filler] * (n_calls - len(turns))
        completion_ids, logps = _generate_in_chunks(self.generate, padded, self.batch_size or n_calls)
        completion_ids, logps = completion_ids[: len(turns)], logps[: len(turns)]
        texts = self.tokenizer.batch_decode(completion_ids, skip_special_tokens=True) if turns else []
        self.timings["generation"] += time.perf_counter() - tic
        decisions = []
        for ids, cids, lps, text in zip(prompt_ids, completion_ids, logps, texts, strict=True):
            parsed = self.parse(text)
            shown = parsed.action if parsed.valid else parsed.action[:HISTORY_CHARS]
            data = (list(ids), list(cids), [float(x) for x in lps], text)
            nll = -sum(data[2]) / max(len(data[2]), 1)  # the mean token NLL: the branching criterion's
            decisions.append(Decision(parsed.action, valid=parsed.valid, shown=shown, data=data, nll=nll))
        if turns and self.progress is not None:
            self.progress.update(1)
        return decisions


def _check_prompt_lengths(prompt_ids: list[list[int]], limit: int | None, turn: int) -> None:
    longest = max((len(p) for p in prompt_ids), default=0)
    if limit is not None and longest > limit:
        raise ValueError(
            f"a prompt of {longest} tokens at step {turn + 1} exceeds max_prompt_length={limit}; raise "
            "max_prompt_length, or shorten the prompt (history_length, max_admissible_actions)"
        )


def check_first_prompts(
    env: Any,
    task_ids: Sequence[str],
    tokenizer: Any,
    prompts: PromptBuilder,
    max_prompt_length: int | None,
    *,
    chat_template_kwargs: dict[str, Any] | None = None,
    most_tasks: int = 64,
) -> int:
    """The longest first prompt over tasks spread evenly over ``task_ids``; an error if it is too long.

    The first turn's prompt (task, observation, admissible actions, no history) is the shortest a
    task's episode has: if it does not fit ``max_prompt_length``, the run would stop at its first turn.

    Args:
        env: an env of the run (reset to each task in turn).
        task_ids: the run's task ids.
        tokenizer: renders the chat messages as the rollout does.
        prompts: the run's prompt builder.
        max_prompt_length: the limit (None: only measured).
        chat_template_kwargs: extra ``apply_chat_template`` arguments.
        most_tasks: how many tasks to render at most (evenly spaced over ``task_ids``).

    Returns:
        The longest first prompt in tokens.

    Raises:
        ValueError: naming the task, its length and the limit, if one is longer than ``max_prompt_length``.
    """
    stride = max(1, -(-len(task_ids) // most_tasks))
    longest, longest_task = 0, None
    for task in list(task_ids)[::stride]:
        observation, info = env.reset(options={"task_id": task})
        messages = prompts.messages(info["task"], 0, observation, info["admissible_actions"], [])
        length = len(_render(tokenizer, messages, chat_template_kwargs))
        if length > longest:
            longest, longest_task = length, task
    if max_prompt_length is not None and longest > max_prompt_length:
        raise ValueError(
            f"max_prompt_length={max_prompt_length} is below the first prompt of task {longest_task!r} "
            f"({longest} tokens): every episode of it would stop at its first turn; raise max_prompt_length to at "
            "least that, or shorten the prompt (max_admissible_actions, system_prompt)"
        )
    return longest


def _generate_in_chunks(
    generate: GenerateFn, prompt_ids: list[list[int]], chunk: int
) -> tuple[list[list[int]], list[list[float]]]:
    completion_ids: list[list[int]] = []
    logps: list[list[float]] = []
    for start in range(0, len(prompt_ids), chunk):
        ids, lps = generate(prompt_ids[start : start + chunk])
        completion_ids.extend(ids)
        logps.extend(lps)
    return completion_ids, logps


def _render(tokenizer: Any, conversation: list[dict[str, str]], kwargs: dict[str, Any] | None) -> list[int]:
    out = tokenizer.apply_chat_template(
        conversation, add_generation_prompt=True, tokenize=True, return_dict=True, **(kwargs or {})
    )
    return list(out["input_ids"])


def generate_with_logprobs(
    model: torch.nn.Module,
    prompt_ids: list[list[int]],
    *,
    pad_token_id: int,
    eos_token_ids: Sequence[int],
    generation_config: Any,
    temperature: float = 1.0,
    no_grad: bool = True,
    sampler: str = "lean",
) -> tuple[list[list[int]], list[list[float]]]:
    """Samples completions and records each sampled token's log-prob.

    The log-prob is ``log_softmax(logits / temperature)`` of the token, from the raw logits of the
    forward pass that produced it (as TRL scores tokens in its loss). ``sampler="lean"`` samples with
    :func:`gaca_train.rollout.sampling.sample_with_logprobs` (each distinct prompt prefilled once, in length
    buckets, finished rows out of the decode batch; the same distribution as ``model.generate``,
    other draws for a seed) where it applies; otherwise, and with ``sampler="generate"``, with
    ``model.generate``, the log-probs captured by a forward hook: one step's log-probs are held at a
    time, never the whole [batch, length, vocab] tensor.

    Args:
        model: a causal LM (already unwrapped for generation).
        prompt_ids: token ids per prompt (unpadded).
        pad_token_id: id used for left padding.
        eos_token_ids: ids that end a completion (kept as its last token).
        generation_config: a ``transformers.GenerationConfig`` (sampling settings).
        temperature: the sampling temperature, applied to the recorded log-probs.
        no_grad: run under ``torch.no_grad()`` (the lean sampler always does).
        sampler: ``lean`` or ``generate`` (see above).

    Returns:
        Per prompt, the completion token ids (up to and including the first EOS) and their log-probs.
    """
    if sampler not in ("lean", "generate"):
        raise ValueError(f"sampler must be 'lean' or 'generate', got {sampler!r}")
    if sampler == "lean" and sampling.supports(model, generation_config):
        return sampling.sample_with_logprobs(
            model,
            prompt_ids,
            pad_token_id=pad_token_id,
            eos_token_ids=eos_token_ids,
            generation_config=generation_config,
            temperature=temperature,
        )
    device = next(model.parameters()).device
    input_ids, attention_mask = _left_pad(prompt_ids, pad_token_id)
    width = input_ids.shape[1]
    recorded: list[torch.Tensor] = []
    pending: dict[str, torch.Tensor] = {}

    def hook(_module: Any, args: tuple, kwargs: dict, output: Any) -> None:
        ids = kwargs.get("input_ids", args[0] if args else None)
        if "logp" in pending:
            recorded.append(pending.pop("logp").gather(1, ids[:, -1:].to(device)).squeeze(1))
        logits = output.logits[:, -1, :].float()
        pending["logp"] = torch.log_softmax(logits / temperature, dim=-1)

    # A PEFT model's generate runs its base model (with the adapters injected), never its own forward.
    hooked = model.get_base_model() if hasattr(model, "get_base_model") else model
    handle = hooked.register_forward_hook(hook, with_kwargs=True)
    try:
        with torch.no_grad() if no_grad else nullcontext():
            sequences = model.generate(
                input_ids=input_ids.to(device),
                attention_mask=attention_mask.to(device),
                generation_config=generation_config,
            )
    finally:
        handle.remove()
    completions = sequences[:, width:]
    # The prefill of every padded row, then one position per row for each token fed back.
    sampling.COMPUTED.total += input_ids.numel() + input_ids.shape[0] * max(completions.shape[1] - 1, 0)
    if completions.shape[1] and not recorded and "logp" not in pending:
        raise RuntimeError(
            f"no log-probs were recorded while {type(model).__name__}.generate ran: its forward pass was not the "
            "hooked module's; pass the model generate runs (for PEFT, the PeftModel or its base model)"
        )
    if "logp" in pending and completions.shape[1] > len(recorded):
        recorded.append(pending.pop("logp").gather(1, completions[:, len(recorded)].unsqueeze(1)).squeeze(1))
    logps = (
        torch.stack(recorded, dim=1) if recorded else completions.new_zeros((len(prompt_ids), 0), dtype=torch.float)
    )
    return _cut_at_eos(completions, logps, eos_token_ids)


def _left_pad(prompt_ids: list[list[int]], pad_token_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(p) for p in prompt_ids)
    input_ids = torch.full((len(prompt_ids), width), pad_token_id, dtype=torch.long)
    attention_mask = torch.zeros_like(input_ids)
    for row, ids in enumerate(prompt_ids):
        input_ids[row, width - len(ids) :] = torch.tensor(ids, dtype=torch.long)
        attention_mask[row, width - len(ids) :] = 1
    return input_ids, attention_mask


def _cut_at_eos(
    completions: torch.Tensor, logps: torch.Tensor, eos_token_ids: Sequence[int]
) -> tuple[list[list[int]], list[list[float]]]:
    """Per row, the tokens up to and including the first EOS, with their log-probs."""
    eos = torch.tensor(list(eos_token_ids), device=completions.device)
    out_ids, out_logps = [], []
    for row in range(completions.shape[0]):
        ids = completions[row].tolist()
        hits = torch.isin(completions[row], eos).nonzero()
        end = int(hits[0, 0]) + 1 if hits.numel() else len(ids)
        out_ids.append(ids[:end])
        out_logps.append(logps[row, :end].tolist())
    return out_ids, out_logps
