"""The HTTP transport: the standard library's http.client, one connection a request."""

from __future__ import annotations

import http.client
import json
import socket
import ssl
from dataclasses import dataclass
from typing import Any, Mapping
from urllib.parse import quote, urlencode, urlsplit

from ._version import __version__
from .errors import ConnectionFailed, error_for

USER_AGENT = f"shoal-sdk-python/{__version__}"


@dataclass
class Response:
    status: int
    headers: http.client.HTTPMessage
    body: bytes

    def json(self) -> Any:
        if not self.body:
            return None
        return json.loads(self.body)

    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")


def path_segment(value: str | int) -> str:
    """A value as one URL path segment."""
    return quote(str(value), safe="")


class Transport:
    """Sends requests to one API base URL (``http(s)://host:port/api/v1``)."""

    def __init__(
        self,
        api: str,
        token: str | None,
        timeout: float,
        ca_file: str | None = None,
    ) -> None:
        base = api.rstrip("/")
        if not base.endswith("/api/v1"):
            base += "/api/v1"
        parts = urlsplit(base)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"api must be an http:// or https:// URL, not {api!r}")
        self.base = base
        self.scheme = parts.scheme
        self.host = parts.hostname
        self.port = parts.port
        self.prefix = parts.path
        self.token = token
        self.timeout = timeout
        self.ssl_context: ssl.SSLContext | None = None
        if self.scheme == "https":
            self.ssl_context = ssl.create_default_context(cafile=ca_file)

    def _connect(self, timeout: float) -> http.client.HTTPConnection:
        if self.ssl_context is not None:
            return http.client.HTTPSConnection(
                self.host, self.port, timeout=timeout, context=self.ssl_context
            )
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def request(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        raw_body: bytes | None = None,
        content_type: str | None = None,
        query: Mapping[str, str | int | None] | None = None,
        timeout: float | None = None,
        ok: tuple[int, ...] = (),
    ) -> Response:
        """Sends one request; raises a :class:`ShoalError` for an answer of 400 or more.

        ``json_body`` is sent as JSON; ``raw_body`` as is with ``content_type``.
        """
        target = self.prefix + path
        if query:
            pairs = [(k, str(v)) for k, v in query.items() if v is not None]
            if pairs:
                target += "?" + urlencode(pairs)
        headers = {"User-Agent": USER_AGENT, "Accept": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        body: bytes | None = None
        if json_body is not None:
            body = json.dumps(json_body).encode()
            headers["Content-Type"] = "application/json"
        elif raw_body is not None:
            body = raw_body
            headers["Content-Type"] = content_type or "application/octet-stream"
        elif method in ("POST", "PUT"):
            # The API takes writes with a JSON content type only (no cross-site forms).
            body = b""
            headers["Content-Type"] = "application/json"
        url = f"{self.scheme}://{self.host}{':' + str(self.port) if self.port else ''}{target}"
        conn = self._connect(self.timeout if timeout is None else timeout)
        try:
            conn.request(method, target, body=body, headers=headers)
            answer = conn.getresponse()
            data = answer.read()
            response = Response(answer.status, answer.headers, data)
        except (OSError, http.client.HTTPException) as e:
            what = "timed out" if isinstance(e, socket.timeout) else str(e) or type(e).__name__
            raise ConnectionFailed(what, method=method, url=url) from e
        finally:
            conn.close()
        if response.status >= 400 and response.status not in ok:
            message, err = _error_of(response)
            raise error_for(response.status, message, err, method=method, url=url)
        return response


def _error_of(response: Response) -> tuple[str, dict[str, Any]]:
    """The server's ``error`` message and body, or the raw text when it is not JSON."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("error"), str):
        return body["error"], body
    text = response.text().strip()
    return (text or f"HTTP {response.status}"), {}
