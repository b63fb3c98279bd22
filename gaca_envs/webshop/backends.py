"""How the WebShop env reaches the shop: in-process (the Flask app, no sockets) or over HTTP.

Both return ``(path, html)`` of the page a request ends on, following redirects, so the env sees
identical pages either way, and both save and restore session snapshots through the shop's
``/api/snapshot/*`` endpoints (:mod:`webshop_server.snapshots`). Errors are raised as
``WebShopServerError`` with what to do; a snapshot the shop refuses as ``SnapshotRefused`` with
the shop's reason.
"""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import unquote, urlsplit


class WebShopServerError(RuntimeError):
    """The shop did not answer as expected (unreachable, restarted with other data, or an error page)."""


class SnapshotRefused(ValueError):
    """The shop refused a snapshot (malformed, of another shop or version, or of a page it does not have)."""


SAVE_PATH = "/api/snapshot/save"
RESTORE_PATH = "/api/snapshot/restore"


def _snapshot_failure(status: int, body: Any, what: str) -> Exception:
    """The error for a snapshot request the shop did not answer with a page: a refusal for a 4xx (with the shop's
    reason when it gives one), else a server error."""
    message = body.get("message") if isinstance(body, dict) else None
    if 400 <= status < 500 and message:
        return SnapshotRefused(f"the shop refused to {what} the snapshot ({status}): {message}")
    if 400 <= status < 500:  # the endpoint took it, but the page it names answers an error (a mangled path)
        return SnapshotRefused(f"the shop has no page for the snapshot's path ({status} on {what}); save it again")
    return WebShopServerError(
        f"WebShop answered {status} to a snapshot {what}; is it a webshop-server of this project?"
    )


class InProcessBackend:
    """Requests pages from a Flask app through its test client: same app code, no network.

    Args:
        app: a WebShop app from ``webshop_server.create_app``.
    """

    def __init__(self, app: Any) -> None:
        self.app = app
        self.client = app.test_client()

    def request(self, method: str, path: str, data: dict | None = None) -> tuple[str, str]:
        """Requests ``path`` and returns the final page's path and HTML.

        Raises:
            WebShopServerError: if the app answers with an error page.
        """
        response = self.client.open(path, method=method, data=data, follow_redirects=True)
        html = response.get_data(as_text=True)
        if response.status_code != 200:
            raise WebShopServerError(f"WebShop app answered {response.status_code} for {method} {path[:200]}")
        return unquote(response.request.path), html

    def info(self) -> dict:
        """The shop's ``/api/info`` (number of goals and splits)."""
        return self.client.get("/api/info").get_json()

    def save_snapshot(self, page_path: str) -> dict:
        """The shop's snapshot of the session page at ``page_path`` (a decoded path, as :meth:`request` returns).

        Raises:
            SnapshotRefused: if the shop refuses (the message is its reason).
        """
        response = self.client.post(SAVE_PATH, json={"path": page_path})
        if response.status_code != 200:
            raise _snapshot_failure(response.status_code, response.get_json(silent=True), "save")
        return response.get_json()

    def restore_snapshot(self, snapshot: dict) -> tuple[str, str]:
        """Restores a :meth:`save_snapshot` snapshot; returns its page's path and HTML.

        Raises:
            SnapshotRefused: if the shop refuses it (the message is its reason).
            WebShopServerError: if its page answers with an error.
        """
        response = self.client.post(RESTORE_PATH, json=snapshot, follow_redirects=True)
        if response.status_code != 200:
            raise _snapshot_failure(response.status_code, response.get_json(silent=True), "restore")
        return unquote(response.request.path), response.get_data(as_text=True)

    def close(self) -> None:
        """Nothing to release."""


class HttpBackend:
    """Requests pages from a running ``webshop-server`` over HTTP, reconnecting after a restart.

    Args:
        server_url: e.g. ``http://127.0.0.1:3000``.
        timeout_s: per-request timeout.
        reconnect_s: how long to keep retrying a refused or dropped connection before giving up.
    """

    def __init__(self, server_url: str, timeout_s: float = 10.0, reconnect_s: float = 5.0) -> None:
        import requests

        parts = urlsplit(server_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"server_url must look like http://127.0.0.1:3000, got {server_url!r}")
        self.base = f"{parts.scheme}://{parts.netloc}"
        self.timeout_s = timeout_s
        self.reconnect_s = reconnect_s
        self.requests = requests
        self.session = requests.Session()

    def _send(self, method: str, path: str, data: dict | None, json: Any = None) -> Any:
        deadline = time.monotonic() + self.reconnect_s
        delay = 0.05
        while True:
            try:
                return self.session.request(method, self.base + path, data=data, json=json, timeout=self.timeout_s)
            except (self.requests.ConnectionError, self.requests.Timeout) as e:
                if time.monotonic() >= deadline:
                    raise WebShopServerError(
                        f"WebShop server at {self.base} is unreachable ({type(e).__name__}) after retrying for "
                        f"{self.reconnect_s:.0f} s; start it with `webshop-server --port {urlsplit(self.base).port}` "
                        "or pass another server_url"
                    ) from e
                time.sleep(delay)
                delay = min(delay * 2, 0.5)
                self.session.close()
                self.session = self.requests.Session()

    def request(self, method: str, path: str, data: dict | None = None) -> tuple[str, str]:
        """Requests ``path`` and returns the final page's path and HTML.

        Raises:
            WebShopServerError: if the server stays unreachable or answers with an error page.
        """
        response = self._send(method, path, data)
        if response.status_code != 200:
            raise WebShopServerError(f"WebShop server answered {response.status_code} for {method} {path[:200]}")
        return unquote(urlsplit(response.url).path), response.text

    def info(self) -> dict:
        """The shop's ``/api/info`` (number of goals and splits)."""
        response = self._send("GET", "/api/info", None)
        if response.status_code != 200:
            raise WebShopServerError(
                f"{self.base}/api/info answered {response.status_code}; is this a webshop-server of this project?"
            )
        return response.json()

    def save_snapshot(self, page_path: str) -> dict:
        """The server's snapshot of the session page at ``page_path`` (a decoded path, as :meth:`request` returns).

        Raises:
            SnapshotRefused: if the server refuses (the message is its reason).
            WebShopServerError: if the server stays unreachable.
        """
        response = self._send("POST", SAVE_PATH, None, json={"path": page_path})
        if response.status_code != 200:
            raise _snapshot_failure(response.status_code, _json_or_none(response), "save")
        return response.json()

    def restore_snapshot(self, snapshot: dict) -> tuple[str, str]:
        """Restores a :meth:`save_snapshot` snapshot (any server of the same shop); returns its page's path and HTML.

        Raises:
            SnapshotRefused: if the server refuses it (the message is its reason).
            WebShopServerError: if the server stays unreachable or the page answers with an error.
        """
        response = self._send("POST", RESTORE_PATH, None, json=snapshot)
        if response.status_code != 200:
            raise _snapshot_failure(response.status_code, _json_or_none(response), "restore")
        return unquote(urlsplit(response.url).path), response.text

    def close(self) -> None:
        """Closes the HTTP connection pool."""
        self.session.close()


def _json_or_none(response: Any) -> Any:
    try:
        return response.json()
    except ValueError:
        return None
