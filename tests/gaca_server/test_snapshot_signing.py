"""Signed snapshots through the server: 220 tampered snapshots per env refused over HTTP, none taken.

The app runs in-process (``create_server_app`` under Starlette's ``TestClient``): ``/state`` hands out
snapshots signed with the server's key, and ``/reset`` refuses any that was altered (the mutations of
tests/gaca_envs/snapshot_fuzz.py, plus altered, missing, swapped and mistyped signatures), each with a
4xx naming the snapshot, and the session's old episode then needs a reset. With ``trust_snapshots`` the
env's own checks refuse unsigned bad snapshots as in-process. ``GACA-Remote-v0`` refuses what a local env
refuses, with the same error.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest
from fastapi.testclient import TestClient

import gaca_envs  # noqa: F401  (registers the ids)
from gaca_envs.task_env import EnvSnapshot
from gaca_server.app import create_server_app
from tests.gaca_envs.snapshot_fuzz import KINDS, SIGNATURE_KINDS, Pool, Tally, canonical, mutations, saves_back
from tests.gaca_server.servers import running_server

MUTATIONS_PER_ENV = 220
QUERIES = ("bar stool", "red shoes", "x")


@pytest.fixture(scope="module")
def alfworld_root(tmp_path_factory) -> Path:
    from gaca_envs.alfworld.generate import generate

    root = tmp_path_factory.mktemp("alfworld_signing")
    generate(root, 4, seed=6, split="train")
    return root


@pytest.fixture(scope="module")
def served(alfworld_root, tmp_path_factory) -> dict[str, tuple[str, dict[str, Any]]]:
    shop = {"cache_dir": str(tmp_path_factory.mktemp("index")), "title_nouns": "fallback"}
    return {
        "alfworld": ("GACA-ALFWorld-v0", {"data_path": str(alfworld_root)}),
        "webshop": ("GACA-WebShop-v0", {"shop_config": shop}),
        "criticalchain": ("GACA-CriticalChain-v0", {"noise": 0.2}),
    }


@pytest.fixture
def client_of(served) -> Iterator:
    clients = []

    def open_client(kind: str, **options: Any) -> TestClient:
        env_id, kwargs = served[kind]
        client = TestClient(create_server_app(env_id, kwargs, **options)).__enter__()
        clients.append(client)
        return client

    yield open_client
    for client in clients:
        client.__exit__(None, None, None)


class Session:
    """One HTTP session of an in-process server."""

    def __init__(self, client: TestClient) -> None:
        self.client = client
        self.id: str | None = None

    def reset(self, **data: Any) -> Any:
        response = self.client.post("/reset", json={**data, **({"session_id": self.id} if self.id else {})})
        if response.status_code == 200:
            self.id = response.json()["session_id"]
        return response

    def step(self, action: str) -> Any:
        return self.client.post("/step", json={"session_id": self.id, "action": {"action": action}})

    def snapshot(self) -> dict[str, Any]:
        return self.client.get("/state", params={"session_id": self.id}).json()["snapshot"]


def _action(observation: dict[str, Any], rng: random.Random) -> str:
    actions = observation["admissible_actions"]
    if rng.random() < 0.15 or not actions:
        return "do a dance"
    action = rng.choice(actions)
    return f"search[{rng.choice(QUERIES)}]" if action == "search[<query>]" else action


def signed_snapshots(session: Session, task_ids: list[str], seed: int) -> list[dict[str, Any]]:
    """Signed snapshots from ``/state``: at reset, mid-episode and at the end, over a few tasks."""
    rng = random.Random(seed)
    out = []
    for task_id in task_ids[:3]:
        observation = session.reset(task_id=task_id).json()["observation"]
        out.append(session.snapshot())
        for _ in range(rng.randrange(2, 9)):
            answer = session.step(_action(observation, rng)).json()
            observation = answer["observation"]
            if answer["done"]:
                break
        out.append(session.snapshot())
    session.reset(task_id=task_ids[1])
    while not session.step("do a dance").json()["done"]:
        pass
    out.append(session.snapshot())
    return out


def _foreign(served, kind: str) -> list[dict[str, Any]]:
    """Good snapshots of the other envs, straight from in-process envs (unsigned)."""
    out = []
    for other, (env_id, kwargs) in served.items():
        if other == kind:
            continue
        if other == "webshop":
            from webshop_server import create_app

            kwargs = {"app": create_app(kwargs["shop_config"])}
        env = gym.make(env_id, **kwargs)
        _, info = env.reset(options={"task_id": env.unwrapped.task_ids[0]})
        env.step(info["admissible_actions"][0].replace("<query>", "x"))
        out.append(env.unwrapped.save_state().to_dict())
        env.close()
    return out


def fuzz_server(client: TestClient, served, kind: str, count: int, seed: int, signed: bool) -> Tally:
    """Resets a live session to ``count`` mutations; counts refusals that leave it needing a reset."""
    session = Session(client)
    task_ids = client.get("/gaca/info").json()["task_ids"][:6]
    bases = signed_snapshots(session, task_ids, seed)
    if not signed:
        bases = [{k: v for k, v in b.items() if k != "signature"} for b in bases]
    cap = client.get("/gaca/info").json()["max_env_steps"]
    pool = Pool(cap, task_ids, bases, _foreign(served, kind))
    tally = Tally()
    for kind_of_mutation, _, mutated in mutations(
        bases, pool, count, seed, KINDS + (SIGNATURE_KINDS if signed else ())
    ):
        assert session.reset(task_id=task_ids[-1]).status_code == 200
        answer = session.reset(snapshot=mutated)
        if answer.status_code == 200:
            valid = not signed and saves_back(session.snapshot(), mutated)
            tally.count("valid" if valid else "silent", kind_of_mutation, canonical(mutated)[:300])
            continue
        message = answer.json().get("error", "")
        step = session.step("look")
        ok = answer.status_code in (400, 422) and "snapshot" in message and step.status_code == 409
        ok = ok and "after the episode ended" in step.json()["error"]
        detail = f"{answer.status_code} {message[:150]}; then step {step.status_code} {step.text[:100]}"
        tally.count("refused" if ok else "silent", kind_of_mutation, detail)
    # The server's own snapshots still restore exactly.
    for base in bases:
        answer = session.reset(snapshot=base)
        assert answer.status_code == 200 and answer.json()["observation"]["observation"] == base["observation"]
        restored = {k: v for k, v in session.snapshot().items() if k not in ("signature", "rng")}
        assert canonical(restored) == canonical({k: v for k, v in base.items() if k not in ("signature", "rng")})
    return tally


@pytest.mark.parametrize("kind", ["alfworld", "webshop", "criticalchain"])
def test_a_server_refuses_every_altered_snapshot(client_of, served, kind):
    tally = fuzz_server(client_of(kind), served, kind, MUTATIONS_PER_ENV, seed=11, signed=True)
    assert tally.total == MUTATIONS_PER_ENV
    assert not tally.silent and not tally.valid, f"{kind}: taken {tally.silent[:3]}"
    assert set(tally.refused) >= {*KINDS, *SIGNATURE_KINDS}


@pytest.mark.parametrize("kind", ["alfworld", "webshop", "criticalchain"])
def test_a_trusting_server_still_checks_every_snapshot(client_of, served, kind):
    # trust_snapshots: unsigned snapshots restore, so the env's own checks are all that stands in the way.
    tally = fuzz_server(client_of(kind, trust_snapshots=True), served, kind, 60, seed=12, signed=False)
    assert tally.total == 60 and not tally.silent, f"{kind}: taken {tally.silent[:3]}"
    assert sum(tally.refused.values()) >= 50, (tally.refused, tally.valid)


def test_snapshots_restore_on_servers_that_share_a_key_only(client_of, monkeypatch):
    first, second = Session(client_of("criticalchain")), Session(client_of("criticalchain"))
    first.reset(task_id="train-3")
    first.step("walk on")
    snapshot = first.snapshot()
    # Two servers with random keys (the default) do not take each other's snapshots.
    answer = second.reset(snapshot=snapshot)
    assert answer.status_code == 400
    assert "snapshot field signature does not match the snapshot" in answer.json()["error"]
    # One deployment key, given or from $GACA_SNAPSHOT_KEY: they do.
    key = "one key for the whole deployment"
    shared = Session(client_of("criticalchain", snapshot_key=key))
    shared.reset(task_id="train-3")
    monkeypatch.setenv("GACA_SNAPSHOT_KEY", key)
    from_env = Session(client_of("criticalchain"))
    assert from_env.reset(snapshot=shared.snapshot()).json()["observation"]["task_id"] == "train-3"
    # Unsigned snapshots need trust_snapshots; a trusting server still refuses a bad signature.
    unsigned = {k: v for k, v in snapshot.items() if k != "signature"}
    assert "signature is missing" in second.reset(snapshot=unsigned).json()["error"]
    trusting = Session(client_of("criticalchain", trust_snapshots=True))
    assert trusting.reset(snapshot=unsigned).status_code == 200
    assert trusting.reset(snapshot={**snapshot, "steps": 0}).status_code == 400


def test_a_websocket_session_refuses_an_altered_snapshot_and_needs_a_reset(client_of):
    client = client_of("criticalchain")
    with client.websocket_connect("/ws") as ws:
        ws.send_json({"type": "reset", "data": {"task_id": "train-1"}})
        ws.receive_json()
        ws.send_json({"type": "state"})
        snapshot = ws.receive_json()["data"]["snapshot"]
        for bad in ({**snapshot, "done": True}, {**snapshot, "signature": "0" * 64}, {**snapshot, "observation": ""}):
            ws.send_json({"type": "reset", "data": {"task_id": "train-1"}})
            assert ws.receive_json()["type"] == "observation"
            ws.send_json({"type": "reset", "data": {"snapshot": bad}})
            error = ws.receive_json()["data"]["message"]
            assert error.startswith("ValueError: snapshot field signature does not match the snapshot")
            ws.send_json({"type": "step", "data": {"action": "walk on"}})
            assert "after the episode ended" in ws.receive_json()["data"]["message"]
        ws.send_json({"type": "reset", "data": {"snapshot": snapshot}})
        assert ws.receive_json()["data"]["observation"]["task_id"] == "train-1"


@pytest.mark.slow
def test_the_remote_env_refuses_bad_snapshots_as_a_local_env_does():
    local = gym.make("GACA-CriticalChain-v0")
    with running_server("GACA-CriticalChain-v0") as server:
        remote = gym.make("GACA-Remote-v0", url=server.url)
        for env in (local, remote):
            env.reset(options={"task_id": "train-2"})
            env.step("walk on")
        snapshot = remote.unwrapped.save_state()
        assert snapshot.signature is not None and snapshot == local.unwrapped.save_state()
        # None used to start a random task on the remote env: now both raise the same TypeError.
        cases = [
            ({"snapshot": None}, TypeError, r"snapshot must come from save_state\(\), got NoneType"),
            ({"snapshot": "train-2"}, TypeError, r"snapshot must come from save_state\(\), got str"),
            ({"snapshot": snapshot, "task_id": "train-2"}, ValueError, "reset options with 'snapshot' may contain"),
        ]
        for options, error, message in cases:
            for env in (local, remote):
                env.reset(options={"task_id": "train-2"})
                with pytest.raises(error, match=message):
                    env.reset(options=options)
                with pytest.raises(RuntimeError, match="step\\(\\) called before reset\\(\\) or after the episode"):
                    env.step("walk on")
        # An altered snapshot: the server refuses it by its signature; the local env by its state.
        altered = dataclasses.replace(snapshot, done=True)
        with pytest.raises(ValueError, match="snapshot field signature does not match the snapshot"):
            remote.reset(options={"snapshot": altered})
        with pytest.raises(ValueError, match="snapshot field done is True but the episode goes on"):
            local.reset(options={"snapshot": altered})
        for env in (local, remote):
            with pytest.raises(RuntimeError, match="after the episode ended"):
                env.step("walk on")
        # The server's signed snapshot restores on the server and, trusted, in-process.
        assert remote.reset(options={"snapshot": snapshot})[0] == local.reset(options={"snapshot": snapshot})[0]
        assert EnvSnapshot.from_dict(snapshot.to_dict()).signature == snapshot.signature
        remote.close()
    local.close()
