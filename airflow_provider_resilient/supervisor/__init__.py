"""The one attempt loop, as a pure state machine (no Airflow, no Google, no clock).

See :mod:`.machine` for the phases, events and actions. The Vertex AI operator and trigger, and later
the TPU operator, are shells around :func:`step`.
"""

from .machine import (
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
)

__all__ = [
    "TRANSITIONS", "Action", "EndAttempt", "Ended", "Event", "Fail", "IllegalTransition", "JobFailed", "JobSucceeded",
    "MoveOff", "Phase", "RunState", "Sleep", "Started", "Step",
    "Submit", "SubmitFailed", "Submitted", "Succeed", "Watch", "WokeUp", "state_from_json", "state_to_json", "step",
]
