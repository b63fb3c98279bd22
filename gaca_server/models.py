"""The typed action, observation and state of a GACA env served over OpenEnv.

They subclass OpenEnv's own :class:`~openenv.core.env_server.types.Action`,
:class:`~openenv.core.env_server.types.Observation` and :class:`~openenv.core.env_server.types.State`,
so ``/schema`` publishes them and OpenEnv's clients parse them. The observation carries DESIGN.md's
info contract as typed fields; the env's other info keys travel in ``info``.
"""

from __future__ import annotations

from typing import Any

from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field

# The longest action a session accepts; the GACA envs' own action spaces stop at 4,096 characters.
MAX_ACTION_CHARS = 16_384
# Worker threads per server process that run the envs' resets and steps, off the event loop.
ENV_THREADS = 16
# HTTP sessions at once per server process; a new one past it closes the least recently used.
MAX_HTTP_SESSIONS = 64


class GACAAction(Action):
    """One text action, as ``env.step(action)`` takes it."""

    action: str = Field(description="the action text, e.g. 'go to fridge 1' or 'search[red shoes]'")


class GACAObservation(Observation):
    """What ``reset`` or ``step`` returns: the observation text, the step's outcome and the info contract.

    ``reward`` and ``done`` (``terminated or truncated``) are OpenEnv's own fields.
    """

    observation: str = Field(description="the observation text")
    terminated: bool = Field(default=False, description="the episode ended by the task (won or failed)")
    truncated: bool = Field(default=False, description="the episode ended at the env's step limit")
    task: str = Field(default="", description="the instruction in words")
    task_id: str = Field(default="", description="the task instance; equal across a group")
    admissible_actions: list[str] = Field(default_factory=list, description="the actions the env accepts now")
    anchor_key: str = Field(default="", description="canonical key of the current state")
    anchor_text: str = Field(default="", description="the raw text GiGPO keys on")
    action_valid: bool = Field(default=True, description="whether the last action was understood")
    won: bool = Field(default=False, description="task solved")
    score: float = Field(default=0.0, description="task score in [0, 1]")
    info: dict[str, Any] = Field(default_factory=dict, description="the env's other info keys")


class GACAState(State):
    """The session's state: OpenEnv's ``episode_id`` and ``step_count``, the env id and a snapshot.

    ``snapshot`` is the episode as :meth:`gaca_envs.task_env.TaskEnv.save_state` saves it
    (``EnvSnapshot.to_dict()``); ``reset(snapshot=...)`` returns any session of the same server
    (or an env built with the same arguments) to it. None before the first reset, or for an env
    without snapshots.
    """

    env_id: str = Field(default="", description="the served env id")
    task_id: str | None = Field(default=None, description="the episode's task id")
    snapshot: dict[str, Any] | None = Field(default=None, description="EnvSnapshot.to_dict() of the episode")
