"""Train an LLM agent with GACA, GiGPO or GRPO on a GACA env, TRL-style.

    accelerate launch scripts/train.py --config configs/alfworld_gaca.yaml
    python scripts/train.py --config configs/alfworld_gaca.yaml --dry_run true   # start-up checks only
    python scripts/train.py --config configs/quickstart_cpu.yaml --estimator gigpo   # CLI overrides YAML

Arguments: every ``GACAConfig`` field (TRL's ``GRPOConfig`` plus env, rollout and estimator
options), TRL's ``ModelConfig`` (model path, dtype, LoRA, quantisation) and the script options
below. Run ``python scripts/train.py --help`` for the full list. That script wraps :func:`cli`.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from transformers import AutoTokenizer
from trl import ModelConfig, TrlParser, get_peft_config, get_quantization_config

from gaca_train.training.config import GACAConfig
from gaca_train.training.startup import HubUnreachableError, check_startup, describe_schedule
from gaca_train.training.trainer import GACATrainer


@dataclass
class ScriptArguments:
    """Options of this script that are not part of the trainer's config."""

    save_final_model: bool = field(default=True, metadata={"help": "Save the model to output_dir after training."})
    dry_run: bool = field(
        default=False,
        metadata={"help": "Run every start-up check, print the schedule and memory plan, and stop before loading."},
    )


def main(script_args: ScriptArguments, training_args: GACAConfig, model_args: ModelConfig) -> None:
    """Builds the trainer from the parsed arguments and trains."""
    if model_args.model_name_or_path is None:
        raise ValueError("model_name_or_path is required: a hub id or a local folder (see scripts/make_tiny_model.py)")
    import torch

    cpu_dry_run = script_args.dry_run and not torch.cuda.is_available()
    if cpu_dry_run and training_args.use_vllm:
        print("dry run without a GPU: vLLM is not checked (a GPU run with use_vllm needs it installed)")
    try:
        check_startup(
            training_args, model_args.model_name_or_path, dtype=model_args.dtype, peft=model_args.use_peft,
            require_vllm=not cpu_dry_run,
        )  # fmt: skip
    except HubUnreachableError as e:  # every other check passed; a dry run here cannot verify the id
        if not script_args.dry_run:
            raise SystemExit(f"train.py: error: {e}") from None
        print(f"note: {e}")
    except ValueError as e:  # a start-up check's message says what to change: no traceback
        raise SystemExit(f"train.py: error: {e}") from None
    if script_args.dry_run:
        print(f"start-up checks passed; {describe_schedule(training_args)}")
        print(dry_run_memory_plan(training_args, model_args))
        return
    model_init_kwargs = dict(
        revision=model_args.model_revision,
        trust_remote_code=training_args.trust_remote_code,
        attn_implementation=model_args.attn_implementation,
        dtype=model_args.dtype,
    )
    model_init_kwargs.update(training_args.model_init_kwargs or {})
    training_args.model_init_kwargs = model_init_kwargs
    tokenizer = AutoTokenizer.from_pretrained(
        model_args.model_name_or_path,
        revision=model_args.model_revision,
        trust_remote_code=training_args.trust_remote_code,
        padding_side="left",
    )
    trainer = GACATrainer(
        model=model_args.model_name_or_path,
        args=training_args,
        processing_class=tokenizer,
        peft_config=get_peft_config(model_args),
        quantization_config=get_quantization_config(model_args),
    )
    trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)
    if script_args.save_final_model:
        trainer.save_model(training_args.output_dir)
        trainer.accelerator.print(f"Model saved to {training_args.output_dir}")
    # Tear the process group down before the interpreter does: left to exit, a rank's gloo threads can
    # be destroyed while still joinable, which aborts that rank ("terminate called without an active
    # exception") after a run that finished. No-op in a single process.
    trainer.accelerator.wait_for_everyone()
    trainer.accelerator.end_training()


def dry_run_memory_plan(training_args: GACAConfig, model_args: ModelConfig) -> str:
    """The memory plan (:func:`gaca_train.training.memory.plan_for_fields`) of the parsed settings, as plan_memory.py
    prints it.

    Sized for this machine's GPU, or an 80 GiB one without CUDA. A model whose sizes cannot be known
    without loading it (a Hub id outside :data:`gaca_train.training.memory.ARCHITECTURES`) gets a line saying so.
    """
    import torch

    from gaca_train.training.memory import format_plan, plan_for_fields

    gpu_mem_gb = torch.cuda.get_device_properties(0).total_memory / 1024**3 if torch.cuda.is_available() else 80.0
    fields = {
        "model_name_or_path": model_args.model_name_or_path,
        "dtype": (training_args.model_init_kwargs or {}).get("dtype", model_args.dtype),
        "use_peft": model_args.use_peft,
        "lora_r": model_args.lora_r,
        **{
            name: getattr(training_args, name)
            for name in (
                "micro_batch_tokens", "max_completion_length", "gradient_checkpointing", "use_vllm", "vllm_mode",
                "vllm_gpu_memory_utilization", "vllm_enable_sleep_mode", "beta", "bf16", "fp16",
            )
        },
    }  # fmt: skip
    try:
        parts = plan_for_fields(fields, gpu_mem_gb=gpu_mem_gb)
    except ValueError as e:
        return f"memory plan: not available ({e})"
    return format_plan(parts, gpu_mem_gb, f"model {model_args.model_name_or_path}")[0]


def make_parser() -> TrlParser:
    """The CLI parser: script options, GACAConfig and ModelConfig, with ``--config`` YAML support."""
    import argparse

    parser = TrlParser((ScriptArguments, GACAConfig, ModelConfig))
    # TRL's parser takes --config FILE out of the arguments before argparse sees them: say so in --help.
    parser.description = (
        "Train an LLM agent with GACA, GiGPO or GRPO on a GACA env, TRL-style.\n\n"
        "  --config FILE   a YAML file of the options below (configs/*.yaml); options given on the command\n"
        "                  line override it, e.g. --config configs/quickstart_cpu.yaml --estimator gigpo"
    )
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    return parser


def cpu_dry_run_args(argv: list[str]) -> list[str]:
    """For ``--dry_run`` on a machine without CUDA: check the config as it would run, on the CPU.

    TrainingArguments refuses ``bf16`` without a GPU at parse time unless ``use_cpu`` is set.
    """
    import torch

    if any(a.startswith("--dry_run") for a in argv) and not torch.cuda.is_available():
        print("dry run without a GPU: checking with --use_cpu true")
        return [*argv, "--use_cpu", "true"]
    return argv


def cli(argv: list[str] | None = None) -> None:
    """Command line entry point: parses ``argv`` (default: ``sys.argv[1:]``) and YAML, then :func:`main`."""
    argv = cpu_dry_run_args(sys.argv[1:] if argv is None else argv)
    script_args, training_args, model_args = make_parser().parse_args_and_config(args=argv)
    main(script_args, training_args, model_args)
