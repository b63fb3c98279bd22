"""GACAConfig: TRL's GRPOConfig plus the env, rollout and credit-assignment options."""

from __future__ import annotations

import importlib.util
import json
import os
from dataclasses import dataclass, field
from typing import Any

from trl import GRPOConfig

from gaca_train.estimators.options import ESTIMATORS, EstimatorConfig
from gaca_train.oracle.monte_carlo import OracleConfig
from gaca_train.rollout.branching import Branching
from gaca_train.rollout.prompts import ACTION_LIST_STYLES
from gaca_train.rollout.sampling import check_generation_kwargs

# The estimator options of METHOD.md: GACAConfig inherits them from EstimatorConfig.
ESTIMATOR_FIELDS: tuple[str, ...] = EstimatorConfig.option_names()
_CHOICES: dict[str, tuple[Any, ...]] = {
    "estimator": ESTIMATORS,
    "anchor": ("state", "text"),
    "nll_reduction": ("mean", "sum"),
    "vector_env": ("async", "sync"),
    "format_check": ("strict", "verl-agent"),
    "old_logps": ("recompute", "rollout"),
    "update_layout": ("packed", "padded"),
    "hf_sampler": ("lean", "generate"),
    "action_list_style": tuple(ACTION_LIST_STYLES),
}


@dataclass
class GACAConfig(GRPOConfig, EstimatorConfig):
    r"""Configuration of [`GACATrainer`]: every [`trl.GRPOConfig`] field, every estimator option of
    [`gaca_train.estimators.options.EstimatorConfig`] (inherited, so each is declared once) and the fields below.

    An iteration plays ``tasks_per_iteration`` tasks ``rollouts_per_task`` times each (one group per
    task, each group on one rank) and is one TRL step (``global_step`` counts iterations, so
    ``max_steps`` is the number of iterations). Each agent step becomes one training row. The
    iteration's rows, over all ranks, are shuffled and cut into mini-batches of ``mini_batch_rows``
    rows; each mini-batch is one optimiser update, accumulated on each device over micro-batches of at
    most ``micro_batch_tokens`` padded tokens (see ``gaca_train.training.batching`` and docs/training.md).

    TRL's batch fields are derived and must not be set: ``num_generations = rollouts_per_task``,
    ``per_device_train_batch_size = tasks_per_iteration * rollouts_per_task / world size`` (episodes per
    rank), ``steps_per_generation = gradient_accumulation_steps = 1``. None of the schedule's numbers
    depends on the world size, only how the rows are divided among ranks.
    """

    # --- Environment and tasks ---
    env_id: str = field(
        default="GACA-CriticalChain-v0",
        metadata={"help": "Gymnasium id of the environment (after `import gaca_envs`), e.g. `GACA-ALFWorld-v0`."},
    )
    env_kwargs: dict | str | None = field(
        default=None,
        metadata={"help": "Keyword arguments for `gym.make(env_id, ...)`; a dict, or a JSON string on the CLI."},
    )
    task_split: str = field(
        default="train",
        metadata={"help": "Split whose task ids are trained on; read from the env's `task_ids(split)` method."},
    )
    task_ids: list[str] | None = field(
        default=None,
        metadata={"help": "Explicit task ids to train on, instead of the env's `task_ids(task_split)`."},
    )
    max_tasks: int | None = field(
        default=None, metadata={"help": "Use only the first `max_tasks` task ids of the split (None: all)."}
    )
    tasks_per_iteration: int = field(default=16, metadata={"help": "Tasks (groups) played per iteration."})
    rollouts_per_task: int = field(
        default=8, metadata={"help": "Rollouts (trajectories) per task: the group size N. Sets `num_generations`."}
    )
    max_env_steps: int = field(default=50, metadata={"help": "Agent steps per episode before it is cut off."})
    vector_env: str = field(
        default="async",
        metadata={"help": "`async`: one subprocess per env (Gymnasium AsyncVectorEnv); `sync`: all in-process."},
    )
    env_server_urls: list[str] | None = field(
        default=None,
        metadata={
            "help": "gaca-env-server URLs (e.g. `http://10.0.0.5:8000`) whose envs the rollouts play, spread "
            "round-robin (GACA-Remote-v0); each must serve `env_id` with `env_kwargs`. None: envs run here."
        },
    )
    env_server_timeout_s: float = field(
        default=120.0,
        metadata={
            "help": "Seconds a rollout waits for one answer (reset, step, snapshot) of an env server in "
            "`env_server_urls` before it fails with TimeoutError (GACA-Remote-v0's step_timeout_s; it raises within "
            "this plus a second)."
        },
    )
    reward_scale: float = field(
        default=1.0, metadata={"help": "Multiplies every env reward before the estimator (e.g. 0.1 maps 10 to 1)."}
    )

    # --- Update schedule (verl-agent's PPO mini-batches, dynamic micro-batches) ---
    mini_batch_rows: int | None = field(
        default=None,
        metadata={
            "help": "Step rows per optimiser update, counted over all ranks (verl-agent's ppo_mini_batch_size x "
            "group size). The last mini-batch of an iteration holds the remainder. None: one update of all rows."
        },
    )
    micro_batch_tokens: int | None = field(
        default=None,
        metadata={
            "help": "Most computed tokens per micro-batch on one device, like verl's ppo_max_token_len_per_gpu: in "
            "the packed layout the positions of the rows' prefix tree (each shared prompt prefix once), in the padded "
            "layout rows x (longest prompt + longest completion); a single row over budget runs alone. None: no limit."
        },
    )
    hf_sampler: str = field(
        default="lean",
        metadata={
            "help": "How rollouts sample without vLLM: `lean` (each distinct prompt prefilled once, prompts in length "
            "buckets, finished rows out of the decode batch; generate's distribution and processors, other draws "
            "for a seed; greedy, beam or static-cache configs fall back to generate) or `generate` (model.generate)."
        },
    )
    update_layout: str = field(
        default="packed",
        metadata={
            "help": "How the update's forward passes (loss, old and reference log-probs) lay rows out: `packed` (no "
            "padding; a prompt prefix that rows of a micro-batch share is computed once, attention by rows under SDPA "
            "or through a 4D tree mask under eager; only scored positions reach the LM head; the same log-probs and "
            "gradients up to rounding; other attention implementations run `padded`) or `padded` (TRL's layout: "
            "left-padded prompts, right-padded completions)."
        },
    )
    pack_length: int | None = field(
        default=None,
        metadata={
            "help": "Most positions of one packed sequence: a micro-batch's prefix trees are cut into sequences of "
            "this length, stacked. None: no cut under SDPA (attention by rows costs what the rows do, whatever the "
            "sequence's length), 512 under eager (its tree mask costs a sequence's length squared)."
        },
    )
    ppo_epochs: int = field(default=1, metadata={"help": "Passes over an iteration's rows (one reshuffle each)."})
    old_logps: str = field(
        default="recompute",
        metadata={
            "help": "Old-policy log-probs of an iteration's updates after the first: `recompute` (verl's "
            "compute_log_prob, a forward pass over all rows) or `rollout` (the log-probs recorded while sampling, "
            "the same weights: saves that pass; equal up to rounding in float32, not with vLLM)."
        },
    )
    max_prompt_length: int | None = field(
        default=None,
        metadata={"help": "Most tokens of a step's prompt; a longer one stops the run with an error (None: no cap)."},
    )

    # --- Validation (verl-agent's test_freq / val_before_train: TRL's eval_strategy, eval_steps, eval_on_start) ---
    eval_splits: list[str] | None = field(
        default=None,
        metadata={
            "help": "Held-out splits played by `evaluate()` (e.g. ALFWorld valid_unseen valid_seen, WebShop test); "
            "each task once per `eval_rollouts_per_task`. None: the eval_dataset's task ids, or no validation."
        },
    )
    eval_max_tasks: int | None = field(
        default=None, metadata={"help": "Play at most the first `eval_max_tasks` tasks of each eval split."}
    )
    eval_rollouts_per_task: int = field(default=1, metadata={"help": "Episodes per eval task."})
    eval_temperature: float = field(default=0.4, metadata={"help": "Sampling temperature of validation episodes."})
    allow_generated_data: bool = field(
        default=False,
        metadata={
            "help": "Train on the project's generated ALFWorld games or WebShop catalog when no real data is given. "
            "False: a run without real data (ALFWORLD_DATA / data_path, WebShop catalog files) stops at start-up."
        },
    )

    # --- Prompt ---
    history_length: int = field(
        default=2, metadata={"help": "Number of past (observation, action) pairs shown in each prompt."}
    )
    prompt_template: str | None = field(
        default=None,
        metadata={
            "help": "User-message template (str.format fields: task, step, max_env_steps, history, observation, "
            "admissible_actions; `{max_steps}` is the previous name of `{max_env_steps}`). None: the env's own "
            "(its class's `prompt`, see `gaca_train.rollout.prompts.template_for`)."
        },
    )
    system_prompt: str | None = field(
        default=None, metadata={"help": "System message; None: the env family's default, '' for none."}
    )
    max_admissible_actions: int | None = field(
        default=None, metadata={"help": "List at most this many admissible actions in a prompt (None: all)."}
    )
    hidden_actions: list[str] | None = field(
        default=None,
        metadata={"help": "Admissible actions left out of the prompt (verl-agent removes ALFWorld's `help`)."},
    )
    action_list_style: str = field(
        default="quoted",
        metadata={
            "help": "How a prompt lists the admissible actions: `quoted` ('go to desk 1', 'look') or `plain` (go to "
            "desk 1, look: fewer tokens, for actions without commas such as ALFWorld's)."
        },
    )
    format_check: str = field(
        default="strict",
        metadata={
            "help": "`strict`: the response is exactly <think>...</think><action>...</action>; `verl-agent`: both "
            "tag pairs anywhere, the action lowercased (see gaca_train.rollout.prompts.parse_response)."
        },
    )
    rollout_batch_size: int | None = field(
        default=None,
        metadata={"help": "Most prompts per `generate` call during rollout (None: all live envs at once)."},
    )

    # --- Credit assignment (METHOD.md) ---
    estimator: str = field(default="gaca", metadata={"help": "Advantage estimator: grpo, gigpo, gaca or reweight."})
    anchor: str = field(
        default="state",
        metadata={"help": "Anchor of step groups: `state` hashes info['anchor_key'], `text` info['anchor_text']."},
    )
    nll_reduction: str = field(
        default="mean", metadata={"help": "Step NLL from token log-probs: `mean` or `sum` over the response."}
    )
    # The estimator options themselves (gamma, omega, lambda0, eta, ..., preset) are EstimatorConfig's fields,
    # inherited: declared once, in gaca_train/estimators/options.py.

    # --- Branching rollouts (docs/training.md "Branching rollouts", METHOD.md section 7) ---
    branching: str = field(
        default="off",
        metadata={
            "help": "Where a group's rollouts branch from env snapshots: `off` (independent rollouts), `nll` (the "
            "root steps with the highest response NLL, GACA's criticality), `entropy` (policies that report it; "
            "not the LLM rollout) or `uniform` (at random)."
        },
    )
    branch_roots: int | None = field(
        default=None, metadata={"help": "Root rollouts per group (None: half of rollouts_per_task, at least 1)."}
    )
    branch_points: int = field(default=2, metadata={"help": "Branch points per group, chosen among its root steps."})
    branch_continuations: int = field(
        default=2, metadata={"help": "Continuations per branch point (branch_budget `fixed`)."}
    )
    branch_budget: str = field(
        default="env_steps",
        metadata={
            "help": "`env_steps`: continuations are added while the group's env steps stay within the independent "
            "setting's (rollouts_per_task x the roots' mean length), at most rollouts_per_task; `fixed`: "
            "branch_continuations per branch point."
        },
    )
    oracle_every: int = field(
        default=0,
        metadata={
            "help": "Every how many iterations the oracle measures the estimators against true advantages from env "
            "snapshots (`oracle/*` metrics, docs/training.md); 0: never."
        },
    )
    oracle_rows: int = field(
        default=16, metadata={"help": "Oracle: rows measured per pass (stratified by NLL, step)."}
    )
    oracle_continuations: int = field(
        default=4, metadata={"help": "Oracle: continuations per row for Q(s, a) and again for V(s)."}
    )

    def oracle_spec(self) -> OracleConfig | None:
        """The run's :class:`~gaca_train.oracle.monte_carlo.OracleConfig`; None when ``oracle_every`` is 0."""
        if not self.oracle_every:
            return None
        return OracleConfig(self.oracle_rows, self.oracle_continuations, self.oracle_every, seed=self.seed)

    def branching_spec(self) -> Branching | None:
        """The run's :class:`~gaca_train.rollout.branching.Branching`; None for independent rollouts."""
        if self.branching == "off":
            return None
        roots = self.branch_roots if self.branch_roots is not None else max(1, self.rollouts_per_task // 2)
        return Branching(self.branching, roots, self.branch_points, self.branch_continuations, self.branch_budget)

    def _validate_branching(self) -> None:
        if self.branching == "entropy":
            raise ValueError(
                "branching='entropy' needs the policy's entropy per step, which the LLM rollout does not record "
                "(it keeps the sampled tokens' log-probs); use branching='nll' or 'uniform'"
            )
        roots = 1 if self.branch_roots is None else self.branch_roots  # Branching names the field of a bad value
        spec = Branching(self.branching, roots, self.branch_points, self.branch_continuations, self.branch_budget)
        if spec.criterion != "off":
            self.branching_spec().check(self.rollouts_per_task)
            if self.preset == "verl-agent":
                raise ValueError("preset='verl-agent' has no branching rollouts; set branching='off'")

    def __post_init__(self) -> None:
        if isinstance(self.env_kwargs, str):
            try:
                self.env_kwargs = json.loads(self.env_kwargs)
            except json.JSONDecodeError as e:
                raise ValueError(f"env_kwargs must be a JSON object string, got {self.env_kwargs!r}: {e}") from e
        if self.env_kwargs is not None and not isinstance(self.env_kwargs, dict):
            raise ValueError(f"env_kwargs must be a dict, got {type(self.env_kwargs).__name__}")
        self.env_kwargs = dict(self.env_kwargs or {})
        if self.preset == "none":  # the CLI cannot pass None
            self.preset = None
        self._validate_gaca_fields()
        self._validate_branching()
        OracleConfig(self.oracle_rows, self.oracle_continuations, self.oracle_every)  # names a bad value's field
        self._check_report_to()
        if self.num_generations_eval is None:
            self.num_generations_eval = 1  # validation plays each eval task eval_rollouts_per_task times itself
        world_size = int(os.environ.get("WORLD_SIZE", "1"))
        self._derive_trl_batch_fields(world_size)
        if self.activation_checkpointing is None:
            # TRL 1.16's GRPOConfig gives transformers 5's deprecated `gradient_checkpointing` a default of its own,
            # so transformers would warn on every config, set or not: the value moves to the new name, which
            # transformers then mirrors back to the old one (what TRL's trainer reads).
            self.activation_checkpointing = self.gradient_checkpointing
        super().__post_init__()
        if self.world_size != world_size:
            raise ValueError(
                f"WORLD_SIZE={world_size} but the run has {self.world_size} processes; "
                "launch with accelerate launch or torchrun"
            )
        if self.hf_sampler == "lean" and not self.use_vllm:
            check_generation_kwargs(self.generation_kwargs)  # a refused option stops the run here, not at a rollout

    def _derive_trl_batch_fields(self, world_size: int) -> None:
        """Sets TRL's batch fields from the GACA ones (see the class docstring); raises if they were set."""
        if self.gradient_accumulation_steps != 1:
            raise ValueError(
                f"gradient_accumulation_steps must stay 1, got {self.gradient_accumulation_steps}: GACATrainer "
                "accumulates each update over token-budgeted micro-batches itself; set mini_batch_rows (rows per "
                "update) and micro_batch_tokens (tokens per micro-batch) instead"
            )
        if self.steps_per_generation not in (None, 1) or self.generation_batch_size is not None:
            raise ValueError(
                "steps_per_generation and generation_batch_size are derived by GACAConfig (one rollout per step); "
                f"got steps_per_generation={self.steps_per_generation}, generation_batch_size="
                f"{self.generation_batch_size}; set tasks_per_iteration, rollouts_per_task and mini_batch_rows instead"
            )
        if self.num_iterations != 1:
            raise ValueError(f"num_iterations must stay 1, got {self.num_iterations}; set ppo_epochs instead")
        if self.tasks_per_iteration % world_size:
            raise ValueError(
                f"tasks_per_iteration ({self.tasks_per_iteration}) must be a multiple of the number of processes "
                f"({world_size}) so that every rank plays whole groups; change tasks_per_iteration or the process "
                "count"
            )
        self.num_generations = self.rollouts_per_task
        self.per_device_train_batch_size = self.tasks_per_iteration * self.rollouts_per_task // world_size
        self.steps_per_generation = 1

    def _check_report_to(self) -> None:
        """Fails before any env or model is built when a ``report_to`` backend is not installed."""
        backends = [self.report_to] if isinstance(self.report_to, str) else list(self.report_to or [])
        packages = {"tensorboard": "tensorboard", "wandb": "wandb", "trackio": "trackio", "mlflow": "mlflow"}
        for backend in backends:
            package = packages.get(backend)
            if package and importlib.util.find_spec(package) is None:
                raise ValueError(
                    f"report_to={backend!r} but the {package!r} package is not installed; pip install {package} "
                    "(tensorboard comes with the `train` extra) or set report_to: none"
                )

    def _validate_gaca_fields(self) -> None:
        for name, choices in _CHOICES.items():
            value = getattr(self, name)
            if value not in choices:
                raise ValueError(f"{name} must be one of {choices}, got {value!r}")
        if self.old_logps == "rollout" and self.use_vllm:
            raise ValueError(
                "old_logps: rollout takes the old log-probs from the sampling engine, which with vLLM is not the "
                "trained model (its log-probs differ); use old_logps: recompute with use_vllm"
            )
        if not self.env_server_timeout_s > 0 or self.env_server_timeout_s == float("inf"):
            raise ValueError(
                f"env_server_timeout_s must be a finite number of seconds > 0, got {self.env_server_timeout_s}"
            )
        positive = ("tasks_per_iteration", "max_env_steps", "rollouts_per_task", "ppo_epochs")
        positive += ("eval_rollouts_per_task",)
        for name in positive:
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.rollouts_per_task < 2:
            raise ValueError(
                "rollouts_per_task must be >= 2 (group-relative advantages need a group), "
                f"got {self.rollouts_per_task}"
            )
        for name in ("history_length",):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        for name in (
            "max_tasks",
            "max_admissible_actions",
            "rollout_batch_size",
            "mini_batch_rows",
            "micro_batch_tokens",
            "pack_length",
            "max_prompt_length",
            "eval_max_tasks",
        ):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} must be >= 1 or None, got {value}")
        EstimatorConfig.__post_init__(self)  # the estimator options; raises naming the field
        if self.task_ids is not None and len(self.task_ids) == 0:
            raise ValueError("task_ids must be None or a non-empty list of task ids, got []")
        if self.prompt_template is not None:
            _check_template(self.prompt_template)
        if self.micro_batch_tokens is not None and self.max_prompt_length is not None:
            longest = self.max_prompt_length + self.max_completion_length
            if self.micro_batch_tokens < longest:
                raise ValueError(
                    f"micro_batch_tokens ({self.micro_batch_tokens}) is smaller than one row at full length: "
                    f"max_prompt_length + max_completion_length = {longest}; raise micro_batch_tokens to >= {longest}"
                )

    def estimator_kwargs(self) -> dict[str, Any]:
        """The keyword arguments of ``compute_advantages`` besides ``rows`` (estimator and its options)."""
        return {"estimator": self.estimator, **self.to_kwargs()}


def _check_template(template: str) -> None:
    from gaca_train.rollout.prompts import TEMPLATE_FIELDS

    sample = dict.fromkeys(TEMPLATE_FIELDS, "")
    try:
        template.format(**sample)
    except (KeyError, IndexError, ValueError) as e:
        raise ValueError(
            f"prompt_template must be a str.format template using only the fields {TEMPLATE_FIELDS}, "
            f"got an error for {template[:80]!r}: {e!r}"
        ) from e
