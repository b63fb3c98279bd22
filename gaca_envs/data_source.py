"""Whether an env would play the benchmark's own data or the data the project generates.

Without real data the envs still run: ALFWorld on games generated into a user cache, WebShop on
the project's generated catalog. That keeps tests and demos offline, but a training run on them
measures something else than the benchmark. The entry points that train (``GACATrainer`` with its
validation, ``scripts/train.py``'s start-up checks, :mod:`gaca_envs.trl`) call
:func:`check_real_data`, which stops such a run unless the user allows generated data.
"""

from __future__ import annotations

import os


def generated_data_reason(env_id: str, env_kwargs: dict) -> str | None:
    """Why a run of ``env_id`` would play the project's generated data instead of the benchmark's, or None.

    ALFWorld plays real games when ``data_path``/``game_files`` or ``$ALFWORLD_DATA`` is given; WebShop
    serves the original catalog when ``shop_config`` names a catalog folder, or a server of the user's
    (``server_url``). A ``data_path`` is taken as the user's choice even if it holds generated games.
    """
    base = env_id.split(":")[-1]
    if base.startswith("GACA-ALFWorld"):
        if env_kwargs.get("data_path") or env_kwargs.get("game_files") or os.environ.get("ALFWORLD_DATA"):
            return None
        return (
            f"{env_id} has no ALFWorld data (no data_path in env_kwargs, no $ALFWORLD_DATA), so it would play games "
            "the project generates, not ALFWorld's; get the data with ALFWorld's `alfworld-download` and set "
            "ALFWORLD_DATA to the folder holding json_2.1.1"
        )
    if base.startswith("GACA-WebShop"):
        shop = env_kwargs.get("shop_config") or {}
        catalog = shop.get("catalog", "embedded") if isinstance(shop, dict) else getattr(shop, "catalog", "embedded")
        if "$" in os.path.expandvars(str(catalog)) and not env_kwargs.get("server_url"):
            return (
                f"{env_id}'s shop_config.catalog is {catalog!r}, an environment variable that is not set, so there "
                "is no WebShop data; set it to the folder of the original WebShop files (WebShop's setup.sh)"
            )
        if env_kwargs.get("server_url") or not str(catalog).startswith("embedded"):  # embedded, embedded-v1
            return None
        return (
            f"{env_id} has no original WebShop catalog (shop_config.catalog is {catalog!r}), so it would shop the "
            "project's generated catalog; download the original data files (WebShop's setup.sh) and pass "
            'env_kwargs {"shop_config": {"catalog": "<folder>"}}'
        )
    return None


def check_real_data(
    env_id: str, env_kwargs: dict, allow_generated_data: bool, *, allow_with: str = "set allow_generated_data: true"
) -> None:
    """Stops a run that would silently train or evaluate on generated data.

    Args:
        env_id: the env id the run plays.
        env_kwargs: the keyword arguments its envs are built with.
        allow_generated_data: the user's choice to play generated data knowingly.
        allow_with: how the caller's user makes that choice, for the error (a config field or an argument).

    Raises:
        ValueError: if no real data is configured and ``allow_generated_data`` is False.
    """
    reason = generated_data_reason(env_id, env_kwargs)
    if reason and not allow_generated_data:
        raise ValueError(f"{reason}; or {allow_with} to use the generated data knowingly")
