"""What this provider uses of Airflow that differs between the Airflow versions it supports: 3.1, 3.2 and 3.3.

Airflow 3.3 gives the provider two things the older versions lack, and each has a fallback here:

* **The task state store** (``context["task_state_store"]``: values that survive a deferral *and* a task retry).
  Without it (3.1, 3.2) :func:`run_state_store` gives :class:`XComStateStore`: the same keys kept as this task
  instance's XComs, which survive a deferral (Airflow keeps a deferred task's XComs when it resumes) but not a
  new try (Airflow clears them when a try starts). A retried task then finds its run from the platform instead:
  the jobs and nodes carry the task instance's labels, and the operators rebuild the run from them
  (``_recover``), so a retry still reattaches to a live job or node and never creates a second one.
* **``BaseTrigger.on_kill``** (a deferred task marked failed or success, or cleared, releases its job or node at
  once). Without it the triggerer only cancels the trigger, which releases nothing; the reconciler DAG
  (``airflow_provider_resilient.reconcile``) releases what no live task instance owns on its schedule.

Source: Airflow's release notes (https://airflow.apache.org/docs/apache-airflow/stable/release_notes.html) and
its "Deferrable Operators & Triggers" page
(https://airflow.apache.org/docs/apache-airflow/stable/authoring-and-scheduling/deferring.html).
"""

from __future__ import annotations

import json
from typing import Any

from airflow.triggers.base import BaseTrigger

try:  # Airflow 3.2+
    from airflow.sdk import conf
except ImportError:  # Airflow 3.1
    from airflow.configuration import conf  # type: ignore[no-redef,assignment,unused-ignore]
try:  # Airflow 3.2+: the task SDK's own exceptions
    from airflow.sdk.exceptions import (
        AirflowException,
        AirflowFailException,
        AirflowNotFoundException,
        TaskDeferred,
    )
except ImportError:  # Airflow 3.1
    from airflow.exceptions import (  # type: ignore[assignment,no-redef,attr-defined,unused-ignore]
        AirflowException,
        AirflowFailException,
        AirflowNotFoundException,
        TaskDeferred,
    )

#: Whether the triggerer calls a cancelled trigger's ``on_kill`` (Airflow 3.3 and later).
TRIGGER_ON_KILL: bool = callable(getattr(BaseTrigger, "on_kill", None))


def _airflow_minor() -> tuple[int, int]:
    from airflow import __version__

    major, minor = [*__version__.split("."), "0"][:2]
    return int(major), int("".join(c for c in minor if c.isdigit()) or 0)


#: Airflow's (major, minor) version.
AIRFLOW_MINOR: tuple[int, int] = _airflow_minor()
#: Whether the ModelArts trigger may run in this Airflow's triggerer (3.3 and later). On Airflow 3.1 its trigger
#: runner died ("Response read out of order!") with ModelArts triggers running beside the others (the stack tests'
#: graceful triggerer restart, twice, with the connection read in a worker thread and on the event loop alike),
#: taking every trigger of the process down; the cause is not found yet and 3.2 is untested. There the ModelArts
#: operator watches in the worker instead (``deferrable`` is taken as False, with a warning).
MODELARTS_TRIGGER: bool = AIRFLOW_MINOR >= (3, 3)

#: The prefix of the XCom keys :class:`XComStateStore` keeps its values under.
XCOM_PREFIX = "resilient_state."


class XComStateStore:
    """The task state store's ``get``/``set`` over this task instance's XComs, for Airflow versions without one.

    Values must be JSON-serialisable (as for the task state store). They survive a deferral, not a new try of the
    task: Airflow clears a task instance's XComs when a try starts, so a retried task rebuilds its run from the
    platform (the operators' ``_recover``). Keys are stored as ``resilient_state.<key>`` (visible on the task's
    XCom tab).

    Args:
        ti: the running task instance (``context["ti"]``): it has ``xcom_push`` and ``xcom_pull``.
    """

    def __init__(self, ti: Any) -> None:
        self.ti = ti
        self._cache: dict[str, Any] = {}

    def _map_indexes(self) -> int | None:
        index = getattr(self.ti, "map_index", None)
        return None if index is None or index < 0 else int(index)

    def get(self, key: str, default: Any = None) -> Any:
        """The value stored under ``key`` in this try (``default`` when none)."""
        if key in self._cache:
            return self._cache[key]
        value = self.ti.xcom_pull(task_ids=self.ti.task_id, key=XCOM_PREFIX + key, map_indexes=self._map_indexes())
        return default if value is None else value

    def set(self, key: str, value: Any) -> None:
        """Store ``value`` (JSON-serialisable) under ``key``.

        Raises:
            TypeError: ``value`` is not JSON-serialisable.
        """
        json.dumps(value)  # the same refusal the task state store gives, before anything is written
        self.ti.xcom_push(key=XCOM_PREFIX + key, value=value)
        self._cache[key] = value


def run_state_store(context: Any) -> Any:
    """Where the operators keep a run's state: the task state store (Airflow 3.3), else :class:`XComStateStore`
    over the task instance (Airflow 3.1, 3.2), else None (no task instance: ``execute`` called by hand)."""
    store = context.get("task_state_store")
    if store is not None:
        return store
    ti = context.get("ti")
    return XComStateStore(ti) if ti is not None and hasattr(ti, "xcom_push") else None


__all__ = [
    "TRIGGER_ON_KILL",
    "XCOM_PREFIX",
    "AirflowException",
    "AirflowFailException",
    "AirflowNotFoundException",
           "TaskDeferred",     "XComStateStore",
    "conf",
    "run_state_store",
]
