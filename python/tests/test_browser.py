"""The reports in a real headless browser (Debian's chromium through
chromium-driver and Selenium): no console error, every image decodes, the
tables have the expected rows, nothing is fetched from the network, and a
screenshot of each report is saved (GHFIT_PY_SHOTS, default the work folder).

Run by tests/python.sh browser, which first checks that chromium can start
at all here (exit 77 = skip when it cannot); everything after that fails
loudly.  Network: the browser gets a proxy at a closed local port for every
host, so that any fetch would fail with a console error, and the page's
resource-timing entries must all be data: URLs."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from conftest import expected_rows

pytestmark = pytest.mark.browser

CHROMIUM = os.environ.get("GHFIT_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
DRIVER = os.environ.get("GHFIT_CHROMEDRIVER") or shutil.which("chromedriver") or "/usr/bin/chromedriver"


@pytest.fixture(scope="module")
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
              "--window-size=1300,1600", "--hide-scrollbars",
              # any network request goes to a closed port and fails (and would log an error)
              "--proxy-server=http://127.0.0.1:9", "--proxy-bypass-list=<-loopback>",
              "--no-first-run", "--no-default-browser-check", "--disable-background-networking",
              "--disable-component-update", "--disable-sync"):
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    drv = webdriver.Chrome(service=Service(DRIVER), options=opts)
    drv.set_page_load_timeout(120)
    yield drv
    drv.quit()


def shots_dir(work):
    d = Path(os.environ.get("GHFIT_PY_SHOTS") or work)
    d.mkdir(parents=True, exist_ok=True)
    return d


@pytest.mark.parametrize("which", ("single", "multi", "sweep", "mixture"))
def test_report_in_browser(browser, reports, mixture_report, work, which):
    out, inputs = mixture_report if which == "mixture" else reports[which]
    browser.get(out.resolve().as_uri())
    assert browser.execute_script("return document.readyState") == "complete"
    # every image decoded
    imgs = browser.execute_script(
        "return Array.from(document.images).map(i => [i.complete, i.naturalWidth, i.naturalHeight, i.alt])")
    assert imgs, "no images"
    bad = [i for i in imgs if not (i[0] and i[1] > 0 and i[2] > 0)]
    assert not bad, bad
    assert all(i[3] for i in imgs), "an image without alt text"
    # tables: the expected number of body rows
    rows = browser.execute_script(
        "const r = {}; document.querySelectorAll('table').forEach(t => "
        "{ r[t.id] = t.tBodies.length ? t.tBodies[0].rows.length : 0; }); return r;")
    fits, tests = expected_rows(inputs)
    assert rows["summary"] == len(fits)
    assert rows.get("lrt", 0) == len(tests)
    assert rows["files"] == len(inputs)
    for i, f in enumerate(fits):
        if f"vec-{i}" in rows:
            assert rows[f"vec-{i}"] == f.dim and rows[f"sigma-{i}"] == f.dim
    # nothing fetched from the network: only the page itself and data: URLs
    entries = browser.execute_script(
        "return performance.getEntriesByType('resource').map(e => e.name)"
        ".concat(performance.getEntriesByType('navigation').map(e => e.name))")
    net = [e for e in entries if not (e.startswith("data:") or e.startswith("file:"))]
    assert not net, net
    text = out.read_text(encoding="utf-8")
    assert not re.search(r"(?i)\b(https?|ftp|wss?):", text), "a network URL in the HTML"
    # no console messages of level SEVERE (errors), nor any warnings
    logs = browser.get_log("browser")
    errors = [m for m in logs if m["level"] in ("SEVERE", "WARNING")]
    assert not errors, errors
    # screenshots: the top of the page, and the whole page (height capped)
    d = shots_dir(work)
    assert browser.save_screenshot(str(d / f"report-{which}-top.png"))
    h = min(int(browser.execute_script("return document.documentElement.scrollHeight")), 16000)
    browser.set_window_size(1300, h)
    try:
        assert browser.save_screenshot(str(d / f"report-{which}.png"))
    finally:
        browser.set_window_size(1300, 1600)
    assert (d / f"report-{which}.png").stat().st_size > 10_000


def test_network_would_be_caught(browser, work):
    """The check above is not vacuous: a page that loads an http image gets
    a failed request (a console error) in this browser set-up."""
    page = work / "with-network.html"
    page.write_text('<!DOCTYPE html><html><body><img src="http://example.invalid/x.png"></body></html>')
    browser.get(page.resolve().as_uri())
    browser.execute_script("return document.readyState")
    logs = browser.get_log("browser")
    entries = browser.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
    assert any(m["level"] == "SEVERE" for m in logs) or any(e.startswith("http") for e in entries)
    w = browser.execute_script("return document.images[0].naturalWidth")
    assert w == 0

