"""The API over HTTP: one exception, ApiError, for every way a call can go wrong."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx

from argus_cli import __version__


class ApiError(Exception):
    """The server said no (its message and fields), or could not be reached."""

    def __init__(self, message: str, *, status: int | None = None, fields: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.fields = fields or {}


def _error_of(response: httpx.Response) -> ApiError:
    """The API's one error shape, ``{"error": {"code", "message", "fields"?}}``, or the raw text."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        error = body["error"]
        return ApiError(str(error.get("message", "")), status=response.status_code, fields=error.get("fields"))
    text = response.text.strip()[:300] or response.reason_phrase
    return ApiError(f"HTTP {response.status_code} from {response.request.url}: {text}", status=response.status_code)


class Client:
    def __init__(self, url: str, token: str, *, timeout: float = 30.0) -> None:
        self.url = url.rstrip("/")
        try:
            self.http = httpx.Client(
                base_url=f"{self.url}/api/v2/",
                headers={"Authorization": f"Bearer {token}", "User-Agent": f"argus-cli/{__version__}"},
                timeout=timeout,
            )
        except httpx.InvalidURL as error:
            raise ApiError(f"{self.url} is not a URL ({error}): set ARGUS_URL or run `argus login`.") from error

    def unreachable(self, error: Exception) -> ApiError:
        return ApiError(f"Cannot reach Argus at {self.url}: {error or type(error).__name__}")

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            return self.http.request(method, path, **kwargs)
        except httpx.RemoteProtocolError:
            # The server closed its end as the request went out: a kept-alive connection that
            # timed out between two polls (gunicorn keeps one 2 s, `wait` polls every 2 s). A GET
            # changes nothing: it is sent once more, on a new connection.
            if method != "GET":
                raise
            return self.http.request(method, path, **kwargs)

    def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            response = self._request(method, path, **kwargs)
        except (httpx.TransportError, httpx.InvalidURL) as error:
            raise self.unreachable(error) from error
        if response.is_error:
            raise _error_of(response)
        return response

    def _json(self, response: httpx.Response) -> Any:
        try:
            return response.json()
        except ValueError as error:
            raise ApiError(
                f"{response.request.url} did not answer as the Argus API does (no JSON): check the URL."
            ) from error

    def get(self, path: str, **params: Any) -> Any:
        clean = {key: value for key, value in params.items() if value is not None}
        return self._json(self._send("GET", path, params=clean))

    def text(self, path: str, **params: Any) -> str:
        """A response that is text, not JSON (a CSV)."""
        clean = {key: value for key, value in params.items() if value is not None}
        return self._send("GET", path, params=clean).text

    def post(self, path: str, *, content: bytes | None = None, json: Any = None, content_type: str = "") -> Any:
        headers = {"Content-Type": content_type} if content_type else {}
        response = self._send("POST", path, content=content, json=json, headers=headers)
        return self._json(response) if response.content else None

    def delete(self, path: str) -> Any:
        """The answer's JSON, None when it has none (a 204)."""
        response = self._send("DELETE", path)
        return self._json(response) if response.content else None

    def get_all(self, path: str, *, limit: int | None = None, **params: Any) -> list[dict[str, Any]]:
        """Every row of a paginated list (up to ``limit``), following the pages."""
        rows: list[dict[str, Any]] = []
        page = 1
        while True:
            body = self.get(path, page=page, page_size=min(limit or 500, 500), **params)
            rows.extend(body["results"])
            if not body.get("next") or (limit is not None and len(rows) >= limit):
                return rows[:limit] if limit is not None else rows
            page += 1

    def lines(self, path: str, **params: Any) -> Iterator[str]:
        """A text response line by line, as the server sends it (a followed log never ends on
        its own schedule: no read timeout)."""
        clean = {key: value for key, value in params.items() if value is not None}
        timeout = httpx.Timeout(self.http.timeout.connect, read=None)
        try:
            with self.http.stream("GET", path, params=clean, timeout=timeout) as response:
                if response.is_error:
                    response.read()
                    raise _error_of(response)
                yield from response.iter_lines()
        except (httpx.TransportError, httpx.InvalidURL) as error:
            raise self.unreachable(error) from error
