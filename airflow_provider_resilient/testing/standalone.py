"""Run a provider operator outside a scheduler -- in a script, a notebook or a benchmark -- against the
emulator or a real project: an in-memory task state store and task instance for ``operator.execute``.

    from airflow_provider_resilient.testing.standalone import standalone_context

    context = standalone_context("manual-1")
    result = ResilientCustomJobOperator(task_id="train", ...).execute(context)
    context["ti"].xcom["goodput"]          # what the operator pushed

Nothing here survives the process: a real task keeps its state in Airflow's task state store.
"""

from __future__ import annotations

from typing import Any


class MemoryTaskStateStore(dict[str, Any]):
    """Shaped like the task state store accessor of Airflow's context (``get`` / ``set`` JSON values)."""

    def set(self, key: str, value: Any, **_: Any) -> None:
        self[key] = value


class RecordingTaskInstance:
    """The parts of a task instance the operators use: ``map_index`` and ``xcom_push`` (kept in ``xcom``)."""

    def __init__(self, map_index: int = -1) -> None:
        self.map_index = map_index
        self.xcom: dict[str, Any] = {}

    def xcom_push(self, key: str, value: Any) -> None:
        self.xcom[key] = value


def standalone_context(run_id: str, *, store: MemoryTaskStateStore | None = None,
                       map_index: int = -1) -> dict[str, Any]:
    """A context for ``operator.execute``: ``run_id`` (it goes into the jobs' labels, so two runs with the
    same id reattach to each other's jobs), a fresh or given task state store, a recording task instance."""
    return {"run_id": run_id, "task_state_store": store if store is not None else MemoryTaskStateStore(),
            "ti": RecordingTaskInstance(map_index)}
