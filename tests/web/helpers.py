"""Helpers for browser tests (the fixtures are in tests/web/conftest.py)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from playwright.sync_api import ConsoleMessage, Page

PASSWORD = "password-" + "x" * 8  # tests/conftest.py's make_user default
SHOTS = Path("/tmp/shots")


@dataclass
class PageWatch:
    """What a page did: every request URL, and every console or page error."""

    host: str
    requests: list[str] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)
    allowed_errors: list[re.Pattern[str]] = field(default_factory=list)

    def on_console(self, message: ConsoleMessage) -> None:
        if message.type == "error":
            self.console_errors.append(f"{message.text} ({message.location.get('url')})")

    def allow_console_error(self, pattern: str) -> None:
        self.allowed_errors.append(re.compile(pattern))

    def outside_requests(self) -> list[str]:
        # data: and blob: URLs never reach the network; anything else must be the live server.
        return [
            url
            for url in self.requests
            if urlsplit(url).scheme not in ("data", "blob") and urlsplit(url).netloc != self.host
        ]

    def unexpected_errors(self) -> list[str]:
        return [e for e in self.console_errors if not any(p.search(e) for p in self.allowed_errors)]


def sign_in(page: Page, username: str, password: str = PASSWORD) -> None:
    page.goto("/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in", exact=True).click()


def shot(page: Page, name: str) -> Path:
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
