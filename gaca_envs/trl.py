"""An adapter that hands a GACA env to plain TRL: ``GRPOTrainer(environment_factory=...)``.

TRL 1.16's ``GRPOTrainer`` takes an ``environment_factory``: a callable that builds one object per
rollout. TRL calls its ``reset(**row)`` with the dataset row (every column, ``prompt`` included)
and appends the returned text to the row's last user message; every public method other than
``reset`` and ``get_reward`` becomes a tool the model may call (its name, type hints and
Google-style docstring make the schema); after the rollout ``get_reward()`` scores it (weight 1,
logged under the class name: ``rewards/ALFWorldToolEnvironment/mean`` for ``GACA-ALFWorld-v0``).

Here the env's actions become the one tool ``act(action)``, which steps the env and answers with
the observation and the admissible actions; the env's reward becomes ``get_reward``. Nothing
raises inside an episode: an action the env does not understand is the env's own step
("Nothing happens."), and a call after the episode ended is answered and not taken.

    from trl import GRPOConfig, GRPOTrainer
    from gaca_envs.trl import environment_factory, task_dataset

    # ALFWorld's games from $ALFWORLD_DATA (or allow_generated_data=True for the generated ones)
    dataset = task_dataset("GACA-ALFWorld-v0", "train")  # columns prompt, task_id
    factory = environment_factory("GACA-ALFWorld-v0", dataset=dataset)  # a dataset of another split fails here
    args = GRPOConfig(max_completion_length=20480, max_tool_calling_iterations=50)  # see "Completion length"
    trainer = GRPOTrainer(model="Qwen/Qwen3-0.6B", args=args, train_dataset=dataset, environment_factory=factory)

An env on a ``gaca-env-server`` (another machine's CPUs) plays the same way through
``GACA-Remote-v0``: ``environment_factory("GACA-Remote-v0", url="http://10.0.0.5:8000",
env_id="GACA-ALFWorld-v0")`` (``env_id`` is positional-only in these functions, so this one is
the remote env's; its instances are still ``ALFWorldToolEnvironment``, and the
server's data is checked), with ``task_dataset("GACA-Remote-v0", url=..., env_id=...)``.

Several envs in one run: a dict of factories and datasets with an ``environment`` column
(``task_dataset(..., environment="shop")``); each factory's instances are of a class of its own,
so each env's reward is logged apart.

**Completion length.** TRL counts everything after the prompt against ``max_completion_length``
(512 tokens by default): each turn's tool call *and* each tool answer. An episode that outgrows it
stops where it stands (TRL drops the answer that would overflow and calls no more tools) and is
scored as the env stands then. ``python scripts/trl_budget.py`` measures the budget: 100 generated
ALFWorld games played through this adapter by a seeded random agent for up to 50 steps. A step
costs 673 characters on average (a call of 60, an answer of 614); fifty steps took 31,984
characters at the median and at most 49,396. ``--tokenizer`` counts them in a model's tokens, with
its chat template, as TRL builds the sequence, and prints the ``max_completion_length`` that covers
them: at 2.5-2.7 characters a token, ``max_completion_length=20480`` with
``max_tool_calling_iterations=50`` lets the step limit, not the token budget, end an episode.
Budget the model's own text per turn on top (Qwen3 thinks unless
``chat_template_kwargs={"enable_thinking": False}``), or lower the env's ``max_env_steps``.

This module imports neither TRL nor ``datasets`` at import time (``task_dataset`` imports
``datasets`` when called): importing it loads no torch, like the rest of gaca_envs.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import gymnasium as gym

from gaca_envs.data_source import check_real_data
from gaca_envs.registration import ENV_SPECS
from gaca_envs.task_env import split_task_ids

if TYPE_CHECKING:
    from datasets import Dataset

REWARDS = ("score", "return")
# The user message each dataset row starts with; TRL appends the first observation to it.
DEFAULT_INSTRUCTION = (
    "You are an agent in a text environment. Reach the goal by calling the `act` tool with one of the "
    "admissible actions at a time."
)


def _check_reward(reward: str) -> None:
    if reward not in REWARDS:
        raise ValueError(f"reward must be one of {', '.join(map(repr, REWARDS))}, got {reward!r}")


class GymToolEnvironment:
    """One GACA env behind TRL's environment interface: ``reset``, the tool ``act``, ``get_reward``.

    TRL turns every public method of this class (besides ``reset`` and ``get_reward``) into a tool,
    so ``act`` is the only one; the rest is private or a property. :func:`environment_factory`
    builds instances of a subclass named after the env (``ALFWorldToolEnvironment``), since TRL
    logs an env's reward under its class name.

    Args:
        env_id: a registered id, e.g. ``"GACA-ALFWorld-v0"``.
        reward: what ``get_reward`` returns: ``"score"``, the contract's task score in [0, 1] at the
            episode's last step (1.0 when an ALFWorld or CriticalChain task is won, WebShop's
            attribute-match reward), or ``"return"``, the sum of the env's step rewards (its
            ``reward_on_success`` scale).
        **env_kwargs: passed to ``gym.make(env_id, ...)``.

    Raises:
        ValueError: for an unknown ``reward``; whatever ``gym.make`` raises for the env.
    """

    def __init__(self, env_id: str, /, *, reward: str = "score", **env_kwargs: Any) -> None:
        _check_reward(reward)
        self._env_id = env_id
        self._reward_kind = reward
        self._env = gym.make(env_id, **env_kwargs)
        self._info: dict[str, Any] = {}
        self._actions: list[str] = []
        self._return = 0.0
        self._done = True  # no episode yet
        self._truncated = False
        self._task_ids: frozenset[str] | None = None

    @property
    def env(self) -> gym.Env:
        """The wrapped Gymnasium env (as ``gym.make`` built it)."""
        return self._env

    @property
    def info(self) -> dict[str, Any]:
        """The env's ``info`` after the last reset or step (DESIGN.md contract 1 keys)."""
        return self._info

    @property
    def done(self) -> bool:
        """Whether the episode has ended (terminated or truncated), or none was started."""
        return self._done

    @property
    def actions(self) -> list[str]:
        """The actions ``act`` took in this episode, in order (a call after the end is not taken, not listed)."""
        return list(self._actions)

    def reset(self, task_id: str | None = None, seed: int | None = None, **row: Any) -> str:
        """Starts an episode; called by TRL with the dataset row's columns as keyword arguments.

        Args:
            task_id: the task to play (a ``task_id`` column, as :func:`task_dataset` makes); None
                lets the env draw one.
            seed: seeds the env's reset when the row has a ``seed`` column.
            **row: the row's other columns (``prompt`` and any more), ignored.

        Returns:
            The first observation, with the task when the observation does not state it, and the
            admissible actions.

        Raises:
            ValueError: for a task id of another split than an ALFWorld env's (see ``split``).
        """
        if task_id is not None:
            self._check_task_ids([task_id])
        options = None if task_id is None else {"task_id": task_id}
        observation, self._info = self._env.reset(seed=seed, options=options)
        self._return, self._done, self._truncated, self._actions = 0.0, False, False, []
        task = self._info.get("task", "")
        if task and task not in observation:
            observation = f"Your task is to: {task}\n{observation}"
        return self._render(observation)

    def act(self, action: str) -> str:
        """Takes one action in the environment and returns what happens.

        Args:
            action: the action to take, one of the admissible actions listed in the last observation.

        Returns:
            The new observation and the actions admissible next, or the outcome once the episode ends.
        """
        if self._done:
            return f"The episode is over ({self._outcome()}); the action {action!r} was not taken."
        # A tool call's arguments are parsed from JSON, so a number or a list may arrive; the env
        # accepts only str, and any other text is its own invalid step.
        observation, reward, terminated, truncated, self._info = self._env.step(str(action))
        self._actions.append(str(action))
        self._return += float(reward)
        self._done, self._truncated = terminated or truncated, truncated and not terminated
        if self._done:
            return f"{observation}\n\nThe episode is over ({self._outcome()})."
        return self._render(observation)

    def get_reward(self) -> float:
        """The episode's reward: its final score in [0, 1], or its return (see ``reward``)."""
        if self._reward_kind == "return":
            return self._return
        return float(self._info.get("score", 0.0))

    def _render(self, observation: str) -> str:
        actions = "\n".join(f"- {a}" for a in self._info.get("admissible_actions", []))
        return f"{observation}\n\nAdmissible actions:\n{actions}" if actions else observation

    def _outcome(self) -> str:
        if not self._info:
            return "no episode was started"
        if self._info.get("won"):
            return "task solved"
        return "step limit reached, task not solved" if self._truncated else "task not solved"

    def _check_task_ids(self, task_ids: list[Any]) -> None:
        """Raises if the env is bound to one split (ALFWorld) and a (string) id of ``task_ids`` is not of it.

        An env not bound to a split plays the ids of every split and checks an id itself on reset.
        """
        env = self._env.unwrapped
        if not getattr(env, "bound_to_split", False):
            return
        if self._task_ids is None:
            self._task_ids = frozenset(env.task_ids(env.split))
        missing = [t for t in task_ids if isinstance(t, str) and t not in self._task_ids]
        if missing:
            raise ValueError(
                f"{len(missing)} of {len(task_ids)} task ids are not tasks of this {self._env_id} env, e.g. "
                f"{missing[0]!r}: it plays only the {len(self._task_ids)} tasks of split {env.split!r}. Build the "
                "factory with the split and env kwargs the dataset was made with: "
                f"task_dataset({self._env_id!r}, split, **env_kwargs) goes with "
                f"environment_factory({self._env_id!r}, split=split, **env_kwargs)"
            )


def tool_environment_name(env_id: str) -> str:
    """The class name TRL logs an env's reward under: ``"GACA-ALFWorld-v0"`` -> ``"ALFWorldToolEnvironment"``."""
    base = re.sub(r"-v\d+$", "", re.sub(r"^GACA-", "", env_id.split(":")[-1]))
    words = "".join(w[:1].upper() + w[1:] for w in re.split(r"[^0-9A-Za-z]+", base) if w)
    return f"{words}ToolEnvironment" if words[:1].isalpha() else f"Env{words}ToolEnvironment"


def environment_factory(
    env_id: str,
    /,
    *,
    reward: str = "score",
    dataset: Dataset | None = None,
    name: str | None = None,
    allow_generated_data: bool = False,
    **env_kwargs: Any,
) -> Callable[[], GymToolEnvironment]:
    """A factory for ``trl.GRPOTrainer(environment_factory=...)`` that plays the env ``env_id``.

    TRL calls it once per concurrent rollout and reuses the instances across batches; each call
    builds a fresh env with ``gym.make(env_id, **env_kwargs)``. The instances are of a subclass of
    :class:`GymToolEnvironment` made for this factory and named ``name``, because TRL logs an
    env's reward under its class (``rewards/<name>/mean``) and scores a rollout with the
    ``get_reward`` of its exact class: two factories of one env id in one run need two names.

    Args:
        env_id: a registered id, e.g. ``"GACA-ALFWorld-v0"``.
        reward: ``"score"`` (final task score in [0, 1]) or ``"return"`` (summed env rewards);
            see :class:`GymToolEnvironment`.
        dataset: the train dataset this factory's envs will play (as :func:`task_dataset` makes,
            before concatenating several envs' datasets). Given, its ``task_id`` column is checked
            here against an env built with ``env_kwargs`` (which then serves the first rollout): for
            an env bound to one split, a task of another split (an ALFWorld dataset of
            ``valid_seen`` for an env of ``train``) is an error now, not inside TRL's ``reset``.
        name: the instances' class name (default :func:`tool_environment_name` of ``env_id``).
        allow_generated_data: play the project's generated ALFWorld games or WebShop catalog when no
            real data is given (as ``GACAConfig.allow_generated_data``); False stops here.
        **env_kwargs: the env's keyword arguments (``split``, ``data_path``, ``horizon``, ...).

    Returns:
        A callable without arguments returning a new instance of the factory's class.

    Raises:
        ValueError: for an unknown ``reward``, an ``env_id`` that is not registered, a ``name`` that
            is not an identifier, no real data without ``allow_generated_data``, or a ``dataset``
            task id the env does not play.
    """
    _check_reward(reward)
    if env_id not in gym.registry:
        raise ValueError(f"env_id {env_id!r} is not registered; the GACA ids are {', '.join(ENV_SPECS)}")
    remote = env_id.split(":")[-1] == "GACA-Remote-v0"
    if remote:  # the server's env decides the name and the data
        from gaca_envs.remote import fetch_server_info

        if "url" not in env_kwargs:
            raise ValueError("GACA-Remote-v0 needs url=, the gaca-env-server's address (e.g. http://127.0.0.1:8000)")
        server = fetch_server_info(env_kwargs["url"])
        reason = server["generated_data_reason"]
        if reason and not allow_generated_data:
            raise ValueError(f"the env server at {env_kwargs['url']}: {reason}; pass allow_generated_data=True")
    name = tool_environment_name(server["env_id"] if remote else env_id) if name is None else name
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"name must be a Python identifier (it names the reward's log column), got {name!r}")
    if not remote:
        check_real_data(env_id, env_kwargs, allow_generated_data, allow_with="pass allow_generated_data=True")
    env_class = type(name, (GymToolEnvironment,), {"__doc__": f"{env_id} as a TRL environment (GymToolEnvironment)."})
    ready: list[GymToolEnvironment] = []
    if dataset is not None:
        if not hasattr(dataset, "column_names"):
            raise ValueError(
                f"dataset must be a datasets.Dataset with a task_id column (task_dataset makes one), "
                f"got {type(dataset).__name__}"
            )
        first = env_class(env_id, reward=reward, **env_kwargs)
        if "task_id" in dataset.column_names:
            first._check_task_ids(list(dataset["task_id"]))
        ready.append(first)

    def make() -> GymToolEnvironment:
        return ready.pop() if ready else env_class(env_id, reward=reward, **env_kwargs)

    return make


def task_dataset(
    env_id: str,
    /,
    split: str | None = None,
    *,
    instruction: str = DEFAULT_INSTRUCTION,
    limit: int | None = None,
    environment: str | None = None,
    **env_kwargs: Any,
) -> Dataset:
    """A train dataset for ``GRPOTrainer``: one row per task of a split, with its ``task_id``.

    Each row has ``prompt`` (a conversation of one user message, ``instruction``; TRL appends
    the first observation that ``reset`` returns) and ``task_id``, which TRL passes to
    :meth:`GymToolEnvironment.reset`. Build the factory with the same ``split`` and
    ``env_kwargs`` (an ALFWorld env plays only the tasks of the split it was built for), and
    pass it this dataset to have that checked.

    Args:
        env_id: a registered id.
        split: the split whose task ids to list (:func:`gaca_envs.task_env.split_task_ids`); the
            env that lists them is built with ``split=split``. None: the split the env plays with
            ``env_kwargs``.
        instruction: the user message before the observation.
        limit: keep the first ``limit`` task ids (default: all).
        environment: add an ``environment`` column with this value: the key of this env's factory
            when ``GRPOTrainer`` gets a dict of factories (TRL routes each row by it).
        **env_kwargs: passed to ``gym.make`` to build the env that lists the ids.

    Returns:
        A ``datasets.Dataset`` with columns ``prompt`` and ``task_id`` (and ``environment``).

    Raises:
        ValueError: for a split the env does not have, or ``limit`` < 1.
        ImportError: when the ``datasets`` package is not installed.
    """
    if limit is not None and limit < 1:
        raise ValueError(f"limit must be >= 1 or None, got {limit}")
    try:
        from datasets import Dataset
    except ImportError as e:
        raise ImportError("task_dataset needs the `datasets` package: pip install datasets (TRL depends on it)") from e
    # The listing env is built for the split (a small WebShop may have goals in its test split only).
    kwargs = env_kwargs if split is None else {**env_kwargs, "split": split}
    task_ids = split_task_ids(env_id, kwargs, split)[1][:limit]
    prompt = [{"role": "user", "content": instruction + "\n\n"}]
    columns: dict[str, list[Any]] = {"prompt": [prompt] * len(task_ids), "task_id": task_ids}
    if environment is not None:
        columns["environment"] = [environment] * len(task_ids)
    return Dataset.from_dict(columns)
