from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from gaca_train.experiments.tiny import torch_threads

ROOT = Path(__file__).resolve().parents[2]


def _scripts():
    from gaca_train.experiments import quickstart, warm_start

    return quickstart, warm_start


@pytest.mark.slow
def test_quickstart_smoke_writes_curve_and_before_after_summary(tmp_path):
    quickstart_cpu, _ = _scripts()
    summary = quickstart_cpu.main(
        ["--env", "GACA-CriticalChain-v0", "--out", str(tmp_path), "--sft-steps", "2", "--iterations", "1",
         "--eval-rollouts-per-task", "1"]
    )  # fmt: skip
    assert summary["iterations"] == 1 and summary["estimator"] == "gaca"
    for key in ("before", "after"):
        assert summary[key]["episodes"] == 8 and 0.0 <= summary[key]["success_rate"] <= 1.0
    assert (tmp_path / "learning_curve.png").stat().st_size > 1000
    assert json.loads((tmp_path / "summary.json").read_text())["after"] == summary["after"]
    assert (tmp_path / "after_rl" / "model.safetensors").exists()
    from gaca_envs.task_env import NOTHING_HAPPENS

    _, tokenizer, _ = quickstart_cpu.load_warm_start(tmp_path / "warm_start")
    # the env's answer to an invalid action is in the vocabulary, though no demonstration shows it
    assert tokenizer.unk_token_id not in tokenizer(NOTHING_HAPPENS)["input_ids"]


@pytest.mark.slow
def test_quickstart_alfworld_smoke_measures_held_out_and_train_games(tmp_path):
    quickstart_cpu, _ = _scripts()
    # The shipped YAML with one iteration of 8 tasks x 2 rollouts (not 8): the pipeline, not its learning.
    config = tmp_path / "quickstart_cpu_alfworld.yaml"
    shipped = (ROOT / "configs" / "quickstart_cpu_alfworld.yaml").read_text()
    assert "\nrollouts_per_task: 8\n" in shipped and "\nmini_batch_rows: 128\n" in shipped
    config.write_text(shipped.replace("\nrollouts_per_task: 8\n", "\nrollouts_per_task: 2\n")
                      .replace("\nmini_batch_rows: 128\n", "\nmini_batch_rows: 64\n"))  # fmt: skip
    summary = quickstart_cpu.main(
        ["--out", str(tmp_path / "out"), "--config", str(config), "--sft-steps", "2", "--iterations", "1",
         "--eval-rollouts-per-task", "1", "--train-games", "8", "--eval-games", "2", "--train-eval-tasks", "3",
         "--hidden-size", "32"]
    )  # fmt: skip
    tmp_path = tmp_path / "out"
    assert summary["env"] == "GACA-ALFWorld-v0" and summary["iterations"] == 1
    by_split = summary["by_split"]
    assert summary["before"] == by_split["valid_seen"]["before"]  # held-out games are the headline
    for split, n in (("valid_seen", 2), ("train", 3)):  # the train games measured are capped at 3
        for key in ("before", "after"):
            assert by_split[split][key]["episodes"] == n and 0.0 <= by_split[split][key]["success_rate"] <= 1.0
    games = tmp_path / "games" / "json_2.1.1"
    for split, n in (("train", 8), ("valid_seen", 2)):  # 8: the config's tasks_per_iteration
        folders = [p.parent.parent.name for p in (games / split).glob("*/*/game.tw-pddl")]
        assert len(folders) == n and all(f.startswith("pick_and_place_simple-") for f in folders)
    assert summary["sft_pairs"] >= 8 * 4  # every easy game takes at least 4 expert steps
    assert (tmp_path / "learning_curve.png").stat().st_size > 1000
    assert (tmp_path / "after_rl" / "model.safetensors").exists()


def test_expert_steps_step_noise_replaces_demonstrations_with_admissible_actions(tmp_path):
    from gaca_envs.alfworld.generate import generate

    _, make_tiny_model = _scripts()
    generate(tmp_path, 2, seed=1, split="train", difficulty="easy", engine="native")
    kwargs = {"data_path": str(tmp_path), "split": "train", "max_env_steps": 10}
    import gymnasium as gym

    probe = gym.make("GACA-ALFWorld-v0", **kwargs)
    ids = list(probe.unwrapped.task_ids)
    probe.close()
    clean = make_tiny_model.expert_steps("GACA-ALFWorld-v0", kwargs, ids, 2, 10, seed=0)
    noisy = make_tiny_model.expert_steps("GACA-ALFWorld-v0", kwargs, ids, 2, 10, seed=0, step_noise=1.0)
    actions = [r.split("<action>")[1].split("</action>")[0].strip() for _, r in clean]
    assert actions[-1].startswith("move ")  # the clean expert wins each game in few steps
    assert len(clean) <= 2 * 8
    noisy_actions = [r.split("<action>")[1].split("</action>")[0].strip() for _, r in noisy]
    assert noisy_actions != actions[: len(noisy_actions)]
    for (messages, _), action in zip(noisy, noisy_actions, strict=True):
        assert action in messages[-1]["content"].split("Admissible actions:")[1]


def test_parse_seeds_ranges_and_lists():
    quickstart_cpu, _ = _scripts()
    assert quickstart_cpu.parse_seeds("0-4") == [0, 1, 2, 3, 4]
    assert quickstart_cpu.parse_seeds("0,3,5-6") == [0, 3, 5, 6]


def test_settings_hash_the_config_so_an_edited_yaml_does_not_compare(tmp_path):
    quickstart_cpu, _ = _scripts()
    parse_args, settings = quickstart_cpu.parse_args, quickstart_cpu.settings
    config = tmp_path / "quickstart_cpu_alfworld.yaml"
    config.write_text("learning_rate: 5.0e-4\nmax_steps: 40\n")
    first = settings(parse_args(["--config", str(config)]))
    config.write_text("learning_rate: 5.0e-4\nmax_steps: 30\n")
    second = settings(parse_args(["--config", str(config)]))
    assert first["config"] == second["config"] == "quickstart_cpu_alfworld.yaml"
    assert first["config_sha256"] != second["config_sha256"] and len(first["config_sha256"]) == 16
    assert {k: v for k, v in first.items() if k != "config_sha256"} == {
        k: v for k, v in second.items() if k != "config_sha256"
    }
    # every shipped reference table was made with the shipped config
    from gaca_train.experiments.seed_tables import reference_tables

    shipped = settings(parse_args([]))
    tables = reference_tables()
    assert len(tables) >= 1
    for table in tables:
        assert table["settings"] == {**shipped, "warm_start": table["settings"]["warm_start"]}


def _demo_games(tmp_path, n: int) -> tuple[dict, list[str]]:
    import gymnasium as gym

    from gaca_envs.alfworld.generate import generate

    generate(tmp_path, n, seed=1, split="train", difficulty="easy", engine="native")
    kwargs = {"data_path": str(tmp_path), "split": "train", "max_env_steps": 10}
    probe = gym.make("GACA-ALFWorld-v0", **kwargs)
    ids = list(probe.unwrapped.task_ids)
    probe.close()
    return kwargs, ids


def _demo_parts(pairs: list) -> list[tuple[str, str, str]]:
    """(current observation, admissible actions text, demonstrated action) per demonstration."""
    parts = []
    for messages, response in pairs:
        text = messages[-1]["content"]
        observation = text.split("Current observation:")[1].split("\nAdmissible actions:")[0].strip()
        parts.append(
            (
                observation,
                text.split("Admissible actions:")[1],
                response.split("<action>")[1].split("</action>")[0].strip(),
            )
        )
    return parts


@pytest.mark.slow
def test_expert_steps_invalid_noise_demonstrates_recovery_after_a_rejected_action(tmp_path):
    _, make_tiny_model = _scripts()
    kwargs, ids = _demo_games(tmp_path, 4)
    clean = _demo_parts(make_tiny_model.expert_steps("GACA-ALFWorld-v0", kwargs, ids, 2, 10, seed=0))
    noisy = _demo_parts(
        make_tiny_model.expert_steps("GACA-ALFWorld-v0", kwargs, ids, 2, 10, seed=0, invalid_noise=0.5)
    )
    assert not any(obs == "Nothing happens." for obs, _, _ in clean)  # experts never reach a rejected action
    after_rejected = [(adm, action) for obs, adm, action in noisy if obs == "Nothing happens."]
    assert after_rejected  # the rejected actions are played, and the demonstrations after them kept
    for _, adm, action in noisy:  # but no demonstration is a rejected action
        assert f"'{action}'" in adm


@pytest.mark.slow
def test_expert_steps_searching_takes_only_what_it_sees(tmp_path):
    _, make_tiny_model = _scripts()
    kwargs, ids = _demo_games(tmp_path, 6)
    expert = make_tiny_model.expert_steps("GACA-ALFWorld-v0", kwargs, ids, 2, 10, seed=0)
    searching = _demo_parts(
        make_tiny_model.expert_steps("GACA-ALFWorld-v0", kwargs, ids, 2, 10, seed=0, searching=1.0)
    )
    assert len(searching) >= len(expert)  # a search takes at least the expert's steps
    takes = [(obs, action) for obs, _, action in searching if action.startswith("take ")]
    assert takes
    for obs, action in takes:  # "take apple 1 from fridge 1" right after seeing "a apple 1" there
        item, where = action.removeprefix("take ").split(" from ")
        assert f"a {item}" in obs and where in obs
    for _, adm, action in searching:
        assert f"'{action}'" in adm


def test_quickstart_prompts_are_the_trainers_for_the_same_yaml(tmp_path):
    """SFT demonstrations and measurements render what RL renders, `hidden_actions` and the action list included."""
    from gaca_train.rollout.prompts import PromptBuilder
    from gaca_train.training.config import GACAConfig

    quickstart_cpu, _ = _scripts()
    shipped = ROOT / "configs" / "quickstart_cpu_alfworld.yaml"
    fields, _ = quickstart_cpu.load_config(shipped, tmp_path, {})
    ours = quickstart_cpu.prompt_builder(fields)
    trainers = PromptBuilder.from_config(GACAConfig(**{**fields, "use_cpu": True}))
    assert ours == trainers and ours.history_length == 1
    assert ours.hidden_actions == ("help",) and ours.action_list_style == "plain"
    (user,) = ours.messages("put a mug in desk", 0, "You arrive.", ["go to desk 1", "help", "look"], [])
    assert "Admissible actions: go to desk 1, look\n" in user["content"] and "help" not in user["content"]
    # without the two fields the env family's list is shown whole and quoted
    config = tmp_path / "quickstart.yaml"
    lines = shipped.read_text().splitlines()
    config.write_text("\n".join(x for x in lines if not x.startswith(("hidden_actions:", "action_list_style:"))))
    quoted_fields, _ = quickstart_cpu.load_config(config, tmp_path, {})
    (user,) = quickstart_cpu.prompt_builder(quoted_fields).messages("t", 0, "o", ["go to desk 1", "help"], [])
    assert "Admissible actions: 'go to desk 1', 'help'\n" in user["content"]


def test_expert_steps_demos_per_task_draw_the_noise_anew_for_each_episode():
    _, warm_start = _scripts()
    kwargs = {"horizon": 3, "num_branches": 1, "num_tasks": 1, "num_distractors": 1}
    once = warm_start.expert_steps("GACA-CriticalChain-v0", kwargs, ["train-0"], 2, 6, seed=0, fork_noise=1.0)
    eight = warm_start.expert_steps(
        "GACA-CriticalChain-v0", kwargs, ["train-0"], 2, 6, seed=0, fork_noise=1.0, demos_per_task=8
    )
    assert eight[: len(once)] == once  # the first episode is the one-episode demonstration
    assert len(eight) == 8 * len(once)  # every episode walks the same number of stages

    def fork_actions(pairs):  # the demonstrated roads ("take the indigo road") at the task's one fork
        return [r for _, r in pairs if r.endswith(" road </action>")]

    # one episode shows one guess at the fork, which a tiny model memorises; eight show both roads
    assert len(set(fork_actions(once))) == 1 and len(set(fork_actions(eight))) == 2
    with pytest.raises(ValueError, match="demos_per_task must be at least 1"):
        warm_start.expert_steps("GACA-CriticalChain-v0", kwargs, ["train-0"], 2, 6, seed=0, demos_per_task=0)
    quickstart, _ = _scripts()
    assert quickstart.parse_args(["--env", "GACA-CriticalChain-v0"]).demos_per_task == 8
    assert quickstart.parse_args([]).demos_per_task == 1  # ALFWorld: 400 games, each demonstrated once
    with pytest.raises(SystemExit):
        quickstart.parse_args(["--demos-per-task", "0"])


def test_quickstart_sft_loss_defaults_to_the_whole_text_on_alfworld_only():
    quickstart, _ = _scripts()
    # ALFWorld's tiny model reads the room only if SFT asks it to predict the prompts too
    assert quickstart.parse_args([]).sft_loss == "full"
    assert quickstart.parse_args(["--env", "GACA-CriticalChain-v0"]).sft_loss == "completion"
    assert quickstart.parse_args(["--sft-loss", "completion"]).sft_loss == "completion"
    assert quickstart.settings(quickstart.parse_args([]))["sft_loss"] == "full"  # part of what a comparison needs


# The suite's learning check: the quickstart's whole pipeline (tiny model, SFT warm start, GACATrainer with GACA,
# success measured before and after) on the diagnostic CriticalChain env, cut to about a minute at one thread:
# 450 SFT steps (not 600), 20 iterations (not 40), 8 episodes a task per measurement (not 16). The full CriticalChain
# quickstart (`scripts/quickstart_cpu.py --env GACA-CriticalChain-v0 --seeds 0-4`) and the ALFWorld demo's gain are
# benchmarks (docs/BENCHMARKS.md). Measured with `OMP_NUM_THREADS=1 .venv/bin/python scripts/quickstart_cpu.py --env
# GACA-CriticalChain-v0 --sft-steps 450 --iterations 20 --eval-rollouts-per-task 8 --seed S --out <dir>` on an AMD
# EPYC VM (AVX512): seed 0 0.516 -> 0.906 (+0.391), seed 2, the weakest warm start of the full quickstart's seeds,
# 0.141 -> 0.375 (+0.234). At 300 SFT steps and 15 iterations some seeds gained +0.016 (a warm start too weak to
# learn from in 15 iterations), so this size is the smallest whose gains clear the bound with room. Seeds 0-4 on an
# Intel Xeon VM (AVX512): +0.406, +0.125, +0.391, +0.328, +0.469 (docs/BENCHMARKS.md).
LEARNING_CHECK = ["--sft-steps", "450", "--iterations", "20", "--eval-rollouts-per-task", "8"]
LEARNING_CHECK_BOUND = 0.10  # a clear gain: seed 0 gained +0.391 to +0.453 on every machine measured


@pytest.mark.slow
def test_learning_check_rl_beats_its_warm_start_by_the_measured_margin(tmp_path):
    quickstart, _ = _scripts()
    margin = LEARNING_CHECK_BOUND
    with torch_threads(1):  # bitwise repeatable on one machine
        summary = quickstart.main(["--env", "GACA-CriticalChain-v0", "--out", str(tmp_path), "--seed", "0",
                                   *LEARNING_CHECK])  # fmt: skip
    before, after = summary["before"]["success_rate"], summary["after"]["success_rate"]
    assert summary["before"]["episodes"] == summary["after"]["episodes"] == 64
    assert summary["machine"]["threads"] == 1
    assert after - before >= margin, f"RL gained {after - before:+.3f} (before {before:.3f}), margin {margin:.3f}"


def test_env_takes_gym_ids_and_the_old_short_names_with_a_deprecation_warning():
    from gaca_train.experiments import quickstart

    assert quickstart.parse_args(["--env", "GACA-CriticalChain-v0"]).env == "criticalchain"
    assert quickstart.parse_args([]).env == "alfworld"
    with pytest.warns(FutureWarning, match="--env criticalchain is deprecated .*; use --env GACA-CriticalChain-v0"):
        old = quickstart.parse_args(["--env", "criticalchain"])
    assert old.config == quickstart.parse_args(["--env", "GACA-CriticalChain-v0"]).config


def test_the_quickstart_yaml_renders_the_same_prompts_as_with_the_old_spellings(tmp_path):
    import gymnasium as gym
    import yaml

    quickstart_cpu, warm_start = _scripts()
    text = (ROOT / "configs" / "quickstart_cpu_alfworld.yaml").read_text()
    assert '"max_env_steps": 10' in text and "{max_env_steps}" in text and '"max_steps"' not in text
    old_text = text.replace('"max_env_steps": 10', '"max_steps": 10').replace("{max_env_steps}", "{max_steps}")
    new_file, old_file = tmp_path / "new.yaml", tmp_path / "old.yaml"
    new_file.write_text(text)
    old_file.write_text(old_text)
    games, ids = _demo_games(tmp_path / "games", 2)
    rendered = []
    for path in (new_file, old_file):
        fields, env_kwargs = quickstart_cpu.load_config(path, tmp_path / "out", {})
        env_kwargs["data_path"] = games["data_path"]
        prompts = quickstart_cpu.prompt_builder(fields)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            env = gym.make("GACA-ALFWorld-v0", **env_kwargs)
            cap = env.unwrapped.max_env_steps
            env.close()
            pairs = warm_start.expert_steps(
                fields["env_id"], env_kwargs, ids, fields["history_length"], fields["max_env_steps"], seed=0,
                prompts=prompts, step_noise=0.5,
            )  # fmt: skip
        deprecations = [w for w in caught if issubclass(w.category, FutureWarning)]
        assert bool(deprecations) == (path == old_file)  # only the old env kwarg warns
        rendered.append((cap, {k: v for k, v in yaml.safe_load(path.read_text()).items() if k != "env_kwargs"},
                         pairs))  # fmt: skip
    (new_cap, new_yaml, new_pairs), (old_cap, old_yaml, old_pairs) = rendered
    assert new_cap == old_cap == 10 and len(new_pairs) > 4
    assert new_pairs == old_pairs  # every message and response, byte for byte
    assert "of 10. Observation:" in new_pairs[0][0][-1]["content"]
    # Every other GACAConfig field is the same.
    assert {k: v for k, v in new_yaml.items() if k != "prompt_template"} == {
        k: v for k, v in old_yaml.items() if k != "prompt_template"
    }
