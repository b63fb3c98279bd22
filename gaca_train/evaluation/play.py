"""Evaluation episodes: settings from a training config, three ways to play, and a resumable episode log.

A run is a list of :class:`Job` (a task id and a repeat number). Each finished episode becomes
one record (a dict, see :func:`new_record`) appended to an :class:`EpisodeLog` (JSONL) as soon
as it ends, so a killed run loses at most the episodes in flight and a rerun plays only the rest.

Ways to play:

- :func:`play_chat_jobs`: chat-level policies (an OpenAI-compatible endpoint, or any function
  from chat messages to a response text), ``concurrency`` episodes at once, one env per worker
  thread. A policy that raises :class:`~gaca_train.evaluation.endpoint.EndpointError` ends only its own
  episode, recorded with an ``error``. An interrupt stops the run within a second: the episodes
  in flight are recorded as ``interrupted`` (never as finished) and a rerun plays them.
- :func:`play_token_jobs`: token-level generation (a Hugging Face model or vLLM) through the
  trainer's own :func:`~gaca_train.rollout.policy.run_rollout`, ``batch_size`` envs per rollout.
- :func:`play_baseline_jobs`: the random and expert baselines.

All three show the prompts the trainer shows (:class:`~gaca_train.rollout.prompts.PromptBuilder`) and
read responses as it does (:func:`~gaca_train.rollout.prompts.parse_response`).

Every model backend records the same timing fields (``requests``, ``usage`` token counts,
``latency_s``; :func:`timing_fields`) and, with ``log_samples``, the same ``samples`` (one per step,
:func:`sample_entry`): an endpoint's request is one call, a token backend's generation of one
step's completion is one (its latency is the step's share of the batched generation time).
"""

from __future__ import annotations

import json
import logging
import random
import threading
import zlib
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym

from gaca_train.evaluation.endpoint import EndpointError, Interrupted
from gaca_train.rollout.episodes import BaselinePolicy, Decision, EnvList, Played, Turn, play
from gaca_train.rollout.prompts import HISTORY_CHARS, ParsedResponse, PromptBuilder, parse_response

logger = logging.getLogger(__name__)

# The training-config fields an evaluation reuses (prompt, env and generation settings).
CONFIG_FIELDS: tuple[str, ...] = (
    "env_id",
    "env_kwargs",
    "system_prompt",
    "prompt_template",
    "history_length",
    "max_admissible_actions",
    "eval_temperature",
    "top_p",
    "top_k",
    "max_completion_length",
    "max_env_steps",
    "format_check",
    "hidden_actions",
    "action_list_style",
)
# Per env family: the benchmark's step limit and evaluation split.
DEFAULT_MAX_ENV_STEPS: dict[str, int] = {"GACA-ALFWorld": 50, "GACA-WebShop": 15}
DEFAULT_SPLIT: dict[str, str] = {"GACA-ALFWorld": "valid_unseen", "GACA-WebShop": "test"}
FALLBACK_MAX_ENV_STEPS = 50
FALLBACK_SPLIT = "test"

# One conversation (system and user messages) -> the policy's response text.
ChatFn = Callable[[list[dict[str, str]]], str]
# A response text -> the action and whether the response is well-formed (the run's format check).
ParseFn = Callable[[str], ParsedResponse]


def _family_default(table: dict[str, Any], env_id: str, fallback: Any) -> Any:
    base = env_id.split(":")[-1]
    return next((value for prefix, value in table.items() if base.startswith(prefix)), fallback)


def default_max_env_steps(env_id: str) -> int:
    """The benchmark step limit of an env family: ALFWorld 50, WebShop 15, others 50."""
    return _family_default(DEFAULT_MAX_ENV_STEPS, env_id, FALLBACK_MAX_ENV_STEPS)


def default_split(env_id: str) -> str:
    """The evaluation split of an env family: ALFWorld ``valid_unseen``, WebShop and others ``test``."""
    return _family_default(DEFAULT_SPLIT, env_id, FALLBACK_SPLIT)


def load_config_fields(path: str | Path) -> dict[str, Any]:
    """The :data:`CONFIG_FIELDS` a training YAML sets (``env_kwargs`` decoded when it is a JSON string).

    The file is read with ``yaml.safe_load`` and no ``GACAConfig`` is built, so training-only
    settings are neither needed nor checked.

    Raises:
        ValueError: if the file is missing or unreadable, not a YAML mapping, or its ``env_kwargs`` is not a
            JSON object.
    """
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text())
    except OSError as e:
        raise ValueError(f"--config {path}: cannot read it ({e.strerror or e})") from e
    except yaml.YAMLError as e:
        raise ValueError(f"--config {path} is not valid YAML: {str(e).splitlines()[0]}") from e
    if not isinstance(data, dict):
        raise ValueError(f"--config {path} must be a YAML mapping of config fields, got {type(data).__name__}")
    fields = {name: data[name] for name in CONFIG_FIELDS if data.get(name) is not None}
    kwargs = fields.get("env_kwargs")
    if isinstance(kwargs, str):
        try:
            kwargs = json.loads(kwargs)
        except json.JSONDecodeError as e:
            raise ValueError(
                f"env_kwargs in {path} is not valid JSON ({e.msg} at column {e.colno}): {kwargs!r}"
            ) from e
    if kwargs is not None and not isinstance(kwargs, dict):
        raise ValueError(f"env_kwargs in {path} must be a mapping or a JSON object, got {kwargs!r}")
    if kwargs is not None:
        fields["env_kwargs"] = kwargs
    return fields


@dataclass(frozen=True)
class Job:
    """One episode to play: ``task_id``'s ``repeat``-th episode; ``index`` orders the run (env seed offset)."""

    task_id: str
    repeat: int
    index: int

    @property
    def key(self) -> tuple[str, int]:
        """The (task id, repeat) pair that identifies the episode in the log."""
        return (self.task_id, self.repeat)


def make_jobs(task_ids: Sequence[str], repeats: int) -> list[Job]:
    """Every task ``repeats`` times: all tasks once, then all tasks again, and so on."""
    return [Job(t, r, r * len(task_ids) + k) for r in range(repeats) for k, t in enumerate(task_ids)]


def task_types(env_id: str, env_kwargs: dict[str, Any]) -> dict[str, str]:
    """Task id -> task type for an env whose unwrapped env lists ``records`` with both (ALFWorld); else empty."""
    env = gym.make(env_id, **env_kwargs)
    try:
        records = getattr(env.unwrapped, "records", None) or []
        return {r.task_id: str(r.task_type) for r in records if hasattr(r, "task_id") and hasattr(r, "task_type")}
    finally:
        env.close()


def sample_tasks(task_ids: Sequence[str], n: int, types: dict[str, str] | None = None, seed: int = 0) -> list[str]:
    """``n`` of ``task_ids`` drawn without replacement, stratified by task type, in the split's order.

    Each type gets its proportional share of ``n`` (largest remainders round up; ties broken at
    random), drawn uniformly within the type, so 40 of ALFWorld's 134 unseen games cover all six
    types in their proportions rather than the first two. Tasks without a type form one stratum.
    The draw depends only on ``seed``, the ids and their types.
    """
    if n >= len(task_ids):
        return list(task_ids)
    types = types or {}
    rng = random.Random(seed)
    strata: dict[str, list[str]] = defaultdict(list)
    for t in task_ids:
        strata[types.get(t, "")].append(t)
    names = sorted(strata)
    shares = {k: n * len(strata[k]) / len(task_ids) for k in names}
    quota = {k: int(shares[k]) for k in names}
    order = sorted(names, key=lambda k: (quota[k] - shares[k], rng.random()))  # largest remainder first
    for k in order[: n - sum(quota.values())]:
        quota[k] += 1
    picked = {t for k in names for t in rng.sample(strata[k], quota[k])}
    return [t for t in task_ids if t in picked]


def request_seed(seed: int, job: Job, step: int) -> int:
    """The sampling seed of the request for ``job``'s ``step``: the same in a resumed run as in a whole one."""
    return zlib.crc32(f"{seed}:{job.task_id}:{job.repeat}:{step}".encode()) & 0x7FFFFFFF


def new_record(job: Job, info: dict[str, Any]) -> dict[str, Any]:
    """An episode record before its first step: task, and counters at zero."""
    return {
        "task_id": job.task_id,
        "repeat": job.repeat,
        "task_type": info.get("task_type"),
        "won": False,
        "score": 0.0,
        "length": 0,
        "invalid": 0,
        "malformed": 0,
        "truncated": False,
        "error": None,
        "actions": [],
        "rewards": [],
    }


def interrupted_record(job: Job) -> dict[str, Any]:
    """The record of an episode the run stopped in the middle of: not finished, so a rerun plays it."""
    return {**new_record(job, {}), "error": "interrupted", "interrupted": True}


def _record_step(record: dict[str, Any], action: str, well_formed: bool, reward: float, info: dict[str, Any]) -> None:
    record["length"] += 1
    record["actions"].append(action)
    record["rewards"].append(float(reward))
    record["malformed"] += not well_formed
    record["invalid"] += not info.get("action_valid", True)
    record["won"] = bool(info.get("won", False))
    record["score"] = float(info.get("score", 0.0))


def play_chat_episode(
    env: gym.Env,
    job: Job,
    chat: ChatFn,
    prompts: PromptBuilder,
    *,
    seed: int = 0,
    parse: ParseFn = parse_response,
    stop: threading.Event | None = None,
    log_samples: bool = False,
) -> dict[str, Any] | None:
    """Plays ``job`` in ``env`` with a chat-level policy, as :func:`~gaca_train.rollout.policy.run_rollout` would.

    The env is reset with seed ``seed + job.index``; the episode runs to its end or ``prompts.max_env_steps``
    steps; ``parse`` reads each response. A ``chat`` with a ``complete(messages, seed)`` method (a
    :class:`~gaca_train.evaluation.endpoint.ChatEndpoint`) gets each request's :func:`request_seed`, and the
    record gets its token ``usage``, ``requests`` and ``latency_s``. If ``chat`` raises
    :class:`EndpointError` the episode stops there with ``record["error"]``. Once ``stop`` is set (or
    ``chat`` raises :class:`~gaca_train.evaluation.endpoint.Interrupted`) the episode is abandoned and None returned.

    Args:
        log_samples: keep every step's prompt messages and raw response in ``record["samples"]``.
    """
    policy = _ChatPolicy(chat, prompts, parse, stop, job, seed)
    try:
        played = play(EnvList([env]), [job.task_id], policy, prompts.max_env_steps, seed=seed + job.index)
    except _Abandoned:
        return None
    record = _played_record(job, played)
    calls = [t.decision.data for t in played.transitions if t.decision.data] + policy.failed
    record.update(timing_fields(calls))
    if log_samples:
        record["samples"] = [sample_entry(t.step, **t.decision.data) for t in played.transitions] + [
            sample_entry(**failed) for failed in policy.failed
        ]
    return record


def timing_fields(calls: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """An episode's ``requests``, ``latency_s`` and ``usage`` (token counts) from its model calls, any backend.

    Args:
        calls: one dict per model call with ``tries``, ``latency_s`` (None: not timed) and ``usage``
            (``prompt_tokens``, ``completion_tokens``; None: not reported).

    Returns:
        The three fields, or nothing when no call was timed (a chat function without ``complete``).
    """
    if not any(c.get("latency_s") is not None for c in calls):
        return {}
    usage = [c["usage"] for c in calls if c.get("usage")]
    return {
        "requests": sum(c["tries"] for c in calls),
        "latency_s": round(sum(c["latency_s"] for c in calls), 4),
        "usage": {k: sum(u.get(k, 0) for u in usage) for k in ("prompt_tokens", "completion_tokens")},
    }


def sample_entry(step: int, response: str | None = None, **call: Any) -> dict[str, Any]:
    """One ``samples`` entry of ``--log-samples``, any backend: the step, what the model was shown and answered.

    Args:
        step: the agent step.
        response: the raw response text (None when the request failed).
        **call: the call's other fields: ``messages`` (chat backends) or ``prompt`` (token backends: the
            rendered prompt text), ``usage``, ``latency_s``, ``tries``, ``error``.
    """
    return {"step": step, **call, "response": response} if response is not None else {"step": step, **call}


class _Abandoned(Exception):
    """The run stops: the episode in flight is dropped unrecorded."""


class _ChatPolicy:
    """A chat-level policy (messages in, response text out) over the episode loop."""

    def __init__(self, chat: ChatFn, prompts: PromptBuilder, parse: ParseFn, stop: threading.Event | None,
                 job: Job, seed: int) -> None:  # fmt: skip
        self.chat, self.prompts, self.parse, self.stop, self.job, self.seed = chat, prompts, parse, stop, job, seed
        self.complete = getattr(chat, "complete", None)
        self.failed: list[dict[str, Any]] = []  # the request that ended the episode, if one did

    def act(self, turns: list[Turn]) -> list[Decision]:
        decisions = []
        for t in turns:
            if self.stop is not None and self.stop.is_set():
                raise _Abandoned
            messages = self.prompts.messages(t.info["task"], t.step, t.observation, t.info["admissible_actions"],
                                             t.history)  # fmt: skip
            data: dict[str, Any] = {"messages": messages}
            try:
                if self.complete is not None:
                    answer = self.complete(messages, seed=request_seed(self.seed, self.job, t.step))
                    text = answer.text
                    data.update(usage=answer.usage, latency_s=answer.latency_s, tries=answer.tries)
                else:
                    text = self.chat(messages)
            except Interrupted as e:
                raise _Abandoned from e
            except EndpointError as e:
                if self.complete is not None:
                    data.update(usage=None, latency_s=e.latency_s, tries=e.tries)
                self.failed.append({"step": t.step, **data, "error": str(e)})
                decisions.append(Decision(None, error=str(e)))
                continue
            parsed = self.parse(text)
            shown = parsed.action if parsed.valid else parsed.action[:HISTORY_CHARS]
            decisions.append(Decision(parsed.action, valid=parsed.valid, shown=shown, data={**data, "response": text}))
        return decisions


def _played_record(job: Job, played: Played) -> dict[str, Any]:
    """The episode record of a one-env :func:`~gaca_train.rollout.episodes.play`."""
    episode = played.episodes[0]
    record = new_record(job, played.transitions[0].info if played.transitions else episode.info)
    for t in played.transitions:
        _record_step(record, t.decision.action, t.decision.valid, t.reward, t.next_info)
    record["error"], record["truncated"] = episode.error, episode.truncated
    return record


def play_chat_jobs(
    jobs: Sequence[Job],
    make_env: Callable[[], gym.Env],
    chat: ChatFn,
    prompts: PromptBuilder,
    on_record: Callable[[dict[str, Any]], None],
    *,
    concurrency: int = 1,
    seed: int = 0,
    parse: ParseFn = parse_response,
    stop: threading.Event | None = None,
    log_samples: bool = False,
    grace: float = 1.0,
) -> None:
    """Plays ``jobs`` with ``concurrency`` worker threads, each with its own env from ``make_env``.

    ``on_record`` gets each episode's record, one call at a time. Workers are daemon threads: an
    interrupt (or a worker's exception other than :class:`EndpointError`) sets ``stop``, so no new
    episode or request starts; after at most ``grace`` seconds every episode still in flight is
    recorded with :func:`interrupted_record`, later records are dropped, and the interrupt (or the
    exception) is re-raised without waiting for the workers.

    Args:
        stop: the run's stop event (pass the endpoint's :attr:`~gaca_train.evaluation.endpoint.ChatEndpoint.stop`
            so that requests in flight are cut too); a new one when None.
        log_samples: see :func:`play_chat_episode`.
    """
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    stop = stop if stop is not None else threading.Event()
    pending = list(reversed(jobs))
    lock = threading.Lock()
    in_flight: dict[tuple[str, int], Job] = {}
    state = {"closed": False, "running": 0}
    failures: list[BaseException] = []
    all_done = threading.Event()

    def emit(job: Job, record: dict[str, Any]) -> None:
        with lock:
            if state["closed"] or in_flight.pop(job.key, None) is None:
                return
            on_record(record)

    def work() -> None:
        env = None
        try:
            while not stop.is_set():
                with lock:
                    if not pending:
                        break
                    job = pending.pop()
                    in_flight[job.key] = job
                if env is None:
                    env = make_env()
                record = play_chat_episode(env, job, chat, prompts, seed=seed, parse=parse, stop=stop,
                                           log_samples=log_samples)  # fmt: skip
                emit(job, record if record is not None else interrupted_record(job))
        except BaseException as e:  # noqa: BLE001  (re-raised by the main thread)
            failures.append(e)
            stop.set()
        finally:
            if env is not None:
                env.close()
            with lock:
                state["running"] -= 1
                if state["running"] == 0:
                    all_done.set()

    workers = [threading.Thread(target=work, name=f"gaca-eval-{i}", daemon=True)
               for i in range(min(concurrency, len(jobs)))]  # fmt: skip
    if not workers:
        return
    state["running"] = len(workers)
    for w in workers:
        w.start()
    try:
        while not all_done.wait(0.1):
            if stop.is_set():
                all_done.wait(grace)
                break
    except KeyboardInterrupt:
        stop.set()
        all_done.wait(grace)
        _close(lock, state, in_flight, on_record)
        raise
    _close(lock, state, in_flight, on_record)
    if failures:
        raise failures[0]
    if stop.is_set():
        raise KeyboardInterrupt


def _close(lock: threading.Lock, state: dict[str, Any], in_flight: dict, on_record: Callable) -> None:
    """Records the episodes still in flight as interrupted; later records from the workers are dropped."""
    with lock:
        state["closed"] = True
        for job in list(in_flight.values()):
            on_record(interrupted_record(job))
        in_flight.clear()


def play_token_jobs(
    jobs: Sequence[Job],
    env_id: str,
    env_kwargs: dict[str, Any],
    generate: Any,
    tokenizer: Any,
    prompts: PromptBuilder,
    on_record: Callable[[dict[str, Any]], None],
    *,
    batch_size: int = 16,
    vector_env: str = "sync",
    seed: int = 0,
    parse: ParseFn | None = None,
    log_samples: bool = False,
) -> None:
    """Plays ``jobs`` ``batch_size`` at a time through :func:`~gaca_train.rollout.policy.run_rollout`.

    Args:
        generate: a :data:`~gaca_train.rollout.prompts.GenerateFn` (token ids in, completion ids and log-probs out).
        tokenizer: renders the chat template and decodes completions.
        vector_env: ``"sync"`` (in-process envs) or ``"async"`` (one subprocess per env).
        parse: reads responses (None: :func:`~gaca_train.rollout.prompts.parse_response`, strict).
        log_samples: keep every step's rendered prompt and raw response in ``record["samples"]``.
    """
    from gaca_train.rollout.policy import run_rollout
    from gaca_train.rollout.vector import RolloutPool

    pools: dict[int, RolloutPool] = {}
    try:
        for start in range(0, len(jobs), batch_size):
            batch = list(jobs[start : start + batch_size])
            if len(batch) not in pools:
                pools[len(batch)] = RolloutPool(env_id, len(batch), env_kwargs, mode=vector_env)
            kwargs = {} if parse is None else {"parse": parse}
            task_ids = [j.task_id for j in batch]
            result = run_rollout(pools[len(batch)], task_ids, generate, tokenizer, prompts, seed=seed + batch[0].index,
                                 **kwargs)  # fmt: skip
            records = rollout_records(result, batch, parse or parse_response, tokenizer if log_samples else None)
            for record in records:
                on_record(record)
    finally:
        for pool in pools.values():
            pool.close()


def rollout_records(
    result: Any, batch: Sequence[Job], parse: ParseFn = parse_response, sample_tokenizer: Any = None
) -> list[dict[str, Any]]:
    """Episode records of a :class:`~gaca_train.rollout.policy.RolloutResult` whose env ``i`` played ``batch[i]``.

    Each step's generation counts as one request, with its prompt and completion token counts and an
    equal share of the rollout's generation seconds (the prompts of a turn are generated as one batch).

    Args:
        sample_tokenizer: decodes each step's prompt for ``record["samples"]`` (None: no samples).
    """
    steps = defaultdict(list)
    for step in result.steps:
        steps[step.env_index].append(step)
    share = result.timings.get("generation", 0.0) / max(len(result.steps), 1)
    records = []
    for episode in result.episodes:
        record = new_record(batch[episode.env_index], episode.info)
        calls = []
        for step in steps[episode.env_index]:
            action = parse(step.response).action
            _record_step(record, action, step.valid, step.reward, {"action_valid": step.env_valid})
            usage = {"prompt_tokens": len(step.prompt_ids), "completion_tokens": len(step.completion_ids)}
            calls.append(
                {"step": step.step, "usage": usage, "latency_s": share, "tries": 1, "response": step.response}
            )
        record.update(
            task_type=episode.info.get("task_type"), won=episode.won, score=episode.score, truncated=episode.truncated
        )
        record.update(timing_fields(calls))
        if sample_tokenizer is not None:
            prompts = [sample_tokenizer.decode(step.prompt_ids) for step in steps[episode.env_index]]
            record["samples"] = [sample_entry(**call, prompt=prompt) for call, prompt in zip(calls, prompts)]
        records.append(record)
    return records


def play_baseline_jobs(
    jobs: Sequence[Job],
    env: gym.Env,
    policy: str,
    max_env_steps: int,
    on_record: Callable[[dict[str, Any]], None],
    *,
    seed: int = 0,
) -> None:
    """Plays ``jobs`` with the ``"random"`` (uniform over admissible actions) or ``"expert"`` policy.

    Raises:
        ValueError: for ``"expert"`` when the env gives no ``info["expert_action"]``.
    """
    for job in jobs:
        player = BaselinePolicy(policy, random.Random(seed + job.index), env.spec.id if env.spec else "the env")
        played = play(EnvList([env]), [job.task_id], player, max_env_steps, seed=seed + job.index)
        on_record(_played_record(job, played))


class RunMismatch(ValueError):
    """An episode log holds another run's episodes (other settings, endpoint, model or code version)."""


class EpisodeLog:
    """Episodes in a JSONL file: a header line ``{"run": {...}}``, then one record per line.

    Opening an existing log with the same ``run`` description resumes it: :attr:`finished` holds its
    records without an ``error`` (the latest per (task id, repeat)); errored and interrupted episodes
    are played again. A log of a different run is refused (:class:`RunMismatch`, naming the settings
    that differ) unless ``resume`` is False: then it is moved to ``<path>.prev`` and a new one is
    started. A line cut short by a killed run is dropped.

    Args:
        path: the JSONL file.
        run: what identifies the run (env, split, policy, endpoint, model, sampling, prompt, seed,
            versions), JSON-serialisable.
        resume: False starts a new log even when the run matches.

    Raises:
        RunMismatch: if ``path`` holds another run and ``resume`` is True.
    """

    def __init__(self, path: str | Path, run: dict[str, Any], *, resume: bool = True) -> None:
        self.path = Path(path)
        self.run = json.loads(json.dumps(run, default=str))
        self.records: dict[tuple[str, int], dict[str, Any]] = {}
        self._lock = threading.Lock()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if resume and self.check(self.path, self.run):
            self._read()
            return
        if self.path.exists():
            self.path.replace(self.path.with_name(self.path.name + ".prev"))
            logger.warning("%s held earlier episodes; moved it to %s.prev", self.path, self.path.name)
        self.path.write_text(json.dumps({"run": self.run}) + "\n")

    @classmethod
    def check(cls, path: str | Path, run: dict[str, Any]) -> bool:
        """Whether ``path`` holds episodes of ``run`` (False: no log, or one without a readable header).

        Raises:
            RunMismatch: if it holds another run's episodes, naming the settings that differ.
        """
        path, run = Path(path), json.loads(json.dumps(run, default=str))
        header = cls._header(path) if path.exists() else None
        if header is None:
            return False
        if header != run:
            differ = sorted(k for k in set(header) | set(run) if header.get(k) != run.get(k))
            detail = "; ".join(f"{k}: {header.get(k)!r:.60} then, {run.get(k)!r:.60} now" for k in differ[:4])
            raise RunMismatch(
                f"{path} holds another run's episodes ({detail}); pass --no-resume to start over (the old log is "
                "kept as .prev) or another --out"
            )
        return True

    @staticmethod
    def _header(path: Path) -> dict[str, Any] | None:
        """The run description of the log at ``path``, None when it has no readable header line."""
        with path.open("rb") as f:
            first = f.readline()
        try:
            header = json.loads(first) if first.endswith(b"\n") else None
        except json.JSONDecodeError:
            return None
        run = header.get("run") if isinstance(header, dict) and isinstance(header.get("run"), dict) else None
        if run is not None and "max_steps" in run and "max_env_steps" not in run:  # a log of an earlier release
            run = {("max_env_steps" if k == "max_steps" else k): v for k, v in run.items()}
        return run

    def _read(self) -> None:
        """Loads the records; drops a cut-off last line."""
        raw = self.path.read_bytes()
        complete = raw[: raw.rfind(b"\n") + 1]
        if len(complete) < len(raw):
            self.path.write_bytes(complete)
        for line in complete.decode().splitlines()[1:]:
            record = json.loads(line)
            self.records[(record["task_id"], record["repeat"])] = record

    @property
    def finished(self) -> set[tuple[str, int]]:
        """The (task id, repeat) pairs played to the end (no ``error``)."""
        return {key for key, record in self.records.items() if not record.get("error")}

    def append(self, record: dict[str, Any]) -> None:
        """Writes one episode (thread-safe)."""
        line = json.dumps(record, default=str) + "\n"
        with self._lock:
            with self.path.open("a") as f:
                f.write(line)
            self.records[(record["task_id"], record["repeat"])] = record
