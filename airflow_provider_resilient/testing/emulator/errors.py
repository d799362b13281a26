"""Errors as data: each declares its gRPC status code; the wire layer maps them in one place."""

from __future__ import annotations


class EmulatorError(Exception):
    """An API error the emulator returns to the client. ``code_name`` is a ``grpc.StatusCode`` name."""

    code_name = "UNKNOWN"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidArgument(EmulatorError):
    code_name = "INVALID_ARGUMENT"


class NotFound(EmulatorError):
    code_name = "NOT_FOUND"


class FailedPrecondition(EmulatorError):
    code_name = "FAILED_PRECONDITION"


class ResourceExhausted(EmulatorError):
    code_name = "RESOURCE_EXHAUSTED"


class Unavailable(EmulatorError):
    code_name = "UNAVAILABLE"


class AlreadyExists(EmulatorError):
    code_name = "ALREADY_EXISTS"
