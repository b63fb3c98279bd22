"""gaca_envs.trl: a GACA env as TRL's ``environment_factory`` (reset, the tool ``act``, ``get_reward``)."""

from __future__ import annotations

import inspect
import json

import pytest

from gaca_envs.trl import (
    DEFAULT_INSTRUCTION,
    GymToolEnvironment,
    environment_factory,
    task_dataset,
    tool_environment_name,
)

# The smallest CriticalChain: two stages, no fork; the expert walks "to the quarry", then "to the gate".
CHAIN = "GACA-CriticalChain-v0"
CHAIN_KWARGS = {"horizon": 2, "num_branches": 0, "num_tasks": 2}
ALFWORLD = "GACA-ALFWorld-v0"
SHOP = "GACA-WebShop-v0"
GENERATED = "or pass allow_generated_data=True to use the generated data knowingly"


@pytest.fixture(scope="module")
def alfworld_root(tmp_path_factory):
    """Two easy generated ALFWorld games (pick and place) under ``json_2.1.1/train``, one under ``valid_seen``."""
    from gaca_envs.alfworld.generate import generate

    out = tmp_path_factory.mktemp("alfworld_easy")
    generate(out, 2, seed=0, split="train", difficulty="easy", engine="native")
    generate(out, 1, seed=1, split="valid_seen", difficulty="easy", engine="native")
    return out


@pytest.fixture(scope="module")
def shop_app(tmp_path_factory):
    """An in-process WebShop app over the embedded catalog's first 200 products (goals in its test split)."""
    from tests.webshop_server.helpers import build_test_shop
    from webshop_server import create_app

    shop = build_test_shop(str(tmp_path_factory.mktemp("webshop_index")), n_products=200)
    return create_app({"title_nouns": "fallback"}, shop=shop)


@pytest.fixture
def env_kwargs(request, alfworld_root, shop_app):
    """The env kwargs of each parametrised env id (the WebShop one allows the generated catalog)."""
    return {
        CHAIN: CHAIN_KWARGS,
        ALFWORLD: {"data_path": alfworld_root},
        SHOP: {"app": shop_app, "split": "test", "allow_generated_data": True},
    }[request.param]


def _play_expert(env: GymToolEnvironment) -> list[str]:
    answers = []
    while not env.done:
        answers.append(env.act(env.info["expert_action"]))
    return answers


def test_only_act_becomes_a_tool():
    # TRL lists the class's functions; all but reset, get_reward and private ones become tools.
    env_class = type(environment_factory(CHAIN, **CHAIN_KWARGS)())
    for cls in (GymToolEnvironment, env_class):
        names = [n for n, _ in inspect.getmembers(cls, inspect.isfunction) if not n.startswith("_")]
        assert sorted(names) == ["act", "get_reward", "reset"]


def test_act_docstring_gives_a_tool_schema():
    from transformers.utils import get_json_schema

    env = environment_factory(CHAIN, **CHAIN_KWARGS)()
    schema = get_json_schema(env.act)["function"]
    assert schema["name"] == "act"
    assert schema["parameters"]["required"] == ["action"]
    assert schema["parameters"]["properties"]["action"]["type"] == "string"


@pytest.mark.parametrize(
    ("env_id", "env_kwargs"), [(CHAIN, CHAIN), (ALFWORLD, ALFWORLD), (SHOP, SHOP)], indirect=["env_kwargs"]
)
def test_expert_actions_reach_reward_one(env_id, env_kwargs):
    listing = {k: v for k, v in env_kwargs.items() if k not in ("split", "allow_generated_data")}
    split = env_kwargs.get("split", "train")
    dataset = task_dataset(env_id, split, limit=3, **listing)
    env = environment_factory(env_id, expert=True, dataset=dataset, **env_kwargs)()
    assert type(env).__name__ == tool_environment_name(env_id)
    for task_id in dataset["task_id"]:
        # TRL calls reset with the whole row: prompt, task_id and any other column.
        first = env.reset(prompt=dataset[0]["prompt"], task_id=task_id, other_column=3)
        assert env.info["task_id"] == task_id and not env.done and env.actions == []
        assert env.info["task"] in first
        assert "Admissible actions:\n- " + "\n- ".join(env.info["admissible_actions"]) in first
        assert env.get_reward() == 0.0
        plan = []
        while not env.done:
            plan.append(env.info["expert_action"])
            answer = env.act(plan[-1])
        assert answer.endswith("The episode is over (task solved).")
        assert env.info["won"] and env.get_reward() == 1.0 and env.actions == plan


def test_reward_return_sums_the_env_rewards():
    env = environment_factory(CHAIN, reward="return", expert=True, reward_on_success=7.0, **CHAIN_KWARGS)()
    env.reset(task_id="train-1")
    _play_expert(env)
    assert env.get_reward() == 7.0  # 0 at stage 1, 7 on delivery


@pytest.mark.parametrize(("env_id", "env_kwargs"), [(CHAIN, CHAIN), (ALFWORLD, ALFWORLD)], indirect=["env_kwargs"])
@pytest.mark.parametrize("action", ["fly to the moon", "", 42], ids=["unknown", "empty", "not-a-str"])
def test_bad_action_is_the_envs_nothing_happens(env_id, env_kwargs, action):
    env = environment_factory(env_id, **env_kwargs)()
    first = env.reset(task_id=task_dataset(env_id, **env_kwargs)["task_id"][0])
    answer = env.act(action)
    assert answer.startswith("Nothing happens.\n\nAdmissible actions:\n- ")
    assert answer.split("\n\n")[-1] == first.split("\n\n")[-1]  # same admissible actions
    assert env.info["action_valid"] is False and not env.done and env.get_reward() == 0.0
    assert env.actions == [str(action)]  # taken: the env answered it as a step


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
    assert env.actions == ["walk to the quarry", "walk to the gate"]  # the late call is not listed
    env.reset(task_id="train-0")  # the next rollout starts afresh
    assert not env.done and env.get_reward() == 0.0 and env.actions == []


def test_truncated_episode_says_so():
    env = environment_factory(CHAIN, max_env_steps=2, **CHAIN_KWARGS)()
    env.reset(task_id="train-0")
    env.act("wait")
    assert env.act("wait").endswith("The episode is over (step limit reached, task not solved).")
    assert env.done and env.get_reward() == 0.0


def test_task_dataset_rows_and_errors():
    dataset = task_dataset(CHAIN, "valid", limit=1, **CHAIN_KWARGS)
    assert dataset.column_names == ["prompt", "task_id"] and list(dataset["task_id"]) == ["valid-0"]
    assert dataset[0]["prompt"] == [{"role": "user", "content": DEFAULT_INSTRUCTION + "\n\n"}]
    assert list(task_dataset(CHAIN, limit=2, **CHAIN_KWARGS)["task_id"]) == ["train-0", "train-1"]  # the env's split
    routed = task_dataset(CHAIN, "test", environment="chain", **CHAIN_KWARGS)
    assert routed.column_names == ["prompt", "task_id", "environment"] and set(routed["environment"]) == {"chain"}
    with pytest.raises(ValueError, match="split must be one of .*train.*valid.*test.*, got 'dev'"):
        task_dataset(CHAIN, "dev", **CHAIN_KWARGS)
    with pytest.raises(ValueError, match="limit must be >= 1 or None, got 0"):
        task_dataset(CHAIN, limit=0)


def test_factory_errors():
    with pytest.raises(ValueError, match="reward must be one of 'score', 'return', got 'success'"):
        environment_factory(CHAIN, reward="success")
    with pytest.raises(ValueError, match="env_id 'GACA-Nope-v0' is not registered; the GACA ids are GACA-ALFWorld-v0"):
        environment_factory("GACA-Nope-v0")
    with pytest.raises(
        ValueError, match=r"name must be a Python identifier \(it names the reward's log column\), got"
    ):
        environment_factory(CHAIN, name="chain env")
    with pytest.raises(ValueError, match="dataset must be a datasets.Dataset with a task_id column"):
        environment_factory(CHAIN, dataset=["train-0"], **CHAIN_KWARGS)


def test_each_factory_makes_a_class_named_after_its_env():
    assert [tool_environment_name(i) for i in (ALFWORLD, SHOP, "GACA-WebShop-Browser-v0", CHAIN)] == [
        "ALFWorldToolEnvironment",
        "WebShopToolEnvironment",
        "WebShopBrowserToolEnvironment",
        "CriticalChainToolEnvironment",
    ]
    chain = environment_factory(CHAIN, **CHAIN_KWARGS)
    first, second = chain(), chain()
    assert type(first) is type(second) and first is not second  # one class per factory: TRL's pool grows with it
    assert type(first).__name__ == "CriticalChainToolEnvironment" and isinstance(first, GymToolEnvironment)
    other = environment_factory(CHAIN, name="LongChain", **{**CHAIN_KWARGS, "horizon": 4})()
    assert type(other).__name__ == "LongChain" and type(other) is not type(first)


def test_a_dataset_of_another_split_fails_when_the_factory_is_built(alfworld_root):
    valid = task_dataset(ALFWORLD, "valid_seen", data_path=alfworld_root)
    message = (
        f"1 of 1 task ids are not tasks of this {ALFWORLD} env, e.g. {valid['task_id'][0]!r}: it plays only the 2 "
        "tasks of split 'train'. Build the factory with the split and env kwargs the dataset was made with: "
        f"task_dataset('{ALFWORLD}', split, **env_kwargs) goes with environment_factory('{ALFWORLD}', split=split, "
        "**env_kwargs)"
    )
    with pytest.raises(ValueError) as error:
        environment_factory(ALFWORLD, dataset=valid, data_path=alfworld_root)
    assert str(error.value) == message
    # Without the dataset, TRL's reset of such a row says the same.
    train_env = environment_factory(ALFWORLD, data_path=alfworld_root)()
    with pytest.raises(ValueError) as error:
        train_env.reset(**valid[0])
    assert str(error.value) == message
    # Built for the dataset's split, the factory's first instance is the one that checked it.
    factory = environment_factory(ALFWORLD, dataset=valid, split="valid_seen", data_path=alfworld_root)
    env = factory()
    env.reset(**valid[0])
    assert env.info["task_id"] == valid["task_id"][0] and factory() is not env


def test_generated_data_needs_allowing(monkeypatch, shop_app):
    monkeypatch.delenv("ALFWORLD_DATA", raising=False)
    with pytest.raises(ValueError, match=f"{ALFWORLD} has no ALFWorld data .* {GENERATED}"):
        environment_factory(ALFWORLD)
    with pytest.raises(ValueError, match=f"{SHOP} has no original WebShop catalog .* {GENERATED}"):
        environment_factory(SHOP, app=shop_app, split="test")
    assert environment_factory(SHOP, app=shop_app, split="test", allow_generated_data=True)().reset(task_id="fixed_0")


# --- Through TRL's real GRPOTrainer ---------------------------------------------------------------------------
# A random tiny model calls no tool, so the tests script the policy with transformers' `sequence_bias`
# (GRPOConfig.generation_kwargs): one added token spells a whole `<tool_call>` block; it is biased +100 right
# after the exact token context that precedes a given turn (the prompt's end, or one tool answer as TRL appends
# it), and EOS +200 right after it. Everything else is TRL's: rendering, parsing the calls, calling `act`,
# appending the answers, get_reward, advantages and the update. The tokenizer is a byte-level BPE that decodes
# every text back exactly, so TRL's response parser finds each turn's `<|im_start|>assistant\n` and reads only
# that turn's calls.


def _calls(*actions: str) -> str:
    return "\n".join(
        "<tool_call>\n" + json.dumps({"name": "act", "arguments": {"action": a}}) + "\n</tool_call>" for a in actions
    )


def _chat_tokenizer(corpus: list[str], calls: list[tuple[str, ...]]):
    """A round-trip tokenizer with TRL's Qwen2.5 template, and one added token per tool-call block of ``calls``."""
    from trl.chat_template_utils import qwen2_5_chat_template

    from gaca_train.experiments.tiny import build_bpe_tokenizer

    tokenizer = build_bpe_tokenizer([*corpus, *map(lambda c: _calls(*c), calls)], vocab_size=2048)
    tokenizer.chat_template = qwen2_5_chat_template
    tokenizer.add_tokens([_calls(*c) for c in calls])
    return tokenizer, {c: tokenizer.convert_tokens_to_ids(_calls(*c)) for c in calls}


def _prompt_end(tokenizer, first_observation: str, tools: list, length: int = 48) -> list[int]:
    """The last ``length`` ids of the prompt TRL renders for a row whose reset answered ``first_observation``."""
    prompt = [{"role": "user", "content": DEFAULT_INSTRUCTION + "\n\n" + first_observation}]
    ids = tokenizer.apply_chat_template(
        prompt, tools=tools, add_generation_prompt=True, tokenize=True, return_dict=False
    )
    return list(ids)[-length:]


def _tool_turn(tokenizer, answer: str) -> list[int]:
    """The ids TRL appends after a call's EOS for the tool's ``answer``, by its own recipe (a template difference)."""
    call = {"type": "function", "function": {"name": "act", "arguments": {}}}
    dummy = [{"role": "user", "content": "dummy"}, {"role": "assistant", "content": "", "tool_calls": [call]}]
    prefix = tokenizer.apply_chat_template(dummy, tokenize=True, return_dict=False)
    prefix = prefix[: max(i for i, t in enumerate(prefix) if t == tokenizer.eos_token_id) + 1]
    tool = {"role": "tool", "name": "act", "content": answer}
    full = tokenizer.apply_chat_template([*dummy, tool], add_generation_prompt=True, tokenize=True, return_dict=False)
    assert full[: len(prefix)] == prefix
    return full[len(prefix) :]


def _script(tokenizer, turns: list[tuple[list[int], int]]) -> list:
    """``sequence_bias`` for a scripted policy: after each context, its token; EOS after every call token."""
    contexts = [tuple(context) for context, _ in turns]
    assert len(set(contexts)) == len(contexts), "two turns share a context: the script would be ambiguous"
    eos = tokenizer.eos_token_id
    bias = [[[*context, token], 100.0 if token != eos else 200.0] for context, token in turns]
    return bias + [[[token, eos], 200.0] for token in {t for _, t in turns if t != eos}]


def _grpo_args(tmp_path, **fields):
    from trl import GRPOConfig

    from gaca_train.experiments.tiny import cpu_run_defaults

    return GRPOConfig(
        output_dir=str(tmp_path / "out"), max_steps=1, learning_rate=1e-2, **fields, **cpu_run_defaults()
    )


@pytest.mark.slow
def test_one_grpo_iteration_plays_the_env_through_tools(tmp_path, monkeypatch):
    """One real ``trl.GRPOTrainer`` step: the sampled call wins or fails the episode, and the model learns from it.

    Both call tokens are biased alike everywhere, so seeded sampling draws both; the one turn TRL runs
    (``max_tool_calling_iterations=1``) executes the first message's calls.
    """
    import torch
    from trl import GRPOTrainer

    from gaca_train.experiments.tiny import build_tiny_model

    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")  # environment_factory is experimental in TRL 1.16
    dataset = task_dataset(CHAIN, "train", limit=1, **CHAIN_KWARGS)
    factory = environment_factory(CHAIN, dataset=dataset, **CHAIN_KWARGS)
    probe = factory()
    first = probe.reset(task_id="train-0")
    corpus = [DEFAULT_INSTRUCTION, first, probe.act("walk to the quarry"), probe.act("walk to the gate")]
    win, lose = ("walk to the quarry", "walk to the gate"), ("fly to the moon",)
    tokenizer, token = _chat_tokenizer(corpus, [win, lose])
    bias = [[[t], 100.0] for t in token.values()] + [[[t, tokenizer.eos_token_id], 200.0] for t in token.values()]
    model = build_tiny_model(tokenizer)
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    args = _grpo_args(
        tmp_path,
        per_device_train_batch_size=8,
        num_generations=8,
        max_completion_length=256,
        max_tool_calling_iterations=1,
        generation_kwargs={"sequence_bias": bias},
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
    assert all(e.actions == ["fly to the moon"] and not e.done for e, w in zip(envs, won) if not w)
    assert log["tools/call_frequency"] > 0 and log["tools/failure_frequency"] == 0
    assert log["rewards/CriticalChainToolEnvironment/mean"] == pytest.approx(sum(won) / 8)
    assert "loss" in log
    assert any(not torch.equal(p, before[name]) for name, p in model.named_parameters())


@pytest.mark.slow
def test_a_multi_turn_alfworld_episode_calls_act_once_per_turn(tmp_path, monkeypatch, alfworld_root):
    """TRL's loop plays a whole ALFWorld episode, one ``act`` per turn, and the env ends it.

    The script: each turn calls the expert's next action; after the winning step the model calls once more
    (``look``), which the adapter answers without stepping the env, then stops. A tokenizer that does not
    round-trip made TRL's parser read every earlier turn's calls again (1 + 2 + ... calls for n turns).
    """
    from trl import GRPOTrainer

    from gaca_train.experiments.tiny import build_tiny_model

    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    dataset = task_dataset(ALFWORLD, "train", limit=1, data_path=alfworld_root)
    factory = environment_factory(ALFWORLD, dataset=dataset, expert=True, data_path=alfworld_root)
    probe = factory()
    first = probe.reset(task_id=dataset["task_id"][0])
    plan, answers = [], []
    while not probe.done:
        plan.append(probe.info["expert_action"])
        answers.append(probe.act(plan[-1]))
    answers.append(probe.act("look"))  # "The episode is over (task solved); the action 'look' was not taken."
    assert len(plan) >= 3 and answers[-2].endswith("(task solved).")
    calls = [(a,) for a in [*plan, "look"]]
    tokenizer, token = _chat_tokenizer([DEFAULT_INSTRUCTION, first, *answers], calls)
    contexts = [_prompt_end(tokenizer, first, [probe.act])] + [_tool_turn(tokenizer, a) for a in answers]
    moves = [token[c] for c in calls] + [tokenizer.eos_token_id]
    budget = sum(len(c) + 2 for c in contexts[1:]) + 8  # every answer and call after the prompt
    args = _grpo_args(
        tmp_path,
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=budget,
        max_tool_calling_iterations=len(calls) + 2,
        generation_kwargs={"sequence_bias": _script(tokenizer, list(zip(contexts, moves)))},
    )
    trainer = GRPOTrainer(
        model=build_tiny_model(tokenizer),
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
        environment_factory=factory,
    )
    trainer.train()

    log = trainer.state.log_history[0]
    envs = trainer._environment_pool[None]
    assert len(envs) == 4
    for env in envs:
        assert env.actions == plan and env.done and env.info["won"] and env.get_reward() == 1.0
    assert log["tools/call_frequency"] == len(plan) + 1  # one call per turn: the plan, then the late `look`
    assert log["tools/failure_frequency"] == 0 and log["completions/clipped_ratio"] == 0.0
    assert log["rewards/ALFWorldToolEnvironment/mean"] == 1.0


@pytest.mark.slow
def test_two_envs_in_one_run_log_their_rewards_apart(tmp_path, monkeypatch, shop_app):
    """A dict of factories (CriticalChain wins, WebShop only searches): each env's reward has its own column."""
    from datasets import concatenate_datasets
    from trl import GRPOTrainer

    from gaca_train.experiments.tiny import build_tiny_model

    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    shop_kwargs = {"app": shop_app, "split": "test"}
    chain_rows = task_dataset(CHAIN, "train", limit=1, environment="chain", **CHAIN_KWARGS)
    shop_rows = task_dataset(SHOP, "test", limit=1, environment="shop", app=shop_app)
    factories = {
        "chain": environment_factory(CHAIN, dataset=chain_rows, **CHAIN_KWARGS),
        "shop": environment_factory(SHOP, dataset=shop_rows, allow_generated_data=True, **shop_kwargs),
    }
    chain, shop = factories["chain"](), factories["shop"]()
    chain_first, shop_first = chain.reset(task_id="train-0"), shop.reset(task_id=shop_rows["task_id"][0])
    search = f"search[{shop.info['task'][:40]}]"
    chain_answers = [chain.act("walk to the quarry"), chain.act("walk to the gate")]
    shop_answer = shop.act(search)
    calls = [("walk to the quarry",), ("walk to the gate",), (search,)]
    tokenizer, token = _chat_tokenizer(
        [DEFAULT_INSTRUCTION, chain_first, shop_first, *chain_answers, shop_answer], calls
    )
    eos = tokenizer.eos_token_id
    turns = [
        (_prompt_end(tokenizer, chain_first, [chain.act]), token[calls[0]]),
        (_tool_turn(tokenizer, chain_answers[0]), token[calls[1]]),
        (_tool_turn(tokenizer, chain_answers[1]), eos),
        (_prompt_end(tokenizer, shop_first, [shop.act]), token[calls[2]]),
        (_tool_turn(tokenizer, shop_answer), eos),
    ]
    args = _grpo_args(
        tmp_path,
        per_device_train_batch_size=4,
        num_generations=2,
        max_completion_length=1024,
        max_tool_calling_iterations=3,
        generation_kwargs={"sequence_bias": _script(tokenizer, turns)},
    )
    trainer = GRPOTrainer(
        model=build_tiny_model(tokenizer),
        args=args,
        train_dataset=concatenate_datasets([chain_rows, shop_rows]),
        processing_class=tokenizer,
        environment_factory=factories,
    )
    trainer.train()

    log = trainer.state.log_history[0]
    pool = trainer._environment_pool
    assert {type(e).__name__ for e in pool["chain"]} == {"CriticalChainToolEnvironment"}
    assert {type(e).__name__ for e in pool["shop"]} == {"WebShopToolEnvironment"}
    assert [e.actions for e in pool["chain"]] == [["walk to the quarry", "walk to the gate"]] * 2
    assert [e.actions for e in pool["shop"]] == [[search]] * 2
    assert log["rewards/CriticalChainToolEnvironment/mean"] == 1.0
    assert log["rewards/WebShopToolEnvironment/mean"] == 0.0
    assert log["tools/call_frequency"] == 1.5 and log["tools/failure_frequency"] == 0  # (2 + 2 + 1 + 1) / 4
