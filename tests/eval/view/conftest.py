"""What the run-browser tests share: one headless Chromium (Selenium) for the session, and opening
a page of a written page set in it until its view is drawn."""

from __future__ import annotations

import pytest

from tests.browsers import start_chromium


@pytest.fixture(scope="session")
def browser():
    """Headless Chromium driven by Selenium, started once for the session (1400×1000 window)."""
    driver = start_chromium()
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
