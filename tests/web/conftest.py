"""Fixtures for the web UI's tests: plain static files, and Playwright driving Debian's Chromium.

Browser fixtures, for any test module under tests/web/:

- ``browser``: one Chromium per test module (see its docstring for why not per session).
- ``page``: a fresh browser context on the live server. Every request URL and every console
  error is recorded, and the test fails at teardown if a request left the live server or the
  console logged an error (every Content-Security-Policy violation is logged as one).
  ``page_watch`` gives the records, and ``allow_console_error`` for a test that expects one
  (say, a 404 page).
- ``signed_in_page``: ``page`` already signed in as alice (password ``PASSWORD``).

tests/web/helpers.py has ``sign_in(page, username)`` and ``shot(page, name)`` (a full-page
screenshot to /tmp/shots/<name>.png, to look at).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import Browser, Page, sync_playwright

from tests.web.helpers import PageWatch, sign_in

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-background-networking",
    "--disable-gpu",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


CSP_WATCH = """
document.addEventListener("securitypolicyviolation", (event) => {
  console.error(`CSP violation: ${event.violatedDirective} blocked ${event.blockedURI || "inline"}`);
});
"""


@pytest.fixture(autouse=True)
def plain_static_storage(settings) -> None:
    # The settings use WhiteNoise's manifest storage when DEBUG is off, which needs a
    # collectstatic run first; tests render templates straight from static/ instead.
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Chromium, started once per module.

    Per module, not per session: Playwright's sync API keeps an asyncio loop marked as running
    in this thread while it is started, which would break any later test that calls
    asyncio.run(). For the same reason Django's async-unsafe guard is off while it runs: the
    tests touch the database between Playwright calls, all in this one thread.
    """
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: apt-get install chromium (make test does it)")
    with pytest.MonkeyPatch.context() as patch, sync_playwright() as playwright:
        patch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page_watch(live_server) -> PageWatch:
    return PageWatch(host=urlsplit(live_server.url).netloc)


@pytest.fixture
def page(browser: Browser, live_server, page_watch: PageWatch) -> Iterator[Page]:
    context = browser.new_context(base_url=live_server.url, viewport={"width": 1366, "height": 860})
    context.set_default_timeout(10_000)
    # Every Content-Security-Policy violation becomes a console error, which fails the test.
    context.add_init_script(CSP_WATCH)
    new_page = context.new_page()
    new_page.on("request", lambda request: page_watch.requests.append(request.url))
    new_page.on("console", page_watch.on_console)
    new_page.on("pageerror", lambda error: page_watch.console_errors.append(f"page error: {error}"))
    yield new_page
    context.close()
    assert not page_watch.outside_requests(), f"requests left the server: {page_watch.outside_requests()}"
    assert not page_watch.unexpected_errors(), f"console errors: {page_watch.unexpected_errors()}"


@pytest.fixture
def signed_in_page(page: Page, alice: User) -> Page:
    sign_in(page, alice.username)
    page.wait_for_url("**/tasks/")
    return page
