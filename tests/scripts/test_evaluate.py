from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import pytest
import torch
import yaml

from gaca_train.evaluation.endpoint import ChatEndpoint, EndpointError, RetryPolicy
from gaca_train.experiments.tiny import save_tiny_model
from tests.gaca_train.tiny_setup import ENV_KWARGS, tiny_model_and_tokenizer
from tests.scripts.chat_server import MALFORMED, ChatServer, scripted_response

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def evaluate():
    """The evaluation's command line (scripts/evaluate.py is a wrapper of it)."""
    from gaca_train.experiments import evaluate

    return evaluate


def test_expert_baseline_solves_everything_and_random_rarely(tmp_path, evaluate):
    common = [
        "--env-kwargs",
        json.dumps({"horizon": 5, "num_branches": 2}),
        "--max-tasks",
        "30",
        "--max-env-steps",
        "10",
    ]
    expert = evaluate.main([*common, "--policy", "expert", "--out", str(tmp_path / "expert")])
    random = evaluate.main([*common, "--policy", "random", "--out", str(tmp_path / "random")])
    assert expert["summary"]["success_rate"] == 1.0 and expert["summary"]["episode_length"] == 5.0
    assert random["summary"]["success_rate"] < 0.5
    saved = json.loads((tmp_path / "expert.json").read_text())
    assert saved["summary"]["episodes"] == 30 and len(saved["episodes"]) == 30
    table = (tmp_path / "random.md").read_text()
    assert table.startswith("| policy | episodes | success |") and "| random | 30 | " in table


def untimed(records: list[dict]) -> list[dict]:
    """The records without their timings (which differ between two runs of the same episodes)."""
    return [{k: v for k, v in r.items() if "second" not in k} for r in records]


def test_the_old_spellings_of_the_evaluation_size_and_step_limit_still_work_and_warn(tmp_path, evaluate):
    env = ["--env-kwargs", json.dumps({"horizon": 5, "num_branches": 2}), "--policy", "random", "--seed", "2"]
    new = evaluate.main([*env, "--max-tasks", "3", "--rollouts-per-task", "2", "--max-env-steps", "4",
                         "--out", str(tmp_path / "new")])  # fmt: skip
    for old, renamed in (("--num-episodes", "--max-tasks"), ("--repeats", "--rollouts-per-task"),
                         ("--max-steps", "--max-env-steps")):  # fmt: skip
        argv = {"--max-tasks": "3", "--rollouts-per-task": "2", "--max-env-steps": "4"}
        argv = [a for k, v in argv.items() for a in ((old if k == renamed else k), v)]
        with pytest.warns(FutureWarning, match=f"{old} is deprecated and will be removed in the next release; "
                          f"use {renamed}"):  # fmt: skip
            report = evaluate.main([*env, *argv, "--out", str(tmp_path / old.strip("-"))])
        assert untimed(report["episodes"]) == untimed(new["episodes"])
        assert untimed([report["summary"]]) == untimed([new["summary"]])
    assert new["summary"]["episodes"] == 6 and new["settings"]["max_env_steps"] == 4
    assert all(e["length"] <= 4 for e in new["episodes"])


def test_a_log_written_with_the_old_max_steps_header_resumes(tmp_path, evaluate):
    argv = ["--env-kwargs", json.dumps({"horizon": 3}), "--policy", "random", "--max-tasks", "4"]
    full = evaluate.main([*argv, "--out", str(tmp_path / "full")])
    lines = (tmp_path / "full.jsonl").read_text().splitlines(keepends=True)
    header = json.loads(lines[0])
    header["run"] = {("max_steps" if k == "max_env_steps" else k): v for k, v in header["run"].items()}
    (tmp_path / "old.jsonl").write_text(json.dumps(header) + "\n" + "".join(lines[1:3]))  # 2 of 4 episodes
    resumed = evaluate.main([*argv, "--out", str(tmp_path / "old")])
    assert untimed(resumed["episodes"]) == untimed(full["episodes"])


def test_model_policy_plays_in_batches(tmp_path, evaluate):
    model, tokenizer = tiny_model_and_tokenizer()
    path = save_tiny_model(model, tokenizer, tmp_path / "tiny")
    report = evaluate.main(
        ["--model", str(path), "--env-kwargs", json.dumps(ENV_KWARGS), "--split", "train", "--max-tasks", "2",
         "--batch-size", "1", "--max-env-steps", "3", "--max-new-tokens", "4", "--greedy",
         "--out", str(tmp_path / "m")]
    )  # fmt: skip
    assert [e["task_id"] for e in report["episodes"]] == ["train-0", "train-1"]
    assert all(e["length"] == 3 and e["malformed"] == 3 for e in report["episodes"])  # untrained: never in format
    assert report["summary"]["success_rate"] == 0.0


@pytest.mark.slow
def test_expert_and_random_on_generated_alfworld_games_report_task_types(tmp_path, evaluate):
    pytest.importorskip("textworld", reason="needs the alfworld extra (make test installs it)")
    from gaca_envs.alfworld.generate import generate

    data = tmp_path / "alfworld"
    generate(data, 2, seed=6, split="train")
    common = ["--env", "GACA-ALFWorld-v0", "--env-kwargs", json.dumps({"data_path": str(data)}), "--split", "train",
              "--max-tasks", "2", "--max-env-steps", "50"]  # fmt: skip
    expert = evaluate.main([*common, "--policy", "expert", "--out", str(tmp_path / "expert")])
    assert expert["summary"]["success_rate"] == 1.0
    assert sum(expert["summary"]["success_by_task_type"].values()) == 2.0  # two games of two task types
    # The stratified draw reads each game's task type from the env.
    from gaca_train.evaluation.play import task_types

    types = task_types("GACA-ALFWorld-v0", {"data_path": str(data), "split": "train"})
    assert sorted(types) == sorted(e["task_id"] for e in expert["episodes"])
    assert sorted(types.values()) == sorted(expert["summary"]["success_by_task_type"])
    assert "| task type | episodes | success |" in (tmp_path / "expert.md").read_text()


# --- Chat-level policies: in-process and an OpenAI-compatible endpoint --------------------------

CHAIN = ["--env-kwargs", json.dumps({"horizon": 4, "num_branches": 1, "num_tasks": 6}), "--split", "train",
         "--max-env-steps", "8", "--temperature", "0.5", "--max-new-tokens", "64"]  # fmt: skip


@pytest.fixture
def server():
    with ChatServer() as running:
        yield running


def trajectories(report):
    keys = ("task_id", "repeat", "actions", "rewards", "length", "won", "score", "invalid", "malformed", "error")
    return [{k: e[k] for k in keys} for e in report["episodes"]]


def in_process(evaluate, out, argv=(), seen=None):
    def chat(messages):
        if seen is not None:
            seen.append(messages)
        return scripted_response(messages)

    return evaluate.main([*CHAIN, "--max-tasks", "6", *argv, "--out", str(out)], chat=chat)


def test_endpoint_plays_the_same_trajectories_as_the_in_process_policy(tmp_path, evaluate, server):
    seen = []
    local = in_process(evaluate, tmp_path / "local", seen=seen)
    remote = evaluate.main([*CHAIN, "--max-tasks", "6", "--base-url", server.base_url, "--model", "m",
                            "--concurrency", "3", "--out", str(tmp_path / "remote")])  # fmt: skip
    assert remote["backend"] == "endpoint" and local["backend"] == "chat"
    assert trajectories(remote) == trajectories(local)
    assert [e["task_id"] for e in remote["episodes"]] == [f"train-{k}" for k in range(6)]
    # The endpoint saw exactly the conversations the in-process policy saw (in another order: 3 in flight).
    sent = Counter(json.dumps(r["messages"]) for r in server.requests)
    assert sent == Counter(json.dumps(m) for m in seen)
    assert len(server.requests) == sum(e["length"] for e in remote["episodes"])
    assert {(r["model"], r["temperature"], r["top_p"], r["max_tokens"], "top_k" in r) for r in server.requests} == {
        ("m", 0.5, 1.0, 64, False)
    }
    assert not any("repetition_penalty" in r for r in server.requests)
    # The scripted policy exercised every kind of step: admissible, inadmissible, malformed.
    summary = remote["summary"]
    assert summary["malformed_rate"] > 0 and summary["invalid_rate"] > summary["malformed_rate"] / 2
    assert summary["errors"] == 0 and summary["episodes"] == 6


def test_endpoint_retries_server_errors_with_backoff(tmp_path, evaluate, server):
    local = in_process(evaluate, tmp_path / "local")
    server.behave(fail_next=2)
    remote = evaluate.main([*CHAIN, "--max-tasks", "6", "--base-url", server.base_url, "--model", "m",
                            "--concurrency", "1", "--max-retries", "2", "--retry-backoff", "0.01",
                            "--out", str(tmp_path / "remote")])  # fmt: skip
    assert trajectories(remote) == trajectories(local) and remote["summary"]["errors"] == 0
    assert len(server.requests) == sum(e["length"] for e in remote["episodes"]) + 2  # two 500s, retried


def test_chat_endpoint_backoff_doubles_and_gives_up(server):
    waits = []

    class Recorder(threading.Event):
        def wait(self, timeout=None):
            waits.append(timeout)
            return False

    retry = RetryPolicy(max_retries=3, backoff=0.5, backoff_max=1.5, timeout=5)
    endpoint = ChatEndpoint(server.base_url, "m", {"max_tokens": 8}, api_key="k", retry=retry, stop=Recorder())
    server.behave(fail_next=2)
    messages = [{"role": "user", "content": "Actions: 'a'"}]
    assert endpoint(messages) == scripted_response(messages) and waits == [0.5, 1.0]
    assert server.requests[-1]["auth"] == "Bearer k"
    server.behave(always_fail=True)
    with pytest.raises(EndpointError, match=r"HTTP 500 .* \(gave up after 4 tries\)"):
        endpoint(messages)
    assert waits == [0.5, 1.0, 0.5, 1.0, 1.5]  # capped at backoff_max
    server.behave(faults=["429", "429"], retry_after=7)
    assert endpoint(messages) == scripted_response(messages) and waits[5:] == [7.0, 7.0]  # Retry-After honoured
    server.behave(faults=["429"], retry_after=500)
    with pytest.raises(EndpointError, match=r"HTTP 429 .*asks to retry after 500 s, more than the 120 s honoured"):
        endpoint(messages)
    bad = ChatEndpoint(server.base_url + "/nowhere", "m", retry=retry, stop=Recorder())
    with pytest.raises(EndpointError, match="HTTP 404"):  # not worth retrying
        bad(messages)
    assert len(waits) == 7
    endpoint.close()
    bad.close()


def test_failing_endpoint_reports_errors_keeps_finished_episodes_and_a_rerun_completes(tmp_path, evaluate, server):
    local = in_process(evaluate, tmp_path / "local")
    common = [*CHAIN, "--base-url", server.base_url, "--model", "m", "--concurrency", "2", "--max-retries", "1",
              "--retry-backoff", "0", "--out", str(tmp_path / "remote")]  # fmt: skip
    first = evaluate.main([*common, "--max-tasks", "3"])  # three tasks drawn from six
    assert first["summary"]["episodes"] == 3 and first["summary"]["errors"] == 0
    drawn = {e["task_id"] for e in first["episodes"]}
    server.behave(always_fail=True)
    with pytest.raises(SystemExit, match=r"3 of 6 episodes failed \(first: HTTP 500 .*--allow-errors"):
        evaluate.main([*common, "--max-tasks", "6"])
    broken = json.loads((tmp_path / "remote.json").read_text())  # the report is written before the exit
    assert broken["summary"]["episodes"] == 3 and broken["summary"]["errors"] == 3
    by_task = {e["task_id"]: e for e in trajectories(local)}
    assert all(e == by_task[e["task_id"]] for e in trajectories(broken) if e["task_id"] in drawn)
    assert all("HTTP 500" in e["error"] and e["length"] == 0 for e in broken["episodes"] if e["task_id"] not in drawn)
    assert "| 3 |" in (tmp_path / "remote.md").read_text()  # errors column
    accepted = evaluate.main([*common, "--max-tasks", "6", "--allow-errors"])  # replays the 3, fails again
    assert accepted["summary"]["errors"] == 3
    server.behave()
    n_before = len(server.requests)
    healed = evaluate.main([*common, "--max-tasks", "6"])  # plays only the three errored episodes
    assert trajectories(healed) == trajectories(local)
    assert len(server.requests) - n_before == sum(e["length"] for e in local["episodes"][3:])


def test_endpoint_timeout_is_reported_per_episode(tmp_path, evaluate, server):
    server.behave(sleep_s=0.6)
    report = evaluate.main([*CHAIN, "--max-tasks", "2", "--base-url", server.base_url, "--model", "m",
                            "--concurrency", "2", "--max-retries", "1", "--retry-backoff", "0", "--allow-errors",
                            "--request-timeout", "0.2", "--out", str(tmp_path / "slow")])  # fmt: skip
    assert report["summary"]["errors"] == 2 and report["summary"]["episodes"] == 0
    assert all("TimeoutError" in e["error"] for e in report["episodes"])
    lines = (tmp_path / "slow.jsonl").read_text().splitlines()
    assert len(lines) == 3 and all(json.loads(line)["error"] for line in lines[1:])  # header + 2 episodes


def test_a_killed_run_resumes_where_it_stopped(tmp_path, evaluate):
    full = in_process(evaluate, tmp_path / "full", ["--rollouts-per-task", "2", "--seed", "3"])
    log = tmp_path / "cut.jsonl"
    lines = (tmp_path / "full.jsonl").read_text().splitlines(keepends=True)
    log.write_text("".join(lines[:5]) + lines[5][:40])  # header, 4 episodes and a line cut by the kill
    seen = []
    resumed = in_process(evaluate, tmp_path / "cut", ["--rollouts-per-task", "2", "--seed", "3"], seen=seen)
    assert trajectories(resumed) == trajectories(full)
    first_steps = [m for m in seen if "Step 1 of" in m[-1]["content"]]
    assert len(first_steps) == 12 - 4  # only the missing episodes were played
    assert len(log.read_text().splitlines()) == 1 + 12
    # Other settings (here the seed) are another run: refused, unless --no-resume sets the old log aside.
    with pytest.raises(SystemExit, match=r"cut.jsonl holds another run's episodes \(seed: 3 then, 4 now\); pass "
                       "--no-resume"):  # fmt: skip
        in_process(evaluate, tmp_path / "cut", ["--rollouts-per-task", "2", "--seed", "4"])
    seen.clear()
    in_process(evaluate, tmp_path / "cut", ["--rollouts-per-task", "2", "--seed", "4", "--no-resume"], seen=seen)
    assert len([m for m in seen if "Step 1 of" in m[-1]["content"]]) == 12
    assert (tmp_path / "cut.jsonl.prev").exists()


def test_a_crashing_policy_stops_the_run_and_keeps_only_whole_episodes(tmp_path, evaluate):
    full = in_process(evaluate, tmp_path / "full")
    calls = []

    def crashing(messages):
        calls.append(1)
        if len(calls) == 9:
            raise RuntimeError("policy bug")
        return scripted_response(messages)

    argv = [*CHAIN, "--max-tasks", "6", "--concurrency", "2", "--out", str(tmp_path / "crash")]
    with pytest.raises(RuntimeError, match="policy bug"):
        evaluate.main(argv, chat=crashing)
    lines = [json.loads(line) for line in (tmp_path / "crash.jsonl").read_text().splitlines()[1:]]
    kept = [e for e in lines if not e.get("interrupted")]
    assert all(e["error"] == "interrupted" and e["length"] == 0 for e in lines if e.get("interrupted"))
    assert 0 < len(kept) < 6 and len(calls) < sum(e["length"] for e in full["episodes"])
    by_key = {(e["task_id"], e["repeat"]): e for e in trajectories(full)}
    assert all(by_key[(e["task_id"], e["repeat"])] == {k: e[k] for k in by_key[("train-0", 0)]} for e in kept)
    resumed = evaluate.main(argv, chat=scripted_response)
    assert trajectories(resumed) == trajectories(full)


def test_api_key_is_read_from_the_named_environment_variable(tmp_path, evaluate, server, monkeypatch):
    argv = [*CHAIN, "--max-tasks", "1", "--base-url", server.base_url, "--model", "m", "--out", str(tmp_path / "k")]
    with pytest.raises(SystemExit, match="GACA_TEST_KEY: that environment variable is not set"):
        evaluate.main([*argv, "--api-key-env", "GACA_TEST_KEY"])
    monkeypatch.setenv("GACA_TEST_KEY", "secret")
    evaluate.main([*argv, "--api-key-env", "GACA_TEST_KEY", "--no-resume"])
    assert server.requests and {r["auth"] for r in server.requests} == {"Bearer secret"}


def test_config_supplies_prompt_env_and_generation_settings(tmp_path, evaluate, server):
    config = tmp_path / "train.yaml"
    fields = {
        "model_name_or_path": "some/model",
        "env_id": "GACA-CriticalChain-v0",
        "env_kwargs": json.dumps({"horizon": 3, "num_branches": 1, "num_tasks": 2}),  # a JSON string, as on the CLI
        "task_split": "train",
        "system_prompt": "You are a test courier.",
        "prompt_template": "T: {task} | {history}step {step}/{max_steps} | {observation} | "
        "Actions: {admissible_actions}",
        "history_length": 1,
        "max_admissible_actions": 2,
        "temperature": 1.0,  # the training rollouts' temperature: not used by an evaluation
        "eval_temperature": 0.7,
        "top_p": 0.9,
        "top_k": 5,
        "max_completion_length": 33,
        "max_env_steps": 3,
        "use_vllm": True,  # training-only settings are ignored
        "learning_rate": 1.0e-6,
        "rollouts_per_task": 8,
    }
    config.write_text(yaml.safe_dump(fields))
    report = evaluate.main(["--config", str(config), "--split", "train", "--base-url", server.base_url,
                            "--model", "m", "--out", str(tmp_path / "cfg")])  # fmt: skip
    assert [e["task_id"] for e in report["episodes"]] == ["train-0", "train-1"]
    assert all(e["length"] <= 3 for e in report["episodes"]) and report["settings"]["max_env_steps"] == 3
    first = server.requests[0]
    assert (first["temperature"], first["top_p"], first["top_k"], first["max_tokens"]) == (0.7, 0.9, 5, 33)
    assert report["settings"]["eval_temperature"] == 0.7
    assert first["messages"][0] == {"role": "system", "content": "You are a test courier."}
    user = first["messages"][1]["content"]
    assert user.startswith("T: Deliver the parcel") and "step 1/3" in user and user.count("'") == 4  # 2 actions
    later = [r["messages"][1]["content"] for r in server.requests if "step 3/3" in r["messages"][1]["content"]]
    assert later and all(m.count("[Step ") == 1 for m in later)  # history_length 1
    # Flags override the config.
    args = evaluate.parse_args(
        ["--config", str(config), "--temperature", "0.2", "--max-env-steps", "7", "--top-k", "0"]
    )
    settings = evaluate.resolve(args)
    assert settings["sampling"].temperature == 0.2 and settings["sampling"].top_k is None
    assert settings["sampling"].top_p == 0.9 and settings["prompts"].max_env_steps == 7
    assert settings["env_kwargs"] == {"horizon": 3, "num_branches": 1, "num_tasks": 2}
    # A config's env_kwargs split is the training split: the evaluation plays its own.
    config.write_text(yaml.safe_dump({**fields, "env_id": "GACA-ALFWorld-v0", "env_kwargs": {"split": "train"}}))
    resolved = evaluate.resolve(evaluate.parse_args(["--config", str(config)]))
    assert resolved["env_kwargs"] == {} and resolved["split"] == "valid_unseen"  # task_list() sets the env's split
    resolved = evaluate.resolve(evaluate.parse_args(["--config", str(config), "--split", "valid_seen"]))
    assert resolved["env_kwargs"] == {} and resolved["split"] == "valid_seen"
    resolved = evaluate.resolve(evaluate.parse_args(["--config", str(config), "--env-kwargs", '{"split": "train"}']))
    assert resolved["env_kwargs"] == {"split": "train"} and resolved["split"] == "train"


def test_per_env_default_step_limits_and_splits(evaluate):
    def resolved(env):
        return evaluate.resolve(evaluate.parse_args(["--env", env]))

    assert resolved("GACA-ALFWorld-v0")["prompts"].max_env_steps == 50
    assert resolved("GACA-ALFWorld-v0")["split"] == "valid_unseen"
    assert resolved("GACA-WebShop-v0")["prompts"].max_env_steps == 15
    assert resolved("GACA-WebShop-v0")["split"] == "test"
    assert resolved("GACA-CriticalChain-v0")["prompts"].max_env_steps == 50


def test_report_per_task_type_with_intervals_and_malformed_rate(evaluate):
    records = [
        {"won": True, "score": 1.0, "length": 3, "invalid": 0, "malformed": 0, "task_type": "heat"},
        {"won": False, "score": 0.0, "length": 5, "invalid": 1, "malformed": 2, "task_type": "heat"},
        {"won": True, "score": 1.0, "length": 2, "invalid": 0, "malformed": 1, "task_type": "cool"},
        {"won": False, "score": 0.0, "length": 0, "invalid": 0, "malformed": 0, "task_type": "cool", "error": "x"},
    ]
    summary = evaluate.summarise(records)
    assert summary["episodes"] == 3 and summary["errors"] == 1  # the errored episode is left out of the rates
    assert summary["success_by_task_type"] == {"cool": 1.0, "heat": 0.5}
    assert summary["invalid_rate"] == 0.1 and summary["malformed_rate"] == 0.3 and summary["episode_length"] == 10 / 3
    heat = summary["by_task_type"]["heat"]
    # Wilson, 1 of 2: centre (0.5 + z^2/4) / (1 + z^2/2) = 0.5, half z*sqrt(1/8 + z^2/16) / (1 + z^2/2) = 0.4055
    assert heat["ci95"]["success_rate"] == pytest.approx((0.0945, 0.9055), abs=1e-4)
    # t interval of the mean of 3 and 5 steps: 4 +- 12.706 * sqrt(2) / sqrt(2), clipped at 0 steps
    assert heat["ci95"]["episode_length"] == pytest.approx((0.0, 4 + 12.706))
    # ... and at the step limit when it is given: a mean cannot exceed it.
    capped = evaluate.summarise(records, max_length=10)["by_task_type"]["heat"]
    assert capped["ci95"]["episode_length"] == pytest.approx((0.0, 10.0))
    # 1 of 6 scored 1.0: 1/6 +- 2.571 * sqrt(1/6) / sqrt(6) = 1/6 +- 0.4285, clipped at 0
    six = evaluate.summarise([{"won": s, "score": float(s), "length": 1} for s in (1, 0, 0, 0, 0, 0)])
    assert six["ci95"]["score"] == pytest.approx((0.0, 1 / 6 + 2.571 / 6))
    assert summary["by_task_type"]["cool"]["errors"] == 1 and summary["by_task_type"]["cool"]["episodes"] == 1
    assert summary["by_task_type"]["cool"]["ci95"]["score"] is None  # one episode: no interval
    # Wilson over 0 of 10 steps (no clustering excess at rate 0): upper z^2 / (10 + z^2) = 0.2775
    none = evaluate.summarise([{"won": False, "score": 0.0, "length": 5, "invalid": 0, "malformed": 0}] * 2)
    assert none["ci95"]["malformed_rate"] == pytest.approx((0.0, 0.2775), abs=1e-4)
    table = evaluate.markdown("x", summary)
    assert "| task type | episodes | success | score | steps | invalid | malformed | errors |" in table
    assert "| heat | 2 | 0.500 [0.095, 0.905] | " in table and "| cool | 1 | 1.000 [" in table
    assert "| x | 3 | 0.667 [" in table and table.splitlines()[2].endswith("| 1 |")


def test_clustered_rate_interval_widens_for_episodes_that_are_all_or_nothing():
    from gaca_train.evaluation.report import clustered_rate_interval, wilson

    # Ten episodes of 10 steps: five malformed throughout, five never. Pooled rate 0.5 either way,
    # but the evidence is ten episodes, not a hundred independent steps.
    clustered = clustered_rate_interval([10] * 5 + [0] * 5, [10] * 10)
    spread = clustered_rate_interval([5] * 10, [10] * 10)
    assert spread == pytest.approx(wilson(50, 100))
    assert clustered[1] - clustered[0] > 2.5 * (spread[1] - spread[0])


def test_scripted_policy_covers_every_kind_of_answer():
    answers = {scripted_response([{"role": "user", "content": f"{k}\nActions: 'a', 'b'"}]) for k in range(40)}
    assert MALFORMED in answers and "<think>step by step</think><action>dance on the table</action>" in answers
    assert "<think>step by step</think><action>a</action>" in answers


@pytest.mark.slow
def test_cli_with_a_paper_config_against_an_endpoint(tmp_path, server):
    pytest.importorskip("textworld", reason="needs the alfworld extra (make test installs it)")
    from gaca_envs.alfworld.generate import generate

    generate(tmp_path / "alfworld", 4, seed=6, split="valid_unseen", difficulty="easy", engine="native")
    env = {**os.environ, "ALFWORLD_DATA": str(tmp_path / "alfworld")}
    command = [sys.executable, str(ROOT / "scripts" / "evaluate.py"), "--config", "configs/alfworld_gaca.yaml",
               "--base-url", server.base_url, "--model", "m", "--max-tasks", "4", "--max-retries", "1",
               "--out", str(tmp_path / "cli")]  # fmt: skip
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "generation: temperature=0.4 top_p=1.0 top_k=off max_new_tokens=512" in result.stdout  # eval default
    report = json.loads((tmp_path / "cli.json").read_text())
    assert report["split"] == "valid_unseen" and report["settings"]["max_env_steps"] == 50
    assert report["summary"]["episodes"] == 4 and report["summary"]["errors"] == 0
    assert "by_task_type" in report["summary"] and "| task type | episodes |" in result.stdout
    assert len(server.requests) == sum(e["length"] for e in report["episodes"])


def test_hf_backend_ignores_the_checkpoints_sampling_defaults(tmp_path):
    from transformers import AutoModelForCausalLM, GenerationConfig

    from gaca_train.evaluation.backends import Sampling, hf_backend

    model, tokenizer = tiny_model_and_tokenizer()
    clean = save_tiny_model(model, tokenizer, tmp_path / "clean")
    model.generation_config.repetition_penalty = 50.0  # a checkpoint that ships sampling defaults, as Qwen does
    model.generation_config.no_repeat_ngram_size = 1
    shipped = save_tiny_model(model, tokenizer, tmp_path / "shipped")
    prompts = [tokenizer("Step 1 Observation go to the harbour")["input_ids"]] * 2
    sampling = Sampling(greedy=True, max_new_tokens=12)
    reference, _ = hf_backend(str(clean), sampling, device="cpu")[0](prompts)
    ids, _ = hf_backend(str(shipped), sampling, device="cpu")[0](prompts)
    assert ids == reference
    # The shipped defaults would change the answer had they been inherited (transformers' own behaviour).
    loaded = AutoModelForCausalLM.from_pretrained(shipped).eval()
    inherited = loaded.generate(
        input_ids=torch.tensor(prompts[:1]),
        generation_config=GenerationConfig(max_new_tokens=12, do_sample=False, pad_token_id=tokenizer.pad_token_id),
    )[0, len(prompts[0]) :].tolist()
    assert inherited != reference[0][: len(inherited)] or len(inherited) != len(reference[0])


def test_chat_episode_loop_plays_as_the_trainers_rollout(tmp_path, evaluate, monkeypatch):
    """The endpoint backend's episode loop renders the prompts and keeps the history that run_rollout does."""
    from gaca_train.evaluation import backends as eval_backends

    model, tokenizer = tiny_model_and_tokenizer()
    path = save_tiny_model(model, tokenizer, tmp_path / "tiny")
    prompts = {"rollout": [], "chat": []}
    backend = eval_backends.hf_backend

    def recording_backend(*args, **kwargs):
        generate, tok = backend(*args, **kwargs)
        return (lambda ids: prompts["rollout"].extend(ids) or generate(ids)), tok

    monkeypatch.setattr(eval_backends, "hf_backend", recording_backend)
    common = ["--env-kwargs", json.dumps(ENV_KWARGS), "--split", "train", "--max-tasks", "2", "--max-env-steps", "3",
              "--max-new-tokens", "6", "--temperature", "1.0", "--history-length", "2"]  # fmt: skip
    rollout = evaluate.main([*common, "--model", str(path), "--batch-size", "1", "--out", str(tmp_path / "rollout")])
    # Sampled from the same torch seed: one prompt per generate call, in the same order on both paths.
    generate, tok = backend(str(path), eval_backends.Sampling(temperature=1.0, max_new_tokens=6), device="cpu")

    def chat(messages):
        ids = list(tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=True)
                   ["input_ids"])  # fmt: skip
        prompts["chat"].append(ids)
        completion, _ = generate([ids])
        return tok.decode(completion[0], skip_special_tokens=True)

    played = evaluate.main([*common, "--concurrency", "1", "--out", str(tmp_path / "chat")], chat=chat)
    assert rollout["backend"] == "hf" and played["backend"] == "chat"
    assert len(prompts["chat"]) == 6 and prompts["chat"] == prompts["rollout"]
    assert trajectories(played) == trajectories(rollout)
    assert len({a for e in played["episodes"] for a in e["actions"]}) == 6  # sampled: every response differs


def test_log_samples_request_seeds_usage_and_the_run_header(tmp_path, evaluate, server):
    from gaca_train.evaluation.play import Job, request_seed

    argv = [*CHAIN, "--max-tasks", "2", "--rollouts-per-task", "2", "--base-url", server.base_url, "--model", "m",
            "--seed", "5", "--log-samples", "--out", str(tmp_path / "s")]  # fmt: skip
    report = evaluate.main(argv)
    seeds = {}  # conversation -> the seeds it was sent with (repeats of a task share their first prompt)
    for r in server.requests:
        seeds.setdefault(json.dumps(r["messages"]), set()).add(r["seed"])
    for index, e in enumerate(report["episodes"]):
        assert len(e["samples"]) == e["length"] and e["requests"] == e["length"] and e["latency_s"] > 0
        job = Job(e["task_id"], e["repeat"], index)
        for step, sample in enumerate(e["samples"]):
            assert sample["response"] == scripted_response(sample["messages"]) and sample["step"] == step
            assert request_seed(5, job, step) in seeds[json.dumps(sample["messages"])]  # the prompt as sent
        assert e["usage"]["completion_tokens"] == sum(len(s["response"].split()) for s in e["samples"])
    summary = report["summary"]
    assert summary["requests"] == len(server.requests) and summary["prompt_tokens"] > summary["completion_tokens"] > 0
    assert "at_k" in summary and "pass@2" in (tmp_path / "s.md").read_text()
    header = json.loads((tmp_path / "s.jsonl").read_text().splitlines()[0])["run"]
    assert (header["base_url"], header["model"], header["env_version"]) == (server.base_url, "m", 0)
    assert header["package_version"] and len(header["git_commit"]) == 40 and header["sampling"]["temperature"] == 0.5
    # The same --model behind another endpoint is another run: resuming is refused.
    with ChatServer() as other:
        with pytest.raises(SystemExit, match=r"s.jsonl holds another run's episodes \(base_url: "):
            evaluate.main(
                [*argv[: argv.index("--base-url")], "--base-url", other.base_url, *argv[argv.index("--model") :]]
            )
        assert other.requests == []


def test_max_rps_spaces_the_requests(tmp_path, evaluate, server):
    evaluate.main([*CHAIN, "--max-tasks", "2", "--base-url", server.base_url, "--model", "m", "--concurrency", "2",
                   "--max-rps", "20", "--out", str(tmp_path / "r")])  # fmt: skip
    times = sorted(r["received"] for r in server.requests)
    assert len(times) == 16 and times[-1] - times[0] > 0.7  # 15 gaps of 1/20 s at least (0.75 s), jitter aside
    assert all(t - s > 0.05 for s, t in zip(times, times[2:], strict=False))  # never 3 requests in 1/20 s


def test_vllm_backend_through_a_stand_in_engine_plays_as_the_hf_backend(tmp_path, evaluate, monkeypatch):
    """vllm_backend with a stand-in ``vllm`` module (vLLM needs a GPU): its ``LLM(model, seed, generation_config)``
    / ``generate(prompts, params, use_tqdm)`` / ``SamplingParams`` contract, generating with the HF backend."""
    import importlib.machinery
    import types

    from gaca_train.evaluation import backends as eval_backends

    model, tokenizer = tiny_model_and_tokenizer()
    path = save_tiny_model(model, tokenizer, tmp_path / "tiny")
    made = []

    class SamplingParams:
        def __init__(self, **kwargs):
            self.__dict__.update(kwargs)

    class LLM:
        def __init__(self, model, seed, generation_config):
            made.append({"model": model, "seed": seed, "generation_config": generation_config})
            self.model = model

        def generate(self, prompts, params, use_tqdm=True):
            made.append(dict(params.__dict__))
            sampling = eval_backends.Sampling(greedy=True, max_new_tokens=params.max_tokens)
            generate, _ = eval_backends.hf_backend(self.model, sampling, device="cpu")
            ids, _ = generate([p["prompt_token_ids"] for p in prompts])
            return [types.SimpleNamespace(outputs=[types.SimpleNamespace(token_ids=tuple(i))]) for i in ids]

    vllm = types.ModuleType("vllm")
    vllm.LLM, vllm.SamplingParams = LLM, SamplingParams
    vllm.__spec__ = importlib.machinery.ModuleSpec("vllm", None)
    monkeypatch.setitem(sys.modules, "vllm", vllm)
    common = ["--model", str(path), "--env-kwargs", json.dumps(ENV_KWARGS), "--split", "train", "--max-tasks", "2",
              "--batch-size", "2", "--max-env-steps", "3", "--max-new-tokens", "5", "--greedy",
              "--seed", "7"]  # fmt: skip
    played = evaluate.main([*common, "--backend", "vllm", "--out", str(tmp_path / "vllm")])
    reference = evaluate.main([*common, "--backend", "hf", "--out", str(tmp_path / "hf")])
    assert played["backend"] == "vllm" and trajectories(played) == trajectories(reference)
    assert made[0] == {"model": str(path), "seed": 7, "generation_config": "vllm"}  # the checkpoint's defaults unused
    assert made[1] == {"n": 1, "temperature": 0.0, "top_p": 1.0, "top_k": -1, "repetition_penalty": 1.0,
                       "max_tokens": 5}  # fmt: skip
    assert len(made) == 1 + 3  # one engine, one generate call per turn of the 2-env batch


def test_an_episode_failing_half_way_keeps_its_steps_and_counts_its_tries(tmp_path, evaluate, server):
    server.behave(faults=["ok", "ok", "ok", "500", "500"])  # the 4th request fails twice: its episode ends
    report = evaluate.main([*CHAIN, "--max-tasks", "1", "--base-url", server.base_url, "--model", "m",
                            "--max-retries", "1", "--retry-backoff", "0", "--allow-errors", "--log-samples",
                            "--out", str(tmp_path / "half")])  # fmt: skip
    (episode,) = report["episodes"]
    assert episode["length"] == 3 and "HTTP 500" in episode["error"] and "gave up after 2 tries" in episode["error"]
    assert episode["requests"] == 3 + 2 and len(server.requests) == 5
    assert [s["step"] for s in episode["samples"]] == [0, 1, 2, 3] and "error" in episode["samples"][-1]
    assert report["summary"]["errors"] == 1 and report["summary"]["requests"] == 5
