"""A scripted OpenAI-compatible chat server on 127.0.0.1, and the scripted policy it serves.

The policy (:func:`scripted_response`) is a pure function of the last user message, so the same
conversation gets the same answer in-process and over HTTP. :class:`ChatServer` serves it at
``POST /v1/chat/completions`` and can be told to fail: answer HTTP 500 to the next ``fail_next``
requests, to every request (``always_fail``), or to sleep ``sleep_s`` seconds before answering.
"""

from __future__ import annotations

import json
import re
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MALFORMED = "I am not sure what to do here."
_QUOTED = re.compile(r"'([^']*)'")


def scripted_response(messages: list[dict[str, str]]) -> str:
    """A deterministic answer to a conversation: mostly an admissible action, sometimes malformed or inadmissible.

    The choice is a checksum of the last user message: of ``n`` listed actions plus two extra
    slots, slot ``n`` is a malformed answer and slot ``n + 1`` a well-formed but inadmissible one.
    """
    user = messages[-1]["content"]
    listed = [line for line in user.splitlines() if "ctions:" in line]
    actions = _QUOTED.findall(listed[-1]) if listed else []
    pick = zlib.crc32(user.encode()) % (len(actions) + 2)
    if pick == len(actions):
        return MALFORMED
    action = actions[pick] if pick < len(actions) else "dance on the table"
    return f"<think>step by step</think><action>{action}</action>"


class _Server(ThreadingHTTPServer):
    daemon_threads = False  # server_close() joins every handler thread: nothing runs after a test
    block_on_close = True

    def __init__(self, address: tuple[str, int]) -> None:
        super().__init__(address, _Handler)
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.fail_next = 0
        self.always_fail = False
        self.sleep_s = 0.0

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that timed out closed its socket before the (late) answer: expected here


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        server = self.server
        with server.lock:
            server.requests.append({"path": self.path, "auth": self.headers.get("Authorization"), **body})
            fail = server.always_fail or server.fail_next > 0
            server.fail_next = max(0, server.fail_next - 1)
        if self.path != "/v1/chat/completions":
            return self._answer(404, {"error": f"no route {self.path}"})
        if fail:
            return self._answer(500, {"error": "scripted failure"})
        if server.sleep_s:
            time.sleep(server.sleep_s)
        text = scripted_response(body["messages"])
        self._answer(200, {"id": "x", "object": "chat.completion", "model": body["model"],
                           "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                        "finish_reason": "stop"}]})  # fmt: skip

    def _answer(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class ChatServer:
    """Runs the scripted server in a thread; use as a context manager.

    Attributes:
        base_url: ``http://127.0.0.1:<port>/v1``.
        requests: every request body received (with ``path`` and ``auth`` added), in arrival order.
    """

    def __init__(self) -> None:
        self._server = _Server(("127.0.0.1", 0))
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05})
        self.base_url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> ChatServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._thread.join(timeout=10)
        self._server.server_close()

    @property
    def requests(self) -> list[dict[str, Any]]:
        return self._server.requests

    def behave(self, *, fail_next: int = 0, always_fail: bool = False, sleep_s: float = 0.0) -> None:
        """Sets how the next requests are answered (see the module docstring)."""
        with self._server.lock:
            self._server.fail_next, self._server.always_fail, self._server.sleep_s = fail_next, always_fail, sleep_s
