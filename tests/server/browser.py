"""A headless Chromium for the web page's tests: Debian's ``chromium`` driven by its
``chromium-driver`` through Selenium. Nothing is downloaded: the browser and the driver are
the system's (``make test`` installs them with apt-get where it can); without them the tests
skip with the one line :func:`missing` gives."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

BROWSERS = ("chromium", "chromium-browser")
DRIVER = "chromedriver"
INSTALL = "apt-get install chromium chromium-driver"
# XLRAG_SCREENSHOTS=DIR: the tests save the page's main views there (scripts/screenshots.py)
SCREENSHOTS = "XLRAG_SCREENSHOTS"


def _browser() -> str | None:
    return next((p for p in map(shutil.which, BROWSERS) if p), None)


def missing() -> str | None:
    """Why the browser tests cannot run here, in one line; None when they can."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "no selenium: pip install -e '.[dev]'"
    gone = [name for name, found in (("chromium", _browser()), (DRIVER, shutil.which(DRIVER))) if not found]
    return f"no {' or '.join(gone)} on PATH: {INSTALL}" if gone else None


def chromium() -> Any:
    """A headless Chromium at 1280x860 (the screenshots' size), English UI."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    # Selenium Manager would fetch a driver it cannot find: it is given one, and told not to
    os.environ.setdefault("SE_OFFLINE", "true")
    options = webdriver.ChromeOptions()
    options.binary_location = _browser() or ""
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,860", "--lang=en-US", "--no-first-run", "--disable-extensions",
                "--disable-background-networking", "--disable-component-update"):
        options.add_argument(arg)
    return webdriver.Chrome(service=Service(executable_path=shutil.which(DRIVER)), options=options)


def screenshot(driver: Any, name: str) -> None:
    """Save the page as ``NAME.png`` when screenshots are asked for (scripts/screenshots.py)."""
    folder = os.environ.get(SCREENSHOTS)
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        # the whole page, not the part scrolled to: the window grows to the page's height for the picture
        height = driver.execute_script("window.scrollTo(0, 0); return document.documentElement.scrollHeight")
        width, before = 1280, driver.get_window_size()
        driver.set_window_size(width, max(860, min(height + 140, 2400)))
        try:
            driver.save_screenshot(str(Path(folder) / f"{name}.png"))
        finally:
            driver.set_window_size(before["width"], before["height"])
