"""GACATrainer: TRL's GRPOTrainer trained on multi-turn env rollouts, one row per agent step."""

from __future__ import annotations

import functools
import json
import math
import sys
import time
import warnings
from collections import defaultdict, deque
from contextlib import ExitStack, contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import torch
from accelerate.utils import DistributedType, gather_object
from datasets import Dataset
from tqdm.auto import tqdm
from transformers.distributed.fsdp import is_fsdp_managed_module
from trl import GRPOTrainer
from trl.models import unwrap_model_for_generation
from trl.trainer.utils import pad, use_adapter

import gaca_envs  # noqa: F401  (registers the GACA env ids)
from gaca_envs.task_env import split_task_ids
from gaca_train.estimators.advantages import compute_advantages
from gaca_train.oracle.metrics import OraclePass, run_oracle_pass
from gaca_train.rollout import sampling
from gaca_train.rollout.policy import (
    LLMPolicy,
    RolloutResult,
    check_first_prompts,
    generate_with_logprobs,
    max_over_ranks,
    run_rollout,
)
from gaca_train.rollout.prompts import PromptBuilder, parse_response
from gaca_train.rollout.vector import RolloutPool
from gaca_train.training.batching import pack_micro_batches, plan_mini_batches
from gaca_train.training.config import GACAConfig
from gaca_train.training.memory import pack_length_for
from gaca_train.training.packing import (
    MASKED_ATTENTION,
    attention_of,
    block_attention,
    pack_rows,
    packed_logps,
    unpad_rows,
)
from gaca_train.training.precision import check_update_precision
from gaca_train.training.startup import check_real_data, check_vllm


def env_reward(completions: list[Any], **kwargs: Any) -> list[float]:
    """Placeholder reward function: GRPOTrainer requires one, but GACATrainer scores with the env.

    Raises:
        RuntimeError: always; GACATrainer never calls it.
    """
    raise RuntimeError("GACATrainer takes rewards from the environment; env_reward is never meant to be called")


def resolve_task_ids(args: GACAConfig) -> list[str]:
    """The training task ids: ``args.task_ids``, else the env's ``task_ids(args.task_split)``.

    An env bound to one split (ALFWorld) plays the split of its ``env_kwargs``; another
    ``task_split`` is an error that says so.

    Raises:
        ValueError: if no ids are found, or a split-bound env was built for another split.
    """
    ids = list(args.task_ids) if args.task_ids is not None else None
    if ids is None:
        env = gym.make(args.env_id, **args.env_kwargs)
        try:
            ids = list(env.unwrapped.task_ids(args.task_split))
        finally:
            env.close()
    if not ids:
        raise ValueError(
            f"no task ids for env_id={args.env_id!r}, task_split={args.task_split!r}: the env gave none; "
            "pass task_ids=[...] in the config"
        )
    return ids[: args.max_tasks] if args.max_tasks is not None else ids


def _check_reference_source(model: Any, beta: float, peft_config: Any) -> None:
    """With ``beta`` > 0 TRL loads the KL reference model from the policy's path (unless LoRA disables the adapter).

    Raises:
        ValueError: for a model built in memory (no ``config._name_or_path``), before TRL fails on an empty hub id.
    """
    if beta == 0.0 or peft_config is not None or isinstance(model, str) or hasattr(model, "peft_config"):
        return
    if not getattr(getattr(model, "config", None), "_name_or_path", ""):
        raise ValueError(
            f"beta={beta} needs a KL reference model, which TRL loads from the policy's path, but this model was "
            "built in memory (its config has no _name_or_path): save it with save_pretrained and pass the path "
            "(or the model loaded from it), or set beta: 0"
        )


def tasks_dataset(task_ids: list[str]) -> Dataset:
    """A dataset with one row per task id (columns ``task_id`` and ``prompt``), for TRL's sampler."""
    return Dataset.from_dict({"task_id": list(task_ids), "prompt": list(task_ids)})


def eval_task_sets(args: GACAConfig, eval_dataset: Dataset | None) -> list[tuple[str, dict | None, list[str]]]:
    """(split, env kwargs, task ids) of each validation split: ``eval_splits`` of the env, or the eval_dataset's ids.

    See :func:`gaca_train.rollout.vector.split_task_ids` for how a split reaches the env.
    """
    if args.eval_splits is None:
        if eval_dataset is None:
            return []
        return [("eval", None, [str(t) for t in eval_dataset["task_id"]])]
    sets = []
    for split in args.eval_splits:
        kwargs, ids = split_task_ids(args.env_id, args.env_kwargs, split)
        sets.append((split, kwargs, ids[: args.eval_max_tasks]))
    return sets


def validation_metrics(episodes: list[dict[str, Any]], splits: list[str]) -> dict[str, float]:
    """``eval/*`` metrics of validation episodes (see :meth:`GACATrainer.evaluate`)."""

    def summary(prefix: str, group: list[dict[str, Any]]) -> dict[str, float]:
        n = max(len(group), 1)
        steps = max(sum(e["length"] for e in group), 1)
        return {
            f"{prefix}/success_rate": sum(e["won"] for e in group) / n,
            f"{prefix}/score": sum(e["score"] for e in group) / n,
            f"{prefix}/episode_length": sum(e["length"] for e in group) / n,
            f"{prefix}/malformed_rate": sum(e["malformed"] for e in group) / steps,
            f"{prefix}/env_invalid_rate": sum(e["env_invalid"] for e in group) / steps,
            f"{prefix}/episodes": float(len(group)),
        }

    metrics = summary("eval", episodes)
    for task_type in sorted({str(e["task_type"]) for e in episodes if e["task_type"] is not None}):
        group = [e for e in episodes if str(e["task_type"]) == task_type]
        metrics[f"eval/success_rate/{task_type}"] = sum(e["won"] for e in group) / len(group)
    if len(splits) > 1:
        for split in splits:
            metrics.update(summary(f"eval/{split}", [e for e in episodes if e["split"] == split]))
    return metrics


def token_advantages(advantage: torch.Tensor, completion_mask: torch.Tensor) -> torch.Tensor:
    """Broadcasts per-row advantages [R] to the completion tokens [R, T] (zero on padding).

    METHOD.md section 6: every generated token of a step carries the step's advantage; prompt
    and observation tokens carry none (they are not in the completion).
    """
    return advantage.to(torch.float32).unsqueeze(1) * completion_mask.to(torch.float32)


# TRL loss types normalised per row (a mean over sequences); the others are normalised per token.
_ROW_MEAN_LOSSES = ("grpo", "dr_grpo", "sapo", "luspo")


@dataclass
class IterationRows:
    """One iteration's step rows on this rank, in global order (by episode, then step).

    Attributes:
        steps: the rank's step records.
        advantage: per row, the estimator's advantage.
        loss_tokens: per row, completion tokens that carry loss (0 for a masked truncated completion).
        offset: global index of ``steps[0]`` (rows of lower ranks come first).
        total: rows of the iteration over all ranks.
        old_logps, ref_logps: per row, old-policy and reference token log-probs, when needed.
    """

    steps: list[Any]
    advantage: list[float]
    loss_tokens: list[int]
    offset: int
    total: int
    old_logps: list[torch.Tensor] | None = None
    ref_logps: list[torch.Tensor] | None = None

    @functools.cached_property
    def lengths(self) -> list[tuple[int, int]]:
        """Per row, (prompt tokens, completion tokens)."""
        return [(len(s.prompt_ids), len(s.completion_ids)) for s in self.steps]


class GACATrainer(GRPOTrainer):
    """GRPOTrainer for multi-turn agents: rollouts in Gymnasium envs, advantages from the estimators.

    Differences from ``trl.GRPOTrainer``, and only these:

    * ``_generate_and_score_completions`` is overridden. Instead of one completion per dataset
      prompt, each dataset row is a task id; the rank's rows (whole groups of
      ``rollouts_per_task`` equal ids) are played to the end in a :class:`RolloutPool`, and every
      agent step becomes one training row (prompt = that step's context, completion = the
      response). Advantages come from :func:`gaca_train.estimators.advantages.compute_advantages` with the
      config's estimator, broadcast over the completion tokens. Generation goes through the
      trainer's model (``hf_sampler``: :mod:`gaca_train.rollout.sampling` or ``model.generate``; log-probs
      recorded while sampling, so step NLLs need no extra pass) or TRL's vLLM backend when
      ``use_vllm`` is set.
    * ``training_step`` is overridden: one TRL step is one iteration (``global_step`` counts
      iterations). The iteration's rows over all ranks are shuffled and cut into mini-batches of
      ``mini_batch_rows`` rows (:func:`gaca_train.training.batching.plan_mini_batches`); each mini-batch is
      one optimiser update, accumulated on each device over micro-batches of at most
      ``micro_batch_tokens`` computed tokens. Rows stay on the rank that played them; the ranks agree
      on the number of micro-batches of each update (a rank short of rows runs an empty one with a
      zero loss mask), as sharded models need. The loss of an update is TRL's loss of the whole
      mini-batch: ``current_gradient_accumulation_steps`` is set per micro-batch so that TRL's own
      normalisation becomes the mini-batch's (token mean for ``dapo``/``bnpo``/``cispo``/``vespo``,
      row mean for ``grpo``/``dr_grpo``/``sapo``/``luspo``), whatever the packing or the world size.
      The updates before the last step the optimiser here; the last is left to TRL's loop, so the
      scheduler, logging and checkpoints advance once per iteration, as in verl-agent.
    * ``_get_per_token_logps_and_entropies`` runs the update's forward passes (loss, old and reference
      log-probs) in the packed layout (``update_layout``, :mod:`gaca_train.training.packing`): no padding, each
      prompt prefix that rows of a micro-batch share computed once, the same values up to rounding.
    * ``__init__`` refuses, before any rollout, a model whose stored weights an update at the
      learning rate could not move (:func:`gaca_train.training.precision.check_update_precision`) and a
      ``max_prompt_length`` below a task's first prompt.
    * ``train`` closes the env subprocesses when it returns.

    Everything else (loss, clipping, KL ``beta``, optimiser, scheduler, checkpoints, logging,
    LoRA, DeepSpeed/FSDP) is GRPOTrainer's. The task order is TRL's ``RepeatSampler``, so a
    resumed run continues with the tasks it would have played.
    """

    _tag_names = ["trl", "grpo", "gaca"]
    _name = "GACA"

    def __init__(
        self,
        model: Any,
        args: GACAConfig,
        train_dataset: Dataset | None = None,
        eval_dataset: Dataset | None = None,
        processing_class: Any = None,
        callbacks: list[Any] | None = None,
        optimizers: tuple[Any, Any] = (None, None),
        peft_config: Any = None,
        quantization_config: Any = None,
    ) -> None:
        if not isinstance(args, GACAConfig):
            raise TypeError(f"args must be a GACAConfig, got {type(args).__name__}")
        check_real_data(args.env_id, args.env_kwargs, args.allow_generated_data)
        check_vllm(args)
        _check_reference_source(model, args.beta, peft_config)
        if train_dataset is None:
            train_dataset = tasks_dataset(resolve_task_ids(args))
        self._eval_sets = eval_task_sets(args, eval_dataset)
        if eval_dataset is None and self._eval_sets:  # TRL's loop needs one to schedule evaluate()
            eval_dataset = tasks_dataset(self._eval_sets[0][2])
        if len(train_dataset) < args.tasks_per_iteration:
            raise ValueError(
                f"tasks_per_iteration={args.tasks_per_iteration} needs at least {args.tasks_per_iteration} task ids, "
                f"got {len(train_dataset)}; lower tasks_per_iteration or add tasks (task_ids, max_tasks, env_kwargs)"
            )
        super().__init__(
            model=model,
            reward_funcs=[env_reward],
            args=args,
            train_dataset=train_dataset,
            eval_dataset=eval_dataset,
            processing_class=processing_class,
            callbacks=callbacks,
            optimizers=optimizers,
            peft_config=peft_config,
            quantization_config=quantization_config,
        )
        # After the model is loaded and before any rollout: refuse updates that would round away.
        check_update_precision(self.model, args.learning_rate, master_copy=self.is_deepspeed_enabled)
        self.prompt_builder = PromptBuilder.from_config(args)
        self._parse = functools.partial(parse_response, format_check=args.format_check, env_id=args.env_id)
        self._check_first_prompts(list(self.train_dataset["task_id"]))
        self._pools: dict[tuple, RolloutPool] = {}
        # The packed layout runs where the attention takes a 4D mask (SDPA, eager); elsewhere the padded one.
        self._packed = args.update_layout == "packed" and attention_of(self.model) in MASKED_ATTENTION
        self._pack_length = pack_length_for(args.pack_length, attention_of(self.model))
        # Per iteration: the update's forward passes' row tokens (prompt + scored completion) and positions run.
        self._row_tokens = self._computed_tokens = 0
        self.last_rollout: RolloutResult | None = None
        self.last_oracle: OraclePass | None = None
        # TRL sizes its completion tables to one row per episode; here an iteration has up to
        # max_env_steps rows per episode, and the tables keep the latest iteration's rows.
        most_rows = args.tasks_per_iteration * args.rollouts_per_task * args.max_env_steps
        for key in ("prompt", "completion", "advantages"):
            self._logs[key] = deque(maxlen=most_rows)
        self._logs["rewards"] = defaultdict(lambda: deque(maxlen=most_rows))

    def _check_first_prompts(self, train_ids: list[str]) -> None:
        """Stops at start-up if a training or validation task's first prompt exceeds ``max_prompt_length``."""
        if self.args.max_prompt_length is None:
            return
        # One env per distinct kwargs: splits that share them (all but ALFWorld's) share it, so a large
        # catalog is loaded once for this check, not once per split.
        envs: dict[str, gym.Env] = {}
        try:
            for env_kwargs, ids in [(self.args.env_kwargs, train_ids)] + [(k, t) for _, k, t in self._eval_sets]:
                kwargs = self.args.env_kwargs if env_kwargs is None else env_kwargs
                key = json.dumps(kwargs, sort_keys=True, default=str)
                if key not in envs:
                    envs[key] = gym.make(self.args.env_id, **kwargs)
                check_first_prompts(
                    envs[key], ids, self.processing_class, self.prompt_builder, self.args.max_prompt_length,
                    chat_template_kwargs=self.chat_template_kwargs,
                )  # fmt: skip
        finally:
            for env in envs.values():
                env.close()

    def train(self, *args: Any, **kwargs: Any) -> Any:
        """``GRPOTrainer.train``, then closes the env pools."""
        try:
            return super().train(*args, **kwargs)
        finally:
            self.close_envs()

    def close_envs(self) -> None:
        """Closes every env pool (and its subprocesses); later rollouts open new ones."""
        for pool in self._pools.values():
            pool.close()
        self._pools.clear()

    def _pool(self, size: int, env_kwargs: dict[str, Any] | None = None) -> RolloutPool:
        env_kwargs = self.args.env_kwargs if env_kwargs is None else env_kwargs
        key = (size, json.dumps(env_kwargs, sort_keys=True, default=str))
        if key not in self._pools:
            self._pools[key] = RolloutPool(
                self.args.env_id,
                size,
                env_kwargs,
                mode=self.args.vector_env,
                server_urls=self.args.env_server_urls,
                server_timeout_s=self.args.env_server_timeout_s,
            )
        return self._pools[key]

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> Any:
        """Plays the rank's tasks and scores every step with the estimator.

        Returns:
            In training, the iteration's :class:`IterationRows` (``training_step`` schedules the
            updates); in evaluation, TRL's loss inputs for all the rank's rows in one batch.
        """
        mode = "train" if self.model.training else "eval"
        task_ids = [str(x["task_id"]) for x in inputs]
        _check_groups(task_ids, self.num_generations if mode == "train" else self.num_generations_eval)
        tic, computed = time.perf_counter(), sampling.COMPUTED.total
        result = self._rollout(task_ids, mode)
        rollout_time = time.perf_counter() - tic
        computed = sampling.COMPUTED.total - computed
        self.last_rollout = result

        tic = time.perf_counter()
        # Trajectory ids unique over the ranks; a branching rank plays at most twice as many as it has slots.
        traj_offset = self.accelerator.process_index * len(task_ids) * (1 if result.parents is None else 2)
        rows = result.to_step_rows(
            anchor=self.args.anchor,
            nll_reduction=self.args.nll_reduction,
            reward_scale=self.args.reward_scale,
            traj_offset=traj_offset,
        )
        parent = result.parent_rows(traj_offset)
        advantages = compute_advantages(rows, **self.args.estimator_kwargs(), parent=parent)
        advantage_time = time.perf_counter() - tic
        iteration = self._iteration_rows(result, advantages.advantage)
        metrics = {**result.metrics(), **advantages.metrics, "time/rollout": rollout_time}
        if not self.use_vllm:
            metrics["rollout/computed_tokens"] = float(computed)
        if result.transitions is not None:  # an oracle iteration (oracle_every): A* of some rows, before the update
            metrics.update(self._oracle_metrics(result, rows, parent, len(task_ids)))
        metrics.update({"time/advantage": advantage_time, "train/rows": float(iteration.total)})
        self._record_metrics(metrics, mode)
        if self.log_completions:
            self._log_rows(result, advantages.advantage)
        if mode == "train":
            return iteration
        self._add_policy_logps(iteration, need_old=False)
        batch = self._batch(iteration, list(range(len(iteration.steps))))
        batch["num_items_in_batch"] = self.accelerator.gather(batch["completion_mask"].sum()).sum()
        return batch

    def _oracle_due(self, mode: str) -> bool:
        oracle = self.args.oracle_spec()
        return mode == "train" and oracle is not None and self.state.global_step % oracle.every == 0

    def _oracle_metrics(self, result: RolloutResult, rows: Any, parent: list[int] | None, slots: int) -> dict:
        """``oracle/*``: the estimators against Monte-Carlo A* of chosen rows (:mod:`~gaca_train.oracle.monte_carlo`).

        The continuations sample from the rollout's policy (the model before this iteration's update) through
        the trainer's generation backend, in the rollout's env pool; the torch RNG state is restored after, so
        the oracle leaves training's samples unchanged.
        """
        lockstep = max_over_ranks(self.accelerator)
        rng = torch.get_rng_state()
        cuda_rng = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None
        try:
            with self._generation_model() as model:
                policy = LLMPolicy(
                    self._generate_fn(model),
                    self.processing_class,
                    self.prompt_builder,
                    batch_size=self.args.rollout_batch_size,
                    chat_template_kwargs=self.chat_template_kwargs,
                    lockstep=lockstep,
                    max_prompt_length=self.args.max_prompt_length,
                    parse=self._parse,
                )
                done = run_oracle_pass(
                    self._pool(slots),
                    result.transitions,
                    result.histories,
                    rows,
                    policy,
                    self.args,
                    self.args.oracle_spec(),
                    max_env_steps=self.args.max_env_steps,
                    iteration=self.state.global_step,
                    parent=parent,
                    reward_scale=self.args.reward_scale,
                    min_over_ranks=None if lockstep is None else (lambda n: -lockstep(-n)),
                )
        finally:
            torch.set_rng_state(rng)
            if cuda_rng is not None:
                torch.cuda.set_rng_state_all(cuda_rng)
        self.last_oracle = done
        return done.metrics

    def _iteration_rows(self, result: RolloutResult, advantage: torch.Tensor) -> IterationRows:
        """The rank's rows in global order: by (episode, step), episodes numbered over all ranks."""
        order = sorted(range(len(result.steps)), key=lambda i: (result.steps[i].env_index, result.steps[i].step))
        steps = [result.steps[i] for i in order]
        counts = self.accelerator.gather(torch.tensor([len(steps)], device=self.accelerator.device)).tolist()
        rank = self.accelerator.process_index
        keep = [not self.mask_truncated_completions or (bool(s.completion_ids) and s.completion_ids[-1] in
                self.eos_token_ids) for s in steps]  # fmt: skip
        return IterationRows(
            steps=steps,
            advantage=[float(advantage[i]) for i in order],
            loss_tokens=[len(s.completion_ids) if k else 0 for s, k in zip(steps, keep, strict=True)],
            offset=int(sum(counts[:rank])),
            total=int(sum(counts)),
        )

    def training_step(self, model: Any, inputs: Any, num_items_in_batch: Any = None) -> torch.Tensor:
        """One iteration: a rollout, then its optimiser updates (all but the last stepped here).

        See the class docstring. TRL's loop clips, steps the optimiser and the scheduler for the
        last update and logs once per iteration.
        """
        model.train()
        if hasattr(self.optimizer, "train") and callable(self.optimizer.train):
            self.optimizer.train()
        iteration = self._generate_and_score_completions(inputs)
        tic = time.perf_counter()
        seed = self.args.seed * 1_000_003 + self.state.global_step
        plan = plan_mini_batches(iteration.total, self.args.mini_batch_rows, self.args.ppo_epochs, seed=seed)
        vllm_ratio = self.use_vllm and self.vllm_importance_sampling_correction
        self._row_tokens = self._computed_tokens = 0  # the reference and old-policy passes count too
        self._add_policy_logps(iteration, need_old=len(plan) > 1 or vllm_ratio)
        end = iteration.offset + len(iteration.steps)
        losses, micro_batches = [], []
        for u, global_rows in enumerate(plan):
            local = [g - iteration.offset for g in global_rows if iteration.offset <= g < end]
            loss, count = self._update(model, iteration, local)
            losses.append(loss)
            micro_batches.append(count)
            if u < len(plan) - 1:
                self._optimizer_step(model)
        seconds = time.perf_counter() - tic
        self._record_metrics(
            {
                "train/updates": float(len(plan)),
                "train/micro_batches": sum(micro_batches) / len(micro_batches),
                # Tokens of the forward passes: each row in full (prompt + completion) per pass, and what ran.
                "train/row_tokens": float(self._row_tokens),
                "train/computed_tokens": float(self._computed_tokens),
                "time/update": seconds,
                "throughput/update_rows_per_s": len(iteration.steps) * self.args.ppo_epochs / max(seconds, 1e-9),
                "throughput/update_tokens_per_s": self._computed_tokens / max(seconds, 1e-9),
            },
            "train",
        )
        self._step += 1
        return torch.stack(losses).mean()

    def _update(self, model: Any, iteration: IterationRows, local: list[int]) -> tuple[torch.Tensor, int]:
        """Backward passes of one update over this rank's ``local`` rows; returns (loss, micro-batches).

        The loss of each micro-batch is TRL's, with ``current_gradient_accumulation_steps`` chosen so that
        the sum over micro-batches and ranks (DDP averages over ranks) is the mini-batch's loss.
        """
        world = self.accelerator.num_processes
        device = self.accelerator.device
        totals = torch.tensor([sum(iteration.loss_tokens[i] for i in local), len(local)], device=device)
        tokens_u, rows_u = (float(x) for x in self.accelerator.reduce(totals, reduction="sum").tolist())
        bins = self._synced_bins(iteration, local)
        row_mean = self.loss_type in _ROW_MEAN_LOSSES
        total = torch.zeros((), device=device)
        for k, rows in enumerate(bins):
            last = k == len(bins) - 1
            batch = self._batch(iteration, rows or [0], real=bool(rows))
            tokens_mb = float(batch["completion_mask"].sum())
            empty = tokens_u == 0 or (not row_mean and tokens_mb == 0) or not rows
            if empty:
                scale, batch["num_items_in_batch"] = 1.0, torch.tensor(1.0, device=device)
            elif row_mean:
                scale = rows_u / (len(rows) * world)
            else:  # token-level losses: TRL divides by num_items_in_batch / world * scale
                scale = tokens_u / (tokens_mb * world)
                batch["num_items_in_batch"] = torch.tensor(tokens_mb * world, device=device)
            self.current_gradient_accumulation_steps = scale
            self.accelerator.gradient_state._set_sync_gradients(last)
            # Packed: attention by query blocks through the backward pass too (checkpointing recomputes the forward).
            blocks = block_attention(model) if self._packed else nullcontext()
            with self._sync_context(model, last), self._ragged_gather(), blocks:
                with self.compute_loss_context_manager():
                    loss = self.compute_loss(model, batch)
                if empty:  # keeps the collective backward of an empty micro-batch, with no gradient
                    loss = loss * 0.0
                deepspeed = self.accelerator.distributed_type == DistributedType.DEEPSPEED
                self.accelerator.backward(loss, **({"scale_wrt_gas": False} if deepspeed else {}))
            total = total + loss.detach()
        return total, len(bins)

    def _synced_bins(self, iteration: IterationRows, local: list[int]) -> list[list[int]]:
        """Token-budgeted micro-batches of ``local`` rows, as many on every rank."""
        budget = self.args.micro_batch_tokens
        prompts = [s.prompt_ids for s in iteration.steps] if self._packed else None
        bins = pack_micro_batches(iteration.lengths, local, budget, prompts=prompts, pack_length=self._pack_length)
        count = len(bins)
        if self.accelerator.num_processes > 1:
            count = int(self.accelerator.reduce(torch.tensor(count, device=self.accelerator.device), "max").item())
        return pack_micro_batches(iteration.lengths, local, budget, max(count, 1), prompts, self._pack_length)

    def _get_per_token_logps_and_entropies(
        self,
        model: Any,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        logits_to_keep: int,
        batch_size: int | None = None,
        compute_entropy: bool = False,
        compute_aux_loss: bool = False,
        **extra: Any,
    ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        """TRL's per-token log-probs, in the packed layout where it applies (``update_layout``).

        Takes and returns TRL's padded tensors, so the loss, the KL term and the metrics are TRL's own. The
        packed layout (:mod:`gaca_train.training.packing`) computes the same values without padding and with shared
        prompt prefixes once; the padded one (TRL's) runs for multimodal inputs, MoE auxiliary losses, other
        attention implementations, and inputs not in TRL's layout.
        """
        self._row_tokens += int(attention_mask.sum())
        rows = None
        multimodal = any(value is not None for value in extra.values())
        if self._packed and not multimodal and not compute_aux_loss and attention_of(model) in MASKED_ATTENTION:
            rows = unpad_rows(input_ids, attention_mask, logits_to_keep)
        if rows is None:
            self._computed_tokens += input_ids.numel()
            return super()._get_per_token_logps_and_entropies(
                model, input_ids, attention_mask, logits_to_keep, batch_size, compute_entropy, compute_aux_loss,
                **extra,
            )  # fmt: skip
        packed = pack_rows(rows, self._pack_length, self._tokenizer.pad_token_id or 0, self.args.micro_batch_tokens)
        self._computed_tokens += packed.computed
        with self.accelerator.autocast():
            logps, entropies = packed_logps(
                model, packed, (input_ids.size(0), logits_to_keep), attention_of(model), compute_entropy
            )
        return logps, entropies, None

    @contextmanager
    def _ragged_gather(self):
        """Lets TRL's loss gather per-row metrics of micro-batches whose row counts differ between ranks.

        TRL gathers per-sequence clip ratios assuming equal batches on every rank; token-budgeted
        micro-batches are not. Within this context, ``accelerator.gather`` pads each tensor to the
        longest rank's rows first (NaN rows, which TRL's ``nanmin``/``nanmax`` skip).
        """
        accelerator = self.accelerator
        if accelerator.num_processes < 2:
            yield
            return
        gather = accelerator.gather

        def ragged(tensor: Any) -> Any:
            if isinstance(tensor, torch.Tensor) and tensor.ndim > 0:
                fill = float("nan") if tensor.is_floating_point() else 0
                tensor = accelerator.pad_across_processes(tensor, dim=0, pad_index=fill)
            return gather(tensor)

        accelerator.gather = ragged
        try:
            yield
        finally:
            del accelerator.gather  # the instance attribute; the class method shows again

    @contextmanager
    def _sync_context(self, model: Any, last: bool):
        """Defers the gradient all-reduce to the last micro-batch of an update, as TRL's loop does."""
        if last or self.accelerator.distributed_type == DistributedType.DEEPSPEED:
            yield
        elif self.is_distributed_loading_by_transformers and is_fsdp_managed_module(self.model):
            with self._defer_fsdp_gradient_reduction():
                yield
        else:
            with self.accelerator.no_sync(model=model):
                yield

    def _optimizer_step(self, model: Any) -> None:
        """Clips and steps the optimiser for an update before the iteration's last (the scheduler waits)."""
        if self.args.max_grad_norm > 0 and self.accelerator.distributed_type != DistributedType.DEEPSPEED:
            self._clip_grad_norm(model)
        self.optimizer.step()
        model.zero_grad()

    def _batch(self, iteration: IterationRows, rows: list[int], real: bool = True) -> dict[str, Any]:
        """TRL's loss inputs for ``rows`` of the iteration, padded to the micro-batch's longest row.

        ``real=False`` builds an empty micro-batch: the rows attend normally but their loss mask is zero.
        """
        device = self.accelerator.device
        steps = [iteration.steps[i] for i in rows]
        pad_id = self._tokenizer.pad_token_id
        prompt_ids = pad([torch.tensor(s.prompt_ids) for s in steps], padding_value=pad_id, padding_side="left")
        prompt_mask = pad([torch.ones(len(s.prompt_ids), dtype=torch.long) for s in steps], padding_side="left")
        completion_ids = pad([torch.tensor(s.completion_ids) for s in steps], padding_value=pad_id)
        loss_mask = pad([torch.ones(len(s.completion_ids), dtype=torch.long) for s in steps])
        kept = torch.tensor([real and iteration.loss_tokens[i] > 0 for i in rows], dtype=torch.long)
        loss_mask = (loss_mask * kept.unsqueeze(1)).to(device)
        advantage = torch.tensor([iteration.advantage[i] for i in rows], dtype=torch.float32)
        batch = {
            "prompt_ids": prompt_ids.to(device),
            "prompt_mask": prompt_mask.to(device),
            "completion_ids": completion_ids.to(device),
            "completion_mask": loss_mask,
            "advantages": token_advantages(advantage.to(device), loss_mask),
        }
        per_row_logps = {"old_per_token_logps": iteration.old_logps, "ref_per_token_logps": iteration.ref_logps}
        for key, per_row in per_row_logps.items():
            if per_row is not None:
                batch[key] = pad([per_row[i] for i in rows], padding_value=0.0).to(device)
        if self.use_vllm:
            sampling = pad([torch.tensor(s.logps, dtype=torch.float32) for s in steps], padding_value=0.0).to(device)
            batch["sampling_per_token_logps"] = sampling
            if self.vllm_importance_sampling_correction and "old_per_token_logps" in batch:
                batch["importance_sampling_ratio"] = self._vllm_importance_ratio(
                    batch["old_per_token_logps"], sampling, loss_mask
                )
        return batch

    def _add_policy_logps(self, iteration: IterationRows, need_old: bool) -> None:
        """Old-policy (before any update) and reference log-probs of every row, by token-budgeted micro-batches.

        Old log-probs are needed when an iteration makes several updates (later updates are off-policy)
        or for vLLM's importance-sampling correction; reference log-probs when ``beta`` is not zero. With
        ``old_logps: rollout`` the old log-probs are the ones the rollout recorded, with no forward pass.
        """
        recorded = need_old and self.args.old_logps == "rollout"
        forward_old = need_old and not recorded
        # Recorded: the rollout's own log-probs of the same weights (HF generation only, see GACAConfig).
        iteration.old_logps = None
        if recorded:
            iteration.old_logps = [torch.tensor(s.logps, dtype=torch.float32) for s in iteration.steps]
        iteration.ref_logps = None
        if not forward_old and self.beta == 0.0:
            return
        rows = list(range(len(iteration.steps)))
        old: list[torch.Tensor | None] = [None] * len(rows)
        ref: list[torch.Tensor | None] = [None] * len(rows)
        for chunk in self._synced_bins(iteration, rows):
            batch = self._batch(iteration, chunk or [0])
            input_ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
            attention_mask = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
            width = batch["completion_ids"].size(1)
            with torch.no_grad():
                if forward_old:
                    logps, _, _ = self._get_per_token_logps_and_entropies(self.model, input_ids, attention_mask, width)
                    for j, i in enumerate(chunk):
                        old[i] = logps[j, : len(iteration.steps[i].completion_ids)]
                if self.beta != 0.0:
                    logps = self._reference_logps(input_ids, attention_mask, width)
                    for j, i in enumerate(chunk):
                        ref[i] = logps[j, : len(iteration.steps[i].completion_ids)]
        if forward_old:
            iteration.old_logps = old
        if self.beta != 0.0:
            iteration.ref_logps = ref

    def _reference_logps(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, width: int) -> torch.Tensor:
        """Log-probs under the reference: the reference model, or for PEFT the initial adapter or the base model."""
        if self.ref_model is not None:
            ref_model, context = self.ref_model, nullcontext()
        else:
            unwrapped = self.accelerator.unwrap_model(self.model)
            adapter = "ref" if "ref" in unwrapped.peft_config else None
            ref_model, context = self.model, use_adapter(unwrapped, adapter_name=adapter)
        with context:
            logps, _, _ = self._get_per_token_logps_and_entropies(ref_model, input_ids, attention_mask, width)
        return logps

    def _log_rows(self, result: RolloutResult, advantage: torch.Tensor) -> None:
        """Feeds TRL's completion tables (``log_completions``): one entry per step row of this rank."""
        for step, value in zip(result.steps, advantage.tolist(), strict=True):
            self._logs["prompt"].append(self.processing_class.decode(step.prompt_ids, skip_special_tokens=True))
            self._logs["completion"].append(step.response)
            self._logs["rewards"]["env_reward"].append(step.reward)
            self._logs["advantages"].append(value)

    def _rollout(
        self,
        task_ids: list[str],
        mode: str,
        env_kwargs: dict[str, Any] | None = None,
        temperature: float | None = None,
    ) -> RolloutResult:
        pool = self._pool(len(task_ids), env_kwargs)
        # Env seeds follow the optimiser step, so a resumed run replays the same env randomness.
        offset = 0 if mode == "train" else 1_000_003
        seed = (self.args.seed * 7_919 + offset + self.state.global_step * 104_729) % (2**31 - 1)
        seed = seed + self.accelerator.process_index * len(task_ids)
        bar = tqdm(
            total=self.args.max_env_steps,
            desc=f"rollout ({mode})",
            leave=False,
            # A bar over the turns only where it redraws in place: not in a non-interactive log.
            disable=self.args.disable_tqdm or not self.accelerator.is_local_main_process or not sys.stderr.isatty(),
        )
        with bar, self._generation_model() as model, self._sampling_temperature(temperature):
            return run_rollout(
                pool,
                task_ids,
                self._generate_fn(model),
                self.processing_class,
                self.prompt_builder,
                seed=seed,
                branching=self.args.branching_spec() if mode == "train" else None,
                batch_size=self.args.rollout_batch_size,
                chat_template_kwargs=self.chat_template_kwargs,
                progress=bar,
                lockstep=max_over_ranks(self.accelerator),  # collective generation needs equal calls per rank
                max_prompt_length=self.args.max_prompt_length,
                parse=self._parse,
                save_snapshots=self._oracle_due(mode),
            )

    @contextmanager
    def _sampling_temperature(self, temperature: float | None):
        """Samples at ``temperature`` (validation) instead of the training temperature, then restores it."""
        if temperature is None or temperature == self.temperature:
            yield
            return
        saved = self.temperature, self.generation_config.temperature
        vllm = getattr(self, "vllm_generation", None) if self.use_vllm else None
        saved_vllm = vllm.temperature if vllm is not None else None
        self.temperature = self.generation_config.temperature = temperature
        if vllm is not None:
            vllm.temperature = temperature
        try:
            yield
        finally:
            self.temperature, self.generation_config.temperature = saved
            if vllm is not None:
                vllm.temperature = saved_vllm

    def evaluate(self, eval_dataset: Any = None, ignore_keys: Any = None, metric_key_prefix: str = "eval") -> dict:
        """Validation: plays the held-out tasks at ``eval_temperature`` and logs ``eval/*`` (no training rows).

        Called by TRL's loop at ``eval_strategy``/``eval_steps`` (and before the first iteration with
        ``eval_on_start``), or directly. Each rank plays its share of every eval split's tasks through
        the trainer's generation backend; the episodes are gathered, so every rank returns the same
        metrics: ``eval/success_rate``, ``eval/score``, ``eval/episode_length``, ``eval/malformed_rate``
        (responses that failed the format check), ``eval/env_invalid_rate``, ``eval/episodes``,
        ``eval/success_rate/<task_type>`` and, with several splits, ``eval/<split>/success_rate``.
        The torch RNG state is restored afterwards, so validation leaves training's samples unchanged.
        """
        sets = self._eval_sets if eval_dataset is None else [("eval", None, [str(t) for t in eval_dataset["task_id"]])]
        if not sets:
            raise ValueError("nothing to evaluate: set eval_splits in the config or pass an eval_dataset")
        rng = torch.get_rng_state()
        cuda_rng = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None
        was_training = self.model.training
        self.model.eval()
        episodes: list[dict[str, Any]] = []
        try:
            for split, env_kwargs, task_ids in sets:
                episodes += [{**e, "split": split} for e in self._validation_episodes(task_ids, env_kwargs)]
            metrics = validation_metrics(gather_object(episodes), [s for s, _, _ in sets])
            self.log(metrics)  # in eval mode: TRL's log leaves the pending training metrics alone
        finally:
            torch.set_rng_state(rng)
            if cuda_rng is not None:
                torch.cuda.set_rng_state_all(cuda_rng)
            self.model.train(was_training)
        self.control = self.callback_handler.on_evaluate(self.args, self.state, self.control, metrics)
        return metrics

    def _validation_episodes(self, task_ids: list[str], env_kwargs: dict[str, Any] | None) -> list[dict[str, Any]]:
        """This rank's share of ``task_ids`` (each ``eval_rollouts_per_task`` times), one record per episode."""
        world, rank = self.accelerator.num_processes, self.accelerator.process_index
        mine = [t for t in task_ids for _ in range(self.args.eval_rollouts_per_task)][rank::world]
        if not mine:
            raise ValueError(f"{len(task_ids)} eval tasks cannot give each of {world} ranks one; add eval tasks")
        result = self._rollout(mine, "eval", env_kwargs, temperature=self.args.eval_temperature)
        steps: dict[int, list[Any]] = defaultdict(list)
        for step in result.steps:
            steps[step.env_index].append(step)
        return [
            {
                "task_id": e.task_id,
                "task_type": e.info.get("task_type"),
                "won": e.won,
                "score": e.score,
                "length": e.length,
                "malformed": sum(not s.valid for s in steps[e.env_index]),
                "env_invalid": sum(not s.env_valid for s in steps[e.env_index]),
            }
            for e in result.episodes
        ]

    @contextmanager
    def _generation_model(self):
        if self.use_vllm:
            with self._vllm_awake():
                yield None
            return
        with ExitStack() as stack:
            with warnings.catch_warnings():
                # TRL 1.16's unwrap_model_for_generation reads transformers 5's deprecated `is_gradient_checkpointing`
                # on entry (a FutureWarning at the first rollout), and nothing on our side can pass the new name:
                # drop this filter with the TRL pin once TRL reads `is_activation_checkpointing`. Only that
                # warning, only while TRL's context is entered.
                warnings.filterwarnings(
                    "ignore", message="`is_gradient_checkpointing` is deprecated", category=FutureWarning
                )
                unwrapped = stack.enter_context(
                    unwrap_model_for_generation(
                        self.model_wrapped,
                        self.accelerator,
                        gather_deepspeed3_params=self.args.ds3_gather_for_generation,
                        generation_kwargs=self.generation_kwargs,
                        gradient_checkpointing_kwargs=self.args.gradient_checkpointing_kwargs,
                    )
                )
            stack.enter_context(torch.no_grad())
            stack.enter_context(self._dist.summon_full_params(self.model_wrapped, recurse=False))
            yield unwrapped

    @contextmanager
    def _vllm_awake(self):
        """Weights pushed to vLLM once per iteration, and vLLM kept awake for all turns of the rollout.

        TRL's colocate sleep mode sleeps at level 2 (weights discarded) after every ``generate`` call
        and pushes the weights again at the next; a multi-turn rollout would push them on every turn.
        Here sleep mode is held off for the rollout and the engine sleeps once at its end.
        """
        vllm = self.vllm_generation
        asleep = getattr(vllm, "_llm_weights_sleeping", False)
        if self.state.global_step != self._last_loaded_step or asleep:
            vllm.sync_weights()  # wakes the weights first in sleep mode
            self._last_loaded_step = self.state.global_step
        sleep_mode = vllm.mode == "colocate" and vllm.enable_sleep_mode
        if not sleep_mode:
            yield
            return
        vllm.llm.wake_up(tags=["kv_cache"])
        vllm.enable_sleep_mode = False
        try:
            yield
        finally:
            vllm.enable_sleep_mode = True
            vllm.llm.sleep(level=2)
            vllm._llm_weights_sleeping = True

    def _generate_fn(self, model: Any):
        if self.use_vllm:
            # TRL's vLLM backend (colocate or server); tested with a stand-in of the same contract (no GPU).
            def generate_vllm(prompt_ids: list[list[int]]) -> tuple[list[list[int]], list[list[float]]]:
                _, completion_ids, logprobs, _ = self.vllm_generation.generate(
                    prompts=prompt_ids, images=None, num_generations=1, profiler=nullcontext()
                )
                return completion_ids, [[lp[0] for lp in seq] for seq in logprobs]

            return generate_vllm

        def generate_hf(prompt_ids: list[list[int]]) -> tuple[list[list[int]], list[list[float]]]:
            return generate_with_logprobs(
                model,
                prompt_ids,
                pad_token_id=self._tokenizer.pad_token_id,
                eos_token_ids=self.eos_token_ids,
                generation_config=self.generation_config,
                temperature=self.temperature,
                sampler=self.args.hf_sampler,
            )

        return generate_hf

    def _vllm_importance_ratio(self, old: torch.Tensor, sampling: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """pi_train / pi_vLLM of the sampled tokens, per token or per sequence, truncated or masked as TRL does.

        ``vllm_importance_sampling_mode``: ``token_*`` gives a (rows, tokens) ratio, ``sequence_*`` a
        (rows, 1) ratio of the summed log-prob gaps; ``*_truncate`` clamps it to the clip bounds,
        ``*_mask`` zeroes it outside them. Tokens vLLM could not score (NaN) count as ratio 1.
        """
        gap = torch.nan_to_num((old - sampling) * mask, nan=0.0)
        mode = self.vllm_importance_sampling_mode
        level, _, action = mode.partition("_")
        if level not in ("token", "sequence") or action not in ("truncate", "mask"):
            raise ValueError(f"unknown vllm_importance_sampling_mode {mode!r}")
        ratio = torch.exp(gap.sum(dim=-1, keepdim=True) if level == "sequence" else gap)
        low, high = self.vllm_importance_sampling_clip_min, self.vllm_importance_sampling_clip_max
        if action == "truncate":
            return ratio.clamp(min=low, max=high)
        low = -math.inf if low is None else low
        high = math.inf if high is None else high
        return ratio.masked_fill((ratio < low) | (ratio > high), 0.0)

    def _record_metrics(self, metrics: dict[str, float], mode: str) -> None:
        """Averages each metric over ranks and appends it to TRL's metric lists (logged by ``log``)."""
        names = sorted(metrics)
        values = torch.tensor([float(metrics[k]) for k in names], dtype=torch.float64, device=self.accelerator.device)
        gathered = self.accelerator.gather(values.unsqueeze(0)).view(-1, len(names))
        for name, value in zip(names, torch.nanmean(gathered, dim=0).tolist(), strict=True):
            self._metrics[mode][name].append(value)


def _check_groups(task_ids: list[str], group_size: int) -> None:
    for start in range(0, len(task_ids), group_size):
        block = task_ids[start : start + group_size]
        if len(block) != group_size or len(set(block)) != 1:
            raise ValueError(
                f"the rank's batch must hold whole groups of {group_size} equal task ids in a row, got {block}; "
                "keep per_device_train_batch_size * steps_per_generation a multiple of rollouts_per_task"
            )
