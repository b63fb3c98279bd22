"""TextSpace: Gymnasium's Text space, correct through AsyncVectorEnv's shared memory (the default)."""

from __future__ import annotations

import copy

import gymnasium as gym
import pytest
from gymnasium.vector.utils.shared_memory import create_shared_memory, read_from_shared_memory, write_to_shared_memory

import gaca_envs  # noqa: F401  (registers the ids)
from gaca_envs.spaces import SharedTexts, TextSpace


def _play(vec, steps: int) -> list:
    obs, info = vec.reset(seed=0, options={"task_id": "train-4"})
    seen = [obs]
    for _ in range(steps):
        obs, _, _, _, info = vec.step(tuple(actions[0] for actions in info["admissible_actions"]))
        seen.append(obs)
    return [tuple(o) for o in seen]


def test_async_vector_env_with_default_shared_memory_returns_the_real_observations():
    # Gymnasium's plain Text space returned the strings read at construction ('000...') forever.
    make = [lambda: gym.make("GACA-CriticalChain-v0") for _ in range(2)]
    sync = gym.vector.SyncVectorEnv(make)
    shared = gym.vector.AsyncVectorEnv(make)  # shared_memory=True, Gymnasium's default
    try:
        expected = _play(sync, 3)
        assert _play(shared, 3) == expected
        assert expected[0][0].startswith("Deliver the parcel") and expected[1] != expected[0]
    finally:
        sync.close()
        shared.close()


def test_shared_buffer_round_trips_unicode_and_lengths():
    space = TextSpace(16, min_length=0, any_unicode=True)
    buffer = create_shared_memory(space, n=3)
    view = read_from_shared_memory(space, buffer, n=3)
    for index, text in enumerate(("héllo ☃", "", "x" * 16)):
        write_to_shared_memory(space, index, text, buffer)
    assert isinstance(view, SharedTexts) and tuple(view) == ("héllo ☃", "", "x" * 16)
    assert copy.deepcopy(view) == ("héllo ☃", "", "x" * 16) and type(copy.deepcopy(view)) is tuple
    write_to_shared_memory(space, 1, "later", buffer)  # a live view: no re-read needed
    assert view[1] == "later" and view[1:] == ("later", "x" * 16) and len(view) == 3
    with pytest.raises(ValueError, match="observation must be a str of at most 16 characters"):
        write_to_shared_memory(space, 0, "y" * 17, buffer)


def test_text_space_membership():
    printable = TextSpace(8)
    assert printable.contains("ab c") and not printable.contains("é") and not printable.contains("")
    unicode = TextSpace(8, min_length=0, any_unicode=True)
    assert unicode.contains("é") and unicode.contains("") and not unicode.contains("x" * 9)
    assert printable.contains(printable.sample()) and unicode.contains(unicode.sample())
    assert printable != unicode and printable == TextSpace(8)
