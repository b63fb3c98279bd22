"""A client for OpenAI-compatible chat endpoints (vLLM's server, hosted models): retries, deadlines, pre-flight.

Only the standard library is used (``http.client``), so evaluating against an endpoint needs no
extra package. One :meth:`ChatEndpoint.complete` call sends one conversation to
``POST {base_url}/chat/completions`` and returns the first choice's text with its token usage and
latency (:class:`Completion`).

- **Answers.** ``message.content`` may be a string, a list of content parts (``{"type": "text",
  "text": ...}``; other part types carry no text) or null (empty text), as the chat API allows.
  A body that is not JSON or has no ``choices[0].message`` is a fault and is retried.
- **Faults.** Connection errors, time-outs, malformed bodies, HTTP 408, 409, 425, 429 and 5xx are
  retried with exponential backoff (:class:`RetryPolicy`), or after the ``Retry-After`` the server
  asks for; other HTTP errors (a bad key, a bad request) and exhausted retries raise
  :class:`EndpointError`, which the caller reports per episode.
- **Deadlines.** ``RetryPolicy.timeout`` bounds a whole try (connecting, sending, every byte of
  the answer): a watchdog thread closes the socket of a try that outlives it, so an answer
  trickled byte by byte cannot hold a worker longer.
- **Stopping.** Once :attr:`ChatEndpoint.stop` is set, no request starts, waits between tries end
  and requests in flight are cut within a twentieth of a second; the calls raise :class:`Interrupted`.
- **Pre-flight.** :func:`check_endpoint` asks ``GET /models`` (or, where a server has no such
  route, one one-token completion) whether the URL is well formed, the server reachable and the
  model served, and says which in one line.
"""

from __future__ import annotations

import contextlib
import email.utils
import http.client
import json
import logging
import socket
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

logger = logging.getLogger(__name__)

# Answers that a later try may not get again: rate limits and server-side failures.
RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
_WATCH_PERIOD = 0.05  # seconds between two looks of the watchdog at the requests in flight


class EndpointError(RuntimeError):
    """A chat request failed for good (after its retries, or with an answer not worth retrying).

    Attributes:
        tries: how many tries were made (0 when not known, e.g. for a pre-flight check).
        latency_s: seconds from the first try to the failure, waits between tries included.
    """

    def __init__(self, message: str, tries: int = 0, latency_s: float = 0.0) -> None:
        super().__init__(message)
        self.tries, self.latency_s = tries, latency_s


class Interrupted(Exception):
    """The run is stopping (:attr:`ChatEndpoint.stop` is set): the request was not sent or was cut."""


class _Malformed(ValueError):
    """An answer whose body is not a chat completion (retried like a server fault)."""


@dataclass(frozen=True)
class RetryPolicy:
    """How a failed request is retried.

    Args:
        max_retries: retries after the first try (0: no retry).
        backoff: seconds before the first retry; each further retry waits twice as long.
        backoff_max: the longest wait between two tries, in seconds.
        timeout: seconds one try may take in all (connecting, sending and reading the whole answer).
        retry_after_max: the longest ``Retry-After`` honoured, in seconds; a server asking for more
            ends the request (an :class:`EndpointError` naming the wait).
    """

    max_retries: int = 4
    backoff: float = 1.0
    backoff_max: float = 30.0
    timeout: float = 120.0
    retry_after_max: float = 120.0

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {self.max_retries}")
        if self.backoff < 0 or self.backoff_max < 0:
            raise ValueError(f"backoff and backoff_max must be >= 0, got {self.backoff} and {self.backoff_max}")
        if self.timeout <= 0:
            raise ValueError(f"timeout must be > 0 seconds, got {self.timeout}")
        if self.retry_after_max < 0:
            raise ValueError(f"retry_after_max must be >= 0, got {self.retry_after_max}")

    def delay(self, retry: int) -> float:
        """Seconds to wait before retry number ``retry`` (0-based): ``min(backoff * 2**retry, backoff_max)``."""
        return min(self.backoff * 2**retry, self.backoff_max)


@dataclass
class Completion:
    """One answered request.

    Attributes:
        text: the first choice's text ("" for null content).
        usage: the answer's ``usage`` (``prompt_tokens``, ``completion_tokens``), None when absent.
        latency_s: seconds from the first try to the answer, waits between tries included.
        tries: how many tries it took.
    """

    text: str
    usage: dict[str, int] | None
    latency_s: float
    tries: int


def content_text(content: Any) -> str:
    """The text of a chat message's ``content``: a string, a list of content parts, or null.

    Parts are strings or objects; those of type ``text`` (or ``output_text``) contribute their
    ``text``, other types (an image, a refusal) nothing.

    Raises:
        ValueError: for another shape (a number, an object, a part that is neither string nor object).
    """
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, dict):
                if part.get("type", "text") in ("text", "output_text") and isinstance(part.get("text"), str):
                    texts.append(part["text"])
            else:
                raise _Malformed(f"content part {part!r:.80} is neither a string nor an object")
        return "".join(texts)
    raise _Malformed(f"message content must be a string, a list of parts or null, got {type(content).__name__}")


def check_base_url(base_url: str) -> urllib.parse.SplitResult:
    """``base_url`` split into its parts, once checked to be an ``http(s)://host[:port][/path]`` URL.

    Raises:
        ValueError: naming what is wrong and a well-formed example.
    """
    parts = urllib.parse.urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        hint = base_url if "://" in base_url else f"http://{base_url}"
        raise ValueError(
            f"--base-url {base_url!r} is not an http(s) URL with a host; expected e.g. http://127.0.0.1:8000/v1"
            + ("" if "://" in base_url else f" (did you mean {hint}?)")
        )
    try:
        parts.port  # noqa: B018  (raises for a port that is not a number)
    except ValueError as e:
        raise ValueError(f"--base-url {base_url!r} has a bad port: {e}") from e
    return parts


def _retry_after(value: str | None) -> float | None:
    """Seconds asked for by a ``Retry-After`` header (delta-seconds or an HTTP date), None if absent or unreadable."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


class _Watchdog:
    """Closes the sockets of requests past their deadline, or of every request once ``stop`` is set."""

    def __init__(self, stop: threading.Event) -> None:
        self.stop = stop
        self._cond = threading.Condition()
        self._live: dict[int, tuple[http.client.HTTPConnection, float]] = {}
        self._cut: set[int] = set()
        self._thread: threading.Thread | None = None

    def watch(self, conn: http.client.HTTPConnection, deadline: float) -> None:
        with self._cond:
            self._live[id(conn)] = (conn, deadline)
            self._cut.discard(id(conn))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="gaca-endpoint-watchdog", daemon=True)
                self._thread.start()
            self._cond.notify()

    def unwatch(self, conn: http.client.HTTPConnection) -> bool:
        """Stops watching ``conn``; True if the watchdog cut it."""
        with self._cond:
            self._live.pop(id(conn), None)
            cut = id(conn) in self._cut
            self._cut.discard(id(conn))
            return cut

    def _run(self) -> None:
        with self._cond:
            while True:
                while not self._live:
                    self._cond.wait()
                now, stopping = time.monotonic(), self.stop.is_set()
                for key, (conn, deadline) in list(self._live.items()):
                    if stopping or now >= deadline:
                        del self._live[key]
                        self._cut.add(key)
                        _shut(conn)
                self._cond.wait(_WATCH_PERIOD)


def _shut(conn: http.client.HTTPConnection) -> None:
    sock = conn.sock
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


class _RateLimit:
    """At most ``rps`` request starts per second, over every thread of one endpoint."""

    def __init__(self, rps: float) -> None:
        self.interval, self._next, self._lock = 1.0 / rps, 0.0, threading.Lock()

    def wait(self, stop: threading.Event) -> None:
        with self._lock:
            now = time.monotonic()
            start = max(now, self._next)
            self._next = start + self.interval
        if start > now and stop.wait(start - now):
            raise Interrupted


@dataclass
class ChatEndpoint:
    """Calls an OpenAI-compatible ``/chat/completions`` endpoint; one instance is safe to share across threads.

    Each thread keeps its own keep-alive connection.

    Args:
        base_url: the API root, e.g. ``http://127.0.0.1:8000/v1`` (``/chat/completions`` is appended).
        model: the ``model`` field of each request (the served model's name).
        sampling: request fields sent as given, e.g. ``{"temperature": 0.4, "top_p": 1.0, "max_tokens": 512}``.
        api_key: sent as ``Authorization: Bearer <api_key>`` when given.
        retry: the :class:`RetryPolicy`.
        max_rps: most requests started per second (None: no limit).
        stop: once set, requests stop (see the module docstring).

    Raises:
        ValueError: for a ``base_url`` that is not an http(s) URL, or ``max_rps`` <= 0.
    """

    base_url: str
    model: str
    sampling: dict[str, Any] = field(default_factory=dict)
    api_key: str | None = None
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    max_rps: float | None = None
    stop: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        parts = check_base_url(self.base_url)
        self._https = parts.scheme == "https"
        self._host, self._port = parts.hostname or "", parts.port
        self._path = parts.path.rstrip("/")
        if self.max_rps is not None and self.max_rps <= 0:
            raise ValueError(f"max_rps must be > 0, got {self.max_rps}")
        self._rate = _RateLimit(self.max_rps) if self.max_rps else None
        self._local = threading.local()
        self._connections: list[http.client.HTTPConnection] = []
        self._connections_lock = threading.Lock()
        self._watchdog = _Watchdog(self.stop)

    def close(self) -> None:
        """Closes every thread's connection (a later request opens a new one)."""
        with self._connections_lock:
            for conn in self._connections:
                conn.close()

    def __enter__(self) -> ChatEndpoint:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def url(self) -> str:
        """The chat completions URL."""
        return self.base_url.rstrip("/") + "/chat/completions"

    def __call__(self, messages: list[dict[str, str]]) -> str:
        """The text of the endpoint's answer to ``messages`` (see :meth:`complete`)."""
        return self.complete(messages).text

    def complete(self, messages: list[dict[str, str]], seed: int | None = None) -> Completion:
        """The endpoint's answer to ``messages``, sampled with ``seed`` when given.

        Raises:
            EndpointError: after ``retry.max_retries`` failed retries, at once for an HTTP error
                that retrying does not fix (e.g. 400, 401, 404), or when the server asks to wait
                longer than ``retry.retry_after_max``.
            Interrupted: once :attr:`stop` is set.
        """
        request = {"model": self.model, "messages": messages, "n": 1, **self.sampling}
        if seed is not None:
            request["seed"] = seed
        body = json.dumps(request).encode()
        tic = time.monotonic()
        wait, last = 0.0, ""
        for attempt in range(self.retry.max_retries + 1):
            if attempt and self.stop.wait(wait):
                raise Interrupted
            wait = self.retry.delay(attempt)
            try:
                status, headers, raw = self.request("POST", "/chat/completions", body, self.retry.timeout)
            except (OSError, http.client.HTTPException) as e:
                last = f"{_describe(e)} calling {self.url}"
            else:
                if status == 200:
                    try:
                        text, usage = _parse_completion(raw)
                        return Completion(text, usage, time.monotonic() - tic, attempt + 1)
                    except _Malformed as e:
                        last = f"{self.url} answered a malformed body ({e}): {raw[:200]!r}"
                else:
                    last = f"HTTP {status} from {self.url}: {raw[:300].decode(errors='replace')}"
                    if status not in RETRY_STATUS:
                        raise EndpointError(last, attempt + 1, time.monotonic() - tic)
                    asked = _retry_after(headers.get("Retry-After"))
                    if asked is not None:
                        if asked > self.retry.retry_after_max:
                            raise EndpointError(f"{last} (asks to retry after {asked:.0f} s, more than the "
                                                f"{self.retry.retry_after_max:g} s honoured)", attempt + 1,
                                                time.monotonic() - tic)  # fmt: skip
                        wait = asked
            logger.info("chat request failed (try %d of %d): %s", attempt + 1, self.retry.max_retries + 1, last)
        tries = self.retry.max_retries + 1
        raise EndpointError(f"{last} (gave up after {tries} tries)", tries, time.monotonic() - tic)

    def request(
        self, method: str, path: str, body: bytes | None, timeout: float
    ) -> tuple[int, http.client.HTTPMessage, bytes]:
        """One try: ``method {base_url}{path}`` within ``timeout`` seconds in all; the status, headers and body.

        Raises:
            TimeoutError: when the whole answer did not come within ``timeout``.
            OSError, http.client.HTTPException: connection failures.
            Interrupted: once :attr:`stop` is set.
        """
        if self.stop.is_set():
            raise Interrupted
        if self._rate is not None:
            self._rate.wait(self.stop)
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        conn = getattr(self._local, "conn", None)
        if conn is None:
            kind = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
            conn = self._local.conn = kind(self._host, self._port, timeout=timeout)
            with self._connections_lock:
                self._connections.append(conn)
        deadline = time.monotonic() + timeout
        while True:
            reused = conn.sock is not None
            try:
                return self._exchange(conn, method, path, body, headers, deadline, timeout)
            except _STALE as e:
                # A keep-alive connection the server closed while it idled: one new connection, at once.
                if not reused or time.monotonic() >= deadline:
                    raise
                logger.debug("kept-alive connection to %s was closed (%s); reconnecting", self.base_url, e)

    def _exchange(self, conn: http.client.HTTPConnection, method: str, path: str, body: bytes | None,
                  headers: dict[str, str], deadline: float, timeout: float) -> tuple[int, Any, bytes]:  # fmt: skip
        conn.timeout = max(deadline - time.monotonic(), 0.001)
        if conn.sock is not None:
            conn.sock.settimeout(conn.timeout)
        self._watchdog.watch(conn, deadline)
        try:
            conn.request(method, self._path + path, body=body, headers=headers)
            response = conn.getresponse()
            raw = response.read()
        except BaseException as e:
            conn.close()
            if self._watchdog.unwatch(conn):
                if self.stop.is_set():
                    raise Interrupted from e
                raise TimeoutError(f"no complete answer within {timeout:g} s") from e
            raise
        if self._watchdog.unwatch(conn):
            # Cut at the deadline between two header lines: http.client takes the EOF for the end of the
            # headers and of a body without Content-Length, so the cut answer reads as a whole (empty) one.
            conn.close()
            if self.stop.is_set():
                raise Interrupted
            raise TimeoutError(f"no complete answer within {timeout:g} s")
        if response.will_close:
            conn.close()
        return response.status, response.headers, raw


# What a request on a kept-alive connection that the server has closed fails with, before any answer.
_STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)


def _describe(e: BaseException) -> str:
    if isinstance(e, TimeoutError | socket.timeout):
        return f"TimeoutError ({e or 'timed out'})"
    if isinstance(e, ConnectionRefusedError):
        return "connection refused"
    return f"{type(e).__name__} ({e})"


def _parse_completion(raw: bytes) -> tuple[str, dict[str, int] | None]:
    try:
        payload = json.loads(raw)
    except ValueError as e:
        raise _Malformed("not JSON") from e
    try:
        message = payload["choices"][0]["message"]
    except (KeyError, IndexError, TypeError) as e:
        raise _Malformed("no choices[0].message") from e
    if not isinstance(message, dict):
        raise _Malformed("choices[0].message is not an object")
    usage = payload.get("usage")
    if isinstance(usage, dict):
        usage = {k: int(v) for k, v in usage.items() if k in ("prompt_tokens", "completion_tokens")
                 and isinstance(v, int | float)}  # fmt: skip
    else:
        usage = None
    return content_text(message.get("content")), usage


PREFLIGHT_TIMEOUT = 10.0


def check_endpoint(endpoint: ChatEndpoint, timeout: float = PREFLIGHT_TIMEOUT) -> None:
    """Checks, before any episode, that ``endpoint`` is reachable and serves its model.

    Asks ``GET {base_url}/models``; a server without that route (HTTP 404 or 405) is asked for one
    one-token completion instead. No retries: every answer comes within ``timeout`` seconds.

    Raises:
        EndpointError: one line naming the cause (unreachable, time-out, a URL that is not the API
            root, a rejected key, a model the server does not serve) and the fix.
        Interrupted: once the endpoint's ``stop`` is set.
    """
    root = endpoint.base_url.rstrip("/")
    try:
        status, _, raw = endpoint.request("GET", "/models", None, timeout)
        if status in (404, 405):
            probe = {"model": endpoint.model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}
            status, _, raw = endpoint.request("POST", "/chat/completions", json.dumps(probe).encode(), timeout)
            if status == 200:
                return
    except (OSError, http.client.HTTPException) as e:
        where = f"{endpoint._host}:{endpoint._port or (443 if endpoint._https else 80)}"
        if isinstance(e, TimeoutError | socket.timeout):
            raise EndpointError(f"{root} did not answer in full within {timeout:g} s (is the server up, or "
                                f"overloaded? --request-timeout)") from e  # fmt: skip
        if isinstance(e, ConnectionRefusedError):
            raise EndpointError(f"cannot connect to {root}: connection refused (no server on {where}?)") from e
        raise EndpointError(f"cannot reach {root}: {_describe(e)}") from e
    detail = raw[:200].decode(errors="replace").strip()
    if status in (401, 403):
        raise EndpointError(f"{root} refused the request (HTTP {status}): check the API key (--api-key-env)")
    if status == 404:
        if not root.endswith("/v1"):
            raise EndpointError(f"{root} answered HTTP 404: --base-url must be the API root, which for vLLM and "
                                f"OpenAI ends in /v1 (try {root}/v1)")  # fmt: skip
        raise EndpointError(f"{root} answered HTTP 404 for model {endpoint.model!r}: {detail}")
    if status != 200:
        raise EndpointError(f"{root}/models answered HTTP {status}: {detail}")
    try:
        served = [m["id"] for m in json.loads(raw)["data"]]
    except (ValueError, KeyError, TypeError) as e:
        raise EndpointError(f"{root}/models did not answer a model list (is --base-url the API root, "
                            f"e.g. http://127.0.0.1:8000/v1?): {detail!r}") from e  # fmt: skip
    if endpoint.model not in served:
        raise EndpointError(f"model {endpoint.model!r} is not served by {root}; it serves: "
                            f"{', '.join(map(str, served)) or 'nothing'} (pass one of them as --model)")  # fmt: skip
