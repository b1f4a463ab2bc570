"""What the browser tests share (the run browser's, the documentation site's): a headless Chromium
driven by Selenium, skipped where Chromium, its driver or selenium is missing."""

from __future__ import annotations

import shutil

import pytest


def start_chromium(*flags: str):
    """Headless Chromium (1400×1000 window, wide enough for the site's tabs and header search box),
    with ``flags`` added."""
    chromium, chromedriver = shutil.which("chromium"), shutil.which("chromedriver")
    if not chromium or not chromedriver:
        pytest.skip("the browser test needs Debian's chromium and chromium-driver (`make system-deps` installs them)")
    webdriver = pytest.importorskip("selenium.webdriver", reason="the browser test needs selenium (the test extra)")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1400,1000", *flags):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(chromedriver), options=options)
