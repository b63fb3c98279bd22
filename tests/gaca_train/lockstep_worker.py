"""One rank of the two-process lockstep test (``test_rollout_distributed.py``); run with torchrun.

Each rank plays CriticalChain episodes through TRL's real ``VLLMGeneration.generate`` in server
mode, which gathers every rank's prompts, generates on rank 0 and hands rank ``r`` the slice
``[r * n, (r + 1) * n)`` of the answers. Only the vLLM server (a GPU) is replaced: the stand-in
client's completion is a function of its prompt, so each rank can check that it got the answers to
its own prompts. The ranks differ in how many envs they play (2 and 3) and in how long their
episodes last (2 and 5 steps), as ranks of a real multi-turn run do.

Writes ``{out}/rank{r}.json``: episode lengths, the prompt count of every generate call, whether
every completion matched its prompt, and (with ``--branching``, each rank's group a tree) the parents.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from accelerate import Accelerator
from trl.generation.vllm_generation import VLLMGeneration

from gaca_train.experiments.tiny import build_tokenizer
from gaca_train.rollout.branching import Branching
from gaca_train.rollout.policy import max_over_ranks, run_rollout
from gaca_train.rollout.prompts import PromptBuilder, template_for
from gaca_train.rollout.vector import RolloutPool
from tests.gaca_train.tiny_setup import ENV_KWARGS, env_corpus


def answer_to(prompt: list[int]) -> list[int]:
    """The stand-in server's completion of ``prompt``: 2 tokens that identify it."""
    return [sum(prompt) % 97 + 3, len(prompt) % 97 + 3]


class _ServerStandIn:
    """``VLLMClient.generate``'s contract (runs on rank 0 only): one completion per prompt."""

    def generate(self, prompts, n=1, **_sampling):
        assert n == 1
        return {
            "prompt_ids": prompts,
            "completion_ids": [answer_to(p) for p in prompts],
            "logprobs": [[[-0.5], [-0.25]] for _ in prompts],
        }


class _ServerModeGeneration(VLLMGeneration):
    """TRL's server-mode generation with the stand-in in place of the HTTP client to a vLLM server."""

    def _init_vllm(self) -> None:
        if self.accelerator.is_main_process:
            self.vllm_client = _ServerStandIn()


def main(out: Path, lockstep: bool, branching: bool = False) -> None:
    accelerator = Accelerator(cpu=True)
    rank = accelerator.process_index
    tokenizer = build_tokenizer(env_corpus())
    vllm = _ServerModeGeneration(model=None, accelerator=accelerator, processing_class=tokenizer, mode="server")
    calls: list[int] = []

    def generate(prompt_ids):
        calls.append(len(prompt_ids))
        _, ids, logprobs, _ = vllm.generate(prompts=prompt_ids, images=None, num_generations=1)
        return ids, [[lp[0] for lp in seq] for seq in logprobs]

    n_envs, episode_steps = (2, 2) if rank == 0 else (3, 5)
    pool = RolloutPool("GACA-CriticalChain-v0", n_envs, {**ENV_KWARGS, "max_env_steps": episode_steps}, mode="sync")
    system, template = template_for("GACA-CriticalChain-v0")
    builder = PromptBuilder(system, template, history_length=2, max_env_steps=6)
    try:
        result = run_rollout(
            pool,
            ["train-0"] * n_envs,
            generate,
            tokenizer,
            builder,
            seed=rank,
            batch_size=2,
            lockstep=max_over_ranks(accelerator) if lockstep else None,
            # --branching: each rank's group is a tree (1 root, 1 point, 1 continuation): two waves on every rank
            branching=Branching("uniform", roots=1, points=1, continuations=1, budget="fixed") if branching else None,
        )
    finally:
        pool.close()
    report = {
        "lengths": [e.length for e in result.episodes],
        "calls": calls,
        "answers_match": all(s.completion_ids == answer_to(s.prompt_ids) for s in result.steps),
        "steps": len(result.steps),
        "parents": result.parents,
    }
    (out / f"rank{rank}.json").write_text(json.dumps(report))
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main(Path(sys.argv[1]), lockstep="--no-lockstep" not in sys.argv, branching="--branching" in sys.argv)
