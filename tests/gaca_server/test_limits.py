"""The server's limits, in-process (FastAPI's TestClient): bad fields answer 422 and leak nothing, HTTP sessions
expire and are evicted, ``/schema`` publishes GACAState, and bad command lines end in one line with status 2."""

from __future__ import annotations

import time

import pytest
from fastapi.testclient import TestClient

from gaca_server import cli
from gaca_server.app import create_server_app
from gaca_server.models import GACAState

ENV_ID = "GACA-CriticalChain-v0"


@pytest.fixture
def make_client():
    """``make_client(**limits)``: a TestClient of a fresh CriticalChain app, closed after the test."""
    clients = []

    def make(**limits):
        client = TestClient(create_server_app(ENV_ID, {}, **limits))
        clients.append(client.__enter__())
        return client

    yield make
    for client in clients:
        client.__exit__(None, None, None)


def sessions(client: TestClient) -> tuple[int, int]:
    info = client.get("/gaca/info").json()
    return info["active_sessions"], info["http_sessions"]


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("seed", "abc", "seed must be an integer in [0, 2**64 - 1] or null, got 'abc'"),
        ("seed", 1.5, "seed must be an integer in [0, 2**64 - 1] or null, got 1.5"),
        ("seed", -1, "seed must be an integer in [0, 2**64 - 1] or null, got -1"),
        ("seed", True, "seed must be an integer in [0, 2**64 - 1] or null, got True"),
        ("seed", 2**64, "seed must be an integer in [0, 2**64 - 1] or null, got 18446744073709551616"),
        ("task_id", 7, "task_id must be a string or null, got int 7"),
        ("snapshot", [1], "snapshot must be an object (the snapshot /state answered) or null, got list"),
    ],
)
def test_bad_reset_fields_answer_422_and_leave_no_session(make_client, field, value, message):
    client = make_client(max_sessions=2)
    for _ in range(3):  # before the fix two of these filled a 2-session server for the idle time-out (600 s)
        response = client.post("/reset", json={field: value})
        assert (response.status_code, response.json()) == (422, {"error": f"ValueError: {message}"})
    assert sessions(client) == (0, 0)
    opened = [client.post("/reset", json={"seed": 3}) for _ in range(2)]
    assert [r.status_code for r in opened] == [200, 200]


def test_a_failed_reset_of_a_new_session_leaves_nothing_and_an_open_one_keeps_its_session(make_client):
    client = make_client(max_sessions=2)
    assert client.post("/reset", json={"task_id": "elsewhere-1"}).status_code == 400
    assert client.post("/reset", json={"colour": "red"}).status_code == 400
    assert sessions(client) == (0, 0)
    session_id = client.post("/reset", json={}).json()["session_id"]
    assert client.post("/reset", json={"session_id": session_id, "seed": "abc"}).status_code == 422
    assert sessions(client) == (1, 1)  # the client knows this one: it stays, as a bad step leaves it too
    assert client.post("/step", json={"session_id": session_id, "action": {"action": "wait"}}).status_code == 200


def test_stateless_resets_never_fill_the_server_and_websockets_are_never_evicted(make_client):
    client = make_client(max_sessions=4, max_http_sessions=2)
    with client.websocket_connect("/ws") as ws:
        ws.send_json({"type": "reset", "data": {"task_id": "train-0"}})
        assert ws.receive_json()["type"] == "observation"
        ids = []
        for _ in range(20):  # OpenEnv-style: POST /reset {} again and again, never /close
            response = client.post("/reset", json={})
            assert response.status_code == 200, response.text
            ids.append(response.json()["session_id"])
        assert sessions(client) == (3, 2)  # the WebSocket and the two most recent HTTP sessions
        old = client.post("/step", json={"session_id": ids[0], "action": {"action": "wait"}})
        assert old.status_code == 404
        assert "evicted as the least recently used of 2 HTTP sessions (--max-http-sessions)" in old.json()["error"]
        ws.send_json({"type": "step", "data": {"action": "wait"}})
        assert ws.receive_json()["type"] == "observation"  # the WebSocket's episode goes on
    assert client.post("/step", json={"session_id": ids[-1], "action": {"action": "wait"}}).status_code == 200


def test_the_least_recently_used_http_session_is_the_one_evicted(make_client):
    client = make_client(max_sessions=8, max_http_sessions=2)
    first, second = (client.post("/reset", json={}).json()["session_id"] for _ in range(2))
    client.post("/step", json={"session_id": first, "action": {"action": "wait"}})  # first is now the recent one
    client.post("/reset", json={})
    assert client.get("/state", params={"session_id": first}).status_code == 200
    assert client.get("/state", params={"session_id": second}).status_code == 404


def test_http_sessions_expire_when_idle(make_client):
    client = make_client(idle_timeout_s=0.3)
    idle = client.post("/reset", json={}).json()["session_id"]
    time.sleep(0.4)
    client.post("/reset", json={})  # a new session closes the idle ones (OpenEnv's reaper does too, every 5 s)
    response = client.get("/state", params={"session_id": idle})
    assert response.status_code == 404 and "idle for over 0.3 s (--idle-timeout)" in response.json()["error"]
    assert sessions(client) == (1, 1)


def test_schema_publishes_gaca_state(make_client):
    schema = make_client().get("/schema").json()
    assert schema["state"] == GACAState.model_json_schema()
    assert {"env_id", "task_id", "snapshot"} <= set(schema["state"]["properties"])
    assert "admissible_actions" in schema["observation"]["properties"]


@pytest.mark.parametrize(
    ("words", "message"),
    [
        (
            [ENV_ID, "shop_config={n_products: 5"],
            "env kwarg shop_config: '{n_products: 5' is not valid JSON (Expecting property name enclosed in double "
            "quotes: line 1 column 2 (char 1)); quote keys and strings",
        ),
        ([ENV_ID, "--port", "99999"], "argument --port: must be a TCP port in 1-65535, got 99999"),
        ([ENV_ID, "--port", "http"], "argument --port: expected an integer port, got 'http'"),
        ([ENV_ID, "--idle-timeout", "-5"], "argument --idle-timeout: must be a finite number of seconds >= 0"),
        ([ENV_ID, "--env-threads", "0"], "--env-threads must be >= 1, got 0"),
        ([ENV_ID, "--max-http-sessions", "0"], "--max-http-sessions must be >= 1, got 0"),
        (["GACA-WebShop-v0", "shop_config=5"], 'cannot build GACA-WebShop-v0 with {"shop_config": 5}: '),
    ],
)
def test_bad_command_lines_end_in_one_line_with_status_2(capsys, words, message):
    try:
        status = cli.main(["--env", *words])
    except SystemExit as e:  # argparse's own errors
        status = e.code
    assert status == 2
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]
    assert last.startswith("gaca-env-server: error: ") and message in last, err
    assert "Traceback" not in err


def test_workers_share_one_snapshot_key_and_trust_is_passed_on(monkeypatch):
    # uvicorn is not started: its run() records what the worker processes would be given.
    import json
    import os

    import uvicorn

    seen = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: seen.update(app=app, **kwargs))
    monkeypatch.delenv("GACA_SNAPSHOT_KEY", raising=False)
    monkeypatch.delenv(cli._CONFIG_VARIABLE, raising=False)
    assert cli.main(["--env", "GACA-CriticalChain-v0", "--workers", "2", "--trust-snapshots"]) == 0
    config = json.loads(os.environ[cli._CONFIG_VARIABLE])
    assert seen["workers"] == 2 and config["trust_snapshots"] is True
    assert len(config["snapshot_key"]) == 64  # 32 random bytes in hex, drawn once in the parent
    monkeypatch.setenv("GACA_SNAPSHOT_KEY", "a deployment key of the operator")
    assert cli.main(["--env", "GACA-CriticalChain-v0", "--workers", "2"]) == 0
    config = json.loads(os.environ[cli._CONFIG_VARIABLE])
    assert "snapshot_key" not in config and config["trust_snapshots"] is False  # each worker reads the variable
