"""scripts/trl_budget.py: the plain-TRL completion budget of ALFWorld episodes, in characters or tokens."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import trl

from gaca_envs.trl import DEFAULT_INSTRUCTION, environment_factory
from gaca_train.experiments.tiny import build_bpe_tokenizer, build_tiny_model, build_tokenizer, save_tiny_model
from gaca_train.experiments.trl_budget import main, play_episodes

ALFWORLD = "GACA-ALFWorld-v0"
STEPS = 6
# Qwen2.5-Instruct's chat template as TRL ships it: it renders the tool schema, tool calls and tool messages.
QWEN25_TEMPLATE = (Path(trl.__file__).parent / "chat_templates" / "qwen2_5.jinja").read_text()


@pytest.fixture(scope="module")
def games(tmp_path_factory) -> str:
    """Three easy generated ALFWorld games under ``json_2.1.1/train``."""
    from gaca_envs.alfworld.generate import generate

    out = tmp_path_factory.mktemp("alfworld_budget")
    generate(out, 3, seed=0, split="train", difficulty="easy", engine="native")
    return str(out)


def _budget(tmp_path, games, *extra: str) -> dict:
    out = tmp_path / "budget.json"
    main(["--games", "3", "--max-env-steps", str(STEPS), "--data-path", games, "--json", str(out), *extra])
    return json.loads(out.read_text())


def _replay(games: str, episode: dict) -> tuple[str, list[str]]:
    """Plays the episode's recorded actions by hand through the adapter: its first user message and answers."""
    env = environment_factory(ALFWORLD, data_path=games, max_env_steps=STEPS)()
    prompt = DEFAULT_INSTRUCTION + "\n\n" + env.reset(task_id=episode["task_id"])
    answers = []
    for action in episode["actions"]:
        assert not env.done and action in env.info["admissible_actions"]  # a random agent over admissible actions
        answers.append(env.act(action))
    assert env.done  # the episode ended where the record ends: solved or at the step limit
    assert env.info["won"] == episode["won"] and (episode["won"] or len(answers) == STEPS)
    return prompt, answers


def _conversation(prompt: str, actions: list[str], answers: list[str]) -> list[dict]:
    messages = [{"role": "user", "content": prompt}]
    for action, answer in zip(actions, answers, strict=True):
        call = {"type": "function", "function": {"name": "act", "arguments": {"action": action}}}
        messages += [
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "name": "act", "content": answer},
        ]
    return messages


def test_character_counts_are_the_lengths_of_the_adapters_texts(tmp_path, games, capsys):
    result = _budget(tmp_path, games)
    table = capsys.readouterr().out
    assert result["unit"] == "characters" and result["data"] == f"games from {games}" and len(result["episodes"]) == 3
    assert sorted(e["task_id"] for e in result["episodes"]) == sorted(
        environment_factory(ALFWORLD, data_path=games)().env.unwrapped.task_ids
    )
    for episode in result["episodes"]:
        prompt, answers = _replay(games, episode)
        assert episode["prompt"] == len(prompt)
        assert episode["answers"] == [len(a) for a in answers]
        calls = [json.dumps({"name": "act", "arguments": {"action": a}}) for a in episode["actions"]]
        assert episode["calls"] == [len(c) for c in calls]
        assert episode["total"] == sum(map(len, calls)) + sum(map(len, answers))
    totals = [e["total"] for e in result["episodes"]]
    steps = sum(e["steps"] for e in result["episodes"])
    assert result["steps"] == steps
    calls = sum(sum(e["calls"]) for e in result["episodes"])
    assert result["per_step"]["call"] == pytest.approx(calls / steps)
    assert result["per_step"]["total"] == pytest.approx(sum(totals) / steps)
    assert result["per_episode"]["all"]["max"] == max(totals)
    assert result["per_episode"]["all"]["median"] == sorted(totals)[1]
    assert result["budget"] == 1024 * math.ceil(max(totals) * 1.05 / 1024)
    assert "| per step (characters) | call | answer | call + answer |" in table
    assert f"| all | 3 | {sorted(totals)[1]:,} |" in table
    assert "a token budget needs --tokenizer" in table
    # Seeded: the same seed plays the same games and actions.
    again = play_episodes(3, max_env_steps=STEPS, data_path=games)
    assert [e.actions for e in again] == [e["actions"] for e in result["episodes"]]


def test_tokens_with_a_tool_template_are_the_trl_sequence_of_the_episode(tmp_path, games, capsys):
    texts = [e.prompt for e in play_episodes(3, max_env_steps=STEPS, data_path=games)]
    tokenizer = build_bpe_tokenizer(texts, vocab_size=400)
    tokenizer.chat_template = QWEN25_TEMPLATE
    folder = save_tiny_model(build_tiny_model(tokenizer), tokenizer, tmp_path / "tokenizer")
    result = _budget(tmp_path, games, "--tokenizer", str(folder))
    table = capsys.readouterr().out
    assert result["unit"] == "tokens" and result["method"] == "tokens with the chat template"
    assert f"max_completion_length={result['budget']}:" in table
    tool = environment_factory(ALFWORLD, data_path=games)().act
    for episode in result["episodes"]:
        prompt, answers = _replay(games, episode)
        messages = _conversation(prompt, episode["actions"], answers)

        def ids(messages, generation_prompt=True):
            return tokenizer.apply_chat_template(
                messages, tools=[tool], add_generation_prompt=generation_prompt, tokenize=True, return_dict=False
            )

        def to_eos(ids):
            return ids[: len(ids) - ids[::-1].index(tokenizer.eos_token_id)]

        # The whole conversation rendered at once (as TRL's sequence stands before the model's last turn): its
        # tokens after the prompt are the episode's calls and answers.
        prompt_ids, full_ids = ids(messages[:1]), ids(messages)
        assert full_ids[: len(prompt_ids)] == prompt_ids
        assert episode["prompt"] == len(prompt_ids)
        assert episode["total"] == len(full_ids) - len(prompt_ids)
        # Step k in the conversation itself: the call is the model's turn up to its end-of-turn token, the answer
        # the rest up to the next generation prompt.
        for k in range(len(answers)):
            before, turn = ids(messages[: 2 * k + 1]), to_eos(ids(messages[: 2 * k + 2], generation_prompt=False))
            assert episode["calls"][k] == len(turn) - len(before)
            assert episode["answers"][k] == len(ids(messages[: 2 * k + 3])) - len(turn)


def test_a_template_without_tools_counts_the_raw_texts_and_says_so(tmp_path, games, capsys):
    texts = [e.prompt for e in play_episodes(3, max_env_steps=STEPS, data_path=games)]
    tokenizer = build_tokenizer(texts)  # its ChatML template drops tool calls
    folder = save_tiny_model(build_tiny_model(tokenizer), tokenizer, tmp_path / "tokenizer")
    result = _budget(tmp_path, games, "--tokenizer", str(folder))
    first_line = capsys.readouterr().out.splitlines()[0]
    assert "cannot render tool calls and tool messages" in first_line and "raw texts' tokens" in result["method"]
    for episode in result["episodes"]:
        prompt, answers = _replay(games, episode)
        assert episode["prompt"] == len(tokenizer(prompt, add_special_tokens=False)["input_ids"])
        assert episode["answers"] == [len(tokenizer(a, add_special_tokens=False)["input_ids"]) for a in answers]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--tokenizer", "{tmp}/missing"], "--tokenizer '{tmp}/missing': no such folder; pass a folder"),
        (["--tokenizer", "{tmp}"], "--tokenizer '{tmp}': the folder holds no tokenizer"),
        (["--tokenizer", "nobody/no-such-tokenizer"], "not in the local Hugging Face cache, and nothing is down"),
        (["--games", "4"], "games=4 is more than the 3 tasks of split 'train'; pass fewer games"),
        (["--max-env-steps", "0"], "max_env_steps must be an int >= 1, got 0"),
    ],
    ids=["no-folder", "empty-folder", "not-cached", "too-many-games", "bad-steps"],
)
def test_bad_input_is_a_one_line_error(tmp_path, games, capsys, monkeypatch, argv, message):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))  # an empty cache: nothing is found there
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    with pytest.raises(SystemExit) as exit_info:
        main(["--games", "3", "--data-path", games, *argv])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2
    assert err.startswith("trl_budget.py: error: ") and err.count("\n") == 1
    assert message.replace("{tmp}", str(tmp_path)) in err
