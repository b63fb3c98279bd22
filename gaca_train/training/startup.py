"""Start-up checks that fail in seconds, before any env is built, game generated or model loaded."""

from __future__ import annotations

import os
import re
from pathlib import Path

import gymnasium as gym

from gaca_envs.data_source import check_real_data, generated_data_reason  # noqa: F401  (re-exported)
from gaca_train.training.batching import num_updates
from gaca_train.training.config import GACAConfig
from gaca_train.training.precision import check_precision_config

# Folders the project's scripts write models to (git-ignored): a name under them is a local path, never a Hub id.
LOCAL_OUTPUT_DIRS = ("outputs", "runs")
_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")
HUB_TIMEOUT_S = 8.0


class HubUnreachableError(ValueError):
    """A Hub model id is not cached and the Hub cannot be asked (no network): the id is unverified, not wrong."""


def check_model_source(name_or_path: str) -> None:
    """Raises unless ``name_or_path`` is a local model folder, a cached Hub model, or a model on the Hub.

    A name is a local path when it starts with ``.``, ``/`` or ``~``, has no or several ``/``, or its first
    component is an existing folder or one of :data:`LOCAL_OUTPUT_DIRS`; a local path must exist (checked
    at once, no network). Any other name must be a well-formed Hub id (``org/name``). A Hub id is found in
    the Hugging Face cache, or else looked up on the Hub within :data:`HUB_TIMEOUT_S` seconds; with
    ``HF_HUB_OFFLINE`` set, only the cache counts.

    Raises:
        ValueError: naming the model, the cause and what to do.
    """
    path = Path(name_or_path).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ValueError(f"model_name_or_path={name_or_path!r} is a folder without config.json: not a model")
        return
    parts = Path(name_or_path).parts
    local = (
        name_or_path.startswith((".", "/", "~"))
        or name_or_path.count("/") != 1
        or (bool(parts) and (Path(parts[0]).is_dir() or parts[0] in LOCAL_OUTPUT_DIRS))
    )
    build = "for a CPU run: python scripts/make_tiny_model.py --out DIR"
    if local:
        raise ValueError(
            f"model_name_or_path={name_or_path!r}: no such local folder; pass an existing model folder ({build})"
        )
    if not _HUB_ID.match(name_or_path):
        raise ValueError(
            f"model_name_or_path={name_or_path!r} is neither a local folder nor a Hugging Face Hub id "
            "(org/name of letters, digits, '.', '_' and '-')"
        )
    from huggingface_hub import try_to_load_from_cache

    if isinstance(try_to_load_from_cache(name_or_path, "config.json"), str):
        return
    if os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false", "False"):
        raise ValueError(
            f"model_name_or_path={name_or_path!r}: not in the Hugging Face cache and HF_HUB_OFFLINE is set; "
            f"download it first, or pass a local model folder ({build})"
        )
    _look_up_on_hub(name_or_path)


def _look_up_on_hub(repo_id: str) -> None:
    from huggingface_hub import model_info
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError

    try:
        model_info(repo_id, timeout=HUB_TIMEOUT_S)
    except GatedRepoError as e:
        raise ValueError(
            f"model_name_or_path={repo_id!r} is a gated model on the Hugging Face Hub: accept its terms and log in "
            "(hf auth login), or pass a local copy"
        ) from e
    except RepositoryNotFoundError as e:
        raise ValueError(
            f"model_name_or_path={repo_id!r}: no such model on the Hugging Face Hub (or it is private); check the "
            "spelling, or pass a local model folder"
        ) from e
    except Exception as e:  # no network, DNS, time-out, proxy: the Hub cannot say
        raise HubUnreachableError(
            f"model_name_or_path={repo_id!r} is not in the Hugging Face cache and the Hub cannot be reached "
            f"({type(e).__name__}: {str(e)[:120]}); on an offline machine download the model elsewhere and pass its "
            "folder, or set HF_HUB_OFFLINE=1 with a filled cache"
        ) from e


def describe_schedule(args: GACAConfig) -> str:
    """The iteration's schedule in words: episodes, ranks, rows, updates and micro-batch budget."""
    episodes = args.tasks_per_iteration * args.rollouts_per_task
    most_rows = episodes * args.max_env_steps
    updates = num_updates(most_rows, args.mini_batch_rows, args.ppo_epochs)
    return (
        f"{episodes} episodes per iteration ({args.tasks_per_iteration} tasks x {args.rollouts_per_task} rollouts), "
        f"{args.per_device_train_batch_size} per rank on {args.world_size} rank(s); up to {most_rows} step rows; "
        f"mini-batches of {args.mini_batch_rows or 'all'} rows: up to {updates} optimiser update(s) per iteration; "
        f"micro-batches of at most {args.micro_batch_tokens or 'unlimited'} padded tokens per device; "
        f"{args.max_steps} iterations"
    )


def check_startup(
    args: GACAConfig,
    model_name_or_path: str,
    *,
    dtype: str | None = None,
    peft: bool = False,
    require_vllm: bool = True,
) -> None:
    """Every start-up check that needs neither a model nor an env instance (the config checked itself).

    Args:
        args: the run's config.
        model_name_or_path: the policy (local folder or Hub id).
        dtype: the policy's load dtype (``ModelConfig.dtype``; ``model_init_kwargs["dtype"]`` wins).
        peft: LoRA adapters are trained instead of the weights.
        require_vllm: check that vLLM is installed when ``use_vllm`` is set (a dry run on a machine without
            CUDA skips it: the run itself happens elsewhere).

    Raises:
        ValueError: for an unknown env id or split, missing real data, vLLM asked for but not installed,
            weights an update could not move, or an unusable model source.
    """
    import gaca_envs  # noqa: F401  (registers the env ids)

    try:
        spec = gym.spec(args.env_id)
    except gym.error.Error as e:
        raise ValueError(f"env_id={args.env_id!r} is not a registered Gymnasium id: {e}") from e
    check_splits(spec, args)
    check_real_data(args.env_id, args.env_kwargs, args.allow_generated_data)
    if require_vllm:
        check_vllm(args)
    dtype = (args.model_init_kwargs or {}).get("dtype", dtype)
    deepspeed = bool(args.deepspeed) or os.environ.get("ACCELERATE_USE_DEEPSPEED", "false").lower() == "true"
    check_precision_config(dtype, args.learning_rate, peft=peft, deepspeed=deepspeed)
    check_model_source(model_name_or_path)


def check_splits(spec: gym.envs.registration.EnvSpec, args: GACAConfig) -> None:
    """``task_split`` and every ``eval_splits`` entry must be splits of the env (its class's ``splits``).

    Raises:
        ValueError: naming the field, the bad split and the env's splits.
    """
    env_class = gym.envs.registration.load_env_creator(spec.entry_point) if isinstance(spec.entry_point, str) else None
    splits = tuple(getattr(env_class, "splits", ()) or ())
    if not splits:
        return
    for name, values in (("task_split", [args.task_split]), ("eval_splits", args.eval_splits or [])):
        bad = [v for v in values if v is not None and v not in splits]
        if bad:
            raise ValueError(f"{name}: {args.env_id} has no split {bad[0]!r}; its splits are {', '.join(splits)}")


def check_vllm(args: GACAConfig) -> None:
    """``use_vllm`` needs the ``vllm`` package here, in colocate and in server mode (TRL's weight sync).

    Raises:
        ValueError: for ``use_vllm`` without vLLM installed.
    """
    if not args.use_vllm:
        return
    from trl.import_utils import is_vllm_available

    if not is_vllm_available():
        raise ValueError(
            f"use_vllm: true (vllm_mode: {args.vllm_mode}) needs vLLM, which is not installed here: install it "
            "(pip install -e '.[gpu]' on a CUDA machine; docs/training.md, Install), or set use_vllm: false to "
            "generate with the trained model (HF generate)"
        )
