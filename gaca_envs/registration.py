"""Registration of the GACA environment ids with Gymnasium.

``gym.make`` adds Gymnasium's usual wrappers (the passive env checker, which every env passes,
and the order enforcer) and no ``TimeLimit``: ``max_episode_steps`` stays ``None`` because each
env ends its own episodes at its step limit (``env.unwrapped.max_env_steps``: ALFWorld 50, WebShop 15,
CriticalChain ``2 * horizon``), which its keyword arguments set. A ``TimeLimit`` built from one
registered number would cut episodes short whenever the arguments raise the limit
(CriticalChain with ``horizon=50`` would stop at step 20), and its step counter would disagree
with the env's after a snapshot is restored. Pass ``gym.make(..., max_episode_steps=N)`` to add
one anyway.

Every env (ALFWorld with its native engine, WebShop in-process, over HTTP or in the browser,
CriticalChain) saves its episode as ``snap = env.unwrapped.save_state()`` and returns to it with
``env.reset(options={"snapshot": snap})``, which every wrapper sees (``restore_state(snap)`` on
the unwrapped env alone would leave the order enforcer and a ``TimeLimit`` behind). ``snap`` is a
:class:`gaca_envs.task_env.EnvSnapshot`: versioned, picklable, and JSON through ``to_dict`` /
``from_dict``, so it restores into a fresh env built with the same arguments in any process.
``env.unwrapped.task_ids`` lists the env's tasks (``task_ids(split)`` another split's).
"""

from __future__ import annotations

import gymnasium as gym

# id -> entry point (a string, so that registering imports no env).
ENV_SPECS: dict[str, str] = {
    "GACA-ALFWorld-v0": "gaca_envs.alfworld.env:ALFWorldEnv",
    "GACA-WebShop-v0": "gaca_envs.webshop.env:WebShopEnv",
    "GACA-WebShop-v1": "gaca_envs.webshop.env:WebShopV1Env",
    "GACA-WebShop-Browser-v0": "gaca_envs.webshop.browser:WebShopBrowserEnv",
    "GACA-WebShop-Browser-v1": "gaca_envs.webshop.browser:WebShopBrowserV1Env",
    "GACA-CriticalChain-v0": "gaca_envs.criticalchain.env:CriticalChainEnv",
    # Any of the above played on a gaca-env-server: gym.make("GACA-Remote-v0", url=..., env_id=...).
    "GACA-Remote-v0": "gaca_envs.remote:RemoteEnv",
}


def register_envs() -> None:
    """Registers every GACA env id with Gymnasium; safe to call more than once."""
    for env_id, entry_point in ENV_SPECS.items():
        if env_id in gym.registry:
            continue
        gym.register(id=env_id, entry_point=entry_point)
