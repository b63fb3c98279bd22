"""gaca-env-server with real server processes on 127.0.0.1, through OpenEnv's own client and GACA-Remote-v0.

Each module fixture starts one ``gaca-env-server`` subprocess and kills it by PID. The episodes
played through the server are compared step by step with the same env played in-process.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import threading
import time

import gymnasium as gym
import numpy as np
import pytest
import requests
from openenv.core import GenericEnvClient

import gaca_envs  # noqa: F401  (registers the env ids)
import gaca_envs.remote
from gaca_envs.remote import EnvServerError
from tests.gaca_server.servers import ROOT, running_server

pytestmark = pytest.mark.slow


def play(env: gym.Env, task_id: str, seed: int, max_steps: int = 60, snapshot_at: int | None = None) -> list:
    """One episode with a seeded policy (admissible actions, now and then a made-up one); every step's outcome."""
    rng = np.random.default_rng(seed)
    observation, info = env.reset(seed=seed, options={"task_id": task_id})
    steps, snapshot = [(observation, info)], None
    for t in range(max_steps):
        if t == snapshot_at:
            snapshot = env.unwrapped.save_state()
        actions = info["admissible_actions"]
        action = "dance wildly" if rng.random() < 0.15 or not actions else actions[rng.integers(len(actions))]
        observation, reward, terminated, truncated, info = env.step(action)
        steps.append((action, observation, reward, terminated, truncated, info))
        if terminated or truncated:
            break
    return steps if snapshot_at is None else (steps, snapshot)


def assert_same_episodes(local: gym.Env, remote: gym.Env, task_ids: list[str]) -> None:
    for i, task_id in enumerate(task_ids):
        here, (there, snapshot) = play(local, task_id, seed=i), play(remote, task_id, seed=i, snapshot_at=3)
        assert there == here, f"task {task_id}: the served episode differs from the in-process one"
        assert len(here) > 4
        # The server's snapshot (after 3 steps) restores in-process and goes on as the episode did.
        observation, info = local.reset(options={"snapshot": snapshot})
        assert (observation, info["anchor_key"]) == (here[3][1], here[3][-1]["anchor_key"])
        assert local.step(here[4][0]) == here[4][1:]


# ALFWorld -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def alfworld_data(tmp_path_factory):
    from gaca_envs.alfworld.generate import generate

    out = tmp_path_factory.mktemp("alfworld_data")
    generate(out, 3, seed=6, split="train")
    return str(out)


@pytest.fixture(scope="module")
def alfworld_server(alfworld_data):
    # Two worker processes: every WebSocket client below plays on whichever worker accepts it.
    kwargs = {"data_path": alfworld_data, "max_env_steps": 20}
    with running_server("GACA-ALFWorld-v0", kwargs, "--workers", "2") as server:
        yield server


def test_alfworld_episodes_equal_in_process_ones(alfworld_server, alfworld_data):
    kwargs = {"data_path": alfworld_data, "max_env_steps": 20}
    local = gym.make("GACA-ALFWorld-v0", **kwargs)
    remote = gym.make("GACA-Remote-v0", url=alfworld_server.url, env_id="GACA-ALFWorld-v0", **kwargs)
    assert remote.unwrapped.task_ids == local.unwrapped.task_ids and len(local.unwrapped.task_ids) == 3
    assert remote.unwrapped.prompt == local.unwrapped.prompt and remote.unwrapped.max_env_steps == 20
    assert_same_episodes(local, remote, local.unwrapped.task_ids)
    remote.close()


def test_openenvs_own_client_plays_an_alfworld_episode(alfworld_server, alfworld_data):
    local = gym.make("GACA-ALFWorld-v0", data_path=alfworld_data, max_env_steps=20)
    task_id = local.unwrapped.task_ids[1]
    here = play(local, task_id, seed=5)
    with GenericEnvClient(base_url=alfworld_server.url).sync() as client:
        result = client.reset(seed=5, task_id=task_id)
        assert result.observation["observation"] == here[0][0]
        assert result.observation["anchor_key"] == here[0][1]["anchor_key"] and result.done is False
        for action, observation, reward, terminated, truncated, info in here[1:]:
            result = client.step({"action": action})
            fields = result.observation
            done = terminated or truncated
            assert (fields["observation"], result.reward, result.done) == (observation, reward, done)
            assert {k: fields[k] for k in gaca_envs.INFO_KEYS} == {k: info[k] for k in gaca_envs.INFO_KEYS}
            assert fields["info"]["task_type"] == info["task_type"]
        state = client.state()
        assert state["env_id"] == "GACA-ALFWorld-v0" and state["step_count"] == len(here) - 1
        assert state["snapshot"]["task_id"] == task_id and state["snapshot"]["done"] is True


# WebShop ------------------------------------------------------------------------------------
def test_webshop_episodes_equal_in_process_ones(tmp_path):
    kwargs = {"shop_config": {"n_products": 1000, "title_nouns": "fallback", "cache_dir": str(tmp_path)}}
    local = gym.make("GACA-WebShop-v0", **kwargs)
    with running_server("GACA-WebShop-v0", kwargs) as server:
        remote = gym.make("GACA-Remote-v0", url=server.url, env_id="GACA-WebShop-v0")
        # Two sessions on one goal each get their own shop session: neither sees the other's pages.
        twin = gym.make("GACA-Remote-v0", url=server.url)
        task_ids = local.unwrapped.task_ids[:2]
        twin.reset(options={"task_id": task_ids[0]})
        twin.step("search[red shoes]")
        assert_same_episodes(local, remote, task_ids)
        remote.close()
        twin.close()


# CriticalChain: concurrency, capacity, a crash, bad input -----------------------------------
@pytest.fixture(scope="module")
def chain_server():
    with running_server("GACA-CriticalChain-v0", None, "--max-sessions", "80") as server:
        yield server


def test_criticalchain_episodes_equal_in_process_ones(chain_server):
    local = gym.make("GACA-CriticalChain-v0")
    remote = gym.make("GACA-Remote-v0", url=chain_server.url, env_id="GACA-CriticalChain-v0")
    assert_same_episodes(local, remote, ["train-0", "valid-3", "test-7"])
    assert remote.unwrapped.task_ids("valid") == local.unwrapped.task_ids("valid")
    remote.close()


def test_64_concurrent_sessions_do_not_cross(chain_server):
    n = 64
    task_ids = [f"train-{i}" for i in range(n)]
    local = gym.make("GACA-CriticalChain-v0")
    expected = [play(local, task_id, seed=i) for i, task_id in enumerate(task_ids)]
    envs = [gym.make("GACA-Remote-v0", url=chain_server.url) for _ in range(n)]
    results: list = [None] * n
    all_open = threading.Barrier(n + 1, timeout=60)

    def run(i: int) -> None:
        try:
            envs[i].reset(options={"task_id": task_ids[i]})  # opens the session
            all_open.wait()
            all_open.wait()  # the main thread counted the sessions
            results[i] = play(envs[i], task_ids[i], seed=i)
        except Exception as e:  # noqa: BLE001  (reported by the assertion below)
            results[i] = e

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for thread in threads:
        thread.start()
    all_open.wait()
    active = requests.get(f"{chain_server.url}/gaca/info", timeout=10).json()["active_sessions"]
    all_open.wait()
    for thread in threads:
        thread.join(timeout=120)
    assert active == n
    for i in range(n):
        assert results[i] == expected[i], f"session {i} ({task_ids[i]}) differs: {results[i]!r:.300}"
    for env in envs:
        env.close()


def test_a_full_server_answers_busy_keeps_its_live_episodes_and_closes_idle_ones():
    with running_server("GACA-CriticalChain-v0", None, "--max-sessions", "2", "--idle-timeout", "3") as server:
        first, second = (gym.make("GACA-Remote-v0", url=server.url) for _ in range(2))
        first.reset(options={"task_id": "train-0"})
        second.reset(options={"task_id": "train-1"})
        third = gym.make("GACA-Remote-v0", url=server.url)
        with pytest.raises(EnvServerError, match=r"busy: Server at capacity: 2/2"):
            third.reset(options={"task_id": "train-2"})
        response = requests.post(f"{server.url}/reset", json={"task_id": "train-2"}, timeout=10)
        assert response.status_code == 503 and response.json()["error"].startswith("busy: ")
        # Both live episodes go on (nothing was evicted).
        assert first.step("wait")[4]["task_id"] == "train-0"
        assert second.step("wait")[4]["task_id"] == "train-1"
        second.close()
        assert third.reset(options={"task_id": "train-2"})[1]["task_id"] == "train-2"  # a freed slot is taken
        # Idle sessions close (OpenEnv's reaper looks every 5 s); a step then says so, a reset connects again.
        deadline = time.monotonic() + 20
        while (
            requests.get(f"{server.url}/gaca/info", timeout=10).json()["active_sessions"]
            and time.monotonic() < deadline
        ):
            time.sleep(0.5)
        with pytest.raises(EnvServerError, match="SessionClosed: the server closed this session .idle time-out"):
            first.step("wait")
        assert first.reset(options={"task_id": "train-3"})[1]["task_id"] == "train-3"


def test_a_server_killed_mid_episode_gives_a_clear_error_and_no_silent_reset():
    with running_server("GACA-CriticalChain-v0") as server:
        remote = gym.make("GACA-Remote-v0", url=server.url)
        _, info = remote.reset(options={"task_id": "train-4"})
        remote.step(info["admissible_actions"][0])
        client = GenericEnvClient(base_url=server.url).sync()
        client.connect()
        client.reset(task_id="train-4")
        server.kill()
        lost = r"during an episode of task 'train-4' at step 1; the episode is lost"
        with pytest.raises(ConnectionError, match=lost):
            remote.step(info["admissible_actions"][0])
        with pytest.raises(ConnectionError, match="cannot open a session on the env server"):
            remote.reset(options={"task_id": "train-4"})  # no server: no new episode either
        with pytest.raises(Exception, match="(?i)clos|connect"):
            client.step({"action": "wait"})
        client.close()


@pytest.mark.parametrize(
    ("path", "body", "status", "message"),
    [
        ("/reset", b"{not json", 400, "request body is not valid JSON"),
        ("/reset", b"[1, 2]", 400, "request body must be a JSON object, got list"),
        ("/step", {"session_id": "no-such-session", "action": {"action": "wait"}}, 404, "unknown session_id"),
        ("/reset", {"env_id": "GACA-Nope-v0"}, 400, "this server serves GACA-CriticalChain-v0, not env_id='GACA-Nope"),
        ("/reset", {"snapshot": {"env": "criticalchain"}}, 400, "a snapshot dict has the fields"),
        ("/reset", {"task_id": "train-0", "colour": "red"}, 400, "got unknown colour"),
        ("/reset", {"task_id": "elsewhere-1"}, 400, "task_id must look like"),
        ("/reset", b"x" * (5 << 20), 413, "request body over 4194304 bytes"),
    ],
)
def test_bad_http_input_gets_a_4xx_with_a_message(chain_server, path, body, status, message):
    raw = {"data": body, "headers": {"Content-Type": "application/json"}}
    kwargs = raw if isinstance(body, bytes) else {"json": body}
    response = requests.post(f"{chain_server.url}{path}", timeout=30, **kwargs)
    assert response.status_code == status, response.text[:300]
    assert message in response.json()["error"]
    assert "Traceback" not in response.text


def test_bad_session_input_gets_a_4xx_with_a_message(chain_server):
    session = requests.post(f"{chain_server.url}/reset", json={"task_id": "train-0"}, timeout=10).json()["session_id"]
    cases = [
        ({"session_id": session, "action": {"action": "x" * 1_000_000}}, 400, "action has 1000000 characters"),
        ({"session_id": session, "action": {}}, 422, "action.action: Field required"),
        ({"session_id": session, "action": {"action": 7}}, 422, "action.action: Input should be a valid string"),
        ({"session_id": 12, "action": {"action": "wait"}}, 422, "session_id must be the non-empty string"),
    ]
    for body, status, message in cases:
        response = requests.post(f"{chain_server.url}/step", json=body, timeout=30)
        assert (response.status_code, message in response.json()["error"]) == (status, True), response.text[:300]
    state = requests.get(f"{chain_server.url}/state", params={"session_id": session}, timeout=10).json()
    assert state["step_count"] == 0 and state["snapshot"]["task_id"] == "train-0"  # nothing bad was taken
    bad = dict(state["snapshot"], state={"stage": "far"})
    response = requests.post(f"{chain_server.url}/reset", json={"session_id": session, "snapshot": bad}, timeout=10)
    assert response.status_code == 400 and "snapshot" in response.json()["error"]
    assert requests.post(f"{chain_server.url}/close", json={"session_id": session}, timeout=10).json()["closed"]
    assert requests.get(f"{chain_server.url}/state", params={"session_id": session}, timeout=10).status_code == 404


def test_bad_websocket_input_gets_an_error_with_a_message(chain_server):
    from websockets.sync.client import connect

    with connect(chain_server.url.replace("http", "ws") + "/ws") as ws:
        ws.send("{not json")
        assert json.loads(ws.recv(timeout=10))["data"]["code"] == "INVALID_JSON"
        ws.send(json.dumps({"type": "step", "data": {"action": "x" * 1_000_000}}))
        assert "action has 1000000 characters" in json.loads(ws.recv(timeout=10))["data"]["message"]
    remote = gym.make("GACA-Remote-v0", url=chain_server.url)
    remote.reset(options={"task_id": "train-0"})
    snapshot = remote.unwrapped.save_state().to_dict()
    with pytest.raises(ValueError, match="snapshot field steps must be an int, got str"):
        remote.reset(options={"snapshot": dict(snapshot, steps="3")})
    assert remote.reset(options={"snapshot": snapshot})[1]["task_id"] == "train-0"
    remote.close()


def test_client_refuses_another_env_id_or_kwargs(chain_server):
    with pytest.raises(ValueError, match="serves GACA-CriticalChain-v0, not env_id='GACA-ALFWorld-v0'"):
        gym.make("GACA-Remote-v0", url=chain_server.url, env_id="GACA-ALFWorld-v0")
    with pytest.raises(ValueError, match=r"env kwarg horizon=30 differs from the server's \('not set'"):
        gym.make("GACA-Remote-v0", url=chain_server.url, horizon=30)
    with pytest.raises(ConnectionError, match="no GACA env server answers at http://127.0.0.1:9"):
        gym.make("GACA-Remote-v0", url="http://127.0.0.1:9")


def test_the_episode_cap_travels_as_max_env_steps_and_its_old_name(chain_server, monkeypatch):
    info = requests.get(f"{chain_server.url}/gaca/info", timeout=10).json()
    assert info["max_env_steps"] == info["max_steps"] == 20  # CriticalChain's default, 2 * horizon
    remote = gym.make("GACA-Remote-v0", url=chain_server.url)
    assert remote.unwrapped.max_env_steps == 20
    with pytest.warns(FutureWarning, match="`max_steps` is deprecated, use `max_env_steps`"):
        assert remote.unwrapped.max_steps == 20
    remote.close()
    # A server of the previous release: started with max_steps=12, its info says max_steps only.
    old = {**info, "env_kwargs": {"max_steps": 12}, "max_steps": 12}
    del old["max_env_steps"]
    monkeypatch.setattr(gaca_envs.remote, "fetch_server_info", lambda url, timeout_s=10.0: old)
    remote = gaca_envs.remote.RemoteEnv(chain_server.url, max_env_steps=12)
    assert remote.max_env_steps == 12
    with pytest.warns(FutureWarning, match="use `max_env_steps`"):
        assert gaca_envs.remote.RemoteEnv(chain_server.url, max_steps=12).max_env_steps == 12
    with pytest.raises(ValueError, match=r"env kwarg max_env_steps=13 differs from the server's \(12"):
        gaca_envs.remote.RemoteEnv(chain_server.url, max_env_steps=13)
    with pytest.raises(ValueError, match="were both given"):
        gaca_envs.remote.RemoteEnv(chain_server.url, max_env_steps=12, max_steps=12)


def test_an_unknown_env_id_or_kwarg_stops_the_command_with_its_message(capsys, monkeypatch):
    from gaca_server.cli import main

    monkeypatch.setitem(sys.modules, "gradio", sys.modules.get("gradio"))  # main() hides Gradio; undone after

    for args, message in [
        (["--env", "GACA-Nope-v0"], "env 'GACA-Nope-v0' is not a servable env id; choose one of GACA-ALFWorld-v0"),
        (["--env", "GACA-Remote-v0"], "env 'GACA-Remote-v0' is not a servable env id"),
        (["--env", "GACA-CriticalChain-v0", "horizon"], "env kwargs are KEY=VALUE words"),
        (["--env", "GACA-CriticalChain-v0", "--max-sessions", "0"], "--max-sessions must be >= 1, got 0"),
    ]:
        with pytest.raises(SystemExit) as exit_info:
            main(args)
        err = capsys.readouterr().err
        assert exit_info.value.code == 2 and message in err, err[-500:]
    # A kwarg the env refuses stops it too, with the env's message (one env is built at start-up).
    assert main(["--env", "GACA-CriticalChain-v0", "horizon=-3"]) == 2
    assert "gaca-env-server: error: " in capsys.readouterr().err


def test_the_trainers_rollout_pool_spreads_its_envs_over_servers(chain_server):
    from gaca_train.rollout.vector import RolloutPool

    task_ids = ["train-0", "train-0", "train-5", "train-5"]
    with running_server("GACA-CriticalChain-v0", None) as second:
        urls = [chain_server.url, second.url]
        before = [requests.get(f"{url}/gaca/info", timeout=10).json()["active_sessions"] for url in urls]
        pools = [RolloutPool("GACA-CriticalChain-v0", 4, {}, mode="sync", server_urls=urls)]
        pools.append(RolloutPool("GACA-CriticalChain-v0", 4, {}, mode="sync"))
        episodes = []
        for pool in pools:
            starts = pool.reset(task_ids, seed=1)
            steps = [pool.step([info["admissible_actions"][0] for _, info in starts]) for _ in range(3)]
            episodes.append((starts, [[(s.observation, s.reward, s.info) for s in step] for step in steps]))
        counts = [
            requests.get(f"{url}/gaca/info", timeout=10).json()["active_sessions"] - n for url, n in zip(urls, before)
        ]
        for pool in pools:
            pool.close()
    assert counts == [2, 2]
    assert episodes[0] == episodes[1]


def test_the_trl_adapter_plays_a_remote_env_as_a_local_one(alfworld_server, alfworld_data):
    from gaca_envs.trl import GymToolEnvironment, environment_factory

    kwargs = {"data_path": alfworld_data, "max_env_steps": 20}
    remote = environment_factory("GACA-Remote-v0", url=alfworld_server.url, env_id="GACA-ALFWorld-v0", **kwargs)()
    local = GymToolEnvironment("GACA-ALFWorld-v0", **kwargs)
    assert type(remote).__name__ == "ALFWorldToolEnvironment"
    task_id = local.env.unwrapped.task_ids[2]
    assert remote.reset(task_id=task_id, seed=0) == local.reset(task_id=task_id, seed=0)
    for step in range(25):
        action = local.info["admissible_actions"][step % len(local.info["admissible_actions"])]
        assert remote.act(action) == local.act(action)
    assert remote.done and remote.get_reward() == local.get_reward() and remote.actions == local.actions
    with pytest.raises(ValueError, match="GACA-Remote-v0 needs url="):
        environment_factory("GACA-Remote-v0", env_id="GACA-ALFWorld-v0")


def test_the_docs_openenv_client_script_plays_an_alfworld_episode(alfworld_server, alfworld_data):
    text = (ROOT / "docs" / "openenv.md").read_text()
    script = text.split("<!-- openenv-client-example -->\n```python\n", 1)[1].split("```", 1)[0]
    out = subprocess.run(
        [sys.executable, "-c", script, alfworld_server.url], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    local = gym.make("GACA-ALFWorld-v0", data_path=alfworld_data, max_env_steps=20)
    observation, info = local.reset(seed=0)
    lines = [info["task"]]
    done = False
    while not done:
        action = info["admissible_actions"][0]
        observation, _, terminated, truncated, info = local.step(action)
        lines.append(f"> {action}\n{observation}")
        done = terminated or truncated
    steps = len(lines) - 1
    lines.append(f"won={info['won']} steps={steps} anchor={info['anchor_key']}")
    assert out.stdout == "\n".join(lines) + "\n"


def test_nothing_imports_the_server_package():
    # DESIGN: gaca_server imports gaca_envs; no module of the other packages imports gaca_server,
    # not even inside a function.
    importers = []
    for package in ("gaca_envs", "gaca_train", "webshop_server"):
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
                if isinstance(node, ast.ImportFrom) and node.module:
                    names = [node.module]
                if any(n == "gaca_server" or n.startswith("gaca_server.") for n in names):
                    importers.append(str(path.relative_to(ROOT)))
    assert importers == []
