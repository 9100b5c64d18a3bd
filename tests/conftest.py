"""Fixtures shared by the test files (pytest finds them here; no import needed):

- ``serve``: serves a WSGI app with waitress on a free loopback port in a background thread,
  as a context manager: ``with serve(app, threads=4) as url: ...``; usable from a fixture of
  any scope, the server stops when the ``with`` ends.
- ``chromium``: headless Debian Chromium driven by selenium, one per test module; the module's
  ``browser`` mark sets its window size and page-load strategy
  (``pytestmark = pytest.mark.browser(window="1280,900", eager=True)``). A test marked
  ``browser`` is skipped, with the reason ``NO_CHROMIUM``, where Chromium or its driver is
  missing (``make browser`` installs them).
- ``catalog_shop`` / ``catalog_client``: the served-shop page tests' shops, the generated
  catalog (200 products) and a small tricky one (markup, quotes, slashes), and a Flask test
  client of each.

Plain helpers (HTML to text, the tricky catalog) are in shop_pages.py.
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
HAVE_CHROMIUM = os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK)
NO_CHROMIUM = (f"needs Debian's chromium and chromium-driver ({CHROMIUM}, {CHROMEDRIVER}): "
               "make browser")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``browser`` skip where there is no Chromium (before their fixtures run:
    a module's served app or trained runs cost time for nothing)."""
    if HAVE_CHROMIUM:
        return
    skip = pytest.mark.skip(reason=NO_CHROMIUM)
    for item in items:
        if item.get_closest_marker("browser") is not None:
            item.add_marker(skip)


# ----------------------------------------------------------------------------------- server


@contextmanager
def _serve_in_thread(app, threads: int = 8) -> Iterator[str]:
    """Serve ``app`` with waitress on a free 127.0.0.1 port; yields the base URL."""
    from waitress import wasyncore
    from waitress.server import create_server

    server = create_server(app, host="127.0.0.1", port=0, threads=threads,
                           ident="gagpo-test")
    thread = threading.Thread(target=server.run, name="waitress-test", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.effective_port}"
    finally:
        # An empty socket map ends waitress's loop. Closing the sockets from this thread
        # would race the loop's select(), so the trigger runs the close in the loop thread.
        # The thunk is queued and the trigger pulled under the trigger's lock: otherwise a
        # worker's wake-up between the two could run the close (the trigger's own pipe
        # included) before this thread writes to that pipe, and the write fails (EBADF).
        server.task_dispatcher.shutdown()
        trigger = server.trigger
        with trigger.lock:
            trigger.thunks.append(lambda: wasyncore.close_all(server._map, ignore_all=True))
            trigger._physical_pull()
        thread.join(timeout=10)
        assert not thread.is_alive(), "the test server did not stop"


@pytest.fixture(scope="session")
def serve():
    """``with serve(app, threads=8) as url:`` serves ``app`` on a free loopback port for the
    ``with`` block (session-scoped, so fixtures of any scope can use it)."""
    return _serve_in_thread


# ---------------------------------------------------------------------------------- browser


@pytest.fixture(scope="module")
def chromium(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """A selenium driver of headless Chromium with nothing reaching out of this machine (no
    background networking, updates or sync) and a fresh profile, shared by the module's tests.

    The module's ``browser`` mark may set ``window`` ("W,H", default "1280,900") and ``eager``
    (page loads stop waiting for images: the catalog's are remote URLs an offline DNS lookup
    would hold up)."""
    if not HAVE_CHROMIUM:
        pytest.skip(NO_CHROMIUM)
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    mark = request.node.get_closest_marker("browser")
    settings = dict(mark.kwargs) if mark is not None else {}
    window = settings.pop("window", "1280,900")
    eager = settings.pop("eager", False)
    if settings:
        raise TypeError(f"unknown browser mark settings: {sorted(settings)}")
    profile = tmp_path_factory.mktemp("chromium-profile")

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    if eager:
        options.page_load_strategy = "eager"
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", f"--window-size={window}",
                f"--user-data-dir={profile}"):
        options.add_argument(arg)
    browser = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    browser.set_page_load_timeout(30)
    try:
        yield browser
    finally:
        browser.quit()
        shutil.rmtree(profile, ignore_errors=True)


# ------------------------------------------------------------------------------------ shops


@pytest.fixture(scope="module", params=["generated", "tricky"])
def catalog_shop(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """The generated catalog (200 products), and a small one full of markup, quotes and
    slashes (shop_pages.write_tricky_catalog)."""
    from shop_pages import write_tricky_catalog

    from gagpo.servers.webshop import open_shop

    if request.param == "generated":
        return open_shop(num_products=200)
    return open_shop(write_tricky_catalog(tmp_path_factory.mktemp("tricky")))


@pytest.fixture(scope="module")
def catalog_client(catalog_shop):
    """A Flask test client of ``catalog_shop``'s pages and API."""
    from gagpo.servers.webshop.web.app import create_app

    return create_app(catalog_shop).test_client()
