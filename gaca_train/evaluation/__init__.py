"""Evaluation: episodes played by an endpoint, a local model or a baseline, and their report.

On rollout, beside training: :mod:`~gaca_train.evaluation.play` (jobs, the chat and token-level
players, episode records), :mod:`~gaca_train.evaluation.endpoint` (an OpenAI-compatible chat
endpoint with retries), :mod:`~gaca_train.evaluation.backends` (Transformers, vLLM or endpoint
backends) and :mod:`~gaca_train.evaluation.report` (intervals, pass@k, run comparisons).

This package took the name of the former ``gaca_train.evaluation`` module, whose public names it
re-exports from ``play`` on first use.
"""

from gaca_train._compat import lazy_exports

_EXPORTS = dict.fromkeys(
    ("CONFIG_FIELDS", "DEFAULT_MAX_ENV_STEPS", "DEFAULT_SPLIT", "FALLBACK_MAX_ENV_STEPS", "FALLBACK_SPLIT", "ChatFn",
     "EpisodeLog", "Job", "ParseFn", "RunMismatch", "default_max_env_steps", "default_split", "interrupted_record",
     "load_config_fields", "make_jobs", "new_record", "play_baseline_jobs", "play_chat_episode", "play_chat_jobs",
     "play_token_jobs", "request_seed", "rollout_records", "sample_entry", "sample_tasks", "task_types",
     "timing_fields"),
    "gaca_train.evaluation.play",
)  # fmt: skip
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
