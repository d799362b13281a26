"""A run's state in Airflow's task state store: the supervisor's :class:`~..supervisor.RunState` and the step
reports of the goodput ledger, kept after every step so that a deferral, a task retry or a Clear continues the run.

One :class:`RunStore` per operator (made in its ``__init__``), holding what this task process saw: the newest state
it saved and the step reports noted so far. The store is Airflow's (``task_state_store`` of the task SDK,
:func:`~..compat.run_state_store`): none outside a task (a unit test's context without one), and then the run
lives only in this process.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ..compat import AirflowException, AirflowFailException, run_state_store
from ..supervisor import RunState, StateSchemaTooNew, state_from_json, state_to_json
from ..supervisor.state import STATE_SCHEMA_VERSION, stored_schema_version

#: Task-state-store key of the step reports seen so far (the newest :data:`MAX_STEP_REPORTS`).
STEPS_KEY = "resilient_step_reports"
#: Task-state-store key of the spare node the run holds (:class:`~..supervisor.spare.Spare`; absent: none) and what
#: its spares have cost so far (``held_seconds``, ``taken``, ``released``).
SPARE_KEY = "resilient_spare"
MAX_STEP_REPORTS = 2000


def steps_to_json(reports: Sequence[Any]) -> dict[str, Any]:
    """Step reports (``goodput.StepReport``) as the task state store keeps them (key :data:`STEPS_KEY`):
    ``{"schema_version": 2, "reports": [[time, step], ...]}`` (the run's schema version,
    :data:`~..supervisor.STATE_SCHEMA_VERSION`); a process's start report is ``[time, step, 1]``."""
    return {"schema_version": STATE_SCHEMA_VERSION,
            "reports": [[r.time, r.step, 1] if r.start else [r.time, r.step] for r in reports]}


def steps_from_json(data: Any) -> list[Any]:
    """The inverse of :func:`steps_to_json`; also reads version 1, a bare ``[[time, step], ...]`` list. None or
    empty: no reports.

    Raises:
        StateSchemaTooNew: written by a newer release of the provider.
        TypeError, ValueError: not step reports.
    """
    from ..goodput import StepReport

    if not data:
        return []
    if isinstance(data, dict):
        stored_schema_version(data)
        data = data.get("reports") or []
    return [StepReport(float(item[0]), int(item[1]), bool(item[2]) if len(item) > 2 else False) for item in data]


def first_try_after_clear(context: Any, retries: int | None) -> bool:
    """Whether this try is the first one after a person cleared the task (not an Airflow retry, not the first
    try). Airflow 3.3 tells a try nothing else about why it started; its own rule
    (``RuntimeTaskInstance.get_first_reschedule_date``) is that the first try since the last Clear is number
    ``max_tries - retries + 1``: a Clear raises ``max_tries`` to ``try_number + retries``, a retry leaves it.

    Args:
        context: the task's context (its ``ti`` gives ``try_number`` and ``max_tries``).
        retries: the operator's ``retries``.
    """
    ti = context.get("ti")
    try_number, max_tries = getattr(ti, "try_number", None), getattr(ti, "max_tries", None)
    if not isinstance(try_number, int) or not isinstance(max_tries, int) or try_number <= 1:
        return False
    return try_number == max_tries - (retries or 0) + 1


class RunStore:
    """One task process's view of its run in the task state store.

    Args:
        state_key: the store key of the run state (the operator's ``STATE_KEY``).
        steps_key: the store key of the step reports.
        max_reports: how many of the newest step reports are kept (older ones only cost the ledger detail).

    Attributes:
        last: the newest run state this process loaded or saved (None before the first load).
    """

    def __init__(self, state_key: str, steps_key: str = STEPS_KEY, max_reports: int = MAX_STEP_REPORTS) -> None:
        self.state_key = state_key
        self.steps_key = steps_key
        self.max_reports = max_reports
        self.last: RunState | None = None
        self._steps: list[Any] | None = None  # None: not read from the store yet
        self._stored = 0  # how many of them the store holds (-1: an older form, written anew at the next save)
        self._spare: Any = None  # without a task state store: the spare this process holds

    @staticmethod
    def available(context: Any) -> bool:
        """Whether ``context`` has a task state store (else a retried task finds its run only from the
        platform)."""
        return run_state_store(context) is not None

    def load(self, context: Any) -> RunState:
        """The stored run (a new one when nothing is stored), with the step reports of earlier processes; without a
        task state store, the newest run of this process.

        Raises:
            AirflowException: the stored state was written by a newer release (a retry on an upgraded worker
                reads it: not a permanent failure).
            AirflowFailException: the stored state is unreadable.
        """
        store = run_state_store(context)
        if store is None:
            return self.last or RunState()
        self._load_steps(store)
        try:
            self.last = state_from_json(store.get(self.state_key))
        except StateSchemaTooNew as exc:
            raise AirflowException(f"{self.state_key!r}: {exc}") from exc
        except ValueError as exc:
            raise AirflowFailException(f"the stored state under {self.state_key!r} is unreadable: {exc}") from exc
        return self.last

    def save(self, context: Any, state: RunState) -> None:
        """Keep ``state`` (and the step reports noted since the last save, when there are new ones: each write is
        a call to Airflow's API server)."""
        self.last = state
        store = run_state_store(context)
        if store is None:
            return
        store.set(self.state_key, state_to_json(state))
        steps = self.steps
        if len(steps) != self._stored:
            store.set(self.steps_key, steps_to_json(steps[-self.max_reports:]))
            self._stored = len(steps)

    def spare(self, context: Any) -> Any:
        """The spare node the run holds (:class:`~..supervisor.spare.Spare`), or None."""
        from ..supervisor.spare import Spare

        return Spare.from_json(self._spare_record(context).get("spare"))

    def spare_costs(self, context: Any) -> dict[str, Any]:
        """What the run's spare nodes cost so far: ``{"held_seconds": s, "taken": n, "released": n}`` (seconds from
        each spare's request to its hand-over or its deletion request: an upper bound of the time it was billed,
        from READY on, per worker VM)."""
        record = self._spare_record(context)
        return {"held_seconds": float(record.get("held_seconds", 0.0)), "taken": int(record.get("taken", 0)),
                "released": int(record.get("released", 0))}

    def keep_spare(self, context: Any, spare: Any, *, ended: str | None = None, now: float | None = None) -> None:
        """Remember ``spare`` (a :class:`~..supervisor.spare.Spare`; None: the run holds none). ``ended``:
        ``"taken"`` or ``"released"`` -- the spare held until now ended so, at ``now`` (epoch seconds): its time is
        added to :meth:`spare_costs`."""
        record = self._spare_record(context)
        from ..supervisor.spare import Spare

        held = Spare.from_json(record.get("spare"))
        if ended in ("taken", "released") and held is not None and now is not None:
            record["held_seconds"] = float(record.get("held_seconds", 0.0)) + max(0.0, now - held.created_at)
            record[ended] = int(record.get(ended, 0)) + 1
        record["spare"] = spare.to_json() if spare is not None else {}
        self._spare = record
        store = run_state_store(context)
        if store is not None:
            store.set(SPARE_KEY, record)

    def _spare_record(self, context: Any) -> dict[str, Any]:
        store = run_state_store(context)
        record = self._spare if store is None else store.get(SPARE_KEY)
        return dict(record) if isinstance(record, dict) else {}

    @property
    def steps(self) -> list[Any]:
        """The step reports (``goodput.StepReport``) of this run noted so far, oldest first (a copy)."""
        return list(self._steps or [])

    def note(self, time_: float, step_: int, start: bool = False) -> None:
        """Note that the workload was at ``step_`` at ``time_`` (seconds since the epoch); ``start``: a process of
        it started then, resuming from ``step_``."""
        from ..goodput import StepReport

        self._steps = [*(self._steps or []), StepReport(time_, step_, start)]

    def merge(self, reports: Iterable[Any]) -> None:
        """Add ``reports`` (``goodput.StepReport``) to those noted, in time order."""
        self._steps = sorted([*(self._steps or []), *reports], key=lambda r: r.time)

    def note_reported(self, reported: Any, started_at: float | None) -> int:
        """Note the step reports a trigger's event carries (``[[time, step], ...]``, ``[time, step, 1]`` for a
        process's start); returns how many were noted. A step equal to the last one noted in the same attempt
        (``started_at``: its start, epoch seconds) is not noted again, unless it is a process's start: it is no new
        progress (a new trigger records the step it first sees, often the one its
        predecessor saw last), and the ledger would count the time between the two sightings as a stall. An
        unreadable report only costs the ledger a point."""
        seen = self.steps
        last = (seen[-1].time, seen[-1].step) if seen else None
        noted = 0
        for item in reported or ():
            try:
                at, step_ = float(item[0]), int(item[1])
                start = len(item) > 2 and bool(item[2])
            except (TypeError, ValueError, IndexError):
                continue
            if not start and last is not None and last[1] == step_ and (started_at is None or last[0] >= started_at):
                continue
            self.note(at, step_, start)
            last, noted = (at, step_), noted + 1
        return noted

    def _load_steps(self, store: Any) -> None:
        """Bring back the step reports of earlier processes of this task (deferrals, task retries), once."""
        if self._steps is not None:
            return
        stored = store.get(self.steps_key)
        try:
            saved = steps_from_json(stored)
        except StateSchemaTooNew as exc:
            raise AirflowException(f"{self.steps_key!r}: {exc}") from exc
        except (TypeError, ValueError):
            saved = []  # unreadable reports only cost the ledger its detail
        self._steps = saved
        current = not stored or (isinstance(stored, dict) and stored.get("schema_version") == STATE_SCHEMA_VERSION)
        self._stored = len(saved) if current else -1


__all__ = ["MAX_STEP_REPORTS", "SPARE_KEY", "STEPS_KEY", "RunStore", "first_try_after_clear", "steps_from_json",
           "steps_to_json"]
