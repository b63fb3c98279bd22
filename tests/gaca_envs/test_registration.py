from __future__ import annotations

import subprocess
import sys

import gymnasium as gym
import pytest

import gaca_envs
from gaca_envs.registration import ENV_SPECS


def test_every_id_is_registered_with_a_string_entry_point():
    for env_id, entry_point in ENV_SPECS.items():
        spec = gym.spec(env_id)
        assert spec.entry_point == entry_point


def test_register_is_idempotent():
    before = len(gym.registry)
    gaca_envs.register_envs()
    assert len(gym.registry) == before


def test_import_does_not_import_torch_or_engines():
    code = (
        "import sys, gaca_envs; "
        "bad = [m for m in ('torch', 'trl', 'textworld', 'flask', 'gaca_train') if m in sys.modules]; "
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == ""


def test_anchor_digest_is_stable_and_order_sensitive():
    a = gaca_envs.anchor_digest("alfworld", ["at agent kitchen", "holds apple"])
    # The digest is a pure function of its text: recomputing it in another process must agree.
    code = "import gaca_envs; print(gaca_envs.anchor_digest('alfworld', ['at agent kitchen', 'holds apple']))"
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert a == other
    assert len(a) == 32 and int(a, 16) >= 0
    assert a != gaca_envs.anchor_digest("alfworld", ["holds apple", "at agent kitchen"])
    assert a != gaca_envs.anchor_digest("webshop", ["at agent kitchen", "holds apple"])
    # Joining parts must not be ambiguous: ["a b"] differs from ["a", "b"].
    assert gaca_envs.anchor_digest("k", ["a b"]) != gaca_envs.anchor_digest("k", ["a", "b"])


def test_anchor_digest_rejects_newlines():
    with pytest.raises(ValueError, match="must not contain newlines"):
        gaca_envs.anchor_digest("k", ["a\nb"])


def _wrappers(env) -> list[str]:
    names = []
    while isinstance(env, gym.Wrapper):
        names.append(type(env).__name__)
        env = env.env
    return names


def test_make_runs_gymnasiums_env_checker_and_adds_no_time_limit():
    for env_id in ENV_SPECS:
        spec = gym.spec(env_id)
        assert not spec.disable_env_checker and spec.order_enforce and spec.max_episode_steps is None
    env = gym.make("GACA-CriticalChain-v0")
    assert _wrappers(env) == ["OrderEnforcing", "PassiveEnvChecker"]


@pytest.mark.parametrize("kwargs", [{}, {"horizon": 30}, {"max_env_steps": 5}])
def test_episode_lengths_through_make_equal_the_envs_own(kwargs):
    # The env ends its episodes itself; gym.make must not cut them elsewhere (a registered
    # TimeLimit of 20 would stop horizon=30 episodes at step 20).
    from gaca_envs.criticalchain.env import CriticalChainEnv

    made, direct = gym.make("GACA-CriticalChain-v0", **kwargs), CriticalChainEnv(**kwargs)
    lengths = []
    for env in (made, direct):
        env.reset(seed=3, options={"task_id": "train-1"})
        steps, done = 0, False
        while not done:
            _, _, terminated, truncated, _ = env.step("wait around")  # never admissible: runs to the limit
            steps, done = steps + 1, terminated or truncated
        lengths.append((steps, terminated, truncated))
    assert lengths[0] == lengths[1] == (direct.max_env_steps, False, True)
