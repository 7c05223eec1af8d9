"""A real headless browser for the dashboard tests: Debian's chromium driven through its
chromedriver by selenium (no browser download, no network).

* ``browser`` (function): a fresh ``selenium.webdriver.Chrome`` (1400x1000 window), quit at the
  end.  Chromium runs with ``--headless=new --no-sandbox`` (CI runs as root).  If chromium,
  chromedriver or selenium is missing: FAIL under CI, otherwise skip with the reason.
* :func:`wait_until`: poll a condition in the page with a timeout and a useful message.
* :data:`ARTIFACTS`: where tests keep screenshots (``tests/artifacts/``, git-ignored).

Import them into a test module with ``from browser_fixtures import *``.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

try:
    from conftest import unavailable
except ImportError:  # pragma: no cover
    from tests.conftest import unavailable

__all__ = ["browser", "wait_until", "severe_console", "ARTIFACTS"]

ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
CHROMIUM = os.environ.get("FAWKES_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("FAWKES_CHROMEDRIVER", "/usr/bin/chromedriver")


def _unavailable(reason: str):
    unavailable(f"headless chromium unavailable: {reason}")  # conftest: fails under CI, skips elsewhere


@pytest.fixture
def browser(tmp_path):
    try:
        from selenium import webdriver
        from selenium.common.exceptions import WebDriverException
        from selenium.webdriver.chrome.service import Service
    except ImportError as exc:
        _unavailable(f"selenium not installed ({exc}); scripts/setup installs it (test extra)")
    for path in (CHROMIUM, CHROMEDRIVER):
        if not (Path(path).exists() or shutil.which(path)):
            _unavailable(f"{path} not found (apt-get install chromium chromium-driver; scripts/setup does)")
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1400,1000", f"--user-data-dir={tmp_path / 'chromium-profile'}",
                "--no-first-run", "--disable-extensions", "--disable-background-networking"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # console errors: see severe_console()
    try:
        driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    except WebDriverException as exc:
        _unavailable(f"chromium did not start: {str(exc).splitlines()[0]}")
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


def wait_until(what: str, fn, timeout: float, poll: float = 0.25):
    """Return ``fn()`` once it is truthy; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = fn()
        except AssertionError:
            raise
        except Exception as exc:  # the element is being redrawn (stale, not there yet): ask again
            last = exc
        else:
            if last:
                return last
        time.sleep(poll)
    raise AssertionError(f"timed out after {timeout:g}s waiting for {what} (last: {last!r})")


def severe_console(driver) -> list[str]:
    """The page's console errors so far (a script error, a blocked request, a CSP violation)."""
    return [e["message"] for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
