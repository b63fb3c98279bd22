"""GPU smoke run: 2 GACA iterations of a Qwen2.5-1.5B-shaped model at the paper config's precision and micro-batch,
in each update layout (packed, then padded).

    bash scripts/gpu_wheelhouse.sh    # where the package registry is reachable: the wheels, in .whl/gpu
    bash scripts/gpu_smoke.sh         # on the GPU machine, offline: installs .whl/gpu, then runs this file
    bash scripts/gpu_smoke.sh --tiny  # the same chain on the CPU with a 2-layer model

Nothing is downloaded. The model is randomly initialised with Qwen2.5-1.5B-Instruct's sizes except its
vocabulary, which is the word-level tokenizer's own (built from the generated games' text), so every sampled
id decodes to a word. From ``--config`` (configs/alfworld_gaca.yaml) the run takes the precision (``dtype``
master weights, ``bf16`` autocast), gradient checkpointing, the KL reference model (``beta``), prompt and
completion lengths, ``micro_batch_tokens``, ``mini_batch_rows``, the estimator and the learning rate; it
plays 4 tasks x 4 rollouts x 5 steps per iteration, whose rows fill at least one micro-batch to within a
row of ``micro_batch_tokens``. Generation is vLLM colocated where vLLM is importable, else HF generate.
Prints, and writes to ``<out>/gpu_smoke.json`` (and ``$OUT`` if set): rollout and update tokens/s, the
largest micro-batch (computed tokens), peak GPU memory against the memory plan for the same settings
(``gaca_train.training.memory.plan_for_fields``), and the fraction of parameters the two updates changed, for the
first layout of ``--layouts``; under ``layouts``, each layout's iteration seconds, update tokens/s (row
tokens and computed tokens), largest micro-batch and peak memory, and ``packed_over_padded``, the ratio of
their update seconds. ``--tiny`` prints the same keys (peak memory null).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from importlib import metadata
from pathlib import Path

# The batch, scaled down from the paper's 16 x 8 x 50: 80 rows of up to max_completion_length tokens.
SMOKE_FIELDS = {"tasks_per_iteration": 4, "rollouts_per_task": 4, "max_env_steps": 5, "max_steps": 2}
# --tiny: short rows, and a budget that 80 of them fill several times over.
TINY_FIELDS = {"max_completion_length": 16, "max_prompt_length": 512, "micro_batch_tokens": 1024}
# Paper-config keys that the smoke run sets itself (besides ModelConfig's, which GACAConfig lacks, and eval_*).
NOT_COPIED = {"model_name_or_path", "dtype", "output_dir", "env_id", "env_kwargs", "task_split", "vector_env",
              "save_steps", "report_to", "use_vllm", "logging_steps"}  # fmt: skip


def check_image(requirements_file: Path) -> None:
    """Stops, naming each one, if a distribution that the carried wheels need is not installed.

    Args:
        requirements_file: ``image-requirements.txt`` of the wheelhouse (``name<specifier>  # needed by``).

    Raises:
        SystemExit: listing the missing distributions. A version outside the specifier is only a warning:
            the pins are the carried packages' own, and the import is the real test.
    """
    from packaging.requirements import Requirement

    missing, warnings = [], []
    for line in requirements_file.read_text().splitlines():
        spec, _, needed_by = line.partition("#")
        if not spec.strip():
            continue
        req = Requirement(spec.strip())
        try:
            version = metadata.version(req.name)
        except metadata.PackageNotFoundError:
            missing.append(f"{req} (needed by {needed_by.strip()})")
            continue
        if not req.specifier.contains(version, prereleases=True):
            warnings.append(f"{req.name} {version} is outside {req} (needed by {needed_by.strip()})")
    for warning in sorted(set(warnings)):
        print(f"gpu_smoke: warning: {warning}", file=sys.stderr)
    if missing:
        raise SystemExit(
            "gpu_smoke: this Python lacks what the carried wheels need: " + "; ".join(missing) + ". Install it in "
            "the image, or download its wheel for this Python (pip download --no-deps --only-binary=:all: "
            "--python-version 3.12 --platform manylinux2014_x86_64 NAME) into the wheelhouse and carry it too"
        )
    print(f"gpu_smoke: the image has what the wheels need ({requirements_file})")


def paper_fields(config: Path) -> dict:
    """The training YAML's fields (``configs/alfworld_gaca.yaml``)."""
    import yaml

    return yaml.safe_load(config.read_text())


def game_corpus(games: Path) -> list[str]:
    """The words of the generated games: every observation, task and admissible action on the expert's path."""
    import gymnasium as gym

    from gaca_envs.task_env import NOTHING_HAPPENS
    from gaca_train.rollout.episodes import BaselinePolicy, EnvList, play
    from gaca_train.rollout.prompts import prompt_templates

    env = gym.make("GACA-ALFWorld-v0", data_path=str(games), split="train", expert=True)
    corpus = [" ".join(t) for t in prompt_templates()] + [NOTHING_HAPPENS]
    try:
        for task in env.unwrapped.task_ids:
            played = play(EnvList([env]), [task], BaselinePolicy("expert", env_name="GACA-ALFWorld-v0"), None)
            corpus.append(played.transitions[0].info["task"])
            for t in played.transitions:
                corpus += [t.observation, " ".join(t.info["admissible_actions"])]
    finally:
        env.close()
    return corpus


def build_model(out: Path, games: Path, dtype: str, tiny: bool) -> Path:
    """A random Qwen2.5-1.5B-shaped model (``tiny``: 2 small layers) over a word-level tokenizer, saved to ``out``.

    The vocabulary is the tokenizer's (``len(tokenizer)``): the embedding of Qwen2.5's 151,936 ids would
    give ids that decode to nothing, and responses that never end.
    """
    import dataclasses

    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from gaca_train.experiments.tiny import build_tokenizer, save_tiny_model
    from gaca_train.training.memory import ARCHITECTURES, Architecture

    corpus = game_corpus(games)
    tokenizer = build_tokenizer(corpus)
    arch = dataclasses.replace(ARCHITECTURES["Qwen/Qwen2.5-1.5B-Instruct"], vocab_size=len(tokenizer))
    if tiny:
        arch = Architecture(64, 2, 128, 4, 2, len(tokenizer), True)
    config = Qwen2Config(
        vocab_size=arch.vocab_size, hidden_size=arch.hidden_size, intermediate_size=arch.intermediate_size,
        num_hidden_layers=arch.num_layers, num_attention_heads=arch.num_heads, num_key_value_heads=arch.num_kv_heads,
        tie_word_embeddings=arch.tie_word_embeddings, max_position_embeddings=32768, dtype=dtype,
        bos_token_id=None, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
    )  # fmt: skip
    torch.manual_seed(0)
    with torch.device("cpu" if tiny else "cuda"):  # initialising 1.5B weights on the CPU takes a minute
        model = Qwen2ForCausalLM(config).to(getattr(torch, dtype))
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.bos_token_id = None
    path = save_tiny_model(model, tokenizer, out)
    del model
    if not tiny:
        torch.cuda.empty_cache()
    return path


def smoke_config(paper: dict, out: Path, tiny: bool, use_vllm: bool, layout: str = "packed"):
    """GACAConfig: the paper config's fields with :data:`SMOKE_FIELDS` (and on ``tiny`` :data:`TINY_FIELDS`)."""
    import dataclasses

    from gaca_train.training.config import GACAConfig

    names = {f.name for f in dataclasses.fields(GACAConfig)}
    fields = {k: v for k, v in paper.items() if k in names and k not in NOT_COPIED and not k.startswith("eval")}
    fields.update(SMOKE_FIELDS, update_layout=layout)
    if tiny:
        fields.update(TINY_FIELDS, bf16=False, use_cpu=True)
    env_kwargs = {"data_path": str(out / "games"), "split": "train", "engine": "native"}
    return GACAConfig(
        output_dir=str(out / "run"), env_id="GACA-ALFWorld-v0", env_kwargs=env_kwargs, vector_env="sync",
        allow_generated_data=True, use_vllm=use_vllm, logging_steps=1, save_strategy="no", report_to="none",
        disable_tqdm=True, model_init_kwargs={"dtype": paper.get("dtype") or "float32"}, **fields,
    )  # fmt: skip


def smoke_trainer_class():
    """GACATrainer that records the largest micro-batch (computed tokens of one pass) and each iteration's time."""
    from gaca_train.training.trainer import GACATrainer

    class SmokeTrainer(GACATrainer):
        largest_micro_batch = 0
        iteration_seconds: list[float] = []

        def _get_per_token_logps_and_entropies(self, *args, **kwargs):
            before = self._computed_tokens
            out = super()._get_per_token_logps_and_entropies(*args, **kwargs)
            self.largest_micro_batch = max(self.largest_micro_batch, self._computed_tokens - before)
            return out

        def training_step(self, *args, **kwargs):
            tic = time.perf_counter()
            loss = super().training_step(*args, **kwargs)
            self.iteration_seconds = [*self.iteration_seconds, time.perf_counter() - tic]
            return loss

    return SmokeTrainer


def parameter_copy(model) -> dict:
    """The model's parameters (tied ones once), copied to the CPU."""
    return {name: p.detach().to("cpu", copy=True) for name, p in model.named_parameters()}


def changed_fraction(before: dict, model) -> float:
    """The fraction of parameter elements that differ from ``before``."""
    changed = total = 0
    for name, p in model.named_parameters():
        changed += int((p.detach().cpu() != before[name]).sum())
        total += p.numel()
    return changed / total


def memory_plan(config, model_dir: Path, paper: dict, min_prompt_tokens: int, gpu: bool) -> dict:
    """``plan_for_fields`` for the smoke run's own settings (its model folder, shortest prompt, GPU and layout)."""
    import torch

    from gaca_train.training.memory import plan_for_fields

    keys = ("micro_batch_tokens", "max_completion_length", "gradient_checkpointing", "beta", "bf16", "use_vllm",
            "vllm_mode", "vllm_gpu_memory_utilization", "vllm_enable_sleep_mode", "update_layout",
            "pack_length")  # fmt: skip
    fields = {k: getattr(config, k) for k in keys if hasattr(config, k)}
    fields.update(model_name_or_path=str(model_dir), dtype=paper.get("dtype") or "float32")
    gpu_mem_gb = torch.cuda.get_device_properties(0).total_memory / 1024**3 if gpu else 80.0
    return plan_for_fields(fields, gpu_mem_gb=gpu_mem_gb, min_prompt_tokens=min_prompt_tokens)


def report_of(trainer, tokenizer, setup_seconds: float, use_vllm: bool, gpu: bool) -> dict:
    """The figures of the run (see the module docstring)."""
    import torch

    import gaca_train

    logs = [log for log in trainer.state.log_history if "time/rollout" in log]
    steps = trainer.last_rollout.steps
    texts = tokenizer.batch_decode([s.completion_ids for s in steps], skip_special_tokens=True)
    return {
        "device": torch.cuda.get_device_name(0) if gpu else "cpu (--tiny)",
        "generation": "vllm colocate" if use_vllm else "hf generate",
        "gaca_from": str(Path(gaca_train.__file__).parent.parent),
        "setup_seconds": setup_seconds,
        "iteration_seconds": trainer.iteration_seconds,
        "rollout_tokens_per_s": [
            log["rollout/steps"] * log["rollout/response_length"] / log["time/rollout"] for log in logs
        ],
        "update_tokens_per_s": [log["throughput/update_tokens_per_s"] for log in logs],
        "update_row_tokens_per_s": [log["train/row_tokens"] / log["time/update"] for log in logs],
        "update_seconds": [log["time/update"] for log in logs],
        "update_layout": trainer.args.update_layout,
        "updates_per_iteration": [log["train/updates"] for log in logs],
        "advantage_abs_mean": [log["advantage/abs_mean"] for log in logs],
        "rows_per_iteration": [log["train/rows"] for log in logs],
        "vocab_size": len(tokenizer),
        "parameters": sum(p.numel() for p in trainer.model.parameters()),
        "prompt_tokens": [min(len(s.prompt_ids) for s in steps), max(len(s.prompt_ids) for s in steps)],
        "micro_batch_tokens": trainer.args.micro_batch_tokens,
        "largest_micro_batch_tokens": trainer.largest_micro_batch,
        "nonempty_response_fraction": sum(bool(t.strip()) for t in texts) / len(texts),
        "sample_response": texts[0][:200],
        "peak_gpu_memory_gb": torch.cuda.max_memory_allocated() / 1024**3 if gpu else None,
    }


def run(args: argparse.Namespace) -> dict:
    """Generates the games, builds the model, trains 2 iterations and returns the report."""
    import torch
    from transformers import PreTrainedTokenizerFast
    from trl.import_utils import is_vllm_available

    from gaca_envs.alfworld.generate import generate

    gpu = not args.tiny
    if gpu and not torch.cuda.is_available():
        raise SystemExit("gpu_smoke needs a CUDA GPU (torch.cuda.is_available() is False); --tiny runs on the CPU")
    paper = paper_fields(Path(args.config))
    out = Path(args.out)
    tic = time.perf_counter()
    generate(out / "games", 16, seed=0, split="train", difficulty="easy", engine="native")
    model_dir = build_model(out / "model", out / "games", paper.get("dtype") or "float32", args.tiny)
    use_vllm = gpu and is_vllm_available()
    # Not AutoTokenizer: for a qwen2 config it builds Qwen2's byte-level tokenizer over the word-level vocabulary.
    tokenizer = PreTrainedTokenizerFast.from_pretrained(model_dir)
    setup_seconds = time.perf_counter() - tic
    reports = {}
    for layout in args.layouts:
        config = smoke_config(paper, out, args.tiny, use_vllm, layout)
        trainer = smoke_trainer_class()(model=str(model_dir), args=config, processing_class=tokenizer)
        before = parameter_copy(trainer.model)
        if gpu:
            torch.cuda.reset_peak_memory_stats()
        trainer.train()
        report = report_of(trainer, tokenizer, setup_seconds, use_vllm, gpu)
        report["changed_parameter_fraction"] = changed_fraction(before, trainer.model)
        plan = memory_plan(config, model_dir, paper, report["prompt_tokens"][0], gpu)
        report["memory_plan_gb"] = plan["total"]
        report["memory_plan_parts_gb"] = {k: round(v, 3) for k, v in plan.items() if k != "total"}
        reports[layout] = report
        del trainer
        if gpu:
            torch.cuda.empty_cache()
    keys = ("iteration_seconds", "update_seconds", "update_tokens_per_s", "update_row_tokens_per_s",
            "largest_micro_batch_tokens", "peak_gpu_memory_gb", "memory_plan_gb")  # fmt: skip
    first = reports[args.layouts[0]]
    first["layouts"] = {layout: {k: r[k] for k in keys} for layout, r in reports.items()}
    if {"packed", "padded"} <= set(reports):  # the second iteration: the first includes warm-up
        first["packed_over_padded"] = reports["packed"]["update_seconds"][-1] / reports["padded"]["update_seconds"][-1]
    return first


def main(argv: list[str] | None = None, root: Path | None = None) -> None:
    """Command line entry point (``scripts/gpu_smoke.py``); ``root``: the checkout, for the default config."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="outputs/gpu_smoke", help="output folder (default: %(default)s)")
    config = (root or Path.cwd()) / "configs" / "alfworld_gaca.yaml"
    parser.add_argument("--config", default=str(config), help="the paper config (default: %(default)s)")
    parser.add_argument("--tiny", action="store_true", help="a 2-layer model on the CPU: checks the chain, no figures")
    parser.add_argument(
        "--image-requirements", help="a wheelhouse's image-requirements.txt: stop first if one is not installed"
    )
    parser.add_argument(
        "--layouts",
        nargs="+",
        choices=("packed", "padded"),
        default=["packed", "padded"],
        help="update layouts to train in turn, 2 iterations each (default: %(default)s)",
    )
    args = parser.parse_args(argv)
    if args.image_requirements:
        check_image(Path(args.image_requirements))
    report = run(args)
    text = json.dumps(report, indent=2)
    print(text)
    Path(args.out, "gpu_smoke.json").write_text(text)
    if os.environ.get("OUT"):
        Path(os.environ["OUT"], "gpu_smoke.json").write_text(text)
