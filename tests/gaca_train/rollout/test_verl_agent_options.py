"""verl-agent's behaviours as options: the lenient format check, hidden actions, and the real-data guard."""

from __future__ import annotations

import pytest

from gaca_train.rollout.prompts import PromptBuilder, parse_response
from gaca_train.training.startup import check_real_data, generated_data_reason

ALF, SHOP = "GACA-ALFWorld-v0", "GACA-WebShop-v0"


@pytest.mark.parametrize(
    ("text", "env_id", "action", "valid"),
    [
        # Both tag pairs, in order: the action block's content, stripped and lowercased.
        ("<think>plan</think><action> Go To Desk 1 </action>", ALF, "go to desk 1", True),
        # Tags anywhere, extra text around them: still valid (strict would reject this).
        ("Sure! <action>look</action> because <think>x</think> ok", ALF, "look", True),
        # Upper-case tags count: the search runs on the lowercased text.
        ("<THINK>a</THINK><ACTION>Inventory</ACTION>", ALF, "inventory", False),  # think tags are case-sensitive
        # No </think>: the action is still read, but the step is invalid.
        ("<think>a <action>open drawer 1</action>", ALF, "open drawer 1", False),
        # Chinese characters: invalid in ALFWorld, fine in WebShop.
        ("<think>好</think><action>look</action>", ALF, "look", False),
        ("<think>好</think><action>search[red mug]</action>", SHOP, "search[red mug]", True),
        # No action tags: the last 30 (ALFWorld) or 20 (WebShop) characters of the lowercased text, invalid.
        (
            "<think>x</think> I would like to go to the kitchen counter now",
            ALF,
            " go to the kitchen counter now",
            False,
        ),
        ("<think>x</think> I would like to click the Buy Now button", SHOP, "k the buy now button", False),
        # Only the first action block counts.
        ("<think></think><action>a</action><action>b</action>", ALF, "a", True),
    ],
)
def test_verl_agent_format_check_by_hand(text, env_id, action, valid):
    parsed = parse_response(text, format_check="verl-agent", env_id=env_id)
    assert (parsed.action, parsed.valid) == (action, valid)


def test_strict_format_check_rejects_what_verl_agent_accepts():
    text = "Sure! <action>look</action> because <think>x</think> ok"
    assert not parse_response(text).valid and parse_response(text, "verl-agent", ALF).valid


def test_hidden_actions_leave_the_prompt_only():
    builder = PromptBuilder("", "{admissible_actions}", history_length=0, max_env_steps=5, hidden_actions=("help",))
    (message,) = builder.messages("t", 0, "obs", ["go to desk 1", "help", "look"], [])
    assert message["content"] == "'go to desk 1', 'look'"


def test_runs_without_real_data_stop_unless_allowed(monkeypatch, tmp_path):
    monkeypatch.delenv("ALFWORLD_DATA", raising=False)
    with pytest.raises(ValueError, match="no ALFWorld data .* set ALFWORLD_DATA .* or set allow_generated_data: true"):
        check_real_data(ALF, {"split": "train"}, allow_generated_data=False)
    check_real_data(ALF, {"split": "train"}, allow_generated_data=True)
    assert generated_data_reason(ALF, {"data_path": str(tmp_path)}) is None
    monkeypatch.setenv("ALFWORLD_DATA", str(tmp_path))
    assert generated_data_reason(ALF, {}) is None
    with pytest.raises(ValueError, match="no original WebShop catalog"):
        check_real_data(SHOP, {"split": "test"}, allow_generated_data=False)
    assert generated_data_reason(SHOP, {"shop_config": {"catalog": str(tmp_path)}}) is None
    assert generated_data_reason(SHOP, {"server_url": "http://127.0.0.1:3000"}) is None
    assert generated_data_reason("GACA-CriticalChain-v0", {}) is None


def test_alfworld_data_without_json_folder_is_an_error(monkeypatch, tmp_path):
    from gaca_envs.alfworld.data import real_data_root

    monkeypatch.setenv("ALFWORLD_DATA", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="ALFWORLD_DATA=.* holds no json_2.1.1 folder"):
        real_data_root(None)
    (tmp_path / "json_2.1.1").mkdir()
    assert real_data_root(None) == tmp_path / "json_2.1.1"
    monkeypatch.delenv("ALFWORLD_DATA")
    assert real_data_root(None) is None
