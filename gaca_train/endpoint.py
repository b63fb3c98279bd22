"""A client for OpenAI-compatible chat endpoints (vLLM's server, hosted models), with retries.

Only the standard library is used (``urllib``), so evaluating against an endpoint needs no extra
package. One :class:`ChatEndpoint` call sends one conversation to ``POST {base_url}/chat/completions``
and returns the text of the first choice. Connection errors, timeouts, HTTP 429 and 5xx answers
are retried with exponential backoff (:class:`RetryPolicy`); other HTTP errors (a bad key, a bad
request) and exhausted retries raise :class:`EndpointError`, which the caller reports per episode.
"""

from __future__ import annotations

import http.client
import json
import logging
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

logger = logging.getLogger(__name__)

# Answers that a later try may not get again: rate limits and server-side failures.
RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})


class EndpointError(RuntimeError):
    """A chat request failed for good (after its retries, or with an answer not worth retrying)."""


@dataclass(frozen=True)
class RetryPolicy:
    """How a failed request is retried.

    Args:
        max_retries: retries after the first try (0: no retry).
        backoff: seconds before the first retry; each further retry waits twice as long.
        backoff_max: the longest wait between two tries, in seconds.
        timeout: seconds a single request may take (connecting and reading).
    """

    max_retries: int = 4
    backoff: float = 1.0
    backoff_max: float = 30.0
    timeout: float = 120.0

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {self.max_retries}")
        if self.backoff < 0 or self.backoff_max < 0:
            raise ValueError(f"backoff and backoff_max must be >= 0, got {self.backoff} and {self.backoff_max}")
        if self.timeout <= 0:
            raise ValueError(f"timeout must be > 0 seconds, got {self.timeout}")

    def delay(self, retry: int) -> float:
        """Seconds to wait before retry number ``retry`` (0-based): ``min(backoff * 2**retry, backoff_max)``."""
        return min(self.backoff * 2**retry, self.backoff_max)


@dataclass
class ChatEndpoint:
    """Calls an OpenAI-compatible ``/chat/completions`` endpoint; one instance is safe to share across threads.

    Args:
        base_url: the API root, e.g. ``http://127.0.0.1:8000/v1`` (``/chat/completions`` is appended).
        model: the ``model`` field of each request (the served model's name).
        sampling: request fields sent as given, e.g. ``{"temperature": 0.4, "top_p": 1.0, "max_tokens": 512}``.
        api_key: sent as ``Authorization: Bearer <api_key>`` when given.
        retry: the :class:`RetryPolicy`.
        sleep: the wait function (tests pass a recorder).
    """

    base_url: str
    model: str
    sampling: dict[str, Any] = field(default_factory=dict)
    api_key: str | None = None
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    sleep: Callable[[float], None] = time.sleep

    @property
    def url(self) -> str:
        """The chat completions URL."""
        return self.base_url.rstrip("/") + "/chat/completions"

    def __call__(self, messages: list[dict[str, str]]) -> str:
        """The text of the endpoint's answer to ``messages``.

        Raises:
            EndpointError: after ``retry.max_retries`` failed retries, or at once for an HTTP error
                that retrying does not fix (e.g. 400, 401, 404).
        """
        body = json.dumps({"model": self.model, "messages": messages, "n": 1, **self.sampling}).encode()
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        last = ""
        for attempt in range(self.retry.max_retries + 1):
            if attempt:
                self.sleep(self.retry.delay(attempt - 1))
            try:
                return self._post(body, headers)
            except urllib.error.HTTPError as e:
                detail = e.read().decode(errors="replace")[:300]
                e.close()
                last = f"HTTP {e.code} from {self.url}: {detail}"
                if e.code not in RETRY_STATUS:
                    raise EndpointError(last) from e
            except (urllib.error.URLError, http.client.HTTPException, TimeoutError, ConnectionError) as e:
                last = f"{type(e).__name__} calling {self.url}: {getattr(e, 'reason', e)}"
            logger.info("chat request failed (try %d of %d): %s", attempt + 1, self.retry.max_retries + 1, last)
        raise EndpointError(f"{last} (gave up after {self.retry.max_retries + 1} tries)")

    def _post(self, body: bytes, headers: dict[str, str]) -> str:
        request = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
        with urllib.request.urlopen(request, timeout=self.retry.timeout) as response:
            raw = response.read()
        try:
            payload = json.loads(raw)
            return payload["choices"][0]["message"]["content"] or ""
        except (ValueError, KeyError, IndexError, TypeError) as e:
            raise EndpointError(f"{self.url} answered without choices[0].message.content: {raw[:300]!r}") from e
