from __future__ import annotations

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import gaca_envs
from gaca_envs.criticalchain import NOTHING_HAPPENS, CriticalChainEnv, make_task

ENDED = r"step\(\) called before reset\(\) or after the episode ended; call env\.reset\(\) first"


def _play(env: CriticalChainEnv, task_id: str, policy) -> list[tuple[str, dict]]:
    """Plays one episode; returns (observation, info) per state, the reset state first."""
    obs, info = env.reset(options={"task_id": task_id})
    states = [(obs, info)]
    done = False
    while not done:
        obs, _, terminated, truncated, info = env.step(policy(info))
        states.append((obs, info))
        done = terminated or truncated
    return states


def test_registered_and_passes_gymnasium_checker():
    env = gym.make("GACA-CriticalChain-v0")
    check_env(env.unwrapped)
    env.close()


def test_info_has_every_contract_key_on_reset_and_step():
    env = CriticalChainEnv(horizon=4, num_branches=1)
    _, info = env.reset(seed=1)
    assert set(gaca_envs.INFO_KEYS) <= set(info)
    _, _, _, _, info = env.step(info["admissible_actions"][0])
    assert set(gaca_envs.INFO_KEYS) <= set(info)
    assert isinstance(info["anchor_key"], str) and len(info["anchor_key"]) == 32


def test_expert_wins_and_wrong_fork_loses_only_at_the_end():
    env = CriticalChainEnv(horizon=6, num_branches=2, expert=True)
    states = _play(env, "train-5", lambda info: info["expert_action"])
    assert states[-1][1]["won"] and states[-1][1]["score"] == 1.0
    assert len(states) == 7  # one step per stage

    def wrong_at_first_fork(info):
        if info["fork"] and info["stage"] == min(
            s for s in make_task("train-5", seed=0, horizon=6, num_branches=2, branch_width=2).fork_stages
        ):
            return next(a for a in info["admissible_actions"] if a.startswith("take") and a != info["expert_action"])
        return info["expert_action"]

    states = _play(env, "train-5", wrong_at_first_fork)
    infos = [info for _, info in states]
    assert not infos[-1]["won"] and infos[-1]["score"] == 0.0
    # Consequences show only at the end: every observation before the goal is free of the verdict.
    assert all("wrong" not in obs for obs, _ in states[:-1])
    assert "wrong" in states[-1][0]


def test_reward_only_on_winning_step():
    env = CriticalChainEnv(horizon=3, num_branches=1, reward_on_success=7.0, expert=True)
    _, info = env.reset(options={"task_id": "valid-2"})
    rewards = []
    done = False
    while not done:
        _, reward, terminated, truncated, info = env.step(info["expert_action"])
        rewards.append(reward)
        done = terminated or truncated
    assert rewards == [0.0, 0.0, 7.0]


def test_same_task_id_gives_same_start_and_group_shares_it():
    a, b = CriticalChainEnv(), CriticalChainEnv()
    obs_a, info_a = a.reset(seed=1, options={"task_id": "train-9"})
    obs_b, info_b = b.reset(seed=2, options={"task_id": "train-9"})
    assert obs_a == obs_b and info_a["anchor_key"] == info_b["anchor_key"] and info_a["task_id"] == "train-9"
    _, info_c = a.reset(options={"task_id": "train-10"})
    assert info_c["anchor_key"] != info_a["anchor_key"]


def test_seeded_determinism_side_by_side_with_noise():
    a, b = CriticalChainEnv(noise=0.3, expert=True), CriticalChainEnv(noise=0.3, expert=True)
    out_a = [a.reset(seed=7)]
    out_b = [b.reset(seed=7)]
    for _ in range(30):
        info = out_a[-1][-1]
        if a._done:
            break
        out_a.append(a.step(info["expert_action"]))
        out_b.append(b.step(info["expert_action"]))
    assert out_a == out_b
    # The noise matters: a slip happened somewhere in 30 tries at 30%, so the walk took longer.
    assert any("stumble" in step[0] for step in out_a[1:])


def test_anchor_key_groups_recurring_states_and_separates_hidden_choices():
    env = CriticalChainEnv(horizon=5, num_branches=1, expert=True, num_distractors=2)
    direct = [info["anchor_key"] for _, info in _play(env, "train-1", lambda i: i["expert_action"])]
    # Detour: a no-op first (state recurs with the same key), then "go to" instead of "walk to".
    calls = {"n": 0}

    def detour(info):
        calls["n"] += 1
        if calls["n"] == 1:
            return "look around"
        if calls["n"] == 2:
            return info["expert_action"].replace("walk to", "go to")
        return info["expert_action"]

    states = _play(env, "train-1", detour)
    keys = [info["anchor_key"] for _, info in states]
    assert keys[0] == keys[1] == direct[0]  # a no-op returns to the same state
    assert keys[1:] == direct  # two phrasings of "move on" reach the same states
    assert states[0][1]["anchor_text"] != states[1][1]["anchor_text"]  # raw text differs, the state does not

    fork_stage = make_task("train-1", seed=0, horizon=5, num_branches=1, branch_width=2).fork_stages[0]

    def wrong(info):
        if info["fork"]:
            return next(a for a in info["admissible_actions"] if a.startswith("take") and a != info["expert_action"])
        return info["expert_action"]

    wrong_states = _play(env, "train-1", wrong)
    wrong_keys = [info["anchor_key"] for _, info in wrong_states]
    after = fork_stage + 1
    assert wrong_keys[:after] == direct[:after]
    # After the fork the observation is the same but the true state is not.
    assert wrong_states[after][1]["anchor_text"] == states[after + 1][1]["anchor_text"]
    assert wrong_keys[after] != direct[after]


@pytest.mark.parametrize("bad", ["", "x" * 1_000_000, "take the road to nowhere", "caf\u00e9 \u2603", "\x00\x1b[2J"])
def test_bad_text_is_an_invalid_step_not_a_crash(bad):
    env = CriticalChainEnv(horizon=3, num_branches=1, max_env_steps=10)
    obs0, info0 = env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(bad)
    assert obs == NOTHING_HAPPENS and reward == 0.0 and not terminated and not truncated
    assert info["action_valid"] is False
    assert info["anchor_key"] == info0["anchor_key"]  # the state did not move


def test_actions_are_case_and_space_insensitive():
    env = CriticalChainEnv(horizon=3, num_branches=0, expert=True)
    _, info = env.reset(seed=0)
    _, _, _, _, info2 = env.step("  " + info["expert_action"].upper().replace(" ", "   ") + " ")
    assert info2["action_valid"] and info2["stage"] == 1


def test_truncates_at_max_steps():
    env = CriticalChainEnv(horizon=5, num_branches=1, max_env_steps=3)
    env.reset(seed=0)
    results = [env.step("wait")[2:4] for _ in range(3)]
    assert results == [(False, False), (False, False), (False, True)]


def test_non_string_action_and_step_after_end_raise():
    env = CriticalChainEnv(horizon=3, num_branches=0, max_env_steps=1)
    with pytest.raises(RuntimeError, match=ENDED):
        env.step("wait")
    env.reset(seed=0)
    with pytest.raises(TypeError, match="action must be a str, got int: 3"):
        env.step(3)
    env.step("wait")
    with pytest.raises(RuntimeError, match=ENDED):
        env.step("wait")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"horizon": 1}, "horizon must be >= 2, got 1"),
        ({"horizon": 4, "num_branches": 4}, r"num_branches must be in \[0, horizon - 1\] = \[0, 3\]"),
        ({"branch_width": 1}, r"branch_width must be in \[2, 10\], got 1"),
        ({"noise": 1.0}, r"noise must be in \[0, 1\), got 1.0"),
        ({"split": "dev"}, "split must be one of"),
        ({"num_distractors": 99}, r"num_distractors must be in \[0, 6\], got 99"),
        ({"move_phrasings": 0}, r"move_phrasings must be an int in \[1, 8\], got 0"),
    ],
)
def test_bad_parameters_are_clear_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        CriticalChainEnv(**kwargs)


@pytest.mark.parametrize(
    ("task_id", "error", "message"),
    [
        ("train_3", ValueError, "task_id must look like '<split>-<index>'"),
        ("dev-3", ValueError, "task_id must look like"),
        ("train-5000", ValueError, "task index 5000 of 'train-5000' is out of range: num_tasks=1000"),
        (3, TypeError, r"options\['task_id'\] must be a str"),
    ],
)
def test_bad_task_ids_are_clear_errors(task_id, error, message):
    with pytest.raises(error, match=message):
        CriticalChainEnv().reset(options={"task_id": task_id})


def test_task_ids_and_task_generation_are_stable():
    env = CriticalChainEnv(num_tasks=3)
    assert env.task_ids("test") == ["test-0", "test-1", "test-2"]
    t1 = make_task("train-4", seed=0, horizon=10, num_branches=3, branch_width=3)
    t2 = make_task("train-4", seed=0, horizon=10, num_branches=3, branch_width=3)
    assert t1 == t2 and len(t1.fork_stages) == 3 and 0 not in t1.fork_stages
    assert all(sign in signs for sign, signs in zip(t1.correct_signs, t1.fork_signs, strict=True))
    assert make_task("train-4", seed=1, horizon=10, num_branches=3, branch_width=3) != t1


def test_works_in_async_vector_env_with_a_group():
    envs = gym.vector.AsyncVectorEnv([lambda: gym.make("GACA-CriticalChain-v0") for _ in range(2)])
    try:
        obs, info = envs.reset(seed=0, options={"task_id": "train-4"})
        assert obs[0] == obs[1] and info["anchor_key"][0] == info["anchor_key"][1]
    finally:
        envs.close()


def test_move_phrasings_offer_equivalent_ways_on_and_the_default_is_unchanged():
    default = CriticalChainEnv(num_distractors=0)
    _, info = default.reset(options={"task_id": "train-0"})
    assert [a.split(" the ")[0] for a in info["admissible_actions"]] == ["go to", "walk to"]
    wide = CriticalChainEnv(num_distractors=0, move_phrasings=5)
    _, info = wide.reset(options={"task_id": "train-0"})
    assert len(info["admissible_actions"]) == 5
    keys = set()
    for action in info["admissible_actions"]:  # every phrasing leads to the same next state
        wide.reset(options={"task_id": "train-0"})
        keys.add(wide.step(action)[4]["anchor_key"])
    assert len(keys) == 1
    assert "move_phrasings" not in default.save_state().state["env_args"]  # default snapshots keep their form
    assert wide.save_state().state["env_args"]["move_phrasings"] == 5


def test_step_outcomes_list_every_outcome_and_leave_the_env_as_it_was():
    env = CriticalChainEnv(noise=0.25, num_distractors=1)
    obs, info = env.reset(seed=3, options={"task_id": "train-2"})
    before = env.save_state()
    move = next(a for a in info["admissible_actions"] if a.startswith("walk"))
    outcomes = env.step_outcomes(move)
    assert [p for p, _, _ in outcomes] == [0.75, 0.25]
    on, slip = outcomes[0][1], outcomes[1][1]
    assert on[4]["stage"] == 1 and slip[4]["stage"] == 0 and "stumble" in slip[0]
    assert outcomes[0][2].steps == 1 and env.save_state() == before  # the table left the env untouched
    ((p, result, after),) = env.step_outcomes("look around")
    assert p == 1.0 and result[4]["stage"] == 0 and after is not None
    # An outcome's snapshot restores the state that outcome reached.
    assert env.restore_state(outcomes[0][2])[0] == on[0] and env.restore_state(outcomes[1][2])[0] == slip[0]
