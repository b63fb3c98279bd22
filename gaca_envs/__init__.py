"""Gymnasium text environments for long-horizon LLM agents, with canonical anchor-state keys.

Importing this package registers the environment ids below. Each id's entry point is a string,
so importing ``gaca_envs`` loads neither an engine nor a server: an env's dependencies are
imported only when ``gym.make`` builds it.

| id                        | entry point                                   | extra       |
|---------------------------|-----------------------------------------------|-------------|
| ``GACA-ALFWorld-v0``      | ``gaca_envs.alfworld.env:ALFWorldEnv``        | ``alfworld`` |
| ``GACA-WebShop-v0``       | ``gaca_envs.webshop.env:WebShopEnv``          | ``webshop`` |
| ``GACA-WebShop-v1``       | ``gaca_envs.webshop.env:WebShopV1Env``        | ``webshop`` |
| ``GACA-WebShop-Browser-v0`` | ``gaca_envs.webshop.browser:WebShopBrowserEnv`` | ``webshop,browser`` |
| ``GACA-WebShop-Browser-v1`` | ``gaca_envs.webshop.browser:WebShopBrowserV1Env`` | ``webshop,browser`` |
| ``GACA-CriticalChain-v0`` | ``gaca_envs.criticalchain.env:CriticalChainEnv`` | (core)      |
"""

from __future__ import annotations

from gaca_envs.anchors import INFO_KEYS, anchor_digest
from gaca_envs.registration import register_envs

__all__ = ["INFO_KEYS", "anchor_digest", "register_envs"]
__version__ = "0.1.0"

register_envs()
