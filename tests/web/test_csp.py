"""The Content-Security-Policy: sent everywhere, strict, and honoured by every page.

Every browser test runs under it: tests/web/conftest.py turns each violation into a console
error, which fails the test. These tests show that the policy is there and that the watch
does catch a violation.
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client
from playwright.sync_api import Page, expect

from accounts.models import ApiToken
from tests.web.helpers import PageWatch, sign_in


@pytest.mark.django_db
@pytest.mark.parametrize("url", ["/login/", "/tasks/", "/api/docs/", "/api/v2/tasks", "/admin/login/", "/nowhere/"])
def test_every_response_carries_the_policy(client: Client, url: str, settings) -> None:
    policy = client.get(url)["Content-Security-Policy"]
    assert policy == settings.ARGUS_CSP
    directives = dict(part.strip().split(" ", 1) for part in policy.split(";"))
    assert directives["script-src"] == "'self'" and directives["style-src"] == "'self'"
    assert directives["object-src"] == "'none'" and directives["frame-ancestors"] == "'none'"


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_an_injected_inline_script_does_not_run_and_is_reported(page: Page, page_watch: PageWatch) -> None:
    page_watch.allow_console_error("CSP violation: script-src-elem blocked inline")
    page_watch.allow_console_error("violates the following Content Security Policy directive 'script-src 'self''")
    page.goto("/login/")
    page.evaluate("""() => {
        const script = document.createElement("script");
        script.textContent = "window.injected = true";
        document.body.append(script);
    }""")
    expect(page.get_by_role("heading", name="Sign in to Argus")).to_be_visible()
    assert page.evaluate("() => window.injected") is None
    page.wait_for_function("() => true")  # one more round trip: the violation event is async
    assert any("CSP violation: script-src-elem blocked inline" in error for error in page_watch.console_errors)


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_api_docs_and_the_admin_pass_the_policy(page: Page, admin: User) -> None:
    sign_in(page, "admin")
    page.goto("/api/docs/")
    expect(page.locator(".swagger-ui")).to_be_visible()
    expect(page.get_by_text("/api/v2/files", exact=True).first).to_be_visible()
    for url in ("/admin/", "/admin/accounts/apitoken/", "/admin/accounts/apitoken/add/", "/admin/tasks/task/"):
        page.goto(url)
        expect(page.locator("#site-name")).to_be_visible()
    page.goto("/admin/accounts/apitoken/add/")
    # The user field is the admin's autocomplete (select2, jQuery): it must work under the policy too.
    page.locator(".select2-selection").click()
    page.locator(".select2-search__field").fill("adm")
    page.get_by_role("option", name="admin").click()
    page.locator("#id_name").fill("csp")
    page.locator("input[name=_save]").click()
    expect(page.locator("#raw-token")).to_be_visible()
    assert ApiToken.objects.filter(name="csp").exists()
