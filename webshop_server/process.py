"""Run ``webshop-server`` as a child process: pick a free port, start it, wait for it, stop it.

For benchmarks and tests that need the server over real HTTP (webshop_server/bench.py,
tests/gaca_envs/webshop/test_http.py); ``webshop-server --port N`` in a shell does the same.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request

__all__ = ["free_port", "start_server", "stop_server"]


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
