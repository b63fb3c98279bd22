from __future__ import annotations

import json
import shutil

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import gaca_envs
from gaca_envs.alfworld.engines import GameFileError
from gaca_envs.alfworld.env import ALFWorldEnv

ENDED = r"step\(\) called before reset\(\) or after the episode ended; call env\.reset\(\) first"


@pytest.fixture(scope="module")
def env(alfworld_root):
    env = gym.make("GACA-ALFWorld-v0", data_path=alfworld_root, expert=True)
    yield env
    env.close()


def _play(env, task_id, commands):
    obs, info = env.reset(options={"task_id": task_id})
    steps = [(obs, 0.0, False, False, info)]
    for command in commands:
        steps.append(env.step(command))
    return steps


def test_walkthrough_of_every_game_wins_through_the_env(env, games):
    for g in games:
        walkthrough = g["game"]["walkthrough"]
        obs, info = env.reset(options={"task_id": g["task_id"]})
        assert obs.startswith("-= Welcome to TextWorld, ALFRED! =-")
        assert info["task"] == g["traj"]["turk_annotations"]["anns"][0]["task_desc"]
        assert info["task_type"] == g["traj"]["task_type"] and info["task_id"] == g["task_id"]
        assert info["expert_action"] == walkthrough[0]
        for i, command in enumerate(walkthrough):
            assert command in info["admissible_actions"]
            obs, reward, terminated, truncated, info = env.step(command)
            last = i == len(walkthrough) - 1
            assert (reward, terminated, info["won"], info["score"]) == (
                (10.0, True, True, 1.0) if last else (0.0, False, False, 0.0)
            )
            assert info["action_valid"] and not truncated
        assert info["expert_action"] == ""


def test_info_has_the_contract_keys_on_reset_and_every_step(env, games):
    obs, info = env.reset(options={"task_id": games[0]["task_id"]})
    infos = [info] + [env.step(c)[4] for c in ("look", "inventory", "not a command")]
    for info in infos:
        assert set(gaca_envs.INFO_KEYS) <= set(info)
        assert isinstance(info["admissible_actions"], list) and "look" in info["admissible_actions"]
        assert len(info["anchor_key"]) == 32
    assert infos[-1]["anchor_text"] == "Nothing happens."


@pytest.mark.parametrize(
    "action",
    ["", "   ", "x" * 1_000_000, "ouvre le réfrigérateur", "look\x00", "\x1b[2Jlook", "go to\ttable 1", "LOOK"],
    ids=["empty", "blank", "1MB", "non-ascii", "nul", "escape", "tab-inside", "case"],
)
def test_bad_actions_are_steps_that_do_nothing(env, games, action):
    obs, info = env.reset(options={"task_id": games[0]["task_id"]})
    obs2, reward, terminated, truncated, info2 = env.step(action)
    assert obs2 == "Nothing happens." and info2["anchor_text"] == "Nothing happens."
    assert info2["action_valid"] is False and reward == 0.0 and not terminated and not truncated
    assert info2["anchor_key"] == info["anchor_key"]
    assert info2["admissible_actions"] == info["admissible_actions"]


def test_whitespace_around_a_command_is_ignored_as_in_alfworld(env, games):
    env.reset(options={"task_id": games[0]["task_id"]})
    _, _, _, _, info = env.step("  inventory\n")
    assert info["action_valid"] is True


def test_non_string_action_and_step_after_end_raise(env, games):
    env.reset(options={"task_id": games[0]["task_id"]})
    with pytest.raises(TypeError, match="action must be a str \\(an ALFWorld command\\), got int: 3"):
        env.step(3)
    for command in games[0]["game"]["walkthrough"]:
        env.step(command)
    with pytest.raises(RuntimeError, match=ENDED):
        env.step("look")


def test_truncated_at_max_steps(alfworld_root, games):
    env = ALFWorldEnv(data_path=alfworld_root, max_env_steps=3)
    env.reset(options={"task_id": games[0]["task_id"]})
    ends = [env.step("look")[2:4] for _ in range(3)]
    assert ends == [(False, False), (False, False), (False, True)]
    with pytest.raises(RuntimeError, match="call env.reset"):
        env.step("look")
    env.close()


def test_reset_errors_and_seeded_choice(env, games):
    with pytest.raises(ValueError, match="unknown task_id 'train/nope'; expected one of env.unwrapped.task_ids"):
        env.reset(options={"task_id": "train/nope"})
    with pytest.raises(ValueError, match="reset options may only contain 'task_id' or 'snapshot', got \\['level'\\]"):
        env.reset(options={"level": 1})
    first = env.reset(seed=123)[1]["task_id"]
    assert env.reset(seed=123)[1]["task_id"] == first
    assert len({env.reset(seed=s)[1]["task_id"] for s in range(4)}) > 1


def test_two_envs_side_by_side_are_identical(alfworld_root, games):
    a, b = ALFWorldEnv(data_path=alfworld_root), ALFWorldEnv(data_path=alfworld_root)
    g = games[2]
    commands = ["look", "bogus"] + g["game"]["walkthrough"]
    for sa, sb in zip(_play(a, g["task_id"], commands), _play(b, g["task_id"], commands), strict=True):
        assert sa[:4] == sb[:4]
        assert sa[4] == sb[4]
    a.close(), b.close()


def _kitchen(games):
    return next(g for g in games if g["traj"]["task_type"] == "pick_heat_then_place_in_recep")


def test_anchor_key_is_the_same_for_two_paths_to_the_same_state(env, games):
    g = _kitchen(games)
    obs, info = env.reset(options={"task_id": g["task_id"]})
    gotos = [a for a in info["admissible_actions"] if a.startswith("go to ")]
    fridge = next(a for a in gotos if "fridge" in a)
    direct = _play(env, g["task_id"], [fridge])[-1][4]["anchor_key"]
    detour = _play(env, g["task_id"], [gotos[0], gotos[1], fridge])[-1][4]["anchor_key"]
    fridge_name = fridge.removeprefix("go to ")
    open_close = _play(env, g["task_id"], [fridge, f"open {fridge_name}", f"close {fridge_name}", "look", "inventory"])
    assert direct == detour == open_close[-1][4]["anchor_key"]
    # Looking changes nothing; opening does.
    assert open_close[1][4]["anchor_key"] == direct and open_close[2][4]["anchor_key"] != direct


def test_anchor_key_differs_when_an_object_is_elsewhere_or_changed(env, games):
    g = _kitchen(games)
    walkthrough = g["game"]["walkthrough"]
    take = next(i for i, c in enumerate(walkthrough) if c.startswith("take "))
    holding = _play(env, g["task_id"], walkthrough[: take + 1])[-1]
    obj = walkthrough[take].split(" from ")[0].removeprefix("take ")
    info = holding[4]
    puts = [a for a in info["admissible_actions"] if a.startswith(f"move {obj} to ")]
    assert puts, "the walkthrough takes the object where it can be put back"
    put_back = env.step(puts[0])[4]["anchor_key"]
    # Same place, but the object has been heated: a different state.
    heat_at = next(i for i, c in enumerate(walkthrough) if c.startswith("heat "))
    heated = _play(env, g["task_id"], walkthrough[: heat_at + 1])[-1][4]
    not_heated = _play(env, g["task_id"], walkthrough[:heat_at])[-1][4]
    assert heated["anchor_key"] != not_heated["anchor_key"]
    # Same agent place, object put on two different receptacles.
    final = _play(env, g["task_id"], walkthrough)[-1][4]["anchor_key"]
    assert len({info["anchor_key"], put_back, final}) == 3


def test_gymnasium_env_checker(games):
    env = ALFWorldEnv(game_files=[str(games[0]["file"]), str(games[5]["file"])])
    check_env(env, skip_render_check=True)
    env.close()


def test_make_by_module_path_without_importing_the_package(alfworld_root):
    env = gym.make("gaca_envs:GACA-ALFWorld-v0", data_path=str(alfworld_root))
    assert isinstance(env.unwrapped, ALFWorldEnv)
    env.close()


def test_constructor_validation(alfworld_root, tmp_path):
    with pytest.raises(ValueError, match="split must be one of train, valid_seen, valid_unseen, got 'dev'"):
        ALFWorldEnv(split="dev")
    with pytest.raises(ValueError, match="max_env_steps must be an int >= 1, got 0"):
        ALFWorldEnv(max_env_steps=0)
    with pytest.raises(ValueError, match="engine must be one of 'native', 'textworld', got 'fast'"):
        ALFWorldEnv(engine="fast")
    with pytest.raises(FileNotFoundError, match="holds no json_2.1.1 folder"):
        ALFWorldEnv(data_path=tmp_path)
    with pytest.raises(ValueError, match="task_types: 9 is not an ALFWorld task type; give numbers 1-6 or names"):
        ALFWorldEnv(data_path=alfworld_root, task_types=[9])


def _copy_game(src, dst_root, name):
    dst = dst_root / "train" / "pick_and_place_simple-X-None-Y-1" / name
    shutil.copytree(src.parent, dst)
    return dst / "game.tw-pddl"


def test_corrupt_or_unsolvable_game_files_are_named_in_the_error(tmp_path, games):
    not_json = _copy_game(games[0]["file"], tmp_path, "trial_a")
    not_json.write_text("{not json")
    with pytest.raises(GameFileError, match=f"cannot read ALFWorld game file {not_json}"):
        ALFWorldEnv(game_files=[str(not_json)])
    unsolvable = _copy_game(games[0]["file"], tmp_path, "trial_b")
    data = json.loads(unsolvable.read_text())
    unsolvable.write_text(json.dumps({**data, "solvable": False}))
    with pytest.raises(GameFileError, match=f"ALFWorld game file {unsolvable} is marked unsolvable"):
        ALFWorldEnv(game_files=[str(unsolvable)])
    bad_pddl = _copy_game(games[0]["file"], tmp_path, "trial_c")
    bad_pddl.write_text(json.dumps({**data, "pddl_problem": "(define (problem broken"}))
    env = ALFWorldEnv(game_files=[str(bad_pddl)])
    with pytest.raises(GameFileError, match=f"cannot load ALFWorld game file {bad_pddl}"):
        env.reset()
    missing = _copy_game(games[0]["file"], tmp_path, "trial_d")
    missing.write_text(json.dumps({"grammar": ""}))
    with pytest.raises(
        GameFileError, match=f"ALFWorld game file {missing} lacks pddl_domain, pddl_problem; expected a JSON object"
    ):
        ALFWorldEnv(game_files=[str(missing)])


def test_engine_first_reset_after_load_equals_a_translated_reset(games):
    from gaca_envs.alfworld.engines.textworld import TextWorldEngine

    engine = TextWorldEngine()
    g = games[1]
    engine.load(str(g["file"]))
    first = engine.reset()  # reuses the state load() translated
    names, static = engine.entity_names(), engine.static_facts()
    for command in g["game"]["walkthrough"]:
        last = engine.step(command)
    assert last.won and not first.won
    again = engine.reset()  # translates the problem afresh
    assert again == first
    assert engine.entity_names() == names and engine.static_facts() == static


def test_task_ids_of_the_envs_split_as_a_list_and_as_the_contracts_method(env):
    ids = env.unwrapped.task_ids
    assert isinstance(ids, list) and ids == env.unwrapped.task_ids("train") == env.unwrapped.task_ids()
    assert all(env.reset(options={"task_id": t})[1]["task_id"] == t for t in ids[:2])
    with pytest.raises(ValueError, match="this env was built for split 'train' and plays only its tasks, not those"):
        env.unwrapped.task_ids("valid_seen")
