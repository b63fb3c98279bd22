"""GPU smoke run: 2 GACA iterations of a Qwen2.5-1.5B-sized model on generated ALFWorld, nothing downloaded.

    bash scripts/gpu_smoke.sh            # installs what it needs, then runs this file
    python scripts/gpu_smoke.py --out outputs/gpu_smoke

Builds a randomly initialised model with Qwen2.5-1.5B-Instruct's architecture (its vocabulary size
included, so the logits cost what they cost) and a word-level tokenizer over the games' text, then
trains 2 iterations of 4 tasks x 4 rollouts x 10 steps in bf16 with the paper configs' update
schedule (token-budgeted micro-batches, gradient checkpointing), generating with vLLM colocated when
vLLM is installed, else with HF generate. Prints rollout tokens/s, update tokens/s, peak GPU memory
and time per iteration, and writes them to ``<out>/gpu_smoke.json`` (and ``$OUT`` if set).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import torch
from transformers import Qwen2Config, Qwen2ForCausalLM, TrainerCallback

from gaca_train.memory import ARCHITECTURES, Architecture


class _Timer(TrainerCallback):
    def __init__(self) -> None:
        self.times: list[float] = []

    def on_step_begin(self, args, state, control, **kwargs):
        self._start = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        self.times.append(time.perf_counter() - self._start)


def build_model(out: Path, games: Path, tiny: bool) -> Path:
    """A random Qwen2.5-1.5B-shaped model (``tiny``: 2 small layers) and a local tokenizer, saved to ``out``."""
    import gymnasium as gym

    from gaca_train.rollout import prompt_templates
    from gaca_train.tiny import build_tokenizer, save_tiny_model

    env = gym.make("GACA-ALFWorld-v0", data_path=str(games), split="train", expert=True)
    corpus = [" ".join(t) for t in prompt_templates()]
    for task in env.unwrapped.task_ids:
        obs, info = env.reset(options={"task_id": task})
        corpus += [obs, info["task"], " ".join(info["admissible_actions"])]
    env.close()
    tokenizer = build_tokenizer(corpus)
    arch = ARCHITECTURES["Qwen/Qwen2.5-1.5B-Instruct"]
    if tiny:
        arch = Architecture(64, 2, 128, 4, 2, len(tokenizer), True)
    config = Qwen2Config(
        vocab_size=arch.vocab_size, hidden_size=arch.hidden_size, intermediate_size=arch.intermediate_size,
        num_hidden_layers=arch.num_layers, num_attention_heads=arch.num_heads, num_key_value_heads=arch.num_kv_heads,
        tie_word_embeddings=arch.tie_word_embeddings, max_position_embeddings=32768,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
    )  # fmt: skip
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(config).to(torch.float32 if tiny else torch.bfloat16)
    return save_tiny_model(model, tokenizer, out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="outputs/gpu_smoke")
    parser.add_argument("--max-completion-length", type=int, default=256)
    parser.add_argument("--micro-batch-tokens", type=int, default=16384)
    parser.add_argument(
        "--tiny", action="store_true", help="a 2-layer model on the CPU: checks the script, no figures"
    )
    args = parser.parse_args()
    if not args.tiny and not torch.cuda.is_available():
        raise SystemExit("gpu_smoke needs a CUDA GPU (torch.cuda.is_available() is False); --tiny runs on the CPU")
    from transformers import AutoTokenizer
    from trl.import_utils import is_vllm_available

    from gaca_envs.alfworld.generate import generate
    from gaca_train.config import GACAConfig
    from gaca_train.trainer import GACATrainer

    out = Path(args.out)
    tic = time.perf_counter()
    generate(out / "games", 16, seed=0, split="train", difficulty="easy", engine="native")
    model_dir = build_model(out / "model", out / "games", args.tiny)
    setup_seconds = time.perf_counter() - tic
    use_vllm = is_vllm_available() and not args.tiny
    gpu = not args.tiny
    config = GACAConfig(
        output_dir=str(out / "run"), env_id="GACA-ALFWorld-v0",
        env_kwargs={"data_path": str(out / "games"), "split": "train", "max_steps": 10, "engine": "native"},
        vector_env="sync", tasks_per_iteration=4, rollouts_per_task=4, max_env_steps=10,
        max_completion_length=args.max_completion_length, mini_batch_rows=64,
        micro_batch_tokens=args.micro_batch_tokens, max_steps=2, learning_rate=1e-6, beta=0.0, bf16=gpu,
        gradient_checkpointing=gpu, use_cpu=not gpu, logging_steps=1, save_strategy="no", report_to="none",
        disable_tqdm=True, use_vllm=use_vllm, vllm_mode="colocate", vllm_gpu_memory_utilization=0.3,
        model_init_kwargs={"dtype": "bfloat16" if gpu else "float32"},
    )  # fmt: skip
    timer = _Timer()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    trainer = GACATrainer(model=str(model_dir), args=config, processing_class=tokenizer, callbacks=[timer])
    if gpu:
        torch.cuda.reset_peak_memory_stats()
    trainer.train()
    logs = [log for log in trainer.state.log_history if "time/rollout" in log]
    rollout_tokens = [log["rollout/steps"] * log["rollout/response_length"] for log in logs]
    report = {
        "device": torch.cuda.get_device_name(0) if gpu else "cpu (--tiny)",
        "generation": "vllm colocate" if use_vllm else "hf generate",
        "setup_seconds": setup_seconds,
        "iteration_seconds": timer.times,
        "rollout_tokens_per_s": [n / log["time/rollout"] for n, log in zip(rollout_tokens, logs, strict=True)],
        "update_tokens_per_s": [log["throughput/update_tokens_per_s"] for log in logs],
        "updates_per_iteration": [log["train/updates"] for log in logs],
        "rows_per_iteration": [log["train/rows"] for log in logs],
        "peak_gpu_memory_gb": torch.cuda.max_memory_allocated() / 1024**3 if gpu else None,
    }
    text = json.dumps(report, indent=2)
    print(text)
    (out / "gpu_smoke.json").write_text(text)
    if os.environ.get("OUT"):
        Path(os.environ["OUT"], "gpu_smoke.json").write_text(text)


if __name__ == "__main__":
    main()
