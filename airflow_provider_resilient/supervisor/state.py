"""A run's state (:class:`RunState`: its phase, every attempt, the command to repeat, the observer's memory) and its
stored form: JSON in Airflow's task state store, versioned (:data:`STATE_SCHEMA_VERSION`), older records upgraded
on read and newer ones refused.

The shells persist the state after every step of :func:`.machine.step` (:func:`state_to_json`) and read it back on a
task retry, a deferral's return or a Clear (:func:`state_from_json`). Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from ..policy import Attempt, history_from_json, history_to_json
from .events import Submit
from .observe import WatchMemory


class Phase(StrEnum):
    """Where a run is. The values are what :func:`state_to_json` writes (unchanged since the first release,
    so a stored state of any version reads back)."""

    NEW = "new"
    SUBMITTING = "submitting"
    RUNNING = "running"
    SLEEPING = "sleeping"
    ENDING = "ending"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


@dataclass(frozen=True)
class RunState:
    """Everything the loop knows; JSON through :func:`state_to_json`.

    Attributes:
        phase: new, submitting, running, sleeping, ending (the attempt's resource is being ended: a person
            cleared the task, or it failed and the next attempt waits for it), succeeded, failed.
        history: every attempt of every segment, oldest first.
        segment_start: index in ``history`` where the current segment's attempts begin.
        job_name: the job being watched (or the last one).
        next_submit: after a sleep, the Submit to issue (None: watch ``job_name`` again); while ending, the
            Submit that follows once the attempt has ended (None: the ending is a Clear's).
        wake_at: when the current sleep ends (or, while ending, the backoff's end), seconds since the epoch.
        watch: what the observer (:mod:`.observe`) remembers of the attempt being watched: progress
            clocks, audit entries seen. The shells update it after every look (:meth:`observed`).
        demoted: checkpoint steps that looked complete but would not load (the policy's rule,
            :func:`..policy.demotion.checkpoint_to_demote`): never resumed from again, whatever the segment.
    """

    phase: Phase = Phase.NEW
    history: tuple[Attempt, ...] = ()
    segment_start: int = 0
    job_name: str | None = None
    next_submit: Submit | None = None
    wake_at: float | None = None
    watch: WatchMemory = field(default_factory=WatchMemory)
    demoted: tuple[int, ...] = ()

    def observed(self, memory: WatchMemory) -> RunState:
        """This state with the observer's new ``memory`` (after a look at the running attempt)."""
        return replace(self, watch=memory)

    @property
    def segment(self) -> tuple[Attempt, ...]:
        return self.history[self.segment_start:]

    @property
    def pending_attempt(self) -> int | None:
        """The attempt number being submitted (phase submitting), for finding it by its labels."""
        return self.next_submit.attempt if self.phase == Phase.SUBMITTING and self.next_submit else None

# ------------------------------------------------------------------------------------------ JSON


#: The version of the stored form of a run (:func:`state_to_json`), written with every record as ``schema_version``.
#: 1: the form of the releases before the field existed (no ``schema_version``); 2: the same fields, versioned.
#: :func:`state_from_json` reads every version up to this one, upgrading older records (:data:`STATE_UPGRADES`), and
#: refuses a newer one (:class:`StateSchemaTooNew`): a run stored by a newer release of the provider may mean what
#: this release cannot know. A change of the stored form raises this number and adds its upgrade.
STATE_SCHEMA_VERSION = 2


class StateSchemaTooNew(ValueError):
    """A stored run written by a newer release of the provider (its ``schema_version`` is above
    :data:`STATE_SCHEMA_VERSION`). The fix is to upgrade the provider where the task runs (every worker and
    triggerer), then retry or clear the task; the stored run is left as it is."""

    def __init__(self, version: int) -> None:
        self.version = version
        super().__init__(
            f"the stored run has schema_version {version}, written by a newer release of airflow-provider-resilient; "
            f"this release reads versions up to {STATE_SCHEMA_VERSION}: upgrade the provider "
            "(pip install -U airflow-provider-resilient) on every Airflow worker and triggerer, then retry the task")


def _upgrade_1_to_2(data: dict[str, Any]) -> dict[str, Any]:
    """Version 2 holds the fields of version 1 unchanged and adds ``schema_version``."""
    return {**data, "schema_version": 2}


#: ``{version: upgrade}``: each turns a record of ``version`` into one of ``version + 1`` (pure, on the JSON data).
STATE_UPGRADES: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {1: _upgrade_1_to_2}


def stored_schema_version(data: dict[str, Any]) -> int:
    """The ``schema_version`` of a stored record (1 when it has none: written before versions existed).

    Raises:
        ValueError: the version is not a whole number >= 1.
        StateSchemaTooNew: it is above :data:`STATE_SCHEMA_VERSION`.
    """
    version = data.get("schema_version", 1)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ValueError(f"schema_version {version!r} is not a version (a whole number >= 1)")
    if version > STATE_SCHEMA_VERSION:
        raise StateSchemaTooNew(version)
    return version


def upgrade_state_json(data: dict[str, Any]) -> dict[str, Any]:
    """A stored record of any version up to :data:`STATE_SCHEMA_VERSION`, brought to the current version.

    Raises:
        ValueError: an unreadable ``schema_version``.
        StateSchemaTooNew: a version above :data:`STATE_SCHEMA_VERSION`.
    """
    version = stored_schema_version(data)
    while version < STATE_SCHEMA_VERSION:
        data = STATE_UPGRADES[version](data)
        version += 1
    return data


def state_to_json(state: RunState) -> dict[str, Any]:
    """``state`` as JSON-compatible data without None values (Airflow's task state store takes no None), with
    ``schema_version`` :data:`STATE_SCHEMA_VERSION`."""
    data: dict[str, Any] = {"schema_version": STATE_SCHEMA_VERSION, "phase": Phase(state.phase).value,
                            "history": history_to_json(state.history), "segment_start": state.segment_start}
    if state.job_name:
        data["job_name"] = state.job_name
    if state.next_submit:
        data["next_submit"] = {k: v for k, v in vars(state.next_submit).items() if v is not None}
    if state.wake_at is not None:
        data["wake_at"] = state.wake_at
    if watch := state.watch.to_json():
        data["watch"] = watch
    if state.demoted:
        data["demoted"] = list(state.demoted)
    return data


def state_from_json(data: Any) -> RunState:
    """The inverse of :func:`state_to_json`; empty data gives a new state. A record of an earlier schema version
    (one without ``schema_version`` is version 1) is upgraded first (:func:`upgrade_state_json`).

    Raises:
        StateSchemaTooNew: the record was written by a newer release of the provider (a ``ValueError``).
        ValueError: naming what is wrong when ``data`` is not a state written by :func:`state_to_json`.
    """
    if not data:
        return RunState()
    if not isinstance(data, dict):
        raise ValueError(f"not a supervisor state: {str(data)[:200]}")
    data = upgrade_state_json(data)  # first: a newer release's record is refused as such, whatever its fields
    if "phase" not in data:
        raise ValueError(f"not a supervisor state: {str(data)[:200]}")
    try:
        phase = Phase(data["phase"])
    except ValueError:
        raise ValueError(f"unknown phase {data['phase']!r} (one of {', '.join(p.value for p in Phase)})") from None
    submit = data.get("next_submit")
    return RunState(
        phase=phase,
        history=history_from_json(data.get("history") or []),
        segment_start=int(data.get("segment_start", 0)),
        job_name=data.get("job_name"),
        next_submit=Submit(**submit) if submit else None,
        wake_at=data.get("wake_at"),
        watch=WatchMemory.from_json(data.get("watch")),
        demoted=tuple(int(s) for s in data.get("demoted") or ()),
    )


__all__ = [
    "STATE_SCHEMA_VERSION",
    "STATE_UPGRADES",
    "Phase",
    "RunState",
    "StateSchemaTooNew",
    "state_from_json",
    "state_to_json",
    "stored_schema_version",
    "upgrade_state_json",
]
