"""GACATrainer: TRL's GRPOTrainer trained on multi-turn env rollouts, one row per agent step."""

from __future__ import annotations

import math
import time
from collections import defaultdict, deque
from contextlib import contextmanager, nullcontext
from typing import Any

import gymnasium as gym
import torch
from datasets import Dataset
from tqdm.auto import tqdm
from trl import GRPOTrainer
from trl.models import unwrap_model_for_generation
from trl.trainer.utils import pad, use_adapter

import gaca_envs  # noqa: F401  (registers the GACA env ids)
from gaca_train.advantages import compute_advantages
from gaca_train.config import GACAConfig
from gaca_train.rollout import (
    PromptBuilder,
    RolloutResult,
    generate_with_logprobs,
    max_over_ranks,
    run_rollout,
    template_for,
)
from gaca_train.vector import RolloutPool, env_task_ids


def env_reward(completions: list[Any], **kwargs: Any) -> list[float]:
    """Placeholder reward function: GRPOTrainer requires one, but GACATrainer scores with the env.

    Raises:
        RuntimeError: always; GACATrainer never calls it.
    """
    raise RuntimeError("GACATrainer takes rewards from the environment; env_reward is never meant to be called")


def resolve_task_ids(args: GACAConfig) -> list[str]:
    """The training task ids: ``args.task_ids``, else the env's own list.

    The env's list is ``env.unwrapped.task_ids(args.task_split)`` when ``task_ids`` is a method
    (CriticalChain), or the ``task_ids`` property of an env built for one split (ALFWorld: choose
    the split with ``env_kwargs={"split": ...}``), or ``fixed_<n>`` for the goals ``n`` of the
    ``split_range`` of an env built for one split (WebShop).

    Raises:
        ValueError: if no ids are found, or a split-bound env was built for another split.
    """
    ids = list(args.task_ids) if args.task_ids is not None else None
    if ids is None:
        env = gym.make(args.env_id, **args.env_kwargs)
        try:
            ids = env_task_ids(env.unwrapped, args.task_split)
        finally:
            env.close()
    if not ids:
        raise ValueError(
            f"no task ids for env_id={args.env_id!r}, task_split={args.task_split!r}: the env has no task_ids "
            "method or property (or it gave none); pass task_ids=[...] in the config"
        )
    return ids[: args.max_tasks] if args.max_tasks is not None else ids


def tasks_dataset(task_ids: list[str]) -> Dataset:
    """A dataset with one row per task id (columns ``task_id`` and ``prompt``), for TRL's sampler."""
    return Dataset.from_dict({"task_id": list(task_ids), "prompt": list(task_ids)})


def token_advantages(advantage: torch.Tensor, completion_mask: torch.Tensor) -> torch.Tensor:
    """Broadcasts per-row advantages [R] to the completion tokens [R, T] (zero on padding).

    METHOD.md section 6: every generated token of a step carries the step's advantage; prompt
    and observation tokens carry none (they are not in the completion).
    """
    return advantage.to(torch.float32).unsqueeze(1) * completion_mask.to(torch.float32)


class GACATrainer(GRPOTrainer):
    """GRPOTrainer for multi-turn agents: rollouts in Gymnasium envs, advantages from the estimators.

    Differences from ``trl.GRPOTrainer``, and only these:

    * ``_generate_and_score_completions`` is overridden. Instead of one completion per dataset
      prompt, each dataset row is a task id; the rank's rows (whole groups of
      ``rollouts_per_task`` equal ids) are played to the end in a :class:`RolloutPool`, and every
      agent step becomes one training row (prompt = that step's context, completion = the
      response). Advantages come from :func:`gaca_train.advantages.compute_advantages` with the
      config's estimator, broadcast over the completion tokens. Generation goes through the
      trainer's model (log-probs recorded by a forward hook, so step NLLs need no extra pass) or
      TRL's vLLM backend when ``use_vllm`` is set.
    * Equal work with a variable number of rows: TRL splits a generation batch into
      ``steps_per_generation`` equal micro-batches (dropping any remainder) and DDP averages
      gradients over ranks. The rank's rows are therefore padded to the same count on every
      rank, a multiple of ``steps_per_generation``, with copies of a real row whose completion
      mask is all zero. Padding carries no loss, no KL and no tokens in ``num_items_in_batch``, so
      with the default ``loss_type="dapo"`` the loss is exactly the mean over every real token
      of the iteration. With per-sequence losses (``grpo``, ``bnpo``, ``dr_grpo``, ...) every real
      row still gets the same weight (all micro-batches have the same size), and the iteration's
      loss is scaled by real rows / padded rows, a factor shared by all rows.
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
        if train_dataset is None:
            train_dataset = tasks_dataset(resolve_task_ids(args))
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
        system_prompt, template = template_for(args.env_id)
        self.prompt_builder = PromptBuilder(
            system_prompt=system_prompt if args.system_prompt is None else args.system_prompt,
            template=template if args.prompt_template is None else args.prompt_template,
            history_length=args.history_length,
            max_steps=args.max_env_steps,
            max_admissible_actions=args.max_admissible_actions,
        )
        self._pools: dict[int, RolloutPool] = {}
        self.last_rollout: RolloutResult | None = None
        # TRL sizes its completion tables to one row per episode; here an iteration has up to
        # max_env_steps rows per episode, and the tables keep the latest iteration's rows.
        most_rows = args.generation_batch_size * args.max_env_steps
        for key in ("prompt", "completion", "advantages"):
            self._logs[key] = deque(maxlen=most_rows)
        self._logs["rewards"] = defaultdict(lambda: deque(maxlen=most_rows))

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

    def _pool(self, size: int) -> RolloutPool:
        if size not in self._pools:
            self._pools[size] = RolloutPool(self.args.env_id, size, self.args.env_kwargs, mode=self.args.vector_env)
        return self._pools[size]

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        """Plays the rank's tasks, scores every step with the estimator, returns TRL's loss inputs."""
        mode = "train" if self.model.training else "eval"
        task_ids = [str(x["task_id"]) for x in inputs]
        _check_groups(task_ids, self.num_generations if mode == "train" else self.num_generations_eval)
        tic = time.perf_counter()
        result = self._rollout(task_ids, mode)
        rollout_time = time.perf_counter() - tic
        self.last_rollout = result

        tic = time.perf_counter()
        traj_offset = self.accelerator.process_index * len(task_ids)
        rows = result.to_step_rows(
            anchor=self.args.anchor,
            nll_reduction=self.args.nll_reduction,
            reward_scale=self.args.reward_scale,
            traj_offset=traj_offset,
        )
        advantages = compute_advantages(rows, **self.args.estimator_kwargs())
        advantage_time = time.perf_counter() - tic

        tic = time.perf_counter()
        chunks = self.args.steps_per_generation if mode == "train" else 1
        output = self._rows_to_batch(result, advantages.advantage, chunks)
        output.update(self._policy_logps(output, mode))
        metrics = {**result.metrics(), **advantages.metrics, "rollout/rows_padded": float(len(output["advantages"]))}
        metrics.update({"time/rollout": rollout_time, "time/advantage": advantage_time})
        metrics["time/batch"] = time.perf_counter() - tic
        self._record_metrics(metrics, mode)
        if self.log_completions:
            self._log_rows(result, advantages.advantage)
        return output

    def _log_rows(self, result: RolloutResult, advantage: torch.Tensor) -> None:
        """Feeds TRL's completion tables (``log_completions``): one entry per step row of this rank."""
        for step, value in zip(result.steps, advantage.tolist(), strict=True):
            self._logs["prompt"].append(self.processing_class.decode(step.prompt_ids, skip_special_tokens=True))
            self._logs["completion"].append(step.response)
            self._logs["rewards"]["env_reward"].append(step.reward)
            self._logs["advantages"].append(value)

    def _rollout(self, task_ids: list[str], mode: str) -> RolloutResult:
        pool = self._pool(len(task_ids))
        # Env seeds follow the optimiser step, so a resumed run replays the same env randomness.
        offset = 0 if mode == "train" else 1_000_003
        seed = (self.args.seed * 7_919 + offset + self.state.global_step * 104_729) % (2**31 - 1)
        seed = seed + self.accelerator.process_index * len(task_ids)
        bar = tqdm(
            total=self.args.max_env_steps,
            desc=f"rollout ({mode})",
            leave=False,
            disable=self.args.disable_tqdm or not self.accelerator.is_local_main_process,
        )
        with bar, self._generation_model() as model:
            return run_rollout(
                pool,
                task_ids,
                self._generate_fn(model),
                self.processing_class,
                self.prompt_builder,
                seed=seed,
                batch_size=self.args.rollout_batch_size,
                chat_template_kwargs=self.chat_template_kwargs,
                progress=bar,
                lockstep=max_over_ranks(self.accelerator),  # collective generation needs equal calls per rank
            )

    @contextmanager
    def _generation_model(self):
        if self.use_vllm:
            if self.state.global_step != self._last_loaded_step:
                self.vllm_generation.sync_weights()
                self._last_loaded_step = self.state.global_step
            yield None
            return
        with (
            unwrap_model_for_generation(
                self.model_wrapped,
                self.accelerator,
                gather_deepspeed3_params=self.args.ds3_gather_for_generation,
                generation_kwargs=self.generation_kwargs,
                gradient_checkpointing_kwargs=self.args.gradient_checkpointing_kwargs,
            ) as unwrapped,
            torch.no_grad(),
            self._dist.summon_full_params(self.model_wrapped, recurse=False),
        ):
            yield unwrapped

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
            )

        return generate_hf

    def _rows_to_batch(self, result: RolloutResult, advantage: torch.Tensor, chunks: int) -> dict[str, Any]:
        """Pads the rows to an equal count on every rank, a multiple of ``chunks``; builds TRL's tensors."""
        device = self.accelerator.device
        n_rows = len(result.steps)
        n_max = int(self.accelerator.gather(torch.tensor([n_rows], device=device)).max().item())
        n_target = math.ceil(n_max / chunks) * chunks
        steps = result.steps + [result.steps[0]] * (n_target - n_rows)
        real = torch.arange(n_target) < n_rows
        pad_id = self._tokenizer.pad_token_id
        prompt_ids = pad([torch.tensor(s.prompt_ids) for s in steps], padding_value=pad_id, padding_side="left")
        prompt_mask = pad([torch.ones(len(s.prompt_ids), dtype=torch.long) for s in steps], padding_side="left")
        completion_ids = pad([torch.tensor(s.completion_ids) for s in steps], padding_value=pad_id)
        completion_mask = pad([torch.ones(len(s.completion_ids), dtype=torch.long) for s in steps])
        # Padding rows attend normally (finite log-probs) but carry no loss: their mask is zeroed.
        loss_mask = completion_mask * real.unsqueeze(1).long()
        if self.mask_truncated_completions:
            ended = torch.tensor(
                [bool(s.completion_ids) and s.completion_ids[-1] in self.eos_token_ids for s in steps]
            )
            loss_mask = loss_mask * ended.unsqueeze(1).long()
        row_advantage = torch.zeros(n_target)
        row_advantage[:n_rows] = advantage.to(torch.float32)
        sampling_logps = pad([torch.tensor(s.logps, dtype=torch.float32) for s in steps], padding_value=0.0)
        num_items = self.accelerator.gather(loss_mask.sum().to(device)).sum()
        output = {
            "prompt_ids": prompt_ids.to(device),
            "prompt_mask": prompt_mask.to(device),
            "completion_ids": completion_ids.to(device),
            "completion_mask": loss_mask.to(device),
            "advantages": token_advantages(row_advantage, loss_mask).to(device),
            "num_items_in_batch": num_items,
        }
        if self.use_vllm:
            output["sampling_per_token_logps"] = sampling_logps.to(device)
        return output

    def _policy_logps(self, batch: dict[str, Any], mode: str) -> dict[str, torch.Tensor]:
        """Old-policy and reference log-probs, computed exactly when GRPOTrainer would compute them."""
        out: dict[str, torch.Tensor] = {}
        generate_every = self.args.steps_per_generation * self.num_iterations
        need_old = self.args.gradient_accumulation_steps % generate_every != 0 or (
            self.use_vllm and self.vllm_importance_sampling_correction
        )
        if not need_old and self.beta == 0.0:
            return out
        input_ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
        # As in GRPOTrainer's loss; padding rows still attend to their (real) prompt, so stay finite.
        attention_mask = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
        logits_to_keep = batch["completion_ids"].size(1)
        batch_size = self.args.per_device_train_batch_size if mode == "train" else self.args.per_device_eval_batch_size
        with torch.no_grad():
            if need_old:
                out["old_per_token_logps"], _, _ = self._get_per_token_logps_and_entropies(
                    self.model, input_ids, attention_mask, logits_to_keep, batch_size=batch_size
                )
            if self.use_vllm and self.vllm_importance_sampling_correction:
                out["importance_sampling_ratio"] = self._vllm_importance_ratio(
                    out["old_per_token_logps"], batch["sampling_per_token_logps"], batch["completion_mask"]
                )
            if self.beta != 0.0:
                if self.ref_model is not None:
                    ref_model, context = self.ref_model, nullcontext()
                else:  # PEFT: the reference is the initial adapter copy, or the base model
                    unwrapped = self.accelerator.unwrap_model(self.model)
                    adapter = "ref" if "ref" in unwrapped.peft_config else None
                    ref_model, context = self.model, use_adapter(unwrapped, adapter_name=adapter)
                with context:
                    out["ref_per_token_logps"], _, _ = self._get_per_token_logps_and_entropies(
                        ref_model, input_ids, attention_mask, logits_to_keep, batch_size=batch_size
                    )
        return out

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
