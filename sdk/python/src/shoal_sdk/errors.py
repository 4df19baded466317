"""Errors the SDK raises: one class per kind of answer, all under :class:`ShoalError`."""

from __future__ import annotations

from typing import Any


class ShoalError(Exception):
    """An error answer of the API, or a failure to reach it.

    ``status`` is the HTTP status (``None`` when no answer came), ``message`` the server's
    ``error`` text (or what went wrong on the way), ``body`` the whole decoded error body.
    """

    def __init__(
        self,
        message: str,
        status: int | None = None,
        body: dict[str, Any] | None = None,
        method: str | None = None,
        url: str | None = None,
    ) -> None:
        self.message = message
        self.status = status
        self.body: dict[str, Any] = body if body is not None else {}
        self.method = method
        self.url = url
        where = f"{method} {url}: " if method and url else ""
        code = f"{status} " if status is not None else ""
        super().__init__(f"{code}{where}{message}")

    @property
    def task(self) -> str | None:
        """For a refused definition: the task the error is about, when the server says."""
        task = self.body.get("task")
        return task if isinstance(task, str) else None

    @property
    def line(self) -> int | None:
        """For a definition that is not valid YAML or JSON: the line of the error."""
        line = self.body.get("line")
        return line if isinstance(line, int) else None


class BadRequest(ShoalError):
    """400: a bad body, parameter or definition (the message names the offender)."""


class Unauthorized(ShoalError):
    """401: no valid token."""


class Forbidden(ShoalError):
    """403: the token's user lacks the role the call needs (the message names it)."""


class NotFound(ShoalError):
    """404: no such project, workflow, instance, task instance, ..."""


class Conflict(ShoalError):
    """409: the state forbids it (e.g. a lease that lapsed, an action on an ended run)."""


class PayloadTooLarge(ShoalError):
    """413: the body is over the server's ``--max-body-bytes``."""


class ServerError(ShoalError):
    """5xx: the server failed (the detail is in its log)."""


class ConnectionFailed(ShoalError):
    """The API could not be reached, or the connection broke (``status`` is ``None``)."""


class CommandFailed(ShoalError):
    """A start command could not become an instance (its ``error`` is the message)."""


class WaitTimeout(ShoalError, TimeoutError):
    """A wait ran out of time before the run ended (the run goes on)."""


_BY_STATUS: dict[int, type[ShoalError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    413: PayloadTooLarge,
}


def error_for(
    status: int,
    message: str,
    body: dict[str, Any] | None = None,
    method: str | None = None,
    url: str | None = None,
) -> ShoalError:
    """The :class:`ShoalError` subclass for an HTTP status."""
    cls = _BY_STATUS.get(status)
    if cls is None:
        cls = ServerError if status >= 500 else ShoalError
    return cls(message, status=status, body=body, method=method, url=url)
