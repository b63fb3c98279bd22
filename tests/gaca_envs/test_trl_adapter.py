"""gaca_envs.trl: a GACA env as TRL's ``environment_factory`` (reset, the tool ``act``, ``get_reward``)."""

from __future__ import annotations

import inspect
import json

import pytest

from gaca_envs.trl import GymToolEnvironment, environment_factory, task_dataset

# The smallest CriticalChain: two stages, no fork; the expert walks "to the quarry", then "to the gate".
CHAIN = "GACA-CriticalChain-v0"
CHAIN_KWARGS = {"horizon": 2, "num_branches": 0, "num_tasks": 2}
ALFWORLD = "GACA-ALFWorld-v0"


@pytest.fixture(scope="module")
def alfworld_root(tmp_path_factory):
    """Two easy generated ALFWorld games (pick and place) under ``json_2.1.1/train``."""
    from gaca_envs.alfworld.generate import generate

    out = tmp_path_factory.mktemp("alfworld_easy")
    generate(out, 2, seed=0, split="train", difficulty="easy", engine="native")
    return out


def _play_expert(env: GymToolEnvironment) -> list[str]:
    answers = []
    while not env.done:
        answers.append(env.act(env.info["expert_action"]))
    return answers


def test_only_act_becomes_a_tool():
    # TRL lists the class's functions; all but reset, get_reward and private ones become tools.
    names = [n for n, _ in inspect.getmembers(GymToolEnvironment, inspect.isfunction) if not n.startswith("_")]
    assert sorted(names) == ["act", "get_reward", "reset"]


def test_act_docstring_gives_a_tool_schema():
    from transformers.utils import get_json_schema

    env = environment_factory(CHAIN, **CHAIN_KWARGS)()
    schema = get_json_schema(env.act)["function"]
    assert schema["name"] == "act"
    assert schema["parameters"]["required"] == ["action"]
    assert schema["parameters"]["properties"]["action"]["type"] == "string"


@pytest.mark.parametrize(
    ("env_id", "kwargs"), [(CHAIN, CHAIN_KWARGS), (ALFWORLD, None)], ids=["criticalchain", "alfworld"]
)
def test_expert_actions_reach_reward_one(env_id, kwargs, alfworld_root):
    kwargs = kwargs if kwargs is not None else {"data_path": alfworld_root}
    dataset = task_dataset(env_id, "train", **kwargs)
    env = environment_factory(env_id, expert=True, **kwargs)()
    for task_id in dataset["task_id"]:
        # TRL calls reset with the whole row: prompt, task_id and any other column.
        first = env.reset(prompt=dataset[0]["prompt"], task_id=task_id, other_column=3)
        assert env.info["task_id"] == task_id and not env.done
        assert env.info["task"] in first
        assert "Admissible actions:\n- " + "\n- ".join(env.info["admissible_actions"]) in first
        assert env.get_reward() == 0.0
        answers = _play_expert(env)
        assert answers[-1].endswith("The episode is over (task solved).")
        assert env.info["won"] and env.get_reward() == 1.0


def test_reward_return_sums_the_env_rewards():
    env = environment_factory(CHAIN, reward="return", expert=True, reward_on_success=7.0, **CHAIN_KWARGS)()
    env.reset(task_id="train-1")
    _play_expert(env)
    assert env.get_reward() == 7.0  # 0 at stage 1, 7 on delivery


@pytest.mark.parametrize(
    ("env_id", "kwargs"), [(CHAIN, CHAIN_KWARGS), (ALFWORLD, None)], ids=["criticalchain", "alfworld"]
)
@pytest.mark.parametrize("action", ["fly to the moon", "", 42], ids=["unknown", "empty", "not-a-str"])
def test_bad_action_is_the_envs_nothing_happens(env_id, kwargs, action, alfworld_root):
    kwargs = kwargs if kwargs is not None else {"data_path": alfworld_root}
    env = environment_factory(env_id, **kwargs)()
    first = env.reset(task_id=task_dataset(env_id, **kwargs)["task_id"][0])
    answer = env.act(action)
    assert answer.startswith("Nothing happens.\n\nAdmissible actions:\n- ")
    assert answer.split("\n\n")[-1] == first.split("\n\n")[-1]  # same admissible actions
    assert env.info["action_valid"] is False and not env.done and env.get_reward() == 0.0


def test_acting_after_the_end_answers_and_changes_nothing():
    env = environment_factory(CHAIN, expert=True, **CHAIN_KWARGS)()
    assert (
        env.act("look around")
        == "The episode is over (no episode was started); the action 'look around' was not taken."
    )
    env.reset(task_id="train-0")
    _play_expert(env)
    info = env.info
    assert env.act("walk to the gate") == (
        "The episode is over (task solved); the action 'walk to the gate' was not taken."
    )
    assert env.info is info and env.get_reward() == 1.0
    env.reset(task_id="train-0")  # the next rollout starts afresh
    assert not env.done and env.get_reward() == 0.0


def test_truncated_episode_says_so():
    env = environment_factory(CHAIN, max_steps=2, **CHAIN_KWARGS)()
    env.reset(task_id="train-0")
    env.act("wait")
    assert env.act("wait").endswith("The episode is over (step limit reached, task not solved).")
    assert env.done and env.get_reward() == 0.0


def test_task_dataset_rows_and_errors():
    dataset = task_dataset(CHAIN, "valid", limit=1, **CHAIN_KWARGS)
    assert dataset.column_names == ["prompt", "task_id"] and list(dataset["task_id"]) == ["valid-0"]
    assert dataset[0]["prompt"][0]["role"] == "user"
    assert list(task_dataset(CHAIN, limit=2, **CHAIN_KWARGS)["task_id"]) == ["train-0", "train-1"]  # the env's split
    with pytest.raises(ValueError, match="split must be one of train, valid, test, got 'dev'"):
        task_dataset(CHAIN, "dev", **CHAIN_KWARGS)
    with pytest.raises(ValueError, match="limit must be >= 1 or None, got 0"):
        task_dataset(CHAIN, limit=0)


def test_factory_errors():
    with pytest.raises(ValueError, match="reward must be one of 'score', 'return', got 'success'"):
        environment_factory(CHAIN, reward="success")
    with pytest.raises(ValueError, match="env_id 'GACA-Nope-v0' is not registered; the GACA ids are GACA-ALFWorld-v0"):
        environment_factory("GACA-Nope-v0")


@pytest.mark.slow
def test_one_grpo_iteration_plays_the_env_through_tools(tmp_path, monkeypatch):
    """One real ``trl.GRPOTrainer`` step with the adapter as ``environment_factory``.

    Two things stand between the tiny local model and TRL's tool loop, and each is bridged the
    plainest way we found:
    - the tiny tokenizer's ChatML template renders no tools or tool calls, and TRL refuses such a
      template (``supports_tool_calling``) and parses calls only for templates it knows; we give
      it TRL's own copy of the Qwen2.5 template, which renders both and is one TRL parses.
    - the word-level tokenizer decodes with spaces between tokens, so it cannot spell the JSON
      of a call, and a random model would not call a tool anyway. We add two tokens that each
      spell out whole ``<tool_call>`` blocks (one the winning plan of task train-0, one an
      action the env does not understand) and make generation pick one of them and stop, with
      transformers' ``sequence_bias``. Everything after the sampled token is TRL's: parsing
      the calls, calling ``act``, ``get_reward``, advantages and the update.
    """
    import torch
    from trl import GRPOConfig, GRPOTrainer
    from trl.chat_template_utils import qwen2_5_chat_template

    from gaca_train.tiny import build_tiny_model, build_tokenizer, cpu_run_defaults

    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")  # environment_factory is experimental in TRL 1.16
    dataset = task_dataset(CHAIN, "train", limit=1, **CHAIN_KWARGS)
    factory = environment_factory(CHAIN, **CHAIN_KWARGS)
    probe = factory()
    corpus = [dataset[0]["prompt"][0]["content"], probe.reset(task_id="train-0")]
    corpus += [probe.act("walk to the quarry"), probe.act("walk to the gate"), "Nothing happens."]
    tokenizer = build_tokenizer(corpus)
    tokenizer.chat_template = qwen2_5_chat_template

    def calls(*actions):
        return "\n".join(
            "<tool_call>\n" + json.dumps({"name": "act", "arguments": {"action": a}}) + "\n</tool_call>"
            for a in actions
        )

    tokenizer.add_tokens([calls("walk to the quarry", "walk to the gate"), calls("fly to the moon")], True)
    win, lose = len(tokenizer) - 2, len(tokenizer) - 1
    bias = [[[t], 100.0] for t in (win, lose)] + [[[t, tokenizer.eos_token_id], 200.0] for t in (win, lose)]
    model = build_tiny_model(tokenizer)
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    args = GRPOConfig(
        output_dir=str(tmp_path / "out"),
        max_steps=1,
        per_device_train_batch_size=8,
        num_generations=8,
        max_completion_length=128,
        max_tool_calling_iterations=1,
        learning_rate=1e-2,
        generation_kwargs={"sequence_bias": bias},
        **cpu_run_defaults(),
    )
    trainer = GRPOTrainer(
        model=model, args=args, train_dataset=dataset, processing_class=tokenizer, environment_factory=factory
    )
    assert [t.__name__ for t in trainer.tools] == ["act"]
    trainer.train()

    log = trainer.state.log_history[0]
    envs = trainer._environment_pool[None]
    assert len(envs) == 8 and all(e.info["task_id"] == "train-0" for e in envs)  # reset got the row's task_id
    won = [e.info["won"] for e in envs]
    assert any(won) and not all(won)  # seeded sampling (seed 0) drew both tokens
    assert all(not e.done and e.info["action_valid"] is False for e, w in zip(envs, won) if not w)
    assert log["tools/call_frequency"] > 0 and log["tools/failure_frequency"] == 0
    assert log["rewards/GymToolEnvironment/mean"] == pytest.approx(sum(won) / 8)
    assert "loss" in log
    assert any(not torch.equal(p, before[name]) for name, p in model.named_parameters())
