"""Measure the estimators of a saved checkpoint or a served model against oracle advantages, on any env.

Plays ``--tasks`` task groups of ``--rollouts-per-task`` episodes with the policy (as one training
iteration would, saving each step's snapshot), computes every estimator on the batch, and measures
``--rows`` stratified rows against Monte-Carlo A* (``--continuations`` continuations each for Q and V,
:mod:`gaca_train.oracle`). Writes ``oracle.json`` (the ``oracle/*`` metrics, every row with its estimates,
the settings) to ``--out`` and prints the metrics.

The policy is a Hugging Face checkpoint (``--model``: a folder, or a model id already on disk) or an
OpenAI-compatible chat server (``--base-url``, ``--served-model``) that returns token log-probs
(``logprobs: true``, as vLLM and SGLang do); the NLL of each response is what GACA weighs, so a server
that gives no log-probs is refused. Prompts, sampling and env settings come from a training ``--config``
YAML (or the flags); the oracle samples at the config's training ``temperature`` (default 1.0), the
policy the estimators would train.

Usage:
    python scripts/oracle.py --model runs/oracle-alfworld/after_rl --config configs/quickstart_cpu_alfworld.yaml \\
        --env-kwargs '{"data_path": "runs/oracle-alfworld/games"}' --out runs/oracle-late
    python scripts/oracle.py --base-url http://127.0.0.1:8000/v1 --served-model my-agent \\
        --config configs/alfworld_gaca.yaml --out runs/oracle-served       # real ALFWorld: ALFWORLD_DATA set
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import time
from pathlib import Path
from typing import Any

import gaca_envs  # noqa: F401  (registers the env ids)
from gaca_envs.task_env import split_task_ids
from gaca_train.estimators.options import EstimatorConfig
from gaca_train.estimators.rows import StepRows
from gaca_train.experiments.evaluate import resolve
from gaca_train.oracle.metrics import run_oracle_pass
from gaca_train.oracle.monte_carlo import OracleConfig
from gaca_train.rollout.episodes import Decision, Turn, play
from gaca_train.rollout.policy import LLMPolicy
from gaca_train.rollout.vector import RolloutPool

__all__ = ["EndpointLogprobPolicy", "main"]


class EndpointLogprobPolicy:
    """A served chat model as an episode-loop policy whose decisions carry the response's mean token NLL.

    Args:
        endpoint: a :class:`~gaca_train.evaluation.endpoint.ChatEndpoint` (its ``request`` sends one try).
        prompts: the run's :class:`~gaca_train.rollout.prompts.PromptBuilder`.
        parse: reads a response into an action.
        sampling: request fields (temperature, top_p, max_tokens).
        timeout: seconds for one answer.
        seed: request seeds are ``seed`` plus a counter, so a rerun asks the same.
    """

    def __init__(self, endpoint: Any, prompts: Any, parse: Any, sampling: dict[str, Any], timeout: float = 120.0,
                 seed: int = 0) -> None:  # fmt: skip
        self.endpoint, self.prompts, self.parse, self.sampling = endpoint, prompts, parse, sampling
        self.timeout, self.seed, self.calls = timeout, seed, 0

    def act(self, turns: list[Turn]) -> list[Decision]:  # noqa: D102
        out = []
        for t in turns:
            messages = self.prompts.messages(t.info["task"], t.step, t.observation, t.info["admissible_actions"],
                                             t.history)  # fmt: skip
            text, logps = self._complete(messages)
            parsed = self.parse(text)
            nll = -sum(logps) / len(logps)
            out.append(Decision(parsed.action, valid=parsed.valid, shown=parsed.action, nll=nll,
                                data={"response": text, "logps": logps}))  # fmt: skip
        return out

    def _complete(self, messages: list[dict[str, str]]) -> tuple[str, list[float]]:
        self.calls += 1
        body = {"model": self.endpoint.model, "messages": messages, "n": 1, "logprobs": True,
                "seed": self.seed + self.calls, **self.sampling}  # fmt: skip
        status, _, raw = self.endpoint.request("POST", "/chat/completions", json.dumps(body).encode(), self.timeout)
        if status != 200:
            raise RuntimeError(f"HTTP {status} from {self.endpoint.url}: {raw[:300].decode(errors='replace')}")
        try:
            choice = json.loads(raw)["choices"][0]
            text = choice["message"]["content"] or ""
            logprobs = [float(tok["logprob"]) for tok in (choice.get("logprobs") or {}).get("content") or []]
        except (ValueError, KeyError, IndexError, TypeError) as e:
            raise RuntimeError(f"{self.endpoint.url} answered a malformed body: {raw[:200]!r}") from e
        if not logprobs:
            raise RuntimeError(
                f"{self.endpoint.url} returned no token log-probs (choices[0].logprobs.content): the oracle needs "
                "each response's NLL; serve the model with an OpenAI-compatible server that honours logprobs=true "
                "(vLLM, SGLang)"
            )
        return text, logprobs


def _policy(args: argparse.Namespace, s: dict[str, Any]) -> tuple[Any, Any]:
    """The policy of ``--model`` (token level) or ``--base-url`` (chat level), and what to close after."""
    if args.base_url:
        from gaca_train.evaluation.endpoint import ChatEndpoint

        endpoint = ChatEndpoint(args.base_url, args.served_model, api_key=os.environ.get("OPENAI_API_KEY"))
        sampling = {"temperature": s["sampling"].temperature, "top_p": s["sampling"].top_p,
                    "max_tokens": s["sampling"].max_new_tokens}  # fmt: skip
        return EndpointLogprobPolicy(endpoint, s["prompts"], s["parse"], sampling, args.timeout, args.seed), endpoint
    from gaca_train.evaluation import backends as eval_backends

    generate, tokenizer = eval_backends.hf_backend(args.model, s["sampling"], seed=args.seed)
    return LLMPolicy(generate, tokenizer, s["prompts"], batch_size=args.batch_size, parse=s["parse"]), None


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def _row(t: Any, group: int, config: dict[str, Any]) -> dict[str, Any]:
    """A step row as the trainer builds it (``RolloutResult.to_step_rows``) under the config's settings."""
    data = t.decision.data
    logps = data[2] if isinstance(data, tuple) else data["logps"]
    nll = -sum(logps) / (len(logps) if config.get("nll_reduction", "mean") == "mean" else 1)
    anchor = t.info["anchor_key"] if config.get("anchor", "state") == "state" else t.info["anchor_text"]
    reward = t.reward * float(config.get("reward_scale", 1.0))
    return {"group": group, "traj": t.env_index, "step": t.step, "anchor_key": anchor, "reward": reward, "nll": nll,
            "valid": t.decision.valid}  # fmt: skip


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line (``--help``)."""
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    who = p.add_mutually_exclusive_group(required=True)
    who.add_argument("--model", help="Hugging Face checkpoint: a folder or a model id on disk")
    who.add_argument("--base-url", help="OpenAI-compatible API root of a served model, e.g. http://127.0.0.1:8000/v1")
    p.add_argument("--served-model", default="default", help="the served model's name (with --base-url)")
    p.add_argument("--config", help="training YAML: env, prompts, sampling and estimator settings")
    p.add_argument("--env", help="env id (default: the config's)")
    p.add_argument("--env-kwargs", type=json.loads, default=None, help="JSON env kwargs over the config's")
    p.add_argument("--split", help="task split (default: the config's training split)")
    p.add_argument("--tasks", type=int, default=8, help="task groups played (default %(default)s)")
    p.add_argument("--rollouts-per-task", type=int, default=8, help="episodes per task (default %(default)s)")
    p.add_argument("--rows", type=int, default=32, help="rows measured (default %(default)s)")
    p.add_argument("--continuations", type=int, default=8, help="continuations per row, Q and V (default %(default)s)")
    p.add_argument("--batch-size", type=int, default=None, help="most prompts per generate call (--model)")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds per served answer (--base-url)")
    p.add_argument("--seed", type=int, default=0, help="seeds tasks, envs, picks and sampling")
    p.add_argument("--out", required=True, help="output folder (oracle.json)")
    args = p.parse_args(argv)
    for name in ("tasks", "rollouts_per_task", "rows"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}")
    if args.continuations < 2:
        p.error(f"--continuations must be at least 2 (a variance needs two), got {args.continuations}")
    return args


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Runs the measurement; returns what it writes to ``oracle.json``."""
    import yaml

    args = parse_args(argv)
    config = yaml.safe_load(Path(args.config).read_text()) if args.config else {}
    # resolve() reads evaluate's flags: the oracle's sampling is the config's training temperature.
    flags = argparse.Namespace(config=args.config, env=args.env, env_kwargs=args.env_kwargs, split=args.split,
                               top_k=None, temperature=float(config.get("temperature", 1.0)), top_p=None,
                               max_new_tokens=None, greedy=False, max_env_steps=None, history_length=None,
                               max_admissible_actions=None, format_check=None)  # fmt: skip
    s = resolve(flags)
    env_id, env_kwargs = s["env_id"], dict(s["env_kwargs"])
    config_kwargs = config.get("env_kwargs") or {}
    config_kwargs = json.loads(config_kwargs) if isinstance(config_kwargs, str) else config_kwargs
    env_kwargs.pop("split", None)
    split = args.split or (args.env_kwargs or {}).get("split") or config_kwargs.get("split")
    env_kwargs, all_ids = split_task_ids(env_id, env_kwargs, split)
    options = EstimatorConfig(**{k: config[k] for k in EstimatorConfig.option_names() if k in config})
    task_ids = random.Random(args.seed).sample(list(all_ids), min(args.tasks, len(all_ids)))
    slots = [t for t in task_ids for _ in range(args.rollouts_per_task)]
    policy, closer = _policy(args, s)
    pool = RolloutPool(env_id, len(slots), env_kwargs, mode="sync")
    tic = time.perf_counter()
    try:
        played = play(pool, slots, policy, s["prompts"].max_env_steps, seed=args.seed, save_snapshots=True)
        group = {t: g for g, t in enumerate(task_ids)}
        rows = StepRows.from_steps([_row(t, group[slots[t.env_index]], config) for t in played.transitions])
        oracle = OracleConfig(rows=args.rows, continuations=args.continuations, seed=args.seed)
        done = run_oracle_pass(pool, played.transitions, played.histories, rows, policy, options, oracle,
                               max_env_steps=s["prompts"].max_env_steps, iteration=0,
                               reward_scale=float(config.get("reward_scale", 1.0)))  # fmt: skip
    finally:
        pool.close()
        if closer is not None:
            closer.close()
    report = {
        "env_id": env_id,
        "env_kwargs": env_kwargs,
        "policy": args.model or f"{args.base_url} ({args.served_model})",
        "tasks": task_ids,
        "episodes": len(played.episodes),
        "success_rate": sum(e.won for e in played.episodes) / max(len(played.episodes), 1),
        "rows_played": len(rows),
        "seconds": time.perf_counter() - tic,
        "metrics": done.metrics,
        "records": [
            {**r, "mc_a_star": a, "mc_variance": v}
            for r, a, v in zip(done.rows.to_records(), done.estimates.advantage, done.estimates.variance)
        ],  # fmt: skip
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "oracle.json").write_text(json.dumps(_finite(report), indent=1))  # NaN (undefined) -> null
    keys = ("risk", "nmse", "pearson", "sign")
    print(f"oracle: {env_id}, {len(task_ids)} tasks x {args.rollouts_per_task}, success {report['success_rate']:.3f}, "
          f"{len(rows)} rows, {int(done.metrics['oracle/rows'])} measured in {report['seconds']:.0f} s")  # fmt: skip
    for e in ("grpo", "gigpo", "gaca", "reweight"):
        print(f"  {e:9s} " + "  ".join(f"{k} {done.metrics[f'oracle/{e}/{k}']:+.3f}" for k in keys))
    print(f"  alignment rho {done.metrics['oracle/alignment/rho']:+.4f} (dR/deta at 0 "
          f"{done.metrics['oracle/alignment/slope']:+.4f}); wrote {out / 'oracle.json'}")  # fmt: skip
    return report
