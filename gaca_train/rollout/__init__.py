"""Multi-turn rollouts: envs in worker processes, the episode loop, branching, sampling, prompts, the LLM policy.

On the estimators: :mod:`~gaca_train.rollout.vector` (``RolloutPool``: envs in-process or in
subprocess workers), :mod:`~gaca_train.rollout.episodes` (the episode loop every player shares),
:mod:`~gaca_train.rollout.branching` (continuations from snapshots),
:mod:`~gaca_train.rollout.sampling` (the lean sampler with log-probs),
:mod:`~gaca_train.rollout.prompts` (templates, ``PromptBuilder``, response parsing; no torch) and
:mod:`~gaca_train.rollout.policy` (``run_rollout``, ``LLMPolicy``, ``generate_with_logprobs``).

This package took the name of the former ``gaca_train.rollout`` module, whose public names it
re-exports from ``prompts`` and ``policy`` on first use: ``import gaca_train.rollout.vector``
imports no torch (a subprocess worker starts without it).
"""

from gaca_train._compat import lazy_exports

_EXPORTS = {
    **dict.fromkeys(("ACTION_LIST_STYLES", "HISTORY_CHARS", "TEMPLATE_FIELDS", "VERL_AGENT_FORMATS", "GenerateFn",
                     "ParsedResponse", "PromptBuilder", "parse_response", "prompt_templates", "template_for"),
                    "gaca_train.rollout.prompts"),
    **dict.fromkeys(("LLMPolicy", "LockstepFn", "RolloutResult", "StepRecord", "check_first_prompts",
                     "generate_with_logprobs", "max_over_ranks", "run_rollout"), "gaca_train.rollout.policy"),
    "RolloutPool": "gaca_train.rollout.vector",
}  # fmt: skip
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
