"""Helpers for tests and sanity checks: a small shop, and an oracle that solves a goal."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request

from webshop_server import Shop, ShopConfig


def build_test_shop(cache_dir: str, n_products: int = 1000) -> Shop:
    """The embedded 1k shop with its index cached under ``cache_dir``, title nouns by the fallback."""
    return Shop.from_config(ShopConfig(cache_dir=cache_dir, n_products=n_products, title_nouns="fallback"))


def oracle_actions(shop: Shop, goal_index: int) -> list[str]:
    """Actions that buy the goal's target product with the goal's options (it is on results page 1)."""
    goal = shop.goals[goal_index]
    product = shop.catalog.by_asin[goal["asin"]]
    hits = shop.search(tuple(product["Title"].lower().split()))
    position = [p["asin"] for p in hits].index(goal["asin"])
    actions = [f"search[{product['Title'].lower()}]"]
    actions += ["click[next >]"] * (position // 10)
    actions.append(f"click[{goal['asin'].lower()}]")
    actions += [f"click[{v}]" for v in goal["goal_options"]]
    actions.append("click[buy now]")
    return actions


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(port: int, *args: str, log_path: str | None = None, timeout_s: float = 60.0) -> subprocess.Popen:
    """Starts ``webshop-server --port PORT ARGS`` and waits until it answers ``/api/info``.

    Raises:
        RuntimeError: if it exits or does not answer within ``timeout_s`` (its log is in the message).
    """
    log = open(log_path or os.devnull, "w")  # noqa: SIM115 - handed to the child process
    cmd = [sys.executable, "-m", "webshop_server.cli", "--port", str(port), *args]
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    log.close()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"webshop-server exited with {proc.returncode}: {_tail(log_path)}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/info", timeout=1) as r:
                if r.status == 200:
                    return proc
        except OSError:
            time.sleep(0.1)
    stop_server(proc)
    raise RuntimeError(f"webshop-server did not answer on port {port} within {timeout_s} s: {_tail(log_path)}")


def stop_server(proc: subprocess.Popen) -> None:
    """Stops a server started by ``start_server`` (SIGTERM, then SIGKILL after 10 s)."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _tail(path: str | None) -> str:
    if not path or not os.path.exists(path):
        return "(no log)"
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()[-2000:]
