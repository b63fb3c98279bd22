"""The one episode loop (gaca_train.rollout.episodes.play) and the players built on it."""

from __future__ import annotations

import ast
from pathlib import Path

import gymnasium as gym
import pytest

import gaca_envs  # noqa: F401
from gaca_train.rollout.episodes import Decision, EnvList, play

ROOT = Path(__file__).resolve().parents[3]


class _First:
    """Takes the first admissible action; remembers what it saw."""

    def __init__(self, stop_after: int | None = None) -> None:
        self.seen, self.started, self.stop_after = [], [], stop_after

    def start(self, index, observation, info):
        self.started.append(index)

    def act(self, turns):
        self.seen.append([(t.env_index, t.step, len(t.history)) for t in turns])
        self.histories = [list(t.history) for t in turns]
        out = []
        for t in turns:
            if self.stop_after is not None and t.step >= self.stop_after and t.env_index == 0:
                out.append(Decision(None, error="endpoint down"))
            else:
                out.append(Decision(t.info["admissible_actions"][0], shown="SHOWN"))
        return out


def _envs(n: int, **kwargs):
    return EnvList([gym.make("GACA-CriticalChain-v0", **kwargs) for _ in range(n)])


def test_play_cuts_at_max_steps_and_keeps_history():
    policy = _First()
    played = play(_envs(2), ["train-0", "train-1"], policy, 3, seed=0)
    assert policy.started == [0, 1]
    assert [len(turn) for turn in policy.seen] == [2, 2, 2]
    assert [h for _, _, h in policy.seen[2]] == [2, 2]  # two earlier steps in each history
    assert all(e.truncated and e.length == 3 for e in played.episodes)
    assert [(t.env_index, t.step) for t in played.transitions] == [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2)]
    assert [a for _, a in policy.histories[0]] == ["SHOWN", "SHOWN"]  # the action as the policy wants it shown
    assert [o for o, _ in policy.histories[0]] == [t.observation for t in played.transitions if t.env_index == 0][:2]


def test_play_runs_to_the_envs_own_end_without_a_limit():
    played = play(_envs(1, max_env_steps=4), ["train-0"], _First(), None, seed=0)
    assert played.episodes[0].length == 4 and played.episodes[0].truncated


def test_a_policy_can_end_an_episode_with_an_error():
    played = play(_envs(2), ["train-0", "train-1"], _First(stop_after=1), 3, seed=0)
    first, second = played.episodes
    assert first.error == "endpoint down" and first.length == 1 and not first.truncated
    assert second.error is None and second.length == 3


def test_collective_policy_is_asked_until_it_answers_none():
    calls = []

    class Collective:
        def act(self, turns):
            calls.append(len(turns))
            if len(calls) > 4:
                return None
            return [Decision(t.info["admissible_actions"][0]) for t in turns]

    env = _envs(1, max_env_steps=2)
    played = play(env, ["train-0"], Collective(), 10, seed=0, collective=True)
    assert calls == [1, 1, 0, 0, 0]  # the env ended after 2 steps; the policy kept being asked
    assert played.episodes[0].length == 2


class _SeedRecorder(gym.Wrapper):
    def reset(self, *, seed=None, options=None):
        self.seen = (seed, options)
        return super().reset(seed=seed, options=options)


@pytest.mark.parametrize(("seed", "expected"), [(None, [None, None]), (5, [5, 6]), ([7, 9], [7, 9])])
def test_env_list_seeds(seed, expected):
    """Env i is reset with seed + i (or seed[i]) and its own task id."""
    envs = [_SeedRecorder(gym.make("GACA-CriticalChain-v0")) for _ in range(2)]
    first = EnvList(envs).reset(["train-0", "train-1"], seed=seed)
    assert [e.seen for e in envs] == [(s, {"task_id": t}) for s, t in zip(expected, ["train-0", "train-1"])]
    assert [info["task_id"] for _, info in first] == ["train-0", "train-1"]


def test_no_other_module_writes_an_episode_loop():
    """Every player reaches env.step through gaca_train.rollout.episodes (and the vector pool it drives)."""
    allowed = {"gaca_train/rollout/episodes.py", "gaca_train/rollout/vector.py"}
    offenders = []
    for path in sorted((ROOT / "gaca_train").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel in allowed:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "step"):
                continue
            receiver = node.func.value
            name = getattr(receiver, "id", None) or getattr(receiver, "attr", "")
            if "env" in name.lower():  # env.step, self.env.step, eval_env.step, ...
                offenders.append(f"{rel}:{node.lineno}")
    assert offenders == []
