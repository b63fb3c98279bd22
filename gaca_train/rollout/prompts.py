"""Prompts and responses of multi-turn rollouts, without torch: templates, the prompt builder, parsing.

Each turn, every live env gets one chat prompt (task, step count, the last ``history_length``
observations and actions, the admissible actions and the answer format), built by
:class:`PromptBuilder` from the env family's template (:func:`template_for`); a response is read
into an action by :func:`parse_response` (a malformed response is invalid but still sent to the
env, as the benchmarks do). The LLM policy that generates the responses is
:mod:`gaca_train.rollout.policy`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# ``max_steps`` is the episode cap's previous name: templates that use it keep rendering the same text.
TEMPLATE_FIELDS: tuple[str, ...] = (
    "task",
    "step",
    "max_env_steps",
    "max_steps",
    "history",
    "observation",
    "admissible_actions",
)
_ANSWER_FORMAT = (
    "First reason briefly inside <think> </think>, then give exactly one admissible action inside <action> </action>."
)
_RESPONSE = re.compile(r"^\s*<think>(.*?)</think>\s*<action>(.*?)</action>\s*$", re.DOTALL)
_ACTION = re.compile(r"<action>(.*?)</action>", re.DOTALL)
HISTORY_CHARS = 300  # an invalid response is shown in later prompts cut to this length
# How a prompt lists the admissible actions: each action's format and the separator between them.
# `quoted`: 'go to desk 1', 'look'. `plain`: go to desk 1, look (fewer tokens; for actions without commas).
ACTION_LIST_STYLES: dict[str, tuple[str, str]] = {"quoted": ("'{}'", ", "), "plain": ("{}", ", ")}

# Generates for a batch of token-id prompts; returns, per prompt, the completion's token ids and
# the sampling log-prob of each of those tokens.
GenerateFn = Callable[[list[list[int]]], tuple[list[list[int]], list[list[float]]]]


def template_for(env_id: str) -> tuple[str, str]:
    """The (system prompt, user template) of an env: its class's ``prompt`` with the answer format appended.

    An id that is not registered, or whose env class has no ``prompt``, gets ``TaskEnv``'s generic one.
    """
    from gaca_envs.task_env import TaskEnv

    prompt = getattr(_env_class(env_id), "prompt", TaskEnv.prompt)
    return prompt[0], f"{prompt[1]}\n{_ANSWER_FORMAT}"


def prompt_templates() -> list[tuple[str, str]]:
    """The generic template and every registered GACA env's (each once): the words a tiny tokenizer needs.

    The episode cap's field is written ``{max_steps}`` here, its name before it became ``{max_env_steps}``:
    a field name is never rendered, and a tiny tokenizer's vocabulary (so the tiny model's random
    initialisation, and the quickstart's reference runs) must not change with one.
    """
    from gaca_envs.registration import ENV_SPECS

    out: list[tuple[str, str]] = []
    for env_id in ("", *ENV_SPECS):
        system, template = template_for(env_id)
        template = template.replace("{max_env_steps}", "{max_steps}")
        if (system, template) not in out:
            out.append((system, template))
    return out


def _env_class(env_id: str) -> Any:
    import gymnasium as gym
    from gymnasium.envs.registration import load_env_creator

    import gaca_envs  # noqa: F401  (registers the GACA ids)

    try:
        entry_point = gym.spec(env_id.split(":")[-1]).entry_point
    except gym.error.Error:
        return None
    return load_env_creator(entry_point) if isinstance(entry_point, str) else entry_point


@dataclass(frozen=True)
class ParsedResponse:
    """A model response read as an action.

    Attributes:
        action: the text sent to the env: the ``<action>`` content if there is one, else the whole
            response, stripped.
        valid: whether the response has the format ``<think>...</think><action>...</action>`` with a
            non-empty action (METHOD.md's format check).
    """

    action: str
    valid: bool


# verl-agent's lenient check, per env family: (characters kept of a response without action tags,
# whether a response with CJK characters is invalid), as its ALFWorld and WebShop projections do.
VERL_AGENT_FORMATS: dict[str, tuple[int, bool]] = {"GACA-ALFWorld": (30, True), "GACA-WebShop": (20, False)}
_CJK = re.compile(r"[\u4e00-\u9fff]")


def parse_response(text: str, format_check: str = "strict", env_id: str = "") -> ParsedResponse:
    """Reads ``<think>...</think><action>...</action>`` from a response; see :class:`ParsedResponse`.

    Args:
        text: the decoded response.
        format_check: ``"strict"``: valid only when the whole response is exactly one think block then
            one non-empty action block; the action is the action block (or, if the format fails, the
            first action block or the whole text), whitespace-normalised. ``"verl-agent"``: the response
            is lowercased; the action is the text between the first ``<action>`` and the first
            ``</action>`` (stripped), valid when ``<think>`` and ``</think>`` also appear anywhere (and,
            for ALFWorld, no CJK character does); without both action tags the action is the last 30
            (ALFWorld) or 20 (WebShop) characters and the response is invalid.
        env_id: the env id, which picks verl-agent's per-family details.
    """
    if format_check == "verl-agent":
        tail, reject_cjk = next((v for k, v in VERL_AGENT_FORMATS.items() if env_id.startswith(k)), (30, False))
        lower = text.lower()
        start, end = lower.find("<action>"), lower.find("</action>")
        if start == -1 or end == -1:
            return ParsedResponse(lower[-tail:], False)
        valid = "<think>" in text and "</think>" in text and not (reject_cjk and _CJK.search(text))
        return ParsedResponse(lower[start + len("<action>") : end].strip(), bool(valid))
    match = _RESPONSE.match(text)
    if match and match.group(2).strip() and "<action>" not in match.group(2):
        return ParsedResponse(" ".join(match.group(2).split()), True)
    loose = _ACTION.search(text)
    action = loose.group(1) if loose else text
    return ParsedResponse(" ".join(action.split()), False)


@dataclass
class PromptBuilder:
    """Builds the chat messages of one turn.

    Args:
        system_prompt: the system message ('' for none).
        template: user-message ``str.format`` template over :data:`TEMPLATE_FIELDS`.
        history_length: number of past (observation, action) pairs shown.
        max_env_steps: the episode's step limit, shown in the prompt (template field ``{max_env_steps}``, or
            its previous name ``{max_steps}``).
        max_admissible_actions: list at most this many admissible actions (None: all).
        hidden_actions: admissible actions never listed (they stay valid if the model sends them).
        action_list_style: how the admissible actions are listed, a key of :data:`ACTION_LIST_STYLES`.
    """

    system_prompt: str
    template: str
    history_length: int
    max_env_steps: int
    max_admissible_actions: int | None = None
    hidden_actions: tuple[str, ...] = ()
    action_list_style: str = "quoted"

    def __post_init__(self) -> None:
        if self.action_list_style not in ACTION_LIST_STYLES:
            raise ValueError(
                f"action_list_style must be one of {tuple(ACTION_LIST_STYLES)}, got {self.action_list_style!r}"
            )

    @classmethod
    def from_config(cls, config: Any) -> PromptBuilder:
        """A run's prompts from its config (a ``GACAConfig`` or a mapping of its fields).

        The config's ``system_prompt`` and ``prompt_template`` where set, else the env family's
        (:func:`template_for`); ``history_length``, ``max_env_steps``, ``max_admissible_actions``,
        ``hidden_actions`` and ``action_list_style`` (default ``quoted``) as given.
        """
        get = config.get if isinstance(config, Mapping) else lambda name: getattr(config, name, None)
        system, template = template_for(get("env_id"))
        return cls(
            system_prompt=system if get("system_prompt") is None else get("system_prompt"),
            template=template if get("prompt_template") is None else get("prompt_template"),
            history_length=get("history_length"),
            max_env_steps=get("max_env_steps"),
            max_admissible_actions=get("max_admissible_actions"),
            hidden_actions=tuple(get("hidden_actions") or ()),
            action_list_style=get("action_list_style") or "quoted",
        )

    def messages(
        self, task: str, step: int, observation: str, admissible: Sequence[str], history: Sequence[tuple[str, str]]
    ) -> list[dict[str, str]]:
        """Chat messages for a turn at ``step`` (0-based) with the given history (oldest first)."""
        shown = list(history)[-self.history_length :] if self.history_length else []
        if shown:
            first = step - len(shown) + 1
            lines = [f"[Step {first + k}] Observation: {obs} Action: {act}" for k, (obs, act) in enumerate(shown)]
            history_text = f"Your last {len(shown)} step(s):\n" + "\n".join(lines) + "\n"
        else:
            history_text = ""
        actions = [a for a in admissible if a not in self.hidden_actions]
        if self.max_admissible_actions is not None:
            actions = actions[: self.max_admissible_actions]
        item, separator = ACTION_LIST_STYLES[self.action_list_style]
        user = self.template.format(
            task=task,
            step=step + 1,
            max_env_steps=self.max_env_steps,
            max_steps=self.max_env_steps,
            history=history_text,
            observation=observation,
            admissible_actions=separator.join(item.format(a) for a in actions),
        )
        messages = [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []
        return [*messages, {"role": "user", "content": user}]
