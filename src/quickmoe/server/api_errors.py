"""Errors as the OpenAI API reports them: an HTTP status and `{"error": {"message", "type", "param", "code"}}`."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

__all__ = ["APIError", "error_body", "from_validation_error", "param_path"]


class APIError(Exception):
    """An error answered to the client. 4xx: the request was wrong (`param` names the field); 5xx: the server's
    fault or state (overloaded, shutting down, an engine failure)."""

    def __init__(self, status: int, message: str, *, type: str | None = None, param: str | None = None,
                 code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type or _default_type(status)
        self.param = param
        self.code = code

    def body(self) -> dict[str, Any]:
        return error_body(self.message, self.type, self.param, self.code)


def error_body(message: str, type: str, param: str | None = None, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


def _default_type(status: int) -> str:
    if status == 401:
        return "authentication_error"
    if status == 404:
        return "not_found_error"
    if status == 503:
        return "overloaded_error"
    return "server_error" if status >= 500 else "invalid_request_error"


def param_path(loc: tuple[Any, ...]) -> str:
    """A pydantic location as the field path a client wrote: ('messages', 0, 'content') -> messages[0].content."""
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += ("." if path else "") + str(part)
    return path


def from_validation_error(exc: ValidationError) -> APIError:
    """400 naming the first invalid field, with pydantic's reason and the value received (shortened)."""
    first = exc.errors(include_url=False)[0]
    param = param_path(first["loc"]) or None
    reason = str(first["msg"]).removeprefix("Value error, ")
    if first["type"] == "missing":
        message = f"{param}: required field missing"
    elif first["type"] == "extra_forbidden":
        message = f"{param}: unknown field; this server does not implement it (leave it out)"
        return APIError(400, message, param=param, code="unsupported_value")
    else:
        message = f"{param or 'body'}: {reason} (got {_short(first.get('input'))})"
    return APIError(400, message, param=param, code="invalid_value" if first["type"] != "missing" else "missing")


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."
