"""The one attempt loop, as a pure state machine (no Airflow, no Google, no clock).

See :mod:`.machine` for the phases, events and actions. The Vertex AI operator and trigger, and later
the TPU operator, are shells around :func:`step`.
"""

from .machine import (
    STATE_SCHEMA_VERSION,
    TRANSITIONS,
    Action,
    EndAttempt,
    Ended,
    Event,
    Fail,
    IllegalTransition,
    JobFailed,
    JobSucceeded,
    MoveOff,
    Phase,
    RunState,
    Sleep,
    Started,
    StateSchemaTooNew,
    Step,
    Submit,
    SubmitFailed,
    Submitted,
    Succeed,
    Watch,
    WokeUp,
    state_from_json,
    state_to_json,
    step,
    stored_schema_version,
)

__all__ = [
    "STATE_SCHEMA_VERSION", "TRANSITIONS", "Action", "EndAttempt", "Ended", "Event", "Fail", "IllegalTransition",
    "JobFailed", "JobSucceeded", "MoveOff", "Phase", "RunState", "Sleep", "StateSchemaTooNew", "Started", "Step",
    "Submit", "SubmitFailed", "Submitted", "Succeed", "Watch", "WokeUp", "state_from_json", "state_to_json", "step",
    "stored_schema_version",
]
