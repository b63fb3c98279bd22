"""scripts/evaluate.py as a user runs it: a subprocess against a fault-injecting chat server on 127.0.0.1.

Covers the answer shapes the chat API allows, faults (malformed bodies, dropped connections,
429 with Retry-After, trickled answers), a wrong endpoint (pre-flight), bad arguments, Ctrl-C
(with answers in flight and during a back-off) and a SIGKILL followed by a resume.
"""

from __future__ import annotations

import inspect
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gaca_train.evaluation.endpoint import ChatEndpoint, EndpointError, RetryPolicy
from gaca_train.evaluation.play import Job, play_chat_jobs, request_seed
from tests.scripts.chat_server import ChatServer, scripted_response

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = str(ROOT / "scripts" / "evaluate.py")
CHAIN = ["--env-kwargs", json.dumps({"horizon": 4, "num_branches": 1, "num_tasks": 24}), "--split", "train",
         "--max-env-steps", "8", "--temperature", "0.5", "--max-new-tokens", "64"]  # fmt: skip
KEYS = ("task_id", "repeat", "actions", "rewards", "length", "won", "score", "invalid", "malformed", "error")


@pytest.fixture
def server():
    with ChatServer() as running:
        yield running


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, SCRIPT, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def timed(run, *args):
    """The seconds ``run(*args)`` took, and what it returned."""
    tic = time.monotonic()
    result = run(*args)
    return time.monotonic() - tic, result


def _default_sigint() -> None:
    # A child inherits an ignored SIGINT (as a shell's background job does), and Python then keeps ignoring it;
    # whatever ran before in this process, the evaluator under test starts as a terminal would start it.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, SCRIPT, *args], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True, preexec_fn=_default_sigint)  # fmt: skip


def episodes(path: Path) -> list[dict]:
    """The episode lines of a log, latest per (task id, repeat), in task order."""
    latest = {}
    for line in path.read_text().splitlines()[1:]:
        record = json.loads(line)
        latest[(record["task_id"], record["repeat"])] = record
    return [{k: r[k] for k in KEYS} for _, r in sorted(latest.items(), key=lambda kv: (kv[0][1], kv[0][0]))]


def wait_for(condition, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def one_line_error(result: subprocess.CompletedProcess) -> str:
    """The last stderr line, once checked to be the only message (no traceback)."""
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_every_content_shape_and_retried_faults_play_as_plain_answers(tmp_path, server):
    endpoint = [*CHAIN, "--max-tasks", "8", "--base-url", server.base_url, "--model", "m", "--concurrency", "2"]
    plain = cli(*endpoint, "--out", str(tmp_path / "plain"))
    assert plain.returncode == 0, plain.stderr
    reference = episodes(tmp_path / "plain.jsonl")
    # Content as a list of parts (with an image part between), and one of each fault before the answers:
    # a cut-off JSON body, a choice without message, a dropped connection, a 500 and a 429 (Retry-After 0).
    server.behave(shape="parts", faults=["truncated", "no_message", "drop", "500", "429"], retry_after=0)
    n_before = len(server.requests)
    faulty = cli(*endpoint, "--max-retries", "5", "--retry-backoff", "0", "--out", str(tmp_path / "parts"))
    assert faulty.returncode == 0, faulty.stderr
    assert episodes(tmp_path / "parts.jsonl") == reference
    assert len(server.requests) - n_before == sum(e["length"] for e in reference) + 5  # the five faults, retried
    # Null content is the empty answer: malformed, never a crash.
    server.behave(shape="null")
    null = cli(*endpoint, "--out", str(tmp_path / "null"))
    assert null.returncode == 0, null.stderr
    report = json.loads((tmp_path / "null.json").read_text())
    assert report["summary"]["malformed_rate"] == 1.0 and report["summary"]["errors"] == 0


def test_a_trickled_answer_is_cut_at_the_request_deadline(server):
    endpoint = ChatEndpoint(server.base_url, "m", retry=RetryPolicy(max_retries=0, timeout=1.0))
    tic = time.monotonic()
    endpoint([{"role": "user", "content": "Actions: 'a'"}])  # the same request answered at once: the baseline
    baseline = time.monotonic() - tic
    server.behave(faults=["trickle"], trickle_s=0.2)  # ~400 bytes at 5 per second: over a minute
    tic = time.monotonic()
    with pytest.raises(EndpointError, match=r"no complete answer within 1 s"):
        endpoint([{"role": "user", "content": "Actions: 'a'"}])
    assert 1.0 <= time.monotonic() - tic < 1.0 + 5 * baseline + 0.5  # the deadline, not the minute of trickle
    endpoint.close()


def test_a_kept_alive_connection_the_server_closed_is_reopened_at_once(server):
    endpoint = ChatEndpoint(server.base_url, "m", retry=RetryPolicy(max_retries=0, timeout=5.0))
    messages = [{"role": "user", "content": "Actions: 'a'"}]
    assert endpoint.complete(messages).tries == 1
    server.close_connections()  # the server's idle time-out
    answer = endpoint.complete(messages)  # no retry left: it must not count as a failed try
    assert answer.tries == 1 and answer.text == scripted_response(messages) and len(server.requests) == 2
    endpoint.close()


def test_a_wrong_endpoint_fails_its_preflight_in_seconds_with_one_line(tmp_path, server):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        free = s.getsockname()[1]
    port = server.base_url.split(":")[2].split("/")[0]
    cases = {
        f"http://127.0.0.1:{free}/v1": f"cannot connect to http://127.0.0.1:{free}/v1: connection refused",
        server.base_url.removesuffix("/v1"): "answered HTTP 404: --base-url must be the API root, which for vLLM "
        f"and OpenAI ends in /v1 (try http://127.0.0.1:{port}/v1)",
        f"127.0.0.1:{port}/v1": "is not an http(s) URL with a host; expected e.g. http://127.0.0.1:8000/v1 (did you "
        f"mean http://127.0.0.1:{port}/v1?)",
    }
    # The baseline: the same start-up and pre-flight against a live server that does not serve the model asked for.
    baseline, wrong = timed(
        cli, *CHAIN, "--base-url", server.base_url, "--model", "qwen", "--out", str(tmp_path / "y")
    )
    assert wrong.returncode == 1
    assert "model 'qwen' is not served by" in one_line_error(wrong) and "it serves: m" in wrong.stderr
    for url, expected in cases.items():
        # A pre-flight that retried would wait out a 60-s back-off: the bound is far below it.
        seconds, result = timed(cli, *CHAIN, "--base-url", url, "--model", "m", "--retry-backoff", "60",
                                "--out", str(tmp_path / "x"))  # fmt: skip
        assert result.returncode == 1 and expected in one_line_error(result)
        assert seconds < 2 * baseline + 5, (url, seconds, baseline)
    assert not [r for r in server.requests if r["path"] == "/v1/chat/completions"]  # no episode was started


def test_bad_arguments_give_a_message_not_a_traceback(tmp_path, capsys):
    from gaca_train.experiments import evaluate

    out = ["--out", str(tmp_path / "bad")]
    usage = {  # argparse: exit status 2, "argument --flag: ..."
        ("--max-tasks", "-1"): "argument --max-tasks: must be >= 1, got -1",
        ("--max-tasks", "0"): "argument --max-tasks: must be >= 1, got 0",
        ("--rollouts-per-task", "0"): "argument --rollouts-per-task: must be >= 1, got 0",
        ("--concurrency", "0"): "argument --concurrency: must be >= 1, got 0",
        ("--concurrency", "-4"): "argument --concurrency: must be >= 1, got -4",
        ("--temperature", "-0.5"): "argument --temperature: must be >= 0, got -0.5",
        ("--temperature", "nan"): "argument --temperature: expected a finite number, got 'nan'",
        ("--top-p", "1.5"): "argument --top-p: must be <= 1, got 1.5",
        ("--top-p", "0"): "argument --top-p: must be > 0, got 0",
        ("--max-retries", "-1"): "argument --max-retries: must be >= 0, got -1",
        ("--request-timeout", "0"): "argument --request-timeout: must be > 0, got 0",
        ("--max-rps", "-2"): "argument --max-rps: must be > 0, got -2",
        ("--env-kwargs", "{horizon: 3"): "argument --env-kwargs: not valid JSON (Expecting property name enclosed in "
        "double quotes at column 2)",
        ("--env-kwargs", "[1]"): "argument --env-kwargs: expected a JSON object",
        ("--rollouts-per-task", "two"): "argument --rollouts-per-task: expected an integer, got 'two'",
    }
    for argv, expected in usage.items():
        with pytest.raises(SystemExit) as exit_info:
            evaluate.main([*argv, *out])
        assert exit_info.value.code == 2 and expected in capsys.readouterr().err, argv
    settings = {  # checked after parsing: exit status 1 with the message
        ("--env", "GACA-Nowhere-v0"): "unknown env id 'GACA-Nowhere-v0'; registered GACA envs: GACA-ALFWorld-v0",
        ("--config", str(tmp_path / "missing.yaml")): "missing.yaml: cannot read it (No such file or directory)",
        ("--temperature", "0"): "temperature must be > 0 when sampling, got 0.0; use --greedy instead",
        ("--split", "nope"): "split must be one of train, valid, test, got 'nope'",
    }
    for argv, expected in settings.items():
        with pytest.raises(SystemExit, match=None) as exit_info:
            evaluate.main([*argv, "--policy", "random", *out])
        assert expected in str(exit_info.value.code), (argv, exit_info.value.code)
    # As a subprocess: the message alone, with the usual exit statuses.
    negative = cli("--concurrency", "0", *out)
    assert negative.returncode == 2 and "Traceback" not in negative.stderr
    assert negative.stderr.strip().endswith("argument --concurrency: must be >= 1, got 0")
    missing = cli("--config", "nowhere.yaml", *out)
    assert missing.returncode == 1 and "cannot read it" in one_line_error(missing)


def _interrupt(proc: subprocess.Popen) -> tuple[float, str]:
    """Sends Ctrl-C (SIGINT) and returns the seconds until the process ended and its stderr."""
    tic = time.monotonic()
    os.kill(proc.pid, signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=50)
    except subprocess.TimeoutExpired:  # killed and reaped here, so no open pipe outlives the test
        os.killpg(proc.pid, signal.SIGKILL)
        _, err = proc.communicate()
        pytest.fail(f"still running 50 s after Ctrl-C; its stderr:\n{err[-2000:]}")
    return time.monotonic() - tic, err


def test_ctrl_c_stops_within_its_grace_and_records_episodes_in_flight_as_interrupted(tmp_path, server):
    # The bound: the evaluator's grace for episodes in flight (1 s), plus a whole run of the same CLI that stops
    # at its pre-flight (start-up and exit: more than an exit takes), plus a second; far below the 60 s for which
    # the answers in flight sleep and the back-off waits.
    grace = inspect.signature(play_chat_jobs).parameters["grace"].default
    baseline, wrong = timed(
        cli, *CHAIN, "--base-url", server.base_url, "--model", "qwen", "--out", str(tmp_path / "w")
    )
    assert wrong.returncode == 1 and grace == 1.0
    bound = grace + baseline + 1
    log = tmp_path / "slow.jsonl"
    server.behave(sleep_s=60)  # every answer in flight when the interrupt comes
    proc = start(*CHAIN, "--max-tasks", "8", "--base-url", server.base_url, "--model", "m", "--concurrency", "4",
                 "--out", str(tmp_path / "slow"))  # fmt: skip
    wait_for(lambda: len(server.requests) == 4)
    seconds, err = _interrupt(proc)
    assert proc.returncode == 130 and seconds < bound, (seconds, bound, err)
    assert "Traceback" not in err and err.strip().splitlines()[-1].startswith("evaluate: interrupted; 0 of 8 episodes")
    records = [json.loads(line) for line in log.read_text().splitlines()[1:]]
    assert len(records) == 4 and all(r["interrupted"] and r["error"] == "interrupted" for r in records)
    # During a back-off (every request fails; 30 s before the next try).
    server.behave(always_fail=True)
    proc = start(*CHAIN, "--max-tasks", "8", "--base-url", server.base_url, "--model", "m", "--concurrency", "2",
                 "--retry-backoff", "60", "--out", str(tmp_path / "backoff"))  # fmt: skip
    n_before = len(server.requests)
    wait_for(lambda: len(server.requests) >= n_before + 2)
    seconds, err = _interrupt(proc)
    assert proc.returncode == 130 and seconds < bound, (seconds, bound, err)
    assert "Traceback" not in err


def test_sigkill_then_resume_equals_an_uninterrupted_run_episode_by_episode(tmp_path, server):
    common = [*CHAIN, "--max-tasks", "24", "--base-url", server.base_url, "--model", "m", "--concurrency", "3"]
    whole = cli(*common, "--out", str(tmp_path / "whole"))
    assert whole.returncode == 0, whole.stderr
    seeds_whole = {r["seed"] for r in server.requests}
    server.requests.clear()
    server.behave(sleep_s=0.02)  # slow enough to kill it half-way
    proc = start(*common, "--out", str(tmp_path / "cut"))
    cut = tmp_path / "cut.jsonl"
    wait_for(lambda: cut.exists() and len(cut.read_text().splitlines()) >= 9)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=10)
    assert 9 <= len(cut.read_text().splitlines()) < 25  # header and 8 to 23 episodes, perhaps a line cut short
    server.behave()
    resumed = cli(*common, "--out", str(tmp_path / "cut"))
    assert resumed.returncode == 0, resumed.stderr
    assert "already in" in resumed.stdout and " 0 of 24 already" not in resumed.stdout
    assert episodes(cut) == episodes(tmp_path / "whole.jsonl")
    assert {r["seed"] for r in server.requests} == seeds_whole  # every request carried the same seed
    job = Job("train-0", 0, 0)
    assert request_seed(0, job, 0) in seeds_whole


def test_errored_episodes_make_the_run_fail_unless_accepted(tmp_path, server):
    server.behave(always_fail=True)  # /models answers; every completion fails
    common = [*CHAIN, "--max-tasks", "3", "--base-url", server.base_url, "--model", "m", "--max-retries", "0"]
    failed = cli(*common, "--out", str(tmp_path / "e"))
    assert failed.returncode == 1 and "Traceback" not in failed.stderr
    assert "evaluate: 3 of 3 episodes failed (first: HTTP 500" in failed.stderr.strip().splitlines()[-1]
    assert "episode train-" in failed.stderr and "episode train-" not in failed.stdout  # failures go to stderr
    accepted = cli(*common, "--allow-errors", "--out", str(tmp_path / "e"))
    assert accepted.returncode == 0 and "| m | 0 |" in accepted.stdout and " | 3 |" in accepted.stdout
