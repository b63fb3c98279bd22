from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from gaca_train.training.memory import ARCHITECTURES, CONFIG_DEFAULTS, plan_for_fields
from gaca_train.training.startup import HUB_TIMEOUT_S, check_model_source, check_startup

ROOT = Path(__file__).resolve().parents[2]


def _plan_memory(*argv: str) -> subprocess.CompletedProcess:
    command = [sys.executable, str(ROOT / "scripts" / "plan_memory.py"), *argv]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_parameter_counts_match_the_published_sizes():
    sizes = {name: arch.num_parameters / 1e9 for name, arch in ARCHITECTURES.items()}
    assert sizes["Qwen/Qwen2.5-1.5B-Instruct"] == pytest.approx(1.54, abs=0.01)
    assert sizes["Qwen/Qwen2.5-7B-Instruct"] == pytest.approx(7.62, abs=0.01)


def test_plan_of_the_paper_config_equals_the_hand_count_of_docs_training_md():
    # docs/training.md, "Precision and memory": Qwen2.5-1.5B-Instruct, P = 1,543,714,304 parameters,
    # h = 1536, L = 28, I = 8960, k = 256, V = 151,936; T = 16,384 computed tokens in the packed layout
    # (attention by rows under SDPA), where up to C = T = 16,384 can be completion tokens.
    fields = yaml.safe_load((ROOT / "configs" / "alfworld_gaca.yaml").read_text())
    plan = plan_for_fields(fields, gpu_mem_gb=80)
    P, GiB = 1_543_714_304, 1024**3
    hand = {
        "weights": 4 * P / GiB,  # 5.75: float32 master weights
        "autocast_copy": 2 * P / GiB,  # 2.88: bf16 copies autocast caches in the forward pass
        "gradients": 4 * P / GiB,  # 5.75
        "optimizer": 8 * P / GiB,  # 11.50: AdamW's two float32 moments
        "reference_model": 4 * P / GiB,  # 5.75: beta 0.01 without LoRA, loaded like the policy
        # 2.63 (float32 residual stream, one hidden state per layer) + 1.48 (one bf16 layer in full)
        "activations": (4 * 16384 * 1536 * 28 + 2 * 16384 * (8 * 1536 + 2 * 256 + 4 * 8960)) / GiB,
        # 0.11: one layer's gathered queries (h), keys and values (2k) and SDPA output (h) in bf16
        "row_attention": 2 * 16384 * (2 * 1536 + 2 * 256) / GiB,
        "packed_mask": 0.0,  # SDPA: no [L, L] tree mask
        # 0.25 (tile) + 0.09 (weight slice) + 0.09 (hidden-state gradient) + 0.87 (head gradient)
        "lm_head": (2 * 4096 * 32768 + 2 * 32768 * 1536 + 4 * 16384 * 1536 + 4 * 151936 * 1536) / GiB,
        "vllm": 0.4 * 80,  # vllm_gpu_memory_utilization x GPU memory
        "vllm_cuda_graphs": 1.0,
    }
    assert plan == pytest.approx({**hand, "total": sum(hand.values())})
    assert plan["total"] == pytest.approx(70.15, abs=0.01)
    # The padded layout: no rows gathered, and at most C = (16384 // (256 + 512)) x 512 = 10,752 completion tokens.
    padded = plan_for_fields({**fields, "update_layout": "padded"}, gpu_mem_gb=80)
    assert padded["packed_mask"] == padded["row_attention"] == 0.0
    assert padded["lm_head"] == pytest.approx(hand["lm_head"] - 4 * 5632 * 1536 / GiB)
    assert padded["total"] == pytest.approx(70.01, abs=0.01)
    # Eager attention: the stacked sequences of at most l = 512 positions take a boolean tree mask, T x l bytes.
    eager = plan_for_fields({**fields, "attn_implementation": "eager"}, gpu_mem_gb=80)
    assert eager["packed_mask"] == pytest.approx(16384 * 512 / GiB) and eager["row_attention"] == 0.0


def test_precision_reference_model_sleep_mode_and_zero3_change_the_plan_as_documented():
    fields = yaml.safe_load((ROOT / "configs" / "alfworld_gaca.yaml").read_text())
    base = plan_for_fields(fields)
    bf16 = plan_for_fields({**fields, "dtype": "bfloat16"})  # the refused setting: 2 bytes per weight, no copy
    assert bf16["weights"] == pytest.approx(base["weights"] / 2) and bf16["autocast_copy"] == 0.0
    assert plan_for_fields({**fields, "beta": 0.0})["reference_model"] == 0.0
    lora = plan_for_fields(fields, lora_rank=16)
    assert lora["reference_model"] == 0.0 and lora["optimizer"] < 0.01 * base["optimizer"]
    asleep = plan_for_fields({**fields, "vllm_enable_sleep_mode": True})
    assert asleep["vllm"] == 0.0 and asleep["vllm_cuda_graphs"] == base["vllm_cuda_graphs"]
    # ZeRO-3 over 8 GPUs: 16 bytes per parameter over 8, plus the gathered V x h embedding in bf16.
    arch = ARCHITECTURES["Qwen/Qwen2.5-1.5B-Instruct"]
    zero3 = plan_for_fields(fields, zero3_gpus=8)
    states = zero3["weights"] + zero3["gradients"] + zero3["optimizer"]
    expected = (16 * arch.num_parameters / 8 + 2 * arch.vocab_size * arch.hidden_size) / 1024**3
    assert states == pytest.approx(expected)
    no_ckpt = plan_for_fields({**fields, "gradient_checkpointing": False})
    assert no_ckpt["activations"] > 10 * base["activations"]


def test_plan_defaults_are_gaca_configs_defaults():
    from gaca_train.training.config import GACAConfig

    own = {name: f.default for name, f in GACAConfig.__dataclass_fields__.items() if name in CONFIG_DEFAULTS}
    assert own == {k: v for k, v in CONFIG_DEFAULTS.items() if k not in ("use_peft", "lora_r")}


@pytest.mark.parametrize("env", ["alfworld", "webshop"])
@pytest.mark.parametrize(
    "extra", [[], ["--model", "Qwen/Qwen2.5-7B-Instruct", "--lora-rank", "64", "--dtype", "bfloat16"],
              ["--model", "Qwen/Qwen2.5-7B-Instruct", "--zero3-gpus", "8"]],
)  # fmt: skip
def test_paper_configs_fit_an_80_gb_gpu(env, extra):
    result = _plan_memory("--config", str(ROOT / "configs" / f"{env}_gaca.yaml"), "--gpu-mem-gb", "80", *extra)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "fits a 80 GiB GPU" in result.stdout


def test_full_fine_tune_of_7b_on_one_gpu_does_not_fit():
    result = _plan_memory(
        "--config", str(ROOT / "configs" / "alfworld_gaca.yaml"), "--model", "Qwen/Qwen2.5-7B-Instruct"
    )
    assert result.returncode == 1 and "does NOT fit" in result.stdout


def test_model_source_errors_name_the_path(tmp_path, monkeypatch):
    import huggingface_hub

    def no_hub_call(*args, **kwargs):
        raise AssertionError("a local path must be judged without asking the Hub")

    monkeypatch.setattr(huggingface_hub, "model_info", no_hub_call)
    with pytest.raises(ValueError, match=r"model_name_or_path='\./missing-model': no such local folder"):
        check_model_source("./missing-model")
    # The quickstart's model before make_tiny_model.py has built it: a local path, not a Hub id.
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=r"'outputs/tiny-criticalchain': no such local folder.*make_tiny_model.py"):
        check_model_source("outputs/tiny-criticalchain")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="is a folder without config.json"):
        check_model_source(str(tmp_path / "empty"))
    with pytest.raises(ValueError, match=r"'Qwen/Qwen 2\.5' is neither a local folder nor a Hugging Face Hub id"):
        check_model_source("Qwen/Qwen 2.5")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ValueError, match="not in the Hugging Face cache and HF_HUB_OFFLINE is set"):
        check_model_source("some-org/some-model-never-cached")


def test_an_uncached_hub_id_is_looked_up_once_and_each_failure_named(monkeypatch):
    # The Hub itself cannot be reached from here; its three answers are stood in for.
    import httpx
    import huggingface_hub
    from huggingface_hub.errors import RepositoryNotFoundError

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    calls = []

    def answer(outcome):
        def model_info(repo_id, timeout):
            calls.append((repo_id, timeout))
            if outcome is not None:
                raise outcome

        return model_info

    request = httpx.Request("GET", "https://huggingface.co/api/models/Qwen/Qwen2.5-1.5B-Instruc")
    not_found = RepositoryNotFoundError("404", response=httpx.Response(404, request=request))
    monkeypatch.setattr(huggingface_hub, "model_info", answer(not_found))
    with pytest.raises(ValueError, match="'Qwen/Qwen2.5-1.5B-Instruc': no such model on the Hugging Face Hub"):
        check_model_source("Qwen/Qwen2.5-1.5B-Instruc")
    monkeypatch.setattr(huggingface_hub, "model_info", answer(httpx.ConnectError("Name or service not known")))
    with pytest.raises(
        ValueError, match=r"not in the Hugging Face cache and the Hub cannot be reached \(ConnectError"
    ):
        check_model_source("Qwen/Qwen2.5-1.5B-Instruct")
    monkeypatch.setattr(huggingface_hub, "model_info", answer(None))
    check_model_source("Qwen/Qwen2.5-1.5B-Instruct")
    assert [timeout for _, timeout in calls] == [HUB_TIMEOUT_S] * 3 and HUB_TIMEOUT_S < 10


def test_use_vllm_without_vllm_bad_splits_and_bf16_storage_stop_at_start_up(tmp_path):
    from trl.import_utils import is_vllm_available

    from gaca_train.training.config import GACAConfig

    def config(**overrides):
        fields = dict(output_dir=str(tmp_path), env_id="GACA-CriticalChain-v0", use_cpu=True, report_to="none")
        return GACAConfig(**{**fields, **overrides})

    model = str(_tiny_model_dir(tmp_path))
    check_startup(config(), model)
    assert not is_vllm_available()  # this machine has no vLLM: the check must say so
    with pytest.raises(ValueError, match=r"use_vllm: true \(vllm_mode: colocate\) needs vLLM, which is not installed"):
        check_startup(config(use_vllm=True), model)
    check_startup(config(use_vllm=True), model, require_vllm=False)  # a dry run on a machine without CUDA
    with pytest.raises(
        ValueError, match="eval_splits: GACA-CriticalChain-v0 has no split 'valid_seen'; its splits are"
    ):
        check_startup(config(eval_splits=["valid", "valid_seen"]), model)
    with pytest.raises(ValueError, match="task_split: GACA-CriticalChain-v0 has no split 'dev'"):
        check_startup(config(task_split="dev"), model)
    with pytest.raises(ValueError, match="dtype=bfloat16 with learning_rate=1e-06 would not train"):
        check_startup(config(learning_rate=1e-6), model, dtype="bfloat16")
    check_startup(config(learning_rate=1e-6), model, dtype="bfloat16", peft=True)


def _tiny_model_dir(tmp_path) -> Path:
    from gaca_train.experiments.tiny import build_tiny_model, build_tokenizer, save_tiny_model

    tokenizer = build_tokenizer(["a b c"])
    return save_tiny_model(build_tiny_model(tokenizer), tokenizer, tmp_path / "model")


# Qwen2.5-1.5B-Instruct's config.json as the Hub serves it (the fields a run reads).
QWEN25_15B_CONFIG = {
    "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 1536, "intermediate_size": 8960,
    "num_hidden_layers": 28, "num_attention_heads": 12, "num_key_value_heads": 2, "vocab_size": 151936,
    "tie_word_embeddings": True, "torch_dtype": "bfloat16", "max_position_embeddings": 32768,
}  # fmt: skip


def _hub_cache(tmp_path) -> dict[str, str]:
    """An HF_HUB_CACHE holding Qwen2.5-1.5B-Instruct's config.json in the cache's own layout."""
    repo = tmp_path / "hub" / "models--Qwen--Qwen2.5-1.5B-Instruct"
    revision = "989aa7980e4cf806f80c7fef2b1adb7bc71aa306"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(revision)
    (repo / "snapshots" / revision).mkdir(parents=True)
    (repo / "snapshots" / revision / "config.json").write_text(json.dumps(QWEN25_15B_CONFIG))
    return {"HF_HUB_CACHE": str(tmp_path / "hub")}


def _dry_run(config: str, *extra: str, env: dict | None = None) -> subprocess.CompletedProcess:
    train, path = str(ROOT / "scripts" / "train.py"), str(ROOT / "configs" / f"{config}.yaml")
    command = [sys.executable, train, "--config", path, "--dry_run", "true", *extra]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)


def _real_data(tmp_path, config: str) -> tuple[list[str], dict]:
    """Command-line flags and environment that point a paper config at (stand-in) real data folders."""
    import os

    env = {**{k: v for k, v in os.environ.items() if k != "ALFWORLD_DATA"}, **_hub_cache(tmp_path)}
    if "alfworld" in config:
        (tmp_path / "json_2.1.1").mkdir(exist_ok=True)
        return [], {**env, "ALFWORLD_DATA": str(tmp_path)}
    return ["--env_kwargs", json.dumps({"shop_config": {"catalog": str(tmp_path)}})], env


@pytest.mark.parametrize("config", ["alfworld_gaca", "webshop_gaca", "alfworld_grpo", "webshop_gigpo"])
def test_paper_configs_pass_every_start_up_check_in_a_dry_run(tmp_path, config):
    extra, env = _real_data(tmp_path, config)
    result = _dry_run(config, *extra, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "start-up checks passed; 128 episodes per iteration (16 tasks x 8 rollouts)" in result.stdout
    rows = 512 if "webshop" in config else 2048
    assert f"mini-batches of {rows} rows" in result.stdout and "at most 16384 padded tokens" in result.stdout
    # The dry run prints the memory plan of the settings it checked, as plan_memory.py computes it.
    fields = yaml.safe_load((ROOT / "configs" / f"{config}.yaml").read_text())
    total = plan_for_fields(fields, gpu_mem_gb=80)["total"]
    assert "memory plan of model Qwen/Qwen2.5-1.5B-Instruct" in result.stdout
    assert f"| total | {total:.2f} |" in result.stdout and "fits a 80 GiB GPU" in result.stdout


@pytest.mark.parametrize("config", ["alfworld_gaca", "webshop_gaca"])
def test_paper_configs_without_real_data_stop_at_start_up(config):
    import os

    result = _dry_run(config, env={k: v for k, v in os.environ.items() if k != "ALFWORLD_DATA"})
    assert result.returncode != 0
    assert "set allow_generated_data: true to use the generated data knowingly" in result.stderr


def test_dry_run_stops_on_a_missing_local_model(tmp_path):
    extra, env = _real_data(tmp_path, "alfworld_gaca")
    result = _dry_run("alfworld_gaca", "--model_name_or_path", "./no-such-model", *extra, env=env)
    assert result.returncode != 0 and "'./no-such-model': no such local folder" in result.stderr


def test_readme_dry_run_passes_offline_with_a_note_and_a_real_run_stops_with_one_line(tmp_path):
    import os

    # An empty Hub cache and a proxy on a closed local port: the Hub cannot be reached, deterministically.
    env = {**os.environ, "HF_HUB_CACHE": str(tmp_path / "hub"), "HTTPS_PROXY": "http://127.0.0.1:9"}
    env.pop("HF_HUB_OFFLINE", None)
    result = _dry_run("alfworld_gaca", "--allow_generated_data", "true", env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "note: model_name_or_path='Qwen/Qwen2.5-1.5B-Instruct' is not in the Hugging Face cache and the Hub " \
           "cannot be reached" in result.stdout  # fmt: skip
    assert "memory plan of model Qwen/Qwen2.5-1.5B-Instruct" in result.stdout
    train, config = str(ROOT / "scripts" / "train.py"), str(ROOT / "configs" / "alfworld_gaca.yaml")
    command = [sys.executable, train, "--config", config, "--allow_generated_data", "true", "--use_cpu", "true",
               "--use_vllm", "false"]  # fmt: skip
    run = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
    assert run.returncode != 0 and "Traceback" not in run.stderr
    assert run.stderr.strip().splitlines()[-1].startswith("train.py: error: model_name_or_path='Qwen/Qwen2.5-1.5B")
