"""Debian's Chromium, driven headless by Playwright: for tests of the HTML pages tokpack writes."""

from __future__ import annotations

import atexit
import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"]


def chromium_path() -> str:
    """The system Chromium, never a downloaded one. In CI its absence fails the test; elsewhere it skips."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    if os.environ.get("CI"):
        pytest.fail("Chromium is missing in CI: .ci/run installs Debian's chromium package")
    pytest.skip("no system Chromium (/usr/bin/chromium); install Debian's chromium to run browser tests")


_running: dict[str, Any] = {}


def _browser(playwright_api: Any) -> Any:
    """This process's Chromium, launched on first use and closed at exit (a launch is most of a
    short page test's CPU); launched again if it went away."""
    browser = _running.get("browser")
    if browser is None or not browser.is_connected():
        executable = chromium_path()
        if "playwright" not in _running:
            _running["playwright"] = playwright_api.sync_playwright().start()
            atexit.register(_close)
        browser = _running["browser"] = _running["playwright"].chromium.launch(executable_path=executable, args=FLAGS)
    return browser


def _close() -> None:
    browser, playwright = _running.pop("browser", None), _running.pop("playwright", None)
    if browser is not None:
        browser.close()
    if playwright is not None:
        playwright.stop()


@contextmanager
def browser_page(width: int = 1100, height: int = 900) -> Iterator[Any]:
    """A page of its own context (no storage, cache or permission shared with another test) in
    this process's Chromium; on leaving, no script error and no network request may have happened."""
    playwright_api = pytest.importorskip("playwright.sync_api", reason="playwright is a test extra (./dev test)")
    context = _browser(playwright_api).new_context(viewport={"width": width, "height": height})
    try:
        page = context.new_page()
        failures: list[str] = []
        page.on("pageerror", lambda error: failures.append(str(error)))
        page.on("request", lambda request: failures.append(f"network request {request.url}")
                if not request.url.startswith(("file:", "data:", "about:")) else None)
        yield page
        assert not failures, failures  # no script error, no network
    finally:
        context.close()


def embedded_data(page: Any) -> dict[str, Any]:
    """The JSON a page was made from (its ``#report-data`` script)."""
    return json.loads(page.locator("#report-data").text_content())


def screenshot(page: Any, name: str) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
