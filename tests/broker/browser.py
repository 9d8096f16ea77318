"""Debian's Chromium, headless, driven by Selenium through Debian's chromedriver.

Both come from apt (`make system-deps`): Selenium is pointed at them explicitly,
so it never tries to download a browser or a driver of its own.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

CHROMIUM_PATHS = ("/usr/bin/chromium", "/usr/lib/chromium/chromium")
DRIVER_PATHS = ("/usr/bin/chromedriver", "/usr/lib/chromium/chromedriver")


def _first(paths: tuple[str, ...], name: str) -> str:
    found = next((p for p in paths if Path(p).exists()), None) or shutil.which(name)
    if not found:
        pytest.fail(f"{name} is not installed: run `make system-deps` (apt-get install chromium chromium-driver)")
    return found


def headless_chromium(width: int = 1440, height: int = 1000):
    """A headless Chromium WebDriver; the caller quits it."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = _first(CHROMIUM_PATHS, "chromium")
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                f"--window-size={width},{height}", "--hide-scrollbars"):
        options.add_argument(arg)
    return webdriver.Chrome(service=Service(executable_path=_first(DRIVER_PATHS, "chromedriver")),
                            options=options)


def full_page_screenshot(driver, path: Path) -> Path:
    """The whole page, not only the window: the window is stretched to the page's height."""
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(driver.get_window_size()["width"], max(600, min(int(height) + 40, 6000)))
    driver.save_screenshot(str(path))
    return path
