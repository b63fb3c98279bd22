"""Peak per-device GPU memory of a training config's largest micro-batch, before any GPU is used.

    python scripts/plan_memory.py --config configs/alfworld_gaca.yaml --gpu-mem-gb 80
    python scripts/plan_memory.py --config configs/alfworld_gaca.yaml --model Qwen/Qwen2.5-7B-Instruct --lora-rank 64

The formula is in ``gaca_train/training/memory.py`` and docs/training.md ("Precision and memory"): float32 master
weights, gradients and AdamW state (or ZeRO-3's sharded 16 bytes per parameter), autocast's bf16 copy, the
KL reference model, checkpointed activations, TRL's chunked LM head and a colocated vLLM engine. The largest
micro-batch holds ``micro_batch_tokens`` padded tokens; the most completion tokens among them come from rows
of the shortest prompt (``--min-prompt-tokens``) and a full ``max_completion_length``. Exits 1 if the total
does not fit ``--gpu-mem-gb`` with 10% headroom.
"""

from __future__ import annotations

import argparse
import sys

import yaml

from gaca_train.training.memory import format_plan, plan_for_fields


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True, help="a training YAML (GACAConfig + ModelConfig fields)")
    parser.add_argument("--gpu-mem-gb", type=float, default=80.0, help="memory of one GPU in GiB")
    parser.add_argument("--model", default=None, help="override model_name_or_path (a known id or a local folder)")
    parser.add_argument("--lora-rank", type=int, default=None, help="train LoRA adapters of this rank")
    parser.add_argument("--dtype", default=None, help="override dtype, the policy's storage (float32, bfloat16)")
    parser.add_argument("--zero3-gpus", type=int, default=1, help="ZeRO-3 sharding over this many GPUs")
    parser.add_argument("--min-prompt-tokens", type=int, default=256, help="shortest prompt of a micro-batch")
    args = parser.parse_args(argv)
    try:
        with open(args.config) as f:
            fields = yaml.safe_load(f)
        if args.dtype is not None:
            fields["dtype"] = args.dtype
        parts = plan_for_fields(
            fields, gpu_mem_gb=args.gpu_mem_gb, min_prompt_tokens=args.min_prompt_tokens, model=args.model,
            zero3_gpus=args.zero3_gpus, lora_rank=args.lora_rank,
        )  # fmt: skip
    except (OSError, ValueError, KeyError, yaml.YAMLError) as e:
        parser.exit(2, f"plan_memory.py: error: {e}\n")
    model = args.model or fields["model_name_or_path"]
    lora = args.lora_rank or (fields.get("lora_r", 16) if fields.get("use_peft") else None)
    label = (
        f"{args.config}: model {model}, dtype {fields.get('dtype', 'auto')}, bf16 {bool(fields.get('bf16'))}, "
        f"micro_batch_tokens {fields['micro_batch_tokens']}, LoRA rank {lora}, ZeRO-3 GPUs {args.zero3_gpus}"
    )
    text, fits = format_plan(parts, args.gpu_mem_gb, label)
    print(text)
    return 0 if fits else 1


if __name__ == "__main__":
    sys.exit(main())
