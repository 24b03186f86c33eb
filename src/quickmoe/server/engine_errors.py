"""What `AsyncEngine` raises to the server's handlers, each answered with its HTTP status (server/errors.py)."""

from __future__ import annotations

from quickmoe.errors import QuickMoEError

__all__ = ["EngineDrained", "EngineOverloaded", "EngineStepFailed", "EngineUnavailable", "ProfileBusy"]


class EngineOverloaded(QuickMoEError):
    """More requests wait than the configured queue holds (answered 503)."""


class EngineUnavailable(QuickMoEError):
    """The engine is not running: starting, shutting down, or its thread died (answered 503)."""


class ProfileBusy(QuickMoEError):
    """A step profile is already waiting for its steps (answered 409)."""


class EngineStepFailed(QuickMoEError):
    """The engine could not finish this request: a step raised while running it (answered 500, or an error event
    in a stream; the server goes on)."""

    status = 500
    code = "engine_error"


class EngineDrained(EngineStepFailed):
    """The server is shutting down and this request did not finish within the drain timeout (answered 503)."""

    status = 503
    code = "server_shutting_down"
