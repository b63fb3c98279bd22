"""The native ALFWorld engine: parity with TextWorld's engine, bad game files, save/restore."""

from __future__ import annotations

import json
import pickle
import random
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import pytest

import gaca_envs  # noqa: F401  (registers GACA-ALFWorld-v0)
from gaca_envs.alfworld import parity
from gaca_envs.alfworld.domain import demangle
from gaca_envs.alfworld.engines import GameFileError
from gaca_envs.alfworld.engines.native import NativeEngine
from gaca_envs.alfworld.engines.textworld import TextWorldEngine

# 12 generated games hold every task type and every room kind (kitchen, living room, bedroom, bathroom);
# scripts/parity_alfworld.py checks the whole generated split and real ALFWorld data (docs/BENCHMARKS.md).
PARITY_GAMES = 12
PARITY_STEPS = 15
REAL_PARITY_GAMES = 6


@pytest.fixture(scope="module")
def parity_root(tmp_path_factory) -> Path:
    """12 generated train games (every task type, every room kind), for the CI parity subset."""
    from gaca_envs.alfworld.generate import generate

    out = tmp_path_factory.mktemp("parity_games")
    generate(out, PARITY_GAMES, seed=3, split="train", difficulty="standard")
    return out


@pytest.mark.slow
def test_parity_subset_matches_textworld(parity_root, monkeypatch, capsys):
    # The parity check on 12 games: walkthrough + one random walk (admissible, invalid and
    # whitespace-padded commands) per game, every step's text, commands, won, facts, anchor key.
    monkeypatch.setattr(parity, "WALK_STEPS", PARITY_STEPS)
    status = parity.main(["--games", str(PARITY_GAMES), "--walks", "1", "--data", str(parity_root)])
    out = capsys.readouterr().out
    assert status == 0, out
    assert f"parity: {PARITY_GAMES} games" in out and " 0 mismatches" in out
    folders = [p.parent.parent.name for p in (parity_root / "json_2.1.1" / "train").glob("*/*/game.tw-pddl")]
    assert len({f.split("-")[0] for f in folders}) == 6  # every task type
    floor_plans = {int(f.rsplit("-", 1)[1]) for f in folders}  # ALFWorld's: 1-30 kitchens, 201-230 living rooms, ...
    assert {plan // 100 for plan in floor_plans} == {0, 2, 3, 4}  # every room kind


@pytest.mark.slow
def test_parity_subset_on_real_difficulty_games(tmp_path, monkeypatch, capsys):
    # Games of the `real` difficulty (issue 16): receptacles sharing a place, cabinets and drawers
    # that do not open, fixed scene objects, denser surfaces. Walkthrough + one walk per game.
    from gaca_envs.alfworld.generate import generate

    monkeypatch.setattr(parity, "WALK_STEPS", PARITY_STEPS)
    generate(tmp_path, REAL_PARITY_GAMES, seed=0, split="train", difficulty="real")  # what --seed 0 would make
    argv = ["--games", str(REAL_PARITY_GAMES), "--walks", "1", "--difficulty", "real", "--data", str(tmp_path)]
    status = parity.main(argv)
    out = capsys.readouterr().out
    assert status == 0, out
    assert f"parity: {REAL_PARITY_GAMES} games" in out and " 0 mismatches" in out
    problems = [json.loads(p.read_text())["pddl_problem"] for p in tmp_path.glob("json_2.1.1/train/*/*/game.tw-pddl")]
    fixed = ("HousePlantType", "TelevisionType", "SinkType", "MirrorType")  # scenes.FIXED_HOLDERS
    assert any(f" {kind})" in p.split("(:init", 1)[1] for p in problems for kind in fixed)


def test_env_defaults_to_native_and_matches_textworld_env(game_files):
    native = gym.make("GACA-ALFWorld-v0", game_files=[str(f) for f in game_files[:2]])
    stock = gym.make("GACA-ALFWorld-v0", game_files=[str(f) for f in game_files[:2]], engine="textworld")
    for task_id in native.unwrapped.task_ids:
        rng = random.Random(task_id)
        a, b = native.reset(options={"task_id": task_id}), stock.reset(options={"task_id": task_id})
        assert a == b
        for _ in range(12):
            action = rng.choice(a[-1]["admissible_actions"] + ["jump around"])
            a, b = native.step(action), stock.step(action)
            assert a == b
            if a[2] or a[3]:
                break
    assert type(native.unwrapped._engine).__name__ == "NativeEngine"


def test_unknown_engine_name_is_refused():
    with pytest.raises(ValueError, match="engine must be one of 'native', 'textworld', got 'fast'"):
        gym.make("GACA-ALFWorld-v0", engine="fast")


def test_engine_level_invalid_commands_match(game_files):
    native, stock = NativeEngine(), TextWorldEngine()
    for engine in (native, stock):
        engine.load(str(game_files[0]))
        engine.reset()
    for command in ("", "xyzzy", "go to", "  look  ", "inventory", "take nothing from nowhere", "help"):
        assert native.step(command) == stock.step(command)


def test_save_restore_then_replay_gives_identical_steps(game_files):
    env = gym.make("GACA-ALFWorld-v0", game_files=[str(f) for f in game_files], max_env_steps=200)
    rng = random.Random(0)
    for task_id in env.unwrapped.task_ids:
        obs, info = env.reset(options={"task_id": task_id})
        for _ in range(rng.randrange(3, 15)):
            obs, _, terminated, _, info = env.step(rng.choice(info["admissible_actions"]))
            if terminated:
                break
        if terminated:
            continue
        snapshot = env.unwrapped.save_state()
        assert len(pickle.dumps(snapshot)) < 64_000  # small: facts as frozensets, no engine objects
        commands = [None] * 10
        first = []
        for i in range(10):
            commands[i] = rng.choice(info["admissible_actions"] + ["do a dance"])
            step = env.step(commands[i])
            first.append(step)
            info = step[4]
            if step[2] or step[3]:
                break
        # Restore in this env (after playing on), and in a fresh env that played another game.
        other = gym.make("GACA-ALFWorld-v0", game_files=[str(f) for f in game_files], max_env_steps=200)
        other.reset(options={"task_id": env.unwrapped.task_ids[0]})
        for target in (env, other):
            target.unwrapped.restore_state(snapshot)
            replay = [target.step(c) for c, _ in zip(commands, first, strict=False)]
            assert replay == first


def test_replay_reaches_the_state_stepping_reaches_and_stops_where_stepping_could_not_go(game_files):
    rng = random.Random(3)
    for path in game_files:
        stepped, replayed = NativeEngine(), NativeEngine()
        stepped.load(str(path))
        replayed.load(str(path))
        state, commands = stepped.reset(), []
        for _ in range(rng.randrange(0, 30)):
            if state.won:
                break
            commands.append(rng.choice(state.admissible_commands))
            state = stepped.step(commands[-1])
        replay = replayed.replay(commands)
        assert replay.stopped_at is None and replay.state == state
        assert replay.intro == NativeEngine.reset(replayed).observation
        if commands:  # a command the game does not take stops the replay there
            replay = replayed.replay([*commands[:-1], "fly to the moon"])
            assert (replay.stopped_at, replay.why) == (len(commands) - 1, "not admissible")
        walkthrough = json.loads(path.read_text())["walkthrough"]  # wins; nothing is played after a win
        assert replayed.replay(walkthrough).state.won
        assert replayed.replay([*walkthrough, "look"])[2:] == (len(walkthrough), "won")


def test_save_state_needs_native_engine(game_files):
    env = gym.make("GACA-ALFWorld-v0", game_files=[str(game_files[0])], engine="textworld")
    env.reset()
    with pytest.raises(RuntimeError, match="save_state\\(\\) needs engine='native'"):
        env.unwrapped.save_state()


def test_native_reset_runs_no_planner_and_no_textworld(game_files):
    # A fresh process: resetting and stepping the native env must not import TextWorld or Fast Downward.
    code = (
        "import sys, gymnasium as gym, gaca_envs\n"
        f"env = gym.make('GACA-ALFWorld-v0', game_files=[{str(game_files[0])!r}])\n"
        "obs, info = env.reset(); env.step(info['admissible_actions'][0])\n"
        "print(sorted(m for m in ('textworld', 'fast_downward', 'alfworld') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_demangle_numbers_kinds_from_the_end_of_the_sorted_ids():
    ids = ["apple_bar_2", "apple_bar_1", "sink_bar_1_bar_sinkbasin", "agent1", "loc_bar_3"]
    assert demangle(ids) == {
        "agent1": "agent1 ",
        "apple_bar_1": "apple 2",  # first in sorted order gets the highest number
        "apple_bar_2": "apple 1",
        "loc_bar_3": "loc 1",
        "sink_bar_1_bar_sinkbasin": "sinkbasin 1",
    }


def _broken(tmp_path: Path, game_file: Path, edit) -> str:
    game = json.loads(game_file.read_text())
    edit(game)
    path = tmp_path / "game.tw-pddl"
    path.write_text(json.dumps(game))
    return str(path)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda g: g.update(pddl_domain=g["pddl_domain"].replace("(opened ?r)\n", "", 1)),
            "its PDDL domain is not ALFWorld's alfred.pddl",
        ),
        (
            lambda g: g.update(pddl_problem=g["pddl_problem"].replace("agent1 - agent", "agent1 - robot")),
            "object agent1 has unknown type 'robot'",
        ),
        (
            lambda g: g.update(pddl_problem=g["pddl_problem"].replace("(atLocation agent1 ", "(nearby agent1 ")),
            "uses unknown predicate 'nearby'",
        ),
        (
            lambda g: g.update(pddl_problem=g["pddl_problem"].replace("(atLocation agent1 ", "(atLocation agent7 ")),
            "names 'agent7', which is not declared",
        ),
        (
            lambda g: g.update(
                pddl_problem=g["pddl_problem"].replace("(atLocation agent1 ", "(receptacleAtLocation agent1 ")
            ),
            "argument 1 'agent1' has type 'agent', predicate receptacleatlocation expects 'receptacle'",
        ),
        (
            lambda g: g.update(pddl_problem=g["pddl_problem"].replace("(atLocation agent1 ", "(holdsAny agent1 ")),
            "fact \\(holdsany agent1 .*\\) needs 1 object arguments",
        ),
        (
            lambda g: g.update(grammar=g["grammar"].replace('"#look.feedback#"', '"#look.fedback#"')),
            "uses #look.fedback# but defines no rule",
        ),
        (
            lambda g: g.update(grammar=g["grammar"].replace("{r.name}", "{__import__('os').name}", 1)),
            "grammar expression .* uses Call",
        ),
        (lambda g: g.pop("pddl_problem"), "lacks pddl_problem"),
    ],
)
def test_bad_game_files_fail_at_load_naming_file_and_problem(tmp_path, game_files, edit, message):
    path = _broken(tmp_path, game_files[0], edit)
    with pytest.raises(GameFileError, match=f"{path}.*{message}|{message}.*{path}"):
        NativeEngine().load(path)


def test_missing_agent_start_is_reported(tmp_path, game_files):
    def drop_start(g):
        lines = g["pddl_problem"].split("\n")
        g["pddl_problem"] = "\n".join(x for x in lines if not x.strip().startswith("(atLocation agent1"))

    path = _broken(tmp_path, game_files[0], drop_start)
    with pytest.raises(GameFileError, match=r"missing fact \(atLocation <agent> <location>\)"):
        NativeEngine().load(path)


def _where(engine: NativeEngine, obj: str) -> str:
    return next(r for o, r in engine._store.dynamic["inreceptacle"] if o == obj)


def _slice_and_transform_commands(engine: NativeEngine) -> list[str]:
    # Rare paths random walks seldom reach: slicing, then heating/cooling/cleaning and examining.
    n, static = engine.entity_names(), engine._game.static
    knife = next(o for o, t in sorted(static["objecttype"]) if t in ("knifetype", "butterknifetype"))
    food = next(o for (o,) in sorted(static["sliceable"]))
    rk, rf = _where(engine, knife), _where(engine, food)
    cmds = [f"go to {n[rk]}", f"open {n[rk]}", f"take {n[knife]} from {n[rk]}", f"examine {n[knife]}"]
    cmds += [f"go to {n[rf]}", f"open {n[rf]}", f"slice {n[food]} with {n[knife]}", "look"]
    cmds += [f"move {n[knife]} to {n[rf]}", f"take {n[food]} from {n[rf]}", f"examine {n[food]}", "inventory"]
    for r, t in sorted(static["receptacletype"]):
        verb = {"microwavetype": "heat", "fridgetype": "cool", "sinkbasintype": "clean"}.get(t)
        if verb:
            cmds += [f"go to {n[r]}", f"{verb} {n[food]} with {n[r]}", f"examine {n[food]}", "look"]
    return cmds


def _shared_location_game(tmp_path: Path, game_file: Path) -> tuple[str, list[str]]:
    # Two receptacles at one place (as in real ALFWorld data): "go to" pruning, "You are facing
    # the a, and b", and the "Next to it, you see ..." list fed by TextWorld's not_inreceptacle facts.
    engine = NativeEngine()
    engine.load(str(game_file))
    engine.reset()
    game, n = engine._game, engine.entity_names()
    holders = sorted(
        {r for _, r in engine._store.dynamic["inreceptacle"] if (r,) not in game.static.get("openable", ())}
    )
    r1, r2 = (
        holders[0],
        next(r for r in sorted(game.loc_of) if r != holders[0] and (r,) not in game.static.get("openable", ())),
    )
    obj = next(
        o for o, r in sorted(engine._store.dynamic["inreceptacle"]) if r == r1 and (o,) in game.static["pickupable"]
    )
    data = json.loads(game_file.read_text())
    problem = data["pddl_problem"]
    old_loc, new_loc = game.loc_of[r2], game.loc_of[r1]
    lines = []
    for line in problem.split("\n"):
        low = line.lower()
        if f"receptacleatlocation {r2} " in low or (
            "objectatlocation " in low and low.strip().endswith(f"{old_loc})")
        ):
            line = line[: line.lower().rindex(old_loc)] + new_loc + ")"
        lines.append(line)
    data["pddl_problem"] = "\n".join(lines)
    path = tmp_path / "shared" / "game.tw-pddl"
    path.parent.mkdir()
    path.write_text(json.dumps(data))
    cmds = [f"go to {n[r1]}", "look", f"go to {n[r2]}", f"take {n[obj]} from {n[r1]}", f"move {n[obj]} to {n[r2]}"]
    cmds += [
        "look",
        f"examine {n[r1]}",
        f"examine {n[r2]}",
        f"take {n[obj]} from {n[r2]}",
        f"move {n[obj]} to {n[r1]}",
    ]
    return str(path), [*cmds, "look", "inventory"]


@pytest.mark.slow
def test_rare_paths_match_textworld(parity_root, tmp_path):
    files = sorted((parity_root / "json_2.1.1" / "train").glob("*/*/game.tw-pddl"))
    native, stock = NativeEngine(), TextWorldEngine()
    plays = []
    for f in files:
        native.load(str(f))
        native.reset()
        static = native._game.static
        if any(t in ("knifetype", "butterknifetype") for _, t in static["objecttype"]) and static.get("sliceable"):
            plays.append((str(f), _slice_and_transform_commands(native)))
            break
    assert plays, "no generated game with a knife and something to slice"
    plays.append(_shared_location_game(tmp_path, files[0]))
    sliced = shared = False
    for game_file, commands in plays:
        for engine in (native, stock):
            engine.load(game_file)
        assert native.reset() == stock.reset()
        for command in commands:
            a, b = native.step(command), stock.step(command)
            assert a == b, command
            sliced |= a.observation.startswith("You sliced")
            shared |= "Next to it, you see a " in a.observation
    assert sliced and shared


def test_engines_share_a_built_game_and_play_it_as_a_fresh_build(game_files, tmp_path):
    from gaca_envs.alfworld.engines.native import engine as native_engine

    path = tmp_path / "game.tw-pddl"
    path.write_bytes(game_files[2].read_bytes())
    first, second = NativeEngine(), NativeEngine()
    first.load(str(path))
    second.load(str(path))
    assert second._game is first._game  # built once, shared by the process's engines
    native_engine._GAMES.clear()
    fresh = NativeEngine()
    fresh.load(str(path))
    assert fresh._game is not first._game
    rng = random.Random(0)
    states = [engine.reset() for engine in (first, second, fresh)]
    for _ in range(30):  # the shared game and a fresh build answer a walk alike, step by step
        assert states[0] == states[1] == states[2]
        command = rng.choice(sorted(states[0].admissible_commands))
        states = [engine.step(command) for engine in (first, second, fresh)]
    # A rewritten file is built again, not served from the cache.
    game = json.loads(path.read_text())
    game["pddl_domain"] = game["pddl_domain"].replace("(opened ?r)\n", "", 1)
    path.write_text(json.dumps(game))
    with pytest.raises(GameFileError, match="not ALFWorld's alfred.pddl"):
        NativeEngine().load(str(path))
