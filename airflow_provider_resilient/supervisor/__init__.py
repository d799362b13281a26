"""The one attempt loop, as a pure state machine (no Airflow, no Google, no clock).

See :mod:`.machine` for the phases and the transitions, :mod:`.events` for the events and actions, :mod:`.state`
for the run's state and its stored form. The Vertex AI and TPU operators and their triggers are shells around
:func:`step`.
"""

from .events import (
    Action,
    EndAttempt,
    Ended,
    Event,
    Fail,
    JobFailed,
    JobSucceeded,
    MoveOff,
    Sleep,
    Started,
    Submit,
    SubmitFailed,
    Submitted,
    Succeed,
    Watch,
    WokeUp,
)
from .machine import TRANSITIONS, IllegalTransition, Step, step
from .state import (
    STATE_SCHEMA_VERSION,
    Phase,
    RunState,
    StateSchemaTooNew,
    state_from_json,
    state_to_json,
    stored_schema_version,
)

__all__ = [
    "STATE_SCHEMA_VERSION",
    "TRANSITIONS",
    "Action",
    "EndAttempt",
    "Ended",
    "Event",
    "Fail",
    "IllegalTransition",
    "JobFailed",
    "JobSucceeded",
    "MoveOff",
    "Phase",
    "RunState",
    "Sleep",
    "Started",
    "StateSchemaTooNew",
    "Step",
    "Submit",
    "SubmitFailed",
    "Submitted",
    "Succeed",
    "Watch",
    "WokeUp",
    "state_from_json",
    "state_to_json",
    "step",
    "stored_schema_version",
]
