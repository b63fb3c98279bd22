"""Peak per-device GPU memory of a training config's largest micro-batch, before any GPU is used.

    python scripts/plan_memory.py --config configs/alfworld_gaca.yaml --gpu-mem-gb 80
    python scripts/plan_memory.py --config configs/alfworld_gaca.yaml --model Qwen/Qwen2.5-7B-Instruct --lora-rank 64

The formula is in ``gaca_train/memory.py`` and docs/training.md. The largest micro-batch holds
``micro_batch_tokens`` padded tokens; the most completion tokens among them come from rows of the
shortest prompt (``--min-prompt-tokens``) and a full ``max_completion_length``. Exits 1 if the total
does not fit ``--gpu-mem-gb``.
"""

from __future__ import annotations

import argparse
import sys

import yaml

from gaca_train.memory import architecture_of, plan_memory


def plan_for_config(fields: dict, args: argparse.Namespace) -> dict[str, float]:
    """GiB per part for the YAML fields ``fields`` with the command line's overrides."""
    arch = architecture_of(args.model or fields["model_name_or_path"])
    budget = fields.get("micro_batch_tokens")
    if budget is None:
        raise ValueError("the config has no micro_batch_tokens: its micro-batches are unbounded; set one")
    completion = int(fields.get("max_completion_length", 256))
    rows = max(1, budget // (args.min_prompt_tokens + completion))
    use_vllm = fields.get("use_vllm", False) and fields.get("vllm_mode", "colocate") == "colocate"
    sleeps = fields.get("vllm_enable_sleep_mode", False)
    vllm_gb = fields.get("vllm_gpu_memory_utilization", 0.3) * args.gpu_mem_gb if use_vllm and not sleeps else 0.0
    lora_rank = args.lora_rank or (fields.get("lora_r", 16) if fields.get("use_peft") else None)
    return plan_memory(
        arch,
        micro_batch_tokens=budget,
        completion_tokens=min(budget, rows * completion),
        gradient_checkpointing=bool(fields.get("gradient_checkpointing", False)),
        bytes_per_value=2 if fields.get("bf16") or fields.get("dtype") in ("bfloat16", "float16") else 4,
        lora_rank=lora_rank,
        zero3_gpus=args.zero3_gpus,
        vllm_gb=vllm_gb,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True, help="a training YAML (GACAConfig + ModelConfig fields)")
    parser.add_argument("--gpu-mem-gb", type=float, default=80.0, help="memory of one GPU in GiB")
    parser.add_argument("--model", default=None, help="override model_name_or_path (a known id or a local folder)")
    parser.add_argument("--lora-rank", type=int, default=None, help="train LoRA adapters of this rank")
    parser.add_argument("--zero3-gpus", type=int, default=1, help="ZeRO-3 sharding over this many GPUs")
    parser.add_argument("--min-prompt-tokens", type=int, default=256, help="shortest prompt of a micro-batch")
    args = parser.parse_args(argv)
    with open(args.config) as f:
        fields = yaml.safe_load(f)
    parts = plan_for_config(fields, args)
    print(f"{args.config}: model {args.model or fields['model_name_or_path']}, micro_batch_tokens "
          f"{fields['micro_batch_tokens']}, gradient checkpointing {bool(fields.get('gradient_checkpointing'))}, "
          f"LoRA rank {args.lora_rank or (fields.get('lora_r') if fields.get('use_peft') else None)}, "
          f"ZeRO-3 GPUs {args.zero3_gpus}")  # fmt: skip
    print("| part | GiB |\n|---|---|")
    for name, value in parts.items():
        print(f"| {name} | {value:.1f} |")
    fits = parts["total"] <= args.gpu_mem_gb * 0.9  # ~10% for the CUDA context and fragmentation
    print(f"{'fits' if fits else 'does NOT fit'} a {args.gpu_mem_gb:.0f} GiB GPU (with 10% headroom)")
    return 0 if fits else 1


if __name__ == "__main__":
    sys.exit(main())
