"""The platforms' codes and enum values, and the readers that take them from any form of input.

* google.rpc codes (``RPC_*``), which of them are permanent or retryable, and the HTTP statuses they stand for
  (:func:`as_rpc_code`);
* Vertex AI ``JobState`` and Cloud TPU ``Node.State``, ``Node.Health`` and ``SymptomType`` by number
  (:func:`vertex_state_name`, :func:`enum_name`, :func:`symptom_name`), and the states in which a job or queued
  resource waits for resources (:data:`QUEUED_STATES`);
* readers of odd input: :func:`as_int`, :func:`as_text`, :func:`as_epoch`.

Rules of the module: pure functions, no I/O, no Airflow or Google imports. Enum values are accepted as proto-plus
enums, as their names (with or without a prefix such as ``JOB_STATE_``) or as numbers, and nothing raises on odd
input: what cannot be read is ``None`` or ``""``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from .failures import FailureClass, Platform

# google.rpc.Code numbers (googleapis, google/rpc/code.proto).
RPC_OK = 0
RPC_UNKNOWN = 2
RPC_INVALID_ARGUMENT = 3
RPC_DEADLINE_EXCEEDED = 4
RPC_NOT_FOUND = 5
RPC_ALREADY_EXISTS = 6
RPC_PERMISSION_DENIED = 7
RPC_RESOURCE_EXHAUSTED = 8
RPC_FAILED_PRECONDITION = 9
RPC_ABORTED = 10
RPC_OUT_OF_RANGE = 11
RPC_UNIMPLEMENTED = 12
RPC_INTERNAL = 13
RPC_UNAVAILABLE = 14
RPC_UNAUTHENTICATED = 16

#: The request itself is wrong: retrying it cannot help.
PERMANENT_RPC_CODES = frozenset(
    {RPC_INVALID_ARGUMENT, RPC_NOT_FOUND, RPC_PERMISSION_DENIED, RPC_FAILED_PRECONDITION,
     RPC_OUT_OF_RANGE, RPC_UNIMPLEMENTED, RPC_UNAUTHENTICATED}
)
#: The platform's own trouble: the same request may succeed later.
RETRYABLE_RPC_CODES = frozenset(
    {RPC_UNKNOWN, RPC_DEADLINE_EXCEEDED, RPC_ABORTED, RPC_INTERNAL, RPC_UNAVAILABLE}
)
#: The rpc code of an HTTP status (after the HTTP mappings that google/rpc/code.proto gives);
#: :func:`as_rpc_code` reads the other statuses.
HTTP_TO_RPC = {400: RPC_INVALID_ARGUMENT, 401: RPC_UNAUTHENTICATED, 403: RPC_PERMISSION_DENIED,
               404: RPC_NOT_FOUND, 409: RPC_ALREADY_EXISTS, 429: RPC_RESOURCE_EXHAUSTED,
               500: RPC_INTERNAL, 503: RPC_UNAVAILABLE, 504: RPC_DEADLINE_EXCEEDED}

#: Vertex AI ``JobState`` names by number (the tuple's index), without the ``JOB_STATE_`` prefix.
VERTEX_STATES = ("UNSPECIFIED", "QUEUED", "PENDING", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLING",
                 "CANCELLED", "PAUSED", "EXPIRED", "UPDATING", "PARTIALLY_SUCCEEDED")
#: Cloud TPU ``Node.State``, ``Node.Health`` and ``Symptom.SymptomType`` names by number.
TPU_STATES = {0: "STATE_UNSPECIFIED", 1: "CREATING", 2: "READY", 3: "RESTARTING", 4: "REIMAGING",
              5: "DELETING", 6: "REPAIRING", 8: "STOPPED", 9: "STOPPING", 10: "STARTING",
              11: "PREEMPTED", 12: "TERMINATED", 13: "HIDING", 14: "HIDDEN", 15: "UNHIDING",
              16: "UNKNOWN"}
TPU_HEALTH = {0: "HEALTH_UNSPECIFIED", 1: "HEALTHY", 3: "TIMEOUT", 4: "UNHEALTHY_TENSORFLOW",
              5: "UNHEALTHY_MAINTENANCE"}
TPU_SYMPTOMS = {0: "SYMPTOM_TYPE_UNSPECIFIED", 1: "LOW_MEMORY", 2: "OUT_OF_MEMORY",
                3: "EXECUTE_TIMED_OUT", 4: "MESH_BUILD_FAIL", 5: "HBM_OUT_OF_MEMORY", 6: "PROJECT_ABUSE"}

#: States in which a job or queued resource waits for capacity or quota, by platform (Vertex AI, "Understand
#: the custom training service": a job "might remain in the JOB_STATE_QUEUED state" until quota frees; Cloud
#: TPU queued resources wait in WAITING_FOR_RESOURCES; ModelArts, "Training Fault Tolerance Check": queuing
#: over 30 minutes ends the job).
QUEUED_STATES: Mapping[Platform, frozenset[str]] = {
    Platform.VERTEX_AI: frozenset({"QUEUED", "PENDING"}),
    Platform.AI_PLATFORM: frozenset({"QUEUED", "PREPARING"}),
    Platform.TPU: frozenset({"ACCEPTED", "WAITING_FOR_RESOURCES", "PROVISIONING", "CREATING"}),
    Platform.MODELARTS: frozenset({"CREATING", "PENDING"}),
}



#: ModelArts' error codes (``error_code`` of an API error's body) and the failure each stands for (ModelArts API
#: reference, "Error Codes": https://support.huaweicloud.com/intl/en-us/api-modelarts/modelarts_03_0095.html). A code
#: not here is classified by its HTTP status and text (:func:`~.classify.classify_modelarts_error`).
MODELARTS_ERROR_CODES: Mapping[str, FailureClass] = {
    # quotas: "Exceed quota limit of resource(%s).", "The expected %s exceeds the quota limit.", free-flavor jobs
    **dict.fromkeys(("ModelArts.2815", "ModelArts.0118", "ModelArts.2833"), FailureClass.QUOTA_EXCEEDED),
    # capacity: "Insufficient resources. Please try later.", "No resources are available for the selected
    # specification.", "Resources sold out.", "Sorry, this flavor specification is sold out. Please try others."
    **dict.fromkeys(("ModelArts.3952", "ModelArts.3976", "ModelArts.4992", "ModelArts.6329"),
                    FailureClass.CAPACITY_STOCKOUT),
    # the platform's own errors: unknown, its database / IAM / OBS calls, internal, too many requests (past the
    # hook's retries), a status that changed under the call, a submission that failed
    **dict.fromkeys(("ModelArts.2950", "ModelArts.2952", "ModelArts.2953", "ModelArts.2958", "ModelArts.0010",
                     "ModelArts.2799", "ModelArts.2878", "ModelArts.4907"), FailureClass.INTERNAL_ERROR),
    # the request itself is wrong: flavor, engine, parameters, paths, image, pool, credentials, permissions, account
    **dict.fromkeys(("ModelArts.2763", "ModelArts.2781", "ModelArts.2793", "ModelArts.2840", "ModelArts.2780",
                     "ModelArts.2787", "ModelArts.2788", "ModelArts.0101", "ModelArts.0104", "ModelArts.2757",
                     "ModelArts.2758", "ModelArts.2791", "ModelArts.2806", "ModelArts.2810", "ModelArts.2837",
                     "ModelArts.2886", "ModelArts.2887", "ModelArts.2889", "ModelArts.2890", "ModelArts.0201",
                     "ModelArts.0202", "ModelArts.0203", "ModelArts.4504", "ModelArts.0206", "ModelArts.2784",
                     "ModelArts.2785", "ModelArts.0108", "ModelArts.4116", "ModelArts.4118", "ModelArts.2786",
                     "ModelArts.2775"), FailureClass.PERMANENT_USER_ERROR),
}
#: ``ModelArts.2751`` DuplicateTrainingJobName: a job of that name exists -- for the provider, whose job names are
#: per attempt, the attempt's own job created by a call whose reply was lost (the backend finds it).
MODELARTS_DUPLICATE_NAME = "ModelArts.2751"
#: ``ModelArts.2796`` NotAllowedToTerminate: the job is over already (a stop of an ended job).
MODELARTS_NOT_TERMINABLE = "ModelArts.2796"
#: A ModelArts run record's ``fault_scenario`` (``status.running_records[].recover_records[]``) and the failure it
#: stands for: a chip or node fault is faulty hardware (a job on new nodes); a hang is a hang.
MODELARTS_FAULT_SCENARIOS: Mapping[str, FailureClass] = {
    "chip_fault": FailureClass.NODE_UNHEALTHY,
    "node_fault": FailureClass.NODE_UNHEALTHY,
    "job_hanged": FailureClass.HANG,
}


def as_int(value: Any) -> int | None:
    """An integer from an int, an integral float, a numeric string or an int-valued enum; None otherwise.

    Booleans, NaN, infinities and text that is not a number give None, so odd input never raises.
    """
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return int(value) if math.isfinite(value) and value.is_integer() else None
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            return None
    number = getattr(value, "value", None)
    return number if isinstance(number, int) and not isinstance(number, bool) else None


def as_text(value: Any) -> str:
    """A message as stripped text: None -> ``""``, anything else through ``str()``."""
    if value is None:
        return ""
    return (value if isinstance(value, str) else str(value)).strip()


def as_epoch(value: Any) -> float | None:
    """Seconds since the epoch from a number, a ``datetime`` or an RFC 3339 text; None when unreadable."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, str):
        text = value.strip()
        match = re.fullmatch(r"(.*?T\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)?", text)
        if match is None:
            return None
        fraction = (match[2] or "")[:7]  # datetime reads microseconds; RFC 3339 may give nanoseconds
        zone = "+00:00" if match[3] in (None, "Z") else match[3]
        try:
            return datetime.fromisoformat(match[1] + fraction + zone).timestamp()
        except ValueError:
            return None
    return None


def enum_name(value: Any, by_number: Mapping[int, str] | None = None, prefix: str = "") -> str:
    """Normalise a proto-plus enum, a name or a number to a bare upper-case name."""
    if value is None:
        return ""
    name = getattr(value, "name", None)
    if isinstance(name, str):
        text = name
    elif isinstance(value, int) and by_number is not None:
        text = by_number.get(value, str(value))
    else:
        text = str(value)
    text = text.strip().upper()
    if prefix and text.startswith(prefix):
        text = text[len(prefix):]
    return text


def as_rpc_code(code: int | None) -> int | None:
    """A google.rpc code; HTTP statuses (>= 100) are mapped to the matching rpc code."""
    code = as_int(code)
    if code is None:
        return None
    if code >= 100:
        if code in HTTP_TO_RPC:
            return HTTP_TO_RPC[code]
        return RPC_INTERNAL if code >= 500 else RPC_INVALID_ARGUMENT
    return code


def vertex_state_name(state: Any) -> str:
    """``JobState`` as a bare name (``FAILED``), from a proto-plus enum, ``JOB_STATE_FAILED``, or 5."""
    return enum_name(state, dict(enumerate(VERTEX_STATES)), "JOB_STATE_")


def symptom_name(symptom: Any) -> str:
    """A Cloud TPU ``Symptom``'s type as a bare name, from a ``Symptom`` message or mapping, an enum, a name or a
    number."""
    kind = getattr(symptom, "symptom_type", symptom)
    if isinstance(symptom, Mapping):
        kind = symptom.get("symptom_type", symptom.get("symptomType"))
    return enum_name(kind, TPU_SYMPTOMS)
