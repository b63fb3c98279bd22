"""The server's bounded worker pool for env work: daemon threads, so a stuck env cannot keep a server from exiting.

``concurrent.futures.ThreadPoolExecutor`` joins its threads when the interpreter exits, so one env
blocked for good (a read that never returns) would hang a stopped server at exit. This pool's
threads are daemons that the interpreter leaves behind, and ``shutdown(wait=False)`` returns at once.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any


class WorkerPool(Executor):
    """At most ``threads`` daemon threads that run submitted calls in submission order.

    Threads start as work arrives, up to ``threads``; a call waits in the queue while every thread
    is busy.

    Args:
        threads: the most threads (>= 1).
        name: the threads' name prefix.

    Raises:
        ValueError: for ``threads`` < 1.
    """

    def __init__(self, threads: int, name: str = "gaca-env") -> None:
        if threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        self.max_threads, self.name = threads, name
        self._queue: queue.SimpleQueue[tuple[Future, Callable, tuple, dict] | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._pending = self._busy = 0  # calls queued, calls running
        self._lock = threading.Lock()
        self._shut = False

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        """Schedules ``fn(*args, **kwargs)``; returns its Future.

        Raises:
            RuntimeError: after :meth:`shutdown`.
        """
        future: Future = Future()
        with self._lock:
            if self._shut:
                raise RuntimeError("cannot submit env work after the pool was shut down")
            self._queue.put((future, fn, args, kwargs))
            self._pending += 1
            # A thread per call queued or running, up to the cap: a blocked call never holds up a later one while
            # the pool may still grow.
            if self._pending + self._busy > len(self._threads) and len(self._threads) < self.max_threads:
                thread = threading.Thread(target=self._work, name=f"{self.name}-{len(self._threads)}", daemon=True)
                self._threads.append(thread)
                thread.start()
        return future

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            with self._lock:
                self._pending, self._busy = self._pending - 1, self._busy + 1
            future, fn, args, kwargs = item
            if future.set_running_or_notify_cancel():
                try:
                    result = fn(*args, **kwargs)
                except BaseException as e:  # noqa: BLE001  (handed to the caller through the future)
                    future.set_exception(e)
                else:
                    future.set_result(result)
            del future, fn, args, kwargs, item
            with self._lock:
                self._busy -= 1

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Stops taking work; ``cancel_futures`` cancels the calls not started; ``wait`` joins the threads."""
        with self._lock:
            self._shut = True
            threads = list(self._threads)
        if cancel_futures:
            while True:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is not None:
                    item[0].cancel()
                    with self._lock:
                        self._pending -= 1
        for _ in threads:
            self._queue.put(None)
        if wait:
            for thread in threads:
                thread.join()
