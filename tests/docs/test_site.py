"""The documentation site (mkdocs.yml, docs/): its command pages are what the parsers print
(docs/gen_commands.py --check), it builds with ``mkdocs build --strict`` and no warning, and the
built site works from disk (file://) in headless Chromium: the get-started path, the search box
and a command page."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[2]

EVALUATE = "Evaluate your judge in three commands"


def test_command_pages_are_what_the_parsers_print():
    done = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "gen_commands.py"), "--check"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"run `make docs` (docs/gen_commands.py) and commit the pages:\n{done.stdout}"


def test_site_builds_strictly_without_warnings(site_build):
    assert site_build.warnings == [], "\n".join(site_build.warnings)
    assert site_build.returncode == 0, site_build.output
    assert (site_build.site / "index.html").is_file()
    assert (site_build.site / "reference" / "commands" / "eval-judge.html").is_file()


# --------------------------------------------------------------------------- in a real browser


def _visible(driver, css, text):
    """The one displayed element matching ``css`` whose text is ``text``, else False (for a wait)."""
    found = [e for e in driver.find_elements("css selector", css) if e.is_displayed() and e.text.strip() == text]
    return found[0] if len(found) == 1 else False


def _page(url):
    """``url`` without its query (search's ``?h=`` highlight) and fragment."""
    return urlsplit(url)._replace(query="", fragment="").geturl()


def _at(page, heading):
    """A wait condition: the browser shows ``page`` (a path below the site) with ``heading`` as its h1."""

    def shown(d):
        if not urlsplit(d.current_url).path.endswith("/" + page):
            return False
        h1 = d.find_elements("css selector", "article h1")
        return bool(h1) and h1[0].text.strip() == heading

    return shown


def test_the_site_from_disk_get_started_search_and_a_command_page(site_build, offline_browser):
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    browser = offline_browser
    site = site_build.require_clean()
    wait = WebDriverWait(browser, 20, ignored_exceptions=(StaleElementReferenceException,))
    home = (site / "index.html").as_uri()
    browser.get(home)
    wait.until(_at("index.html", "judgetrain"))
    assert browser.current_url.startswith("file://")
    scripts = browser.execute_script("return Array.from(document.scripts, s => s.src).filter(Boolean)")
    assert scripts and all(src.startswith("file://") for src in scripts), scripts  # the search shim included

    # the get-started path: the "Get started" tab, then its "Evaluate your judge …" page in the sidebar
    wait.until(lambda d: _visible(d, "a.md-tabs__link", "Get started")).click()
    wait.until(_at("get-started/install.html", "Install"))
    wait.until(lambda d: _visible(d, ".md-sidebar--primary a.md-nav__link", EVALUATE)).click()
    wait.until(_at("get-started/evaluate.html", EVALUATE))
    assert browser.title.startswith(EVALUATE)

    # the search box: its index is loaded from disk, and a result leads to `judgetrain eval judge`'s page
    browser.get(home)
    wait.until(_at("index.html", "judgetrain"))
    box = wait.until(
        lambda d: next((e for e in d.find_elements("css selector", "input.md-search__input") if e.is_displayed()), False)
    )
    box.click()
    box.send_keys("eval judge")
    target = (site / "reference" / "commands" / "eval-judge.html").as_uri()

    def open_result(d):
        """Click the result that is ``judgetrain eval judge``'s page itself (its title, no section of
        it); the list is drawn again as the query grows, so a stale result is looked up again."""
        for a in d.find_elements("css selector", ".md-search-result__list a.md-search-result__link"):
            own = a.text.splitlines()[:1] == ["judgetrain eval judge"]
            if _page(a.get_attribute("href")) == target and own and a.is_displayed():
                a.click()
                return True
        return False

    wait.until(open_result)
    wait.until(_at("reference/commands/eval-judge.html", "judgetrain eval judge"))
    assert browser.title.startswith("judgetrain eval judge")
    # the command page: the parser's help, as `judgetrain eval judge --help` prints it
    usage = browser.find_element("css selector", "article pre").text
    assert usage.startswith("usage: judgetrain eval judge"), usage[:200]
