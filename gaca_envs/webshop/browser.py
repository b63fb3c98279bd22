"""``GACA-WebShop-Browser-v0``: the WebShop env played in real headless Chromium through Selenium.

Same contract, observation modes, actions, rewards and anchor keys as ``GACA-WebShop-v0``
(``gaca_envs.webshop.env``), but every action is performed by the browser: a search types the
query into ``#search_input`` and submits the form; a click clicks the button, product link or
option radio (whose script loads the page with that option chosen). Observations are read from
the browser's DOM (``page_source``), so the ``html`` mode shows Chromium's serialisation; the
text modes equal the text env's. Snapshots as the text env's: a restore asks the server, then
Chromium opens the snapshot's page.

Needs Debian's ``chromium`` and ``chromium-driver`` (``scripts/setup.sh`` installs them) and the
``browser`` extra. With ``server_url=None`` the env serves its own shop on a free port of
127.0.0.1 in a background thread, stopped by ``close()``.

Versions: v0 (this) is the first.
"""

from __future__ import annotations

import os
import shutil
import threading
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from gaca_envs.webshop.backends import HttpBackend, WebShopServerError
from gaca_envs.webshop.env import HardShopDefault, Move, WebShopEnv

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-dev-shm-usage",
    "--window-size=1280,1024",
)


def find_browser() -> tuple[str, str]:
    """Paths of Chromium and chromedriver (``$CHROMIUM`` / ``$CHROMEDRIVER`` override the search).

    Raises:
        FileNotFoundError: if either is missing, saying how to install them.
    """
    chromium = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    driver = os.environ.get("CHROMEDRIVER") or shutil.which("chromedriver")
    if not chromium or not driver:
        raise FileNotFoundError(
            "GACA-WebShop-Browser-v0 needs Chromium and chromedriver on PATH (found chromium="
            f"{chromium!r}, chromedriver={driver!r}); install them with `apt-get install chromium chromium-driver` "
            "or `scripts/setup.sh browser`, or set $CHROMIUM and $CHROMEDRIVER"
        )
    return chromium, driver


class _LocalServer:
    """The shop served on a free port of 127.0.0.1 by a Werkzeug server thread."""

    def __init__(self, app: Any) -> None:
        from werkzeug.serving import WSGIRequestHandler, make_server

        class QuietHandler(WSGIRequestHandler):
            def log_request(self, *args: Any) -> None:  # no access log, as webshop-server's default
                pass

        self.server = make_server("127.0.0.1", 0, app, threaded=True, request_handler=QuietHandler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


class WebShopBrowserEnv(WebShopEnv):
    """WebShop in headless Chromium. Arguments as ``WebShopEnv``, plus:

    Args:
        page_load_timeout_s: how long to wait for a page after an action.
    """

    def __init__(self, *args: Any, page_load_timeout_s: float = 20.0, **kwargs: Any) -> None:
        self._local_server: _LocalServer | None = None
        self._driver: Any = None
        self.page_load_timeout_s = page_load_timeout_s
        super().__init__(*args, **kwargs)
        try:
            self._driver = self._start_browser()
        except Exception:
            self.close()
            raise

    def _make_backend(
        self, server_url: str | None, app: Any, shop_config: Any, timeout_s: float, reconnect_s: float
    ) -> Any:
        if server_url is None:
            if app is None:
                from webshop_server import create_app

                app = create_app(shop_config)
            self._local_server = _LocalServer(app)
            server_url = self._local_server.url
        return HttpBackend(server_url, timeout_s, reconnect_s)

    def _start_browser(self) -> Any:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        chromium, driver_path = find_browser()
        options = webdriver.ChromeOptions()
        options.binary_location = chromium
        for flag in CHROMIUM_FLAGS:
            options.add_argument(flag)
        driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
        driver.set_page_load_timeout(self.page_load_timeout_s)
        return driver

    def _fetch(self, move: Move) -> tuple[str, str]:
        from selenium.common.exceptions import WebDriverException

        try:
            if move.verb == "open":
                self._driver.get(self.backend.base + move.url)
            else:
                self._act_in_browser(move)
            path = unquote(urlsplit(self._driver.current_url).path)
            html = self._driver.page_source
        except WebDriverException as e:
            raise WebShopServerError(f"Chromium failed to {move.verb} {move.target[:80]!r}: {e.msg}") from e
        if 'id="error"' in html:
            raise WebShopServerError(f"the shop answered an error page for {move.verb} {move.target[:80]!r} at {path}")
        return path, html

    def _open_snapshot(self, shop_snapshot: dict) -> tuple[str, str]:
        """The server restores its session snapshot; Chromium then opens the snapshot's page."""
        from webshop_server.urls import PATH_SAFE

        path, _ = self.backend.restore_snapshot(shop_snapshot)
        return self._fetch(Move("open", shop_snapshot["session_id"], "GET", quote(path, safe=PATH_SAFE)))

    def _act_in_browser(self, move: Move) -> None:
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support import expected_conditions
        from selenium.webdriver.support.ui import WebDriverWait

        driver = self._driver
        old_page = driver.find_element(By.TAG_NAME, "html")
        if move.verb == "search":
            box = driver.find_element(By.ID, "search_input")
            box.clear()
            box.send_keys(move.target)
            box.submit()
        else:
            self._find_clickable(move).click()
        WebDriverWait(driver, self.page_load_timeout_s).until(expected_conditions.staleness_of(old_page))
        WebDriverWait(driver, self.page_load_timeout_s).until(
            lambda d: d.execute_script("return document.readyState") == "complete"
        )

    def _find_clickable(self, move: Move) -> Any:
        from selenium.webdriver.common.by import By

        kind = move.clickable.kind if move.clickable else ""
        if kind == "radio":
            candidates = self._driver.find_elements(By.CSS_SELECTOR, 'input[type="radio"]')
            matches = [e for e in candidates if e.get_attribute("value") == move.target]
        else:
            selector = "a.product-link" if kind == "link" else "button.btn"
            candidates = self._driver.find_elements(By.CSS_SELECTOR, selector)
            matches = [e for e in candidates if e.text.strip().lower() == move.target]
        if not matches:
            raise WebShopServerError(f"Chromium shows no {kind or 'element'} {move.target[:80]!r} on {move.url[:120]}")
        return matches[0]

    def close(self) -> None:
        """Quits Chromium and stops the env's own server, if any."""
        if self._driver is not None:
            self._driver.quit()
            self._driver = None
        if self._local_server is not None:
            self._local_server.close()
            self._local_server = None
        if getattr(self, "backend", None) is not None:
            super().close()


class WebShopBrowserV1Env(HardShopDefault, WebShopBrowserEnv):
    """``GACA-WebShop-Browser-v1``: :class:`WebShopBrowserEnv` on the hard embedded shop by default.

    The shop it serves itself (no ``server_url``, no ``app``) is read as ``GACA-WebShop-v1``'s
    (:func:`gaca_envs.webshop.env.shop_config_for`).
    """
