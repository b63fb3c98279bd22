"""The server's worker pool: bounded, a blocked call holds up only itself while the pool can grow, and a call stuck
for good does not keep the process from exiting."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

from gaca_server.pool import WorkerPool


@pytest.fixture
def gate():
    """An event the blocked calls wait on; set after the test, so that no thread is left waiting."""
    event = threading.Event()
    yield event
    event.set()


def test_the_pool_never_runs_more_than_its_threads(gate):
    pool = WorkerPool(3, name="test-pool")
    running, most = [0], [0]
    lock = threading.Lock()

    def call(i: int) -> int:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        gate.wait(5)
        with lock:
            running[0] -= 1
        return i

    futures = [pool.submit(call, i) for i in range(10)]
    time.sleep(0.2)
    assert most[0] == 3 and len([t for t in threading.enumerate() if t.name.startswith("test-pool")]) == 3
    gate.set()
    assert [f.result(5) for f in futures] == list(range(10))
    pool.shutdown()


def test_a_blocked_call_holds_up_only_itself_while_the_pool_can_grow(gate):
    pool = WorkerPool(2)
    blocked = pool.submit(gate.wait, 5)
    for i in range(5):  # calls after it run on the other thread, one after another
        assert pool.submit(lambda x: x * 2, i).result(1) == 2 * i
    assert not blocked.done()
    gate.set()
    assert blocked.result(5) is True
    pool.shutdown()


def test_errors_reach_the_caller_and_a_shut_pool_takes_no_work():
    pool = WorkerPool(1)
    with pytest.raises(ZeroDivisionError):
        pool.submit(lambda: 1 / 0).result(5)
    pool.shutdown()
    with pytest.raises(RuntimeError, match="cannot submit env work after the pool was shut down"):
        pool.submit(print)
    with pytest.raises(ValueError, match="threads must be >= 1, got 0"):
        WorkerPool(0)


def test_a_call_stuck_for_good_does_not_keep_the_process_from_exiting():
    code = (
        "import threading\n"
        "from gaca_server.pool import WorkerPool\n"
        "pool = WorkerPool(2)\n"
        "pool.submit(threading.Event().wait)  # never returns\n"
        "pool.shutdown(wait=False, cancel_futures=True)\n"
    )
    tic = time.monotonic()
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - tic < 30  # a ThreadPoolExecutor would be joined at exit: forever
