"""Build a tiny local model and tokenizer for an env, optionally warm-started on expert steps.

    python scripts/make_tiny_model.py --env GACA-CriticalChain-v0 --out outputs/tiny-criticalchain \
        --env-kwargs '{"horizon": 6, "num_branches": 2}' --sft-steps 200

The tokenizer's vocabulary is the words of the env's rendered prompts (no download); the model is
a randomly initialised LLaMA-architecture decoder of a few ten thousand parameters. With ``--sft-steps`` it is
fine-tuned with TRL's ``SFTTrainer`` on expert (prompt, response) pairs, rendered exactly as the
rollout renders them, when the env offers ``info["expert_action"]`` (``expert=True``).
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path
from typing import Any

import gymnasium as gym

import gaca_envs  # noqa: F401  (registers the GACA env ids)
from gaca_train.rollout import TEMPLATES, PromptBuilder, template_for
from gaca_train.tiny import build_tiny_model, build_tokenizer, save_tiny_model
from gaca_train.vector import env_task_ids


def expert_steps(
    env_id: str,
    env_kwargs: dict[str, Any],
    task_ids: list[str],
    history_length: int,
    max_steps: int,
    seed: int,
    fork_noise: float = 0.0,
    step_noise: float = 0.0,
    prompts: PromptBuilder | None = None,
    train_on_noise: bool = True,
    invalid_noise: float = 0.0,
    searching: float = 0.0,
) -> list[tuple[list[dict[str, str]], str]]:
    """(chat messages, response) per step of expert episodes; random admissible actions if no expert.

    With ``fork_noise`` p, at states the env marks ``info["fork"]`` the demonstrated action is a random
    admissible one with probability p: the warm-started policy then walks well but guesses at forks,
    which leaves RL a credit-assignment problem to solve. With ``step_noise`` p, any step's demonstration
    is a random admissible action with probability p (the expert then recovers from the state it leads to).
    ``prompts`` renders the steps (default: the env family's template with ``history_length``), so the
    demonstrations look exactly like the prompts of the run that uses them. With ``train_on_noise=False``
    a random step is played but not kept as a demonstration: the data then shows recovering from a
    random action (in the history) without teaching to take one. With ``invalid_noise`` p, before a
    step the episode plays, with probability p, an action the env rejects (the previous action again,
    or one that was admissible a step ago and is not now), never kept as a demonstration: the next
    demonstration then shows what to do after the env's "Nothing happens.", the state a policy's own
    mistakes lead to and that experts never reach. With ``searching`` q (ALFWorld), a share q of the
    games is demonstrated by :class:`~gaca_envs.alfworld.baseline.SearchingAgent` in a random search
    order instead of the privileged expert (no noise in those games): it reads only the text, so its
    demonstrations show looking for the object, and taking it only where it is seen.
    """
    if prompts is None:
        system, template = template_for(env_id)
        prompts = PromptBuilder(system, template, history_length, max_steps)
    env = gym.make(env_id, **{**env_kwargs, "expert": True})
    rng = random.Random(seed)
    pairs = []
    for task in task_ids:
        obs, info = env.reset(seed=seed, options={"task_id": task})
        history: list[tuple[str, str]] = []
        previous: list[str] = []  # the admissible actions one step ago
        searcher = None
        if searching and rng.random() < searching:
            from gaca_envs.alfworld.baseline import SearchingAgent

            searcher = SearchingAgent(obs, rng=random.Random(rng.random()))
        for step in range(max_steps):
            if searcher is not None:
                action = searcher.act(obs if step else None)
                pairs.append((prompts.messages(info["task"], step, obs, info["admissible_actions"], history),
                              f"<think> </think> <action> {action} </action>"))  # fmt: skip
                history.append((obs, action))
                obs, _, terminated, truncated, info = env.step(action)
                if terminated or truncated:
                    break
                continue
            if invalid_noise and history and rng.random() < invalid_noise:
                now = set(info["admissible_actions"])
                rejected = [history[-1][1]] if history[-1][1] not in now else sorted(set(previous) - now)
                if rejected:
                    action = rng.choice(rejected)
                    history.append((obs, action))
                    previous = info["admissible_actions"]
                    obs, _, terminated, truncated, info = env.step(action)
                    if terminated or truncated:
                        break
                    continue
            action = info.get("expert_action") or rng.choice(info["admissible_actions"])
            noise = False
            if info.get("fork") and rng.random() < fork_noise:
                action = rng.choice([a for a in info["admissible_actions"] if a.startswith("take")] or [action])
            elif step_noise and rng.random() < step_noise:
                action, noise = rng.choice(info["admissible_actions"]), True
            if train_on_noise or not noise:
                messages = prompts.messages(info["task"], step, obs, info["admissible_actions"], history)
                pairs.append((messages, f"<think> </think> <action> {action} </action>"))
            history.append((obs, action))
            previous = info["admissible_actions"]
            obs, _, terminated, truncated, info = env.step(action)
            if terminated or truncated:
                break
    env.close()
    return pairs


def sft_warm_start(model: Any, tokenizer: Any, pairs: list[tuple[list[dict[str, str]], str]], args: Any) -> None:
    """Supervised fine-tuning on the expert responses with TRL's SFTTrainer (completion-only loss)."""
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    prompts = [tokenizer.apply_chat_template(m, add_generation_prompt=True, tokenize=False) for m, _ in pairs]
    data = Dataset.from_dict({"prompt": prompts, "completion": [r for _, r in pairs]})
    config = SFTConfig(
        output_dir=str(Path(args.out) / "sft"),
        max_steps=args.sft_steps,
        per_device_train_batch_size=min(16, len(pairs)),
        learning_rate=args.sft_lr,
        lr_scheduler_type="constant",
        logging_steps=max(1, args.sft_steps // 5),
        save_strategy="no",
        report_to="none",
        bf16=False,
        use_cpu=args.cpu,
        gradient_checkpointing=False,
        seed=args.seed,
        completion_only_loss=True,
        disable_tqdm=True,
    )
    SFTTrainer(model=model, args=config, train_dataset=data, processing_class=tokenizer).train()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="GACA-CriticalChain-v0", help="Gymnasium env id")
    parser.add_argument("--env-kwargs", default="{}", help="JSON object of gym.make keyword arguments")
    parser.add_argument("--out", required=True, help="output folder (model + tokenizer)")
    parser.add_argument("--split", default="train", help="task split used for the vocabulary and warm start")
    parser.add_argument("--num-tasks", type=int, default=50, help="tasks rendered for the vocabulary / warm start")
    parser.add_argument("--history-length", type=int, default=2)
    parser.add_argument("--max-steps", type=int, default=20, help="episode step limit shown in prompts")
    parser.add_argument("--hidden-size", type=int, default=64)
    parser.add_argument("--num-layers", type=int, default=2)
    parser.add_argument("--sft-steps", type=int, default=0, help="supervised warm-start steps (0: none)")
    parser.add_argument("--sft-lr", type=float, default=3e-3)
    parser.add_argument("--fork-noise", type=float, default=0.0, help="random demonstrations at forks (0-1)")
    parser.add_argument("--step-noise", type=float, default=0.0, help="random demonstrations at any step (0-1)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cpu", action="store_true", help="force CPU for the warm start")
    args = parser.parse_args()
    env_kwargs = json.loads(args.env_kwargs)

    probe = gym.make(args.env, **env_kwargs)
    task_ids = env_task_ids(probe.unwrapped, args.split)
    probe.close()
    if not task_ids:
        raise SystemExit(f"{args.env} offers no task ids for split {args.split!r}; cannot build a warm start")
    task_ids = task_ids[: args.num_tasks]
    pairs = expert_steps(
        args.env,
        env_kwargs,
        task_ids,
        args.history_length,
        args.max_steps,
        args.seed,
        args.fork_noise,
        args.step_noise,
    )
    corpus = [m["content"] for messages, _ in pairs for m in messages] + [r for _, r in pairs]
    corpus += [" ".join(t) for t in TEMPLATES.values()]
    tokenizer = build_tokenizer(corpus)
    model = build_tiny_model(tokenizer, hidden_size=args.hidden_size, num_layers=args.num_layers, seed=args.seed)
    if args.sft_steps:
        sft_warm_start(model, tokenizer, pairs, args)
    path = save_tiny_model(model, tokenizer, args.out)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"saved {n_params} parameters, vocabulary {len(tokenizer)}, {len(pairs)} expert steps -> {path}")


if __name__ == "__main__":
    main()
