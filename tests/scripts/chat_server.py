"""A scripted, fault-injecting OpenAI-compatible chat server on 127.0.0.1, and the scripted policy it serves.

The policy (:func:`scripted_response`) is a pure function of the last user message, so the same
conversation gets the same answer in-process and over HTTP. :class:`ChatServer` serves it at
``POST /v1/chat/completions`` (HTTP/1.1, keep-alive) and lists its models at ``GET /v1/models``;
a request for another model gets HTTP 404 as from vLLM. It can be told to misbehave:

- ``fail_next`` / ``always_fail``: HTTP 500 to the next n requests, or to every request;
- ``faults``: a list of faults for the next requests, one each: ``"ok"`` (none), ``"500"``, ``"429"`` (with
  ``Retry-After: <retry_after>``), ``"truncated"`` (a JSON body cut in the middle), ``"no_message"``
  (a choice without ``message``), ``"drop"`` (the connection closed without an answer),
  ``"trickle"`` (the answer sent a byte every ``trickle_s`` seconds);
- ``sleep_s``: wait before answering;
- ``shape``: how ``message.content`` is sent: ``"string"``, ``"parts"`` (a list of text parts, split
  in two, with an image part between), or ``"null"`` (no content: the empty answer).

Run alone (``python -m tests.scripts.chat_server --port 8000``) it serves until killed and prints
its base URL; the benchmark in docs/BENCHMARKS.md uses it that way.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import socket
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
    daemon_threads = True
    block_on_close = False  # ChatServer.__exit__ closes every connection and joins the handlers itself

    def __init__(self, address: tuple[str, int], models: tuple[str, ...], keep_requests: bool) -> None:
        super().__init__(address, _Handler)
        self.models, self.keep_requests = models, keep_requests
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.connections: dict[socket.socket, threading.Thread] = {}
        self.fail_next = 0
        self.always_fail = False
        self.faults: list[str] = []
        self.sleep_s = 0.0
        self.trickle_s = 0.2
        self.retry_after = 1
        self.shape = "string"
        self.logprobs = True  # answer logprobs=true requests with per-word log-probs
        self.closing = threading.Event()  # set on exit: sleeping and trickling handlers end at once

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that timed out closed its socket before the (late) answer: expected here


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # headers and body: no Nagle wait
        with self.server.lock:
            self.server.connections[self.connection] = threading.current_thread()

    def finish(self) -> None:
        with self.server.lock:
            self.server.connections.pop(self.connection, None)
        with contextlib.suppress(OSError):
            super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        if self.path != "/v1/models":
            return self._answer(404, {"error": {"message": f"no route {self.path}"}})
        self._answer(200, {"object": "list", "data": [{"id": m, "object": "model"} for m in self.server.models]})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        server = self.server
        with server.lock:
            if server.keep_requests:
                server.requests.append({"path": self.path, "auth": self.headers.get("Authorization"),
                                        "received": time.monotonic(), **body})  # fmt: skip
            fault = server.faults.pop(0) if server.faults else None
            if fault == "ok":  # a placeholder in the list: this request is answered
                fault = None
            elif fault is None and (server.always_fail or server.fail_next > 0):
                fault = "500"
            server.fail_next = max(0, server.fail_next - 1)
        if self.path != "/v1/chat/completions":
            return self._answer(404, {"error": {"message": f"no route {self.path}"}})
        if body.get("model") not in server.models:
            return self._answer(404, {"error": {"message": f"The model `{body.get('model')}` does not exist."}})
        if fault == "500":
            return self._answer(500, {"error": {"message": "scripted failure"}})
        if fault == "429":
            return self._answer(429, {"error": {"message": "slow down"}}, {"Retry-After": str(server.retry_after)})
        if fault == "drop":
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return None
        if server.sleep_s and server.closing.wait(server.sleep_s):
            return None
        text = scripted_response(body["messages"])
        content: Any = text
        if server.shape == "parts":
            half = len(text) // 2
            content = [{"type": "text", "text": text[:half]}, {"type": "image_url", "image_url": {"url": "x"}},
                       {"type": "text", "text": text[half:]}]  # fmt: skip
        elif server.shape == "null":
            content = None
        choice: dict[str, Any] = {"index": 0, "message": {"role": "assistant", "content": content},
                                  "finish_reason": "stop"}  # fmt: skip
        if fault == "no_message":
            del choice["message"]
        if body.get("logprobs") and server.logprobs:  # as vLLM answers logprobs=true: one entry a token (here a word)
            words = text.split()
            choice["logprobs"] = {"content": [{"token": w, "logprob": -0.1 * (1 + zlib.crc32(w.encode()) % 20)}
                                              for w in words]}  # fmt: skip
        prompt_tokens = sum(len(m["content"].split()) for m in body["messages"])
        payload = {"id": "x", "object": "chat.completion", "model": body["model"], "choices": [choice],
                   "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": len(text.split()),
                             "total_tokens": prompt_tokens + len(text.split())}}  # fmt: skip
        if fault == "truncated":
            data = json.dumps(payload).encode()[:-20]
            return self._send(200, data, {})
        if fault == "trickle":
            data = json.dumps(payload).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            for i in range(len(data)):
                self.wfile.write(data[i : i + 1])
                self.wfile.flush()
                if server.closing.wait(server.trickle_s):
                    return None
            return None
        self._answer(200, payload)

    def _answer(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        self._send(status, json.dumps(payload).encode(), headers or {})

    def _send(self, status: int, data: bytes, headers: dict[str, str]) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)


class ChatServer:
    """Runs the scripted server in a thread; use as a context manager.

    Args:
        models: the model names it serves (others get HTTP 404).
        port: the port on 127.0.0.1 (0: a free one).
        keep_requests: keep every request in :attr:`requests` (off for long runs).

    Attributes:
        base_url: ``http://127.0.0.1:<port>/v1``.
        requests: every chat request body received (with ``path``, ``auth`` and ``received`` added), in arrival order.
    """

    def __init__(self, models: tuple[str, ...] = ("m",), port: int = 0, keep_requests: bool = True) -> None:
        self._server = _Server(("127.0.0.1", port), models, keep_requests)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05})
        self.base_url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> ChatServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.closing.set()
        self._server.shutdown()
        self._thread.join(timeout=10)
        self.close_connections()
        self._server.server_close()

    def close_connections(self) -> None:
        """Closes every open connection, as a server does with kept-alive connections that idled too long."""
        with self._server.lock:
            open_connections = dict(self._server.connections)
        for sock, thread in open_connections.items():
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            thread.join(timeout=10)

    @property
    def requests(self) -> list[dict[str, Any]]:
        return self._server.requests

    def behave(self, *, fail_next: int = 0, always_fail: bool = False, sleep_s: float = 0.0,
               faults: list[str] | None = None, shape: str = "string", trickle_s: float = 0.2,
               retry_after: int = 1) -> None:  # fmt: skip
        """Sets how the next requests are answered (see the module docstring)."""
        s = self._server
        with s.lock:
            s.fail_next, s.always_fail, s.sleep_s, s.faults = fail_next, always_fail, sleep_s, list(faults or [])
            s.shape, s.trickle_s, s.retry_after = shape, trickle_s, retry_after


def main() -> None:
    """Serves until killed: ``python -m tests.scripts.chat_server [--port P] [--model NAME ...] [--shape S]``."""
    p = argparse.ArgumentParser(description="Scripted OpenAI-compatible chat server on 127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--model", action="append", help="served model name (repeatable; default: m)")
    p.add_argument("--shape", choices=("string", "parts", "null"), default="string")
    p.add_argument("--sleep", type=float, default=0.0, help="seconds before each answer")
    args = p.parse_args()
    with ChatServer(tuple(args.model or ["m"]), args.port, keep_requests=False) as server:
        server.behave(shape=args.shape, sleep_s=args.sleep)
        print(server.base_url, flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()


if __name__ == "__main__":
    main()
