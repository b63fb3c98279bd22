from __future__ import annotations

import pytest
import torch
from transformers import GenerationConfig

from gaca_train.estimators.rows import anchor_ids
from gaca_train.rollout.policy import generate_with_logprobs, run_rollout
from gaca_train.rollout.prompts import PromptBuilder, parse_response, template_for
from gaca_train.rollout.vector import RolloutPool
from gaca_train.training.trainer import token_advantages
from tests.gaca_train.tiny_setup import ENV_KWARGS, tiny_model_and_tokenizer


def test_parse_response_accepts_only_think_then_action():
    ok = parse_response("<think> the sign says amber </think> <action> take the amber road </action>")
    assert ok.valid and ok.action == "take the amber road"
    # Malformed responses are invalid, but what looks like an action is still sent to the env.
    no_think = parse_response("<action>walk to the mill</action>")
    assert not no_think.valid and no_think.action == "walk to the mill"
    plain = parse_response("  walk   to the mill ")
    assert not plain.valid and plain.action == "walk to the mill"
    assert not parse_response("<think>x</think><action>  </action>").valid
    assert not parse_response("<think>x</think><action>a</action> trailing words").valid
    assert not parse_response("<action>a</action><think>x</think>").valid


# The envs' default user templates before the episode cap was named max_env_steps (copied verbatim).
OLD_TEMPLATES = {
    "GACA-ALFWorld-v0": "Your task is to: {task}\n{history}You are at step {step} (at most {max_steps}). "
    "Current observation: {observation}\nAdmissible actions: {admissible_actions}",
    "GACA-WebShop-v0": "Instruction: {task}\n{history}You are at step {step} (at most {max_steps}). Current page: "
    "{observation}\nAvailable actions: {admissible_actions}",
    "GACA-CriticalChain-v0": "Task: {task}\n{history}Step {step} of at most {max_steps}. Now: {observation}\n"
    "Actions: {admissible_actions}",
}


@pytest.mark.parametrize("env_id", sorted(OLD_TEMPLATES))
def test_default_templates_say_max_env_steps_and_render_what_they_rendered_before(env_id):
    from gaca_envs.task_env import TaskEnv

    system, template = template_for(env_id)
    assert "{max_env_steps}" in template and "{max_steps}" not in template
    history = [("obs0", "act0"), ("obs1", "act1")]
    args = ("find the mug", 2, "You see a desk.", ["look", "go to desk 1"], history)
    new = PromptBuilder(system, template, history_length=2, max_env_steps=17).messages(*args)
    renamed = OLD_TEMPLATES[env_id].replace("{max_steps}", "{max_env_steps}")
    assert template.startswith(renamed)  # the rename is the only change
    old_template = OLD_TEMPLATES[env_id] + template[len(renamed) :]
    old = PromptBuilder(system, old_template, history_length=2, max_env_steps=17).messages(*args)
    assert new == old and "at most 17" in new[-1]["content"]
    # The base class's template too.
    base = TaskEnv.prompt[1]
    assert PromptBuilder("", base, 0, 5).messages(*args) == PromptBuilder(
        "", base.replace("{max_env_steps}", "{max_steps}"), 0, 5
    ).messages(*args)


def test_a_template_with_the_old_max_steps_field_renders_the_same_text():
    new = PromptBuilder("", "{step}/{max_env_steps} {observation}", history_length=0, max_env_steps=7)
    old = PromptBuilder("", "{step}/{max_steps} {observation}", history_length=0, max_env_steps=7)
    assert (
        new.messages("t", 0, "o", [], [])
        == old.messages("t", 0, "o", [], [])
        == [{"role": "user", "content": "1/7 o"}]
    )


def test_prompt_shows_task_step_history_and_admissible_actions():
    builder = PromptBuilder("SYS", template_for("GACA-CriticalChain-v0")[1], history_length=2, max_env_steps=9)
    history = [("obs0", "act0"), ("obs1", "act1"), ("obs2", "act2")]
    messages = builder.messages("deliver it", 3, "obs3", ["wait", "go on"], history)
    assert messages[0] == {"role": "system", "content": "SYS"}
    user = messages[1]["content"]
    assert "deliver it" in user and "Step 4 of at most 9" in user and "obs3" in user
    assert "[Step 2] Observation: obs1 Action: act1" in user and "[Step 3] Observation: obs2 Action: act2" in user
    assert "obs0" not in user  # only the last history_length steps
    assert "'wait', 'go on'" in user and "<think>" in user and "<action>" in user
    assert len(PromptBuilder("", "{task}", 0, 5).messages("t", 0, "o", [], history)) == 1  # no system message
    assert template_for("GACA-ALFWorld-v0")[0].startswith("You are an expert household agent")
    assert template_for("unknown-env")[1] == template_for("also-unknown")[1]


def test_plain_action_list_drops_the_quotes_and_keeps_hidden_actions_out():
    actions = ["go to desk 1", "help", "look"]
    plain = PromptBuilder("", "{admissible_actions}", 0, 5, hidden_actions=("help",), action_list_style="plain")
    assert plain.messages("t", 0, "o", actions, [])[0]["content"] == "go to desk 1, look"
    assert PromptBuilder("", "{admissible_actions}", 0, 5).messages("t", 0, "o", actions, [])[0]["content"] == (
        "'go to desk 1', 'help', 'look'"
    )
    env_id = "GACA-CriticalChain-v0"
    fields = {"env_id": env_id, "action_list_style": "plain", "history_length": 0}
    expected = PromptBuilder(*template_for(env_id), 0, None, action_list_style="plain")
    assert PromptBuilder.from_config(fields) == expected
    assert PromptBuilder.from_config({**fields, "action_list_style": None}).action_list_style == "quoted"
    with pytest.raises(ValueError, match="action_list_style must be one of \\('quoted', 'plain'\\), got 'dashes'"):
        PromptBuilder("", "{admissible_actions}", 0, 5, action_list_style="dashes")


def _generation_config(tokenizer, max_new_tokens=6):
    return GenerationConfig(
        max_new_tokens=max_new_tokens,
        do_sample=True,
        temperature=1.0,
        top_k=0,
        top_p=1.0,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )


def test_recorded_log_probs_equal_the_policy_recomputed():
    torch.manual_seed(0)
    model, tokenizer = tiny_model_and_tokenizer()
    model.eval()
    prompts = [tokenizer("walk to the mill")["input_ids"], tokenizer("take the road <action>")["input_ids"]]
    ids, logps = generate_with_logprobs(
        model,
        prompts,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_ids=[tokenizer.eos_token_id],
        generation_config=_generation_config(tokenizer, 10),
        temperature=0.7,
    )
    for prompt, completion, recorded in zip(prompts, ids, logps, strict=True):
        assert len(completion) == len(recorded) >= 1
        full = torch.tensor([prompt + completion])
        with torch.no_grad():
            logits = model(full).logits[0, len(prompt) - 1 : -1].float() / 0.7
        expected = torch.log_softmax(logits, -1).gather(1, torch.tensor(completion)[:, None]).squeeze(1)
        torch.testing.assert_close(torch.tensor(recorded), expected, atol=1e-4, rtol=1e-4)
        if tokenizer.eos_token_id in completion:
            assert completion.index(tokenizer.eos_token_id) == len(completion) - 1


def _rollout(mode="sync", tasks=("train-0", "train-0", "train-1", "train-1")):
    torch.manual_seed(0)
    model, tokenizer = tiny_model_and_tokenizer()
    pool = RolloutPool("GACA-CriticalChain-v0", len(tasks), ENV_KWARGS, mode=mode)
    system, template = template_for("GACA-CriticalChain-v0")
    builder = PromptBuilder(system, template, history_length=2, max_env_steps=4)

    def generate(prompt_ids):
        return generate_with_logprobs(
            model,
            prompt_ids,
            pad_token_id=tokenizer.pad_token_id,
            eos_token_ids=[tokenizer.eos_token_id],
            generation_config=_generation_config(tokenizer),
        )

    try:
        return run_rollout(pool, list(tasks), generate, tokenizer, builder, seed=3, batch_size=3), tokenizer
    finally:
        pool.close()


def test_rollout_records_one_row_per_step_with_groups_and_anchors():
    result, tokenizer = _rollout()
    # A random tiny model never answers in format, so every env runs to its step limit (4).
    assert len(result.steps) == 16 and all(not s.valid for s in result.steps)
    assert [e.length for e in result.episodes] == [4, 4, 4, 4]
    assert all(e.truncated and not e.won for e in result.episodes)
    assert result.group_of_env == [0, 0, 1, 1]
    rows = result.to_step_rows(reward_scale=2.0, traj_offset=10)
    assert rows.group.tolist() == [0, 0, 1, 1] * 4
    assert rows.traj.tolist() == [10, 11, 12, 13] * 4
    assert rows.step.tolist() == [0] * 4 + [1] * 4 + [2] * 4 + [3] * 4
    # Invalid actions leave the state as it was, so every step of a trajectory shares the start anchor.
    first = anchor_ids([result.steps[0].anchor_key]).item()
    assert (rows.anchor[rows.group == 0] == first).all()
    nll = torch.tensor([-sum(s.logps) / len(s.logps) for s in result.steps])
    torch.testing.assert_close(rows.nll, nll)
    text_rows = result.to_step_rows(anchor="text", nll_reduction="sum")
    torch.testing.assert_close(text_rows.nll, torch.tensor([-sum(s.logps) for s in result.steps]))
    assert not torch.equal(text_rows.anchor, rows.anchor)
    metrics = result.metrics()
    assert metrics["rollout/invalid_rate"] == 1.0 and metrics["rollout/success_rate"] == 0.0
    assert metrics["rollout/episode_length"] == 4.0 and metrics["time/generation"] > 0
    # Malformed responses were still sent to the env, which answered as the benchmark does.
    assert all(not s.env_valid for s in result.steps)
    assert all(s.prompt_ids[-1] == tokenizer.convert_tokens_to_ids("assistant") for s in result.steps)


def test_async_pool_gives_the_same_rollout_as_sync():
    sync, _ = _rollout("sync")
    asyn, _ = _rollout("async")
    assert [s.completion_ids for s in sync.steps] == [s.completion_ids for s in asyn.steps]
    assert [s.anchor_key for s in sync.steps] == [s.anchor_key for s in asyn.steps]


def _deterministic_rollout(lockstep=None, calls=None):
    """4 envs (episodes of 4 steps) under a 6-turn limit; completions are a function of the prompt."""
    _, tokenizer = tiny_model_and_tokenizer()
    pool = RolloutPool("GACA-CriticalChain-v0", 4, ENV_KWARGS, mode="sync")
    system, template = template_for("GACA-CriticalChain-v0")

    def generate(prompt_ids):
        if calls is not None:
            calls.append(len(prompt_ids))
        ids = [[sum(p) % 50 + 5, len(p) % 50 + 5] for p in prompt_ids]
        return ids, [[-0.5, -0.25] for _ in prompt_ids]

    try:
        builder = PromptBuilder(system, template, history_length=2, max_env_steps=6)
        return run_rollout(pool, ["train-0", "train-0", "train-1", "train-1"], generate, tokenizer, builder, seed=3,
                           batch_size=3, lockstep=lockstep)  # fmt: skip
    finally:
        pool.close()


def test_lockstep_pads_every_call_and_turn_to_the_busiest_rank_without_changing_the_rollout():
    # Another rank has 5 live envs for all 6 turns; this one has 4 envs whose episodes end after 4 steps.
    asked, calls = [], []

    def other_rank_has_five(n):
        asked.append(n)
        return max(n, 5)

    alone = _deterministic_rollout()
    padded = _deterministic_rollout(other_rank_has_five, calls)
    assert asked == [4, 4, 4, 4, 0, 0]  # this rank's live envs, turn by turn, through turns it has nothing to do
    assert calls == [3, 2] * 6  # 5 prompts a turn in chunks of 3, for 6 turns, as the other rank sends
    assert [(s.prompt_ids, s.completion_ids, s.anchor_text) for s in padded.steps] == [
        (s.prompt_ids, s.completion_ids, s.anchor_text) for s in alone.steps
    ]
    assert [e.length for e in padded.episodes] == [4, 4, 4, 4]
    # One process: the rollout asks nobody.
    assert _deterministic_rollout(lambda n: n).steps[0].completion_ids == alone.steps[0].completion_ids


def test_token_advantages_broadcast_over_completion_tokens_only():
    mask = torch.tensor([[1, 1, 1], [1, 0, 0], [0, 0, 0]])
    out = token_advantages(torch.tensor([2.0, -1.0, 5.0]), mask)
    assert out.tolist() == [[2.0, 2.0, 2.0], [-1.0, 0.0, 0.0], [0.0, 0.0, 0.0]]
