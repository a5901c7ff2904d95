"""Assertions and helpers the accounts tests share (the admin tests of other apps too)."""

from __future__ import annotations

from collections.abc import Iterator
from html.parser import HTMLParser
from typing import TYPE_CHECKING, Any

from django.contrib.sessions.backends.db import SessionStore
from django.db import connection

from accounts.models import PREFIX_LENGTH

if TYPE_CHECKING:
    from django.test import Client

    # What DRF's APIClient answers: a Response plus the test client's .json() (stubs only).
    from rest_framework.response import _MonkeyPatchedResponse as ApiResponse


def assert_error(response: ApiResponse, status: int, message: str = "", fields: tuple[str, ...] = ()) -> dict[str, Any]:
    """The one error shape, ``{"error": {"code", "message", "fields"?}}``; returns the error."""
    assert response.status_code == status, response.content
    body = response.json()
    assert list(body) == ["error"], body
    error = body["error"]
    assert isinstance(error["code"], str) and error["code"]
    assert message in error["message"], error
    for field in fields:
        assert field in error["fields"], error
    return error


def database_text() -> Iterator[tuple[str, str, str]]:
    """(table, column, text) for every text-like value in every table of the database.

    Session rows are decoded too: their data is signed and base64-encoded, so a token
    kept in a session would not show as plain text.
    """
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names():
            cursor.execute(f"SELECT * FROM {connection.ops.quote_name(table)}")
            columns = [column[0] for column in cursor.description]
            for row in cursor.fetchall():
                for column, value in zip(columns, row, strict=True):
                    text = _as_text(value)
                    if text is None:
                        continue
                    yield table, column, text
                    if table == "django_session" and column == "session_data":
                        yield table, column, repr(SessionStore().decode(text))


def _as_text(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, bytes | memoryview):
        return bytes(value).decode("latin-1")
    return None


def secret_part(raw: str) -> str:
    """The part of a raw token that its displayed prefix does not show."""
    return raw[PREFIX_LENGTH:]


def assert_stored_nowhere(raw: str) -> None:
    secret = secret_part(raw)
    assert len(secret) >= 32
    found = [(table, column) for table, column, text in database_text() if secret in text]
    assert not found, f"the raw token is stored in {found}"


class _FormFields(HTMLParser):
    """What a browser would send for the forms of a page: each named field with its value."""

    def __init__(self) -> None:
        super().__init__()
        self.data: dict[str, list[str]] = {}
        self._select: str | None = None
        self._textarea: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attr = dict(attrs)
        name = attr.get("name")
        if tag == "input" and name:
            kind = attr.get("type", "text")
            if kind in ("submit", "button", "file", "image") or (
                kind in ("checkbox", "radio") and "checked" not in attr
            ):
                return
            self.data.setdefault(name, []).append(attr.get("value") or ("on" if kind == "checkbox" else ""))
        elif tag == "select" and name:
            self._select = name
            self.data.setdefault(name, [])
        elif tag == "option" and self._select and "selected" in attr:
            self.data[self._select].append(attr.get("value") or "")
        elif tag == "textarea" and name:
            self._textarea = name
            self.data[name] = [""]

    def handle_endtag(self, tag: str) -> None:
        if tag == "select":
            self._select = None
        elif tag == "textarea":
            self._textarea = None

    def handle_data(self, data: str) -> None:
        if self._textarea:
            self.data[self._textarea][0] += data


def page_form(site: Client, url: str, **changes: str) -> dict[str, list[str]]:
    """The forms of the page at ``url`` as a browser would submit them, with ``changes`` typed in."""
    parser = _FormFields()
    parser.feed(site.get(url).content.decode())
    for name, value in changes.items():
        assert name in parser.data, f"no field {name} on the page"
        parser.data[name] = [value]
    return parser.data
