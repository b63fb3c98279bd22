"""Evaluate a policy on a GACA env split: a model (local, vLLM, or an OpenAI-compatible endpoint), or a baseline.

    python scripts/evaluate.py --env GACA-CriticalChain-v0 --policy expert --max-tasks 100
    python scripts/evaluate.py --config configs/alfworld_gaca.yaml --model outputs/alfworld-gaca \
        --max-tasks 140 --out runs/eval-alfworld
    python scripts/evaluate.py --config configs/webshop_gaca.yaml --base-url http://127.0.0.1:8000/v1 \
        --model Qwen/Qwen2.5-7B-Instruct --concurrency 16 --rollouts-per-task 4 --log-samples --out runs/eval-webshop
    python scripts/evaluate.py --compare runs/eval-gaca runs/eval-grpo

Outputs: <out>.jsonl (a header that describes the run, then one line per episode, written as each
ends: a rerun resumes), <out>.json (settings, report, episodes) and <out>.md (success, score, steps,
invalid-action and malformed-response rates with 95% intervals, overall and per task type; pass@k
and mean@k with --rollouts-per-task). An evaluation plays --max-tasks tasks x --rollouts-per-task
episodes, as a training config's eval_max_tasks and eval_rollouts_per_task do; --num-episodes,
--repeats and --max-steps are the deprecated spellings of --max-tasks, --rollouts-per-task and
--max-env-steps.

Exit status: 0 when every episode was played; 1 when episodes errored (--allow-errors accepts
them) or the endpoint failed its pre-flight check; 2 for bad arguments; 130 when interrupted.

:func:`main` is the command line of ``scripts/evaluate.py``; :func:`resolve` turns its options into
the run's settings, and the episodes are played by :mod:`gaca_train.evaluation` and reported by
:mod:`gaca_train.evaluation.report`.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym

import gaca_envs  # noqa: F401  (registers the GACA env ids)
from gaca_envs.task_env import split_task_ids
from gaca_train.evaluation.backends import Sampling, endpoint_backend
from gaca_train.evaluation.endpoint import (
    PREFLIGHT_TIMEOUT,
    EndpointError,
    Interrupted,
    RetryPolicy,
    check_base_url,
    check_endpoint,
)
from gaca_train.evaluation.play import (
    ChatFn,
    EpisodeLog,
    RunMismatch,
    default_max_env_steps,
    default_split,
    load_config_fields,
    make_jobs,
    play_baseline_jobs,
    play_chat_jobs,
    play_token_jobs,
    sample_tasks,
    task_types,
)
from gaca_train.evaluation.report import compare, compare_markdown, load_run, markdown, summarise
from gaca_train.experiments.cli_utils import add_deprecated_alias
from gaca_train.rollout.prompts import PromptBuilder, parse_response, template_for

__all__ = ["main", "markdown", "model_files", "parse_args", "pick_backend", "resolve", "summarise"]

EXIT_ERRORS, EXIT_INTERRUPTED = 1, 130


def _number(kind: Callable[[str], Any], low: float | None = None, high: float | None = None, *,
            above: bool = False) -> Callable[[str], Any]:  # fmt: skip
    """An argparse type: a finite ``kind`` value >= ``low`` (> ``low`` with ``above``) and <= ``high``."""

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected {'an integer' if kind is int else 'a number'}, got {text!r}"
            ) from None
        if isinstance(value, float) and not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
        if low is not None and (value <= low if above else value < low):
            raise argparse.ArgumentTypeError(f"must be {'>' if above else '>='} {low:g}, got {text}")
        if high is not None and value > high:
            raise argparse.ArgumentTypeError(f"must be <= {high:g}, got {text}")
        return value

    return parse


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise argparse.ArgumentTypeError(f"not valid JSON ({e.msg} at column {e.colno}): {text!r}") from e
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object such as '{{\"horizon\": 5}}', got {text!r}")
    return value


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line of ``scripts/evaluate.py`` (every value checked: a bad one exits 2 with a message)."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    count, at_least_0 = _number(int, 1), _number(int, 0)
    positive = _number(float, 0, above=True)
    p.add_argument("--config", help="training YAML whose env, prompt and generation settings are reused")
    p.add_argument("--env", help="Gymnasium env id (default: the config's env_id, else GACA-CriticalChain-v0)")
    p.add_argument("--env-kwargs", type=_json_object, help="JSON object of gym.make keyword arguments (updates the "
                   "config's, whose training split is dropped)")  # fmt: skip
    p.add_argument("--split", help="task split (default: --env-kwargs' split, else ALFWorld valid_unseen, "
                   "WebShop and others test)")  # fmt: skip
    p.add_argument("--max-tasks", type=count, default=100, help="tasks to play, drawn from the split (all "
                   "when it has fewer), stratified by task type and seeded by --sample-seed")  # fmt: skip
    p.add_argument(
        "--sample",
        choices=("stratified", "first"),
        default="stratified",
        help="how --max-tasks tasks are chosen: stratified by task type, or the split's first",
    )
    p.add_argument("--sample-seed", type=int, default=0, help="seed of the task draw (kept apart from --seed)")
    p.add_argument("--rollouts-per-task", type=count, default=1, help="episodes per task (pass@k and mean@k "
                   "when > 1)")  # fmt: skip
    p.add_argument("--policy", choices=("model", "random", "expert"), default="model",
                   help="who plays: the model (default), or a random or expert baseline")  # fmt: skip
    p.add_argument("--backend", choices=("auto", "hf", "vllm", "endpoint"), default="auto",
                   help="auto: endpoint with --base-url, else hf; vllm only when asked for")  # fmt: skip
    p.add_argument("--model", help="checkpoint folder or model id; with --base-url, the served model's name")
    p.add_argument("--device", help="device of the hf backend (default: cuda when available, else cpu)")
    p.add_argument("--base-url", help="OpenAI-compatible API root, e.g. http://127.0.0.1:8000/v1")
    p.add_argument("--api-key-env", help="name of the environment variable that holds the endpoint's API key")
    p.add_argument("--concurrency", type=count, default=8, help="endpoint: episodes (requests) in flight")
    p.add_argument("--max-rps", type=positive, help="endpoint: most requests started per second (default: no limit)")
    p.add_argument("--max-retries", type=at_least_0, default=4, help="endpoint: retries of a failed request")
    p.add_argument(
        "--retry-backoff",
        type=_number(float, 0),
        default=1.0,
        help="endpoint: seconds before the first retry (a Retry-After header overrides it)",
    )
    p.add_argument(
        "--retry-backoff-max", type=_number(float, 0), default=30.0, help="endpoint: longest wait between retries"
    )
    p.add_argument(
        "--request-timeout",
        type=positive,
        default=120.0,
        help="endpoint: seconds one request may take in all (connecting and the whole answer, however slowly it "
        "comes), the pre-flight check's included",
    )
    p.add_argument("--allow-errors", action="store_true", help="exit 0 even when episodes errored")
    p.add_argument("--log-samples", action="store_true", help="keep every prompt and raw response in the records")
    p.add_argument("--greedy", action="store_true", help="greedy decoding instead of sampling")
    p.add_argument("--temperature", type=_number(float, 0), help="sampling temperature (default: the config's "
                   "eval_temperature, else 0.4)")  # fmt: skip
    p.add_argument("--top-p", type=_number(float, 0, 1, above=True), help="nucleus sampling, in (0, 1] "
                   "(default: the config's, else 1.0)")  # fmt: skip
    p.add_argument("--top-k", type=at_least_0, help="top-k sampling, 0 for off (default: the config's, else off)")
    p.add_argument("--max-new-tokens", type=count, help="tokens per response (default: max_completion_length, 512)")
    p.add_argument("--batch-size", type=count, default=16, help="hf / vllm: envs played at once")
    p.add_argument("--vector-env", choices=("sync", "async"), default="sync", help="hf / vllm: env processes")
    p.add_argument("--max-env-steps", type=count, help="agent steps per episode (default: the config's "
                   "max_env_steps, else ALFWorld 50, WebShop 15, others 50)")  # fmt: skip
    p.add_argument("--history-length", type=at_least_0, help="past steps in each prompt (default: the config's, "
                   "else 2)")  # fmt: skip
    p.add_argument("--max-admissible-actions", type=count, help="most admissible actions listed in a prompt")
    p.add_argument("--format-check", choices=("strict", "verl-agent"), help="how responses are read (default: "
                   "the config's format_check, else strict)")  # fmt: skip
    p.add_argument("--seed", type=int, default=0, help="env and sampling seed")
    p.add_argument("--out", default="runs/eval", help="output path prefix (.jsonl, .json and .md are added)")
    p.add_argument("--no-resume", action="store_true", help="start over even if <out>.jsonl holds this run")
    p.add_argument("--compare", nargs=2, metavar=("RUN_A", "RUN_B"), help="print the paired difference of two "
                   "finished runs (their --out prefixes or .json files) on their shared tasks, and exit")  # fmt: skip
    for old, new in (("--num-episodes", "--max-tasks"), ("--repeats", "--rollouts-per-task"),
                     ("--max-steps", "--max-env-steps")):  # fmt: skip
        add_deprecated_alias(p, old, new)
    return p.parse_args(argv)


def _first(*values: Any) -> Any:
    return next((v for v in values if v is not None), None)


def resolve(args: argparse.Namespace) -> dict[str, Any]:
    """Every setting of the run: flags, then the --config fields, then the per-env defaults.

    Raises:
        SystemExit: naming the bad setting (a missing config, an unknown env id, a bad value).
    """
    try:
        config = load_config_fields(args.config) if args.config else {}
    except ValueError as e:
        raise SystemExit(f"evaluate: {e}") from e
    env_id = _first(args.env, config.get("env_id"), "GACA-CriticalChain-v0")
    if env_id not in gym.registry:
        known = ", ".join(sorted(k for k in gym.registry if k.startswith("GACA-")))
        raise SystemExit(f"evaluate: unknown env id {env_id!r}; registered GACA envs: {known}")
    flag_kwargs = dict(args.env_kwargs or {})
    # The config's split is the one it trains on; an evaluation plays --split (or the env family's).
    config_kwargs = {k: v for k, v in config.get("env_kwargs", {}).items() if k != "split"}
    env_kwargs = {**config_kwargs, **flag_kwargs}
    split = _first(args.split, flag_kwargs.get("split"), default_split(env_id))
    if "split" in env_kwargs:
        env_kwargs["split"] = split
    system, template = template_for(env_id)
    top_k = _first(args.top_k, config.get("top_k"))
    # A training config's `temperature` is the rollouts'; validation samples at `eval_temperature` (0.4 by default).
    temperature = _first(args.temperature, config.get("eval_temperature"), 0.4)
    try:
        sampling = Sampling(
            temperature=temperature,
            top_p=_first(args.top_p, config.get("top_p"), 1.0),
            top_k=top_k if top_k and top_k > 0 else None,
            max_new_tokens=_first(args.max_new_tokens, config.get("max_completion_length"), 512),
            greedy=args.greedy,
        )
        max_env_steps = _first(args.max_env_steps, config.get("max_env_steps"), default_max_env_steps(env_id))
        hidden = {"hidden_actions": tuple(config["hidden_actions"])} if config.get("hidden_actions") else {}
        prompts = PromptBuilder(
            system_prompt=_first(config.get("system_prompt"), system),
            template=_first(config.get("prompt_template"), template),
            history_length=_first(args.history_length, config.get("history_length"), 2),
            max_env_steps=max_env_steps,
            max_admissible_actions=_first(args.max_admissible_actions, config.get("max_admissible_actions")),
            action_list_style=config.get("action_list_style") or "quoted",
            **hidden,
        )
    except (ValueError, TypeError) as e:
        raise SystemExit(f"evaluate: {e}") from e
    format_check = _first(args.format_check, config.get("format_check"), "strict")
    parse = parse_response
    if format_check != "strict":
        parse = functools.partial(parse_response, format_check=format_check, env_id=env_id)
    eval_temperature = config.get("eval_temperature") if args.temperature is None and args.config else None
    return {"env_id": env_id, "env_kwargs": env_kwargs, "split": split, "sampling": sampling, "prompts": prompts,
            "format_check": format_check, "parse": parse, "eval_temperature": eval_temperature}  # fmt: skip


def pick_backend(args: argparse.Namespace, chat: ChatFn | None) -> str:
    """The backend that plays a model policy: ``chat`` (in-process chat function), else --backend, else
    ``endpoint`` with --base-url and ``hf`` without (vLLM only when asked for)."""
    if chat is not None:
        return "chat"
    if args.backend != "auto":
        return args.backend
    return "endpoint" if args.base_url else "hf"


def model_files(model: str | None) -> list[Any] | None:
    """Names, sizes and change times of a local checkpoint's files: a retrained checkpoint is another run."""
    if not model or not Path(model).is_dir():
        return None
    return sorted([f.name, f.stat().st_size, f.stat().st_mtime_ns] for f in Path(model).iterdir() if f.is_file())


def versions(env_id: str) -> dict[str, Any]:
    """The code a run was played with: the env's version, the gaca package's version and the git commit."""
    from importlib import metadata

    try:
        package = metadata.version("gaca")
    except metadata.PackageNotFoundError:
        package = None
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).resolve().parent, timeout=10,
                                capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        commit = None
    return {"env_version": gym.spec(env_id).version, "package_version": package, "git_commit": commit}


def _check_backend(args: argparse.Namespace, backend: str) -> None:
    """Fails in a second on settings that cannot play: a missing --model or --base-url, a bad URL or key."""
    if backend in ("hf", "vllm", "endpoint") and not args.model:
        raise SystemExit(f"--model is required with the {backend} backend (a checkpoint, or the served model's name)")
    if backend == "endpoint":
        if not args.base_url:
            raise SystemExit("--backend endpoint needs --base-url, e.g. http://127.0.0.1:8000/v1")
        try:
            check_base_url(args.base_url)
        except ValueError as e:
            raise SystemExit(f"evaluate: {e}") from e
        if args.api_key_env and not os.environ.get(args.api_key_env):
            raise SystemExit(f"--api-key-env {args.api_key_env}: that environment variable is not set")
    if backend in ("hf", "vllm") and not Path(args.model).expanduser().is_dir():
        from gaca_train.training.startup import check_model_source

        try:
            check_model_source(args.model)
        except ValueError as e:
            raise SystemExit(f"evaluate: --model: {e}") from e


def _compare(paths: list[str]) -> dict[str, Any]:
    try:
        (run_a, records_a), (run_b, records_b) = load_run(paths[0]), load_run(paths[1])
    except ValueError as e:
        raise SystemExit(f"evaluate: {e}") from e
    result = compare(records_a, records_b)
    if result["tasks"] == 0:
        raise SystemExit(f"evaluate: {paths[0]} and {paths[1]} share no finished task: nothing to compare")
    for key in ("env", "split"):
        if run_a.get(key) != run_b.get(key):
            print(f"evaluate: warning: the runs differ in {key} ({run_a.get(key)} vs {run_b.get(key)})",
                  file=sys.stderr)  # fmt: skip
    print(compare_markdown(str(run_a.get("policy")), str(run_b.get("policy")), result))
    return result


def main(argv: list[str] | None = None, *, chat: ChatFn | None = None) -> dict[str, Any]:
    """Runs an evaluation; returns the report (``summary``, ``episodes`` in task order, settings).

    Args:
        argv: command-line arguments.
        chat: an in-process chat-level policy (messages -> response text) to play instead of a model,
            through the same episode loop as the endpoint backend.

    Raises:
        SystemExit: for bad settings or an endpoint that fails its pre-flight check (a message), for
            errored episodes without ``--allow-errors`` (a message, after the report is written), and
            with status 130 when interrupted (the episodes in flight are recorded as interrupted).
    """
    args = parse_args(argv)
    if args.compare:
        return _compare(args.compare)
    s = resolve(args)
    backend = pick_backend(args, chat) if args.policy == "model" else args.policy
    _check_backend(args, backend)
    if args.policy == "expert":
        s["env_kwargs"].setdefault("expert", True)
    env_id, split, sampling, prompts = (s[k] for k in ("env_id", "split", "sampling", "prompts"))
    try:
        env_kwargs, task_ids = split_task_ids(env_id, s["env_kwargs"], split)
        if args.sample == "stratified" and args.max_tasks < len(task_ids):
            task_ids = sample_tasks(task_ids, args.max_tasks, task_types(env_id, env_kwargs), args.sample_seed)
    except (ValueError, TypeError, OSError) as e:
        raise SystemExit(f"evaluate: {env_id} with {json.dumps(s['env_kwargs'])}: {e}") from e
    s["env_kwargs"] = env_kwargs
    task_ids = task_ids[: args.max_tasks]
    jobs = make_jobs(task_ids, args.rollouts_per_task)
    name = "chat" if backend == "chat" else args.model if args.policy == "model" else args.policy
    endpoint = _endpoint(args, sampling) if backend == "endpoint" else None
    run = {
        "env": env_id, "env_kwargs": env_kwargs, "split": split, "policy": name, "seed": args.seed,
        "max_env_steps": prompts.max_env_steps,
        "model_files": model_files(args.model) if backend in ("hf", "vllm") else None,
        "sampling": sampling.as_dict() if args.policy == "model" else None,
        "prompt": {"system": prompts.system_prompt, "template": prompts.template,
                   "history_length": prompts.history_length, "max_admissible_actions": prompts.max_admissible_actions,
                   "hidden_actions": list(getattr(prompts, "hidden_actions", ())),
                   "action_list_style": prompts.action_list_style},
        "format_check": s["format_check"],
        "backend": backend, "base_url": args.base_url if endpoint else None,
        "model": args.model if args.policy == "model" else None,
        **versions(env_id),
        **({"eval_temperature": s["eval_temperature"]} if s["eval_temperature"] is not None else {}),
    }  # fmt: skip
    out = Path(args.out)
    try:
        if not args.no_resume:
            EpisodeLog.check(out.with_suffix(".jsonl"), run)
    except RunMismatch as e:
        raise SystemExit(f"evaluate: {e}") from e
    if endpoint is not None:
        try:
            check_endpoint(endpoint, timeout=min(PREFLIGHT_TIMEOUT, args.request_timeout))
        except (EndpointError, Interrupted) as e:
            endpoint.close()
            raise SystemExit(f"evaluate: endpoint check failed: {e}") from e
    log = EpisodeLog(out.with_suffix(".jsonl"), run, resume=not args.no_resume)
    todo = [j for j in jobs if j.key not in log.finished]
    print(f"evaluate: {env_id} split={split} {len(task_ids)} tasks x {args.rollouts_per_task} policy={name} "
          f"backend={backend} max_env_steps={prompts.max_env_steps}")  # fmt: skip
    if args.policy == "model":
        source = f" (eval_temperature of {args.config})" if s["eval_temperature"] is not None else ""
        print(f"generation: {sampling.describe()}{source}")
    print(f"episodes: {len(jobs) - len(todo)} of {len(jobs)} already in {log.path}, {len(todo)} to play")
    tic = time.perf_counter()
    try:
        _play(args, backend, chat or endpoint, todo, s, log)
    except KeyboardInterrupt:
        if endpoint is not None:
            endpoint.stop.set()
        done = len(log.finished & {j.key for j in jobs})
        print(f"evaluate: interrupted; {done} of {len(jobs)} episodes finished and saved in {log.path} (those in "
              "flight recorded as interrupted); rerun the same command to resume", file=sys.stderr)  # fmt: skip
        raise SystemExit(EXIT_INTERRUPTED) from None
    finally:
        if endpoint is not None and not endpoint.stop.is_set():
            endpoint.close()
    records = [log.records[j.key] for j in jobs if j.key in log.records]
    summary = summarise(records, max_length=prompts.max_env_steps)
    summary["seconds"] = time.perf_counter() - tic
    report = {"env": env_id, "split": split, "policy": name, "backend": backend, "settings": run,
              "summary": summary, "episodes": records}  # fmt: skip
    out.with_suffix(".json").write_text(json.dumps(report, indent=2, default=str))
    out.with_suffix(".md").write_text(markdown(name, summary))
    print(markdown(name, summary))
    failed = [r for r in records if r.get("error")]
    if failed and not args.allow_errors:
        raise SystemExit(
            f"evaluate: {len(failed)} of {len(jobs)} episodes failed (first: {failed[0]['error'][:200]}); the report "
            "leaves them out. Rerun the same command to retry them, or pass --allow-errors to accept them"
        )
    return report


def _endpoint(args: argparse.Namespace, sampling: Sampling) -> Any:
    retry = RetryPolicy(args.max_retries, args.retry_backoff, args.retry_backoff_max, args.request_timeout)
    key = os.environ.get(args.api_key_env) if args.api_key_env else None
    return endpoint_backend(args.base_url, args.model, sampling, api_key=key, retry=retry, max_rps=args.max_rps)


def _play(args: argparse.Namespace, backend: str, chat: Any, todo: list, s: dict, log: EpisodeLog) -> None:
    from tqdm.auto import tqdm

    if not todo:
        return
    tty = sys.stderr.isatty()
    bar = tqdm(total=len(todo), desc="episodes", unit="ep", mininterval=0.5 if tty else 30.0, file=sys.stderr)

    def on_record(record: dict[str, Any]) -> None:  # called one at a time
        log.append(record)
        bar.update(1)
        if record.get("error") and not record.get("interrupted"):
            bar.write(f"episode {record['task_id']} (repeat {record['repeat']}) failed: {record['error']}",
                      file=sys.stderr)  # fmt: skip

    env_id, env_kwargs, prompts = s["env_id"], s["env_kwargs"], s["prompts"]
    try:
        if backend in ("random", "expert"):
            env = gym.make(env_id, **env_kwargs)
            try:
                play_baseline_jobs(todo, env, backend, prompts.max_env_steps, on_record, seed=args.seed)
            finally:
                env.close()
        elif backend in ("chat", "endpoint"):
            play_chat_jobs(todo, lambda: gym.make(env_id, **env_kwargs), chat, prompts, on_record,
                           concurrency=args.concurrency, seed=args.seed, parse=s["parse"],
                           stop=getattr(chat, "stop", None), log_samples=args.log_samples)  # fmt: skip
        else:
            from gaca_train.evaluation import backends as eval_backends

            if backend == "vllm":
                generate, tokenizer = eval_backends.vllm_backend(args.model, s["sampling"], seed=args.seed)
            else:
                generate, tokenizer = eval_backends.hf_backend(
                    args.model, s["sampling"], device=args.device, seed=args.seed
                )
            play_token_jobs(todo, env_id, env_kwargs, generate, tokenizer, prompts, on_record,
                            batch_size=args.batch_size, vector_env=args.vector_env, seed=args.seed,
                            parse=None if s["format_check"] == "strict" else s["parse"],
                            log_samples=args.log_samples)  # fmt: skip
    finally:
        bar.close()


def cli(argv: list[str] | None = None) -> None:
    """``scripts/evaluate.py``: :func:`main`; an interrupt anywhere ends with one line and status 130."""
    try:
        main(argv)
    except KeyboardInterrupt:
        print("evaluate: interrupted", file=sys.stderr)
        raise SystemExit(EXIT_INTERRUPTED) from None
