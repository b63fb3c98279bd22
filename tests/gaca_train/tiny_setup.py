"""Shared fakes for the trainer tests: a tiny local model and tokenizer, and a small config."""

from __future__ import annotations

import functools
from typing import Any

from gaca_envs.criticalchain import CriticalChainEnv
from gaca_train.experiments.tiny import build_tiny_model, build_tokenizer, cpu_run_defaults
from gaca_train.rollout.prompts import prompt_templates
from gaca_train.training.config import GACAConfig

ENV_KWARGS = {"horizon": 3, "num_branches": 1, "num_tasks": 2, "max_env_steps": 4}


def env_corpus(env_kwargs: dict[str, Any] = ENV_KWARGS, n_tasks: int = 2) -> list[str]:
    """Texts of the CriticalChain env (observations, actions, templates) for the tokenizer vocabulary."""
    texts = [" ".join(t) for t in prompt_templates()] + [
        "' [ ] 0 1 2 3 4 5 6 7 8 9 10 Step Observation Action Your last"
    ]
    env = CriticalChainEnv(**{**env_kwargs, "expert": True})
    for task in env.task_ids("train")[:n_tasks]:
        obs, info = env.reset(options={"task_id": task})
        done = False
        while not done:
            texts += [obs, info["task"], " ".join(info["admissible_actions"])]
            obs, _, term, trunc, info = env.step(info["expert_action"])
            done = term or trunc
        texts.append(obs)
    return texts


def tiny_model_and_tokenizer(seed: int = 0):
    tokenizer = build_tokenizer(env_corpus())
    return build_tiny_model(tokenizer, seed=seed), tokenizer


def tiny_config(tmp_path, **overrides: Any) -> GACAConfig:
    base = dict(
        output_dir=str(tmp_path / "out"),
        env_id="GACA-CriticalChain-v0",
        env_kwargs=dict(ENV_KWARGS),
        vector_env="sync",
        tasks_per_iteration=2,
        rollouts_per_task=2,
        max_env_steps=4,
        max_completion_length=8,
        learning_rate=1e-2,
        max_steps=1,
        **cpu_run_defaults(),
    )
    base.update(overrides)
    return GACAConfig(**base)


def expert_examples(
    tokenizer, env_kwargs: dict[str, Any] = ENV_KWARGS, n_tasks: int = 2
) -> list[tuple[list[int], list[int]]]:
    """(prompt ids, response ids) of expert steps, rendered exactly as the rollout renders them."""
    from gaca_train.rollout.prompts import PromptBuilder, template_for

    system, template = template_for("GACA-CriticalChain-v0")
    builder = PromptBuilder(system, template, history_length=2, max_env_steps=env_kwargs["max_env_steps"])
    env = CriticalChainEnv(**{**env_kwargs, "expert": True})
    examples = []
    for task in env.task_ids("train")[:n_tasks]:
        obs, info = env.reset(options={"task_id": task})
        history, done, step = [], False, 0
        while not done:
            messages = builder.messages(info["task"], step, obs, info["admissible_actions"], history)
            prompt = tokenizer.apply_chat_template(
                messages, add_generation_prompt=True, tokenize=True, return_dict=True
            )
            action = info["expert_action"]
            response = tokenizer(f"<think> </think> <action> {action} </action>")["input_ids"] + [
                tokenizer.eos_token_id
            ]
            examples.append((list(prompt["input_ids"]), response))
            history.append((obs, action))
            obs, _, term, trunc, info = env.step(action)
            done, step = term or trunc, step + 1
    return examples


def warm_started_model_and_tokenizer(steps: int = 60, seed: int = 0):
    """A fresh copy of the tiny model after supervised steps on expert responses (it mostly answers in format).

    The warm start runs once per (steps, seed) per test session; each call returns a new model.
    """
    state, tokenizer = _warm_start(steps, seed)
    model = build_tiny_model(tokenizer, seed=seed)
    model.load_state_dict(state)
    return model, tokenizer


@functools.cache
def _warm_start(steps: int, seed: int):
    import torch

    model, tokenizer = tiny_model_and_tokenizer(seed)
    examples = expert_examples(tokenizer)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    torch.manual_seed(seed)
    for _ in range(steps):
        loss = 0.0
        for prompt, response in examples:
            ids = torch.tensor([prompt + response])
            labels = torch.tensor([[-100] * len(prompt) + response])
            loss = loss + model(input_ids=ids, labels=labels).loss
        optimizer.zero_grad()
        (loss / len(examples)).backward()
        optimizer.step()
    return {k: v.detach().clone() for k, v in model.state_dict().items()}, tokenizer


# A scripted policy: its response is a function of the prompt alone, so a run plays the same episodes
# whatever the batch composition or the number of ranks (sampling would not). One response is malformed,
# so validity, and with it the advantages, differ within a group.
SCRIPTED_RESPONSES = (
    "<think> </think> <action> walk to the archway </action>",
    "<think> </think> <action> take the indigo road </action>",
    "<think> </think> <action> take the olive road </action>",
    "<think> </think> <action> check the map </action>",
    "<action> walk",
)


def scripted_generate(tokenizer):
    """A :data:`gaca_train.rollout.prompts.GenerateFn` answering each prompt with one of ``SCRIPTED_RESPONSES``."""
    answers = [tokenizer(r)["input_ids"] + [tokenizer.eos_token_id] for r in SCRIPTED_RESPONSES]

    def generate(prompt_ids):
        ids = [answers[(sum(p) * 31 + len(p)) % len(answers)] for p in prompt_ids]
        return ids, [[-0.5] * len(a) for a in ids]

    return generate


def scripted_trainer_class():
    """``GACATrainer`` whose rollouts use :func:`scripted_generate` (the loss still runs the real model)."""
    from gaca_train.training.trainer import GACATrainer

    class ScriptedTrainer(GACATrainer):
        def _generate_fn(self, model):
            return scripted_generate(self.processing_class)

    return ScriptedTrainer
