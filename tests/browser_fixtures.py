"""The browser tests' shared fixtures, one of each per test run (per xdist worker; the browser
tests all run on one, see ``conftest.xdist_group``): the local Streamlit server on ``random:tiny``
and headless Chromium. Starting a server costs a Python start, Streamlit's and JAX's imports and
the first compilations; a Chromium launch a second or two: 6 of each per run before.

A test that needs its own server (a restart, other settings: ``test_browser_sets``,
``test_hosted_server_attacks``) starts it with ``test_browser.start_server``. Tests on the shared
server must not depend on an empty result store: each uses its own sequences or says why not.
"""

from __future__ import annotations

import pytest

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    # Without these Chromium calls Google's hosts at start, which this machine's network refuses.
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    """The run's local Streamlit server; its log is printed if it fails to come up."""
    from test_browser import start_server, stop_server

    cache = tmp_path_factory.mktemp("flamino-cache")
    process = start_server(cache, tmp_path_factory.mktemp("server") / "streamlit.log")
    process.cache = cache  # its FLAMINO_CACHE: the pass-rate file's job log (test_browser_estimates)
    try:
        yield process
    finally:
        stop_server(process)


@pytest.fixture(scope="session")
def playwright_session():
    """The run's Playwright (sync API): one per process, as a second one in the same thread
    refuses to start ("Sync API inside the asyncio loop"). A test that needs Chromium with other
    flags launches it from here."""
    from test_browser import CHROMIUM

    if not CHROMIUM.exists():
        pytest.skip("needs /usr/bin/chromium (apt-get install chromium)")
    playwright_api = pytest.importorskip("playwright.sync_api")
    with playwright_api.sync_playwright() as p:
        yield p


@pytest.fixture(scope="session")
def browser(playwright_session):
    """The run's headless Chromium (each test opens its own context: its own cookies, session)."""
    from test_browser import CHROMIUM

    browser = playwright_session.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
    yield browser
    browser.close()
