"""What the run-browser tests share: one headless Chromium (Selenium) for the session, and opening
a page of a written page set in it until its view is drawn."""

from __future__ import annotations

import shutil

import pytest


@pytest.fixture(scope="session")
def browser():
    """Headless Chromium driven by Selenium, started once for the session (1400×1000 window)."""
    chromium, chromedriver = shutil.which("chromium"), shutil.which("chromedriver")
    if not chromium or not chromedriver:
        pytest.skip("the browser test needs Debian's chromium and chromium-driver (`make system-deps` installs them)")
    webdriver = pytest.importorskip("selenium.webdriver", reason="the browser test needs selenium (the test extra)")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1400,1000"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(chromedriver), options=options)
    yield driver
    driver.quit()


@pytest.fixture
def open_item(browser):
    """``open_item(index_html, item_id)``: the item's page drawn (its detail loaded, its images loaded)."""
    from selenium.webdriver.support.ui import WebDriverWait

    def open_(index, item_id):
        browser.get(f"{index.as_uri()}#item={item_id}")
        wait = WebDriverWait(browser, 20)
        wait.until(lambda d: d.find_element("id", "main").get_attribute("data-ready") == item_id)
        wait.until(lambda d: d.execute_script("return Array.from(document.images).every(i => i.complete)"))
        return browser

    return open_
