"""ModelArts API errors as data: each one an HTTP status, a ``ModelArts.XXXX`` code and a message, answered as the
body ``{"error_code": ..., "error_msg": ...}`` that ``huaweicloudsdkcore`` turns into ``ClientRequestException``
(status < 500) or ``ServerResponseException`` (>= 500) with ``.status_code``, ``.error_code`` and ``.error_msg``.

Codes and statuses from the API reference's "Error Codes" page
(https://support.huaweicloud.com/intl/en-us/api-modelarts/modelarts_03_0095.html). Note that an unknown training job
is HTTP 400 ``ModelArts.2775`` there, not 404.
"""

from __future__ import annotations


class ModelArtsError(Exception):
    """An API error: ``status`` (HTTP), ``code`` (``ModelArts.XXXX``), ``message``."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message

    def body(self) -> dict[str, str]:
        return {"error_code": self.code, "error_msg": self.message}


def invalid_param(what: str) -> ModelArtsError:
    return ModelArtsError(400, "ModelArts.2788", f"Invalid parameter({what}).")


def invalid_json() -> ModelArtsError:
    return ModelArtsError(400, "ModelArts.2787", "Invalid JSON request body.")


def job_not_found(job_id: str) -> ModelArtsError:
    return ModelArtsError(400, "ModelArts.2775", f"Training job (ID: {job_id}) not found.")


def duplicate_name(name: str) -> ModelArtsError:
    return ModelArtsError(400, "ModelArts.2751", f"Duplicate training job (name {name}).")


def flavor_not_found(flavor: str) -> ModelArtsError:
    return ModelArtsError(400, "ModelArts.2781", f"Flavor ({flavor}) not found.")


def flavor_out_of_range(count: int, maximum: int) -> ModelArtsError:
    return ModelArtsError(400, "ModelArts.2793",
                          f"The number of flavor instances ({count}) exceeds the maximum ({maximum}).")


def must_have_command() -> ModelArtsError:
    return ModelArtsError(400, "ModelArts.2806", "Custom image jobs command and engine.url cannot be empty.")


def quota_exceeded(resource: str) -> ModelArtsError:
    return ModelArtsError(400, "ModelArts.2815", f"Exceed quota limit of resource({resource}).")


def unsupported_action(action: str) -> ModelArtsError:
    return ModelArtsError(400, "ModelArts.2812", f"Unsupported action type ({action}).")


def not_allowed_to_terminate() -> ModelArtsError:
    return ModelArtsError(409, "ModelArts.2796", "The job cannot be terminated.")


def no_token() -> ModelArtsError:
    """An unsigned request (no ``Authorization: SDK-HMAC-SHA256 ...`` and no ``X-Auth-Token``)."""
    return ModelArtsError(401, "ModelArts.0201", "Token doesn't exist.")


def project_mismatch() -> ModelArtsError:
    return ModelArtsError(404, "ModelArts.2786", "The project ID in the URL does not match the project ID of the "
                                                 "token.")


def path_not_found(path: str) -> ModelArtsError:
    return ModelArtsError(404, "ModelArts.2836", f"Path not found: {path}.")


def method_not_allowed(method: str) -> ModelArtsError:
    return ModelArtsError(405, "ModelArts.2803", f"Method not allowed: {method}.")


def internal_error() -> ModelArtsError:
    """What an ``unavailable`` fault answers."""
    return ModelArtsError(500, "ModelArts.0010", "Internal error.")
