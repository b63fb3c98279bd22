"""GACA-WebShop-v0 over real HTTP to `webshop-server`: same observations, concurrency, restarts."""

from __future__ import annotations

import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest

from gaca_envs.webshop.backends import WebShopServerError
from gaca_envs.webshop.env import WebShopEnv
from webshop_server.expert import oracle_actions
from webshop_server.process import free_port, start_server, stop_server

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(shop_cache, tmp_path_factory):
    port = free_port()
    log = str(tmp_path_factory.mktemp("server-log") / "server.log")
    proc = start_server(port, "--cache-dir", shop_cache, log_path=log)
    yield f"http://127.0.0.1:{port}", log
    stop_server(proc)


@pytest.fixture(scope="module")
def gunicorn_server(shop_cache):
    port = free_port()
    proc = start_server(port, "--cache-dir", shop_cache, "--workers", "2", "--threads", "8")
    yield f"http://127.0.0.1:{port}"
    stop_server(proc)


def test_http_and_in_process_give_the_same_observations(server, app, shop):
    url, _ = server
    for mode in ("text", "text_rich", "html"):
        remote = WebShopEnv(server_url=url, observation_mode=mode)
        local = WebShopEnv(app=app, observation_mode=mode)
        try:
            first_remote, info_remote = remote.reset(options={"task_id": 9})
            first_local, info_local = local.reset(options={"task_id": 9})
            assert first_remote == first_local
            for action in [*oracle_actions(shop, 9)[:2], "click[description]", "click[< prev]"]:
                step_remote, step_local = remote.step(action), local.step(action)
                assert step_remote[0] == step_local[0]
                assert step_remote[4]["anchor_key"] == step_local[4]["anchor_key"]
                assert step_remote[4]["admissible_actions"] == step_local[4]["admissible_actions"]
        finally:
            remote.close()
            local.close()


def test_access_log_is_off_by_default(server):
    url, log = server
    urllib.request.urlopen(url + "/fixed_1").read()
    with open(log, encoding="utf-8") as f:
        text = f.read()
    assert "serving 1000 products" in text and "GET /fixed_1" not in text


def _play(url: str, shop, n: int) -> tuple[int, str, float, list[str]]:
    env = WebShopEnv(server_url=url, session_prefix=f"c{n}_")
    try:
        _, info = env.reset(options={"task_id": n})
        instructions = []
        for action in oracle_actions(shop, n):
            obs, reward, terminated, _, info = env.step(action)
            if not terminated:
                instructions.append(obs.split(" [SEP] ")[1])
        return n, info["task"], info["score"], instructions
    finally:
        env.close()


def test_64_concurrent_sessions_do_not_cross(gunicorn_server, shop):
    with ThreadPoolExecutor(max_workers=64) as pool:
        results = list(pool.map(lambda n: _play(gunicorn_server, shop, n), range(64)))
    for n, task, score, instructions in results:
        assert task == shop.goals[n]["instruction_text"]
        assert instructions and all(text == task for text in instructions)
        assert score == 1.0


def test_server_restart_gives_reconnect_or_clear_error(shop_cache, shop, tmp_path):
    port = free_port()
    proc = start_server(port, "--cache-dir", shop_cache)
    env = WebShopEnv(server_url=f"http://127.0.0.1:{port}", reconnect_s=30.0)
    try:
        env.reset(options={"task_id": 4})
        actions = oracle_actions(shop, 4)
        env.step(actions[0])
        stop_server(proc)
        # Restart the same server a moment later: the env reconnects and continues the episode.
        restarted = {}
        thread = threading.Thread(target=lambda: restarted.update(proc=start_server(port, "--cache-dir", shop_cache)))
        thread.start()
        for action in actions[1:]:
            obs, reward, terminated, _, info = env.step(action)
        thread.join()
        proc = restarted["proc"]
        assert terminated and info["won"] and reward == 10.0
        # Down for good: a clear error that says how to start a server, after the retry window.
        env.reconnect_s = env.backend.reconnect_s = 0.5
        env.reset(options={"task_id": 4})
        stop_server(proc)
        started = time.monotonic()
        with pytest.raises(WebShopServerError, match=r"unreachable .* start it with `webshop-server --port"):
            env.step(actions[0])
        assert time.monotonic() - started < 10
        # Restarted with another catalog: the env refuses to go on silently.
        proc = start_server(port, "--cache-dir", shop_cache, "--seed", "7")
        with pytest.raises(WebShopServerError, match="another instruction"):
            env.step(actions[0])
    finally:
        env.close()
        stop_server(proc)


def test_unreachable_server_at_construction_is_a_clear_error():
    port = free_port()
    with pytest.raises(WebShopServerError, match=f"start it with `webshop-server --port {port}`"):
        WebShopEnv(server_url=f"http://127.0.0.1:{port}", reconnect_s=0.2)
    with pytest.raises(ValueError, match="server_url must look like"):
        WebShopEnv(server_url="127.0.0.1:3000")


def test_hostile_requests_over_http(server):
    url, _ = server
    import requests

    r = requests.post(url + "/fixed_0", data={"search_query": "shirt <script>alert('x')</script>"}, timeout=10)
    assert r.status_code == 200 and "<script>alert" not in r.text
    assert requests.post(url + "/fixed_0", data={"search_query": "x" * 1_000_000}, timeout=10).status_code == 413
    assert requests.get(url + "/fixed_0/../../etc/passwd", timeout=10).status_code == 404
    r = requests.get(url + "/search_results/fixed_0/%5B'%C3%A9t%C3%A9'%5D/1", timeout=10)
    assert r.status_code == 200 and "Page 1 (Total results: 0)" in r.text
