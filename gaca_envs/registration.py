"""Registration of the GACA environment ids with Gymnasium."""

from __future__ import annotations

import gymnasium as gym

# id -> (entry point, default kwargs). Max steps are enforced by each env itself (it reports
# truncation in its own step), so no TimeLimit wrapper is added here.
ENV_SPECS: dict[str, str] = {
    "GACA-ALFWorld-v0": "gaca_envs.alfworld.env:ALFWorldEnv",
    "GACA-WebShop-v0": "gaca_envs.webshop.env:WebShopEnv",
    "GACA-WebShop-Browser-v0": "gaca_envs.webshop.browser:WebShopBrowserEnv",
    "GACA-CriticalChain-v0": "gaca_envs.criticalchain.env:CriticalChainEnv",
}


def register_envs() -> None:
    """Registers every GACA env id with Gymnasium; safe to call more than once."""
    for env_id, entry_point in ENV_SPECS.items():
        if env_id in gym.registry:
            continue
        gym.register(id=env_id, entry_point=entry_point, disable_env_checker=True)
