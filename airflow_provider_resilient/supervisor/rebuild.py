"""A run rebuilt from the platform when the task state store holds none (Airflow 3.1 and 3.2 have no task state
store; on 3.3 a store emptied by ``[state_store] clear_on_success``, its retention, or its REST API): the backend
lists the task instance's resources by their labels, this pure rule says what run they make. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..policy import Attempt
from .state import Phase, RunState


@dataclass(frozen=True)
class Rebuilt:
    """:func:`rebuilt_run`'s answer: the run, what it does next (for the log), and the attempt number known to
    have no resource yet (the next one to create: its ``find`` need not list again; None: not known)."""

    state: RunState
    then: str
    known_absent: int | None = None


def rebuilt_run(history: Sequence[Attempt], newest: str, *, live: bool, succeeded: bool = False,
                rerun_after_success: bool = False) -> Rebuilt:
    """The run of the attempts found (``history``: one per attempt number up to the newest, those without a
    resource bare), the newest on resource ``newest``: live -> RUNNING (watched, never created again); ended
    successfully -> SUCCEEDED (its result; with ``rerun_after_success`` a new attempt numbered after it); ended
    otherwise -> FAILED (a new attempt, fresh budgets, resuming from the latest complete checkpoint, as after a
    Clear). The rebuilt attempts carry no incidents, so budgets start afresh."""
    last = history[-1].number if history else 1
    if live:
        return Rebuilt(RunState(phase=Phase.RUNNING, history=tuple(history), job_name=newest),
                       "watching it instead of creating another")
    if succeeded:
        then = (f"rerun_after_success: training again as attempt {last + 1}" if rerun_after_success else
                "returning its result instead of creating another")
        return Rebuilt(RunState(phase=Phase.SUCCEEDED, history=tuple(history), job_name=newest), then,
                       last + 1 if rerun_after_success else None)
    return Rebuilt(RunState(phase=Phase.FAILED, history=tuple(history), job_name=newest),
                   f"resuming as attempt {last + 1}", last + 1)


__all__ = ["Rebuilt", "rebuilt_run"]
