"""JSON round-trips for the attempt history, and its one-line-per-attempt rendering.

The history must travel through trigger payloads, XCom and Airflow's task state store, all of which
take JSON only. The (de)serialisation is pydantic's ``TypeAdapter`` over the plain dataclasses of
:mod:`.decide` -- imported lazily, so importing the policy stays cheap.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any

from .decide import Attempt


@cache
def _adapter() -> Any:
    from pydantic import TypeAdapter

    return TypeAdapter(tuple[Attempt, ...])


def history_to_json(history: Sequence[Attempt]) -> list[dict[str, Any]]:
    """The history as JSON-compatible data (lists, dicts, str, int, float, bool).

    Fields that are None are left out (Airflow's task state store takes no None); they come back as
    their defaults in :func:`history_from_json`.
    """
    data: list[dict[str, Any]] = _adapter().dump_python(tuple(history), mode="json", exclude_none=True)
    return data


def history_from_json(data: Any) -> tuple[Attempt, ...]:
    """The inverse of :func:`history_to_json`.

    Raises:
        ValueError: (pydantic's ``ValidationError``) naming the bad field when ``data`` is not a history.
    """
    if not data:
        return ()
    history: tuple[Attempt, ...] = _adapter().validate_python(data)
    return history


def format_history(history: Sequence[Attempt]) -> list[str]:
    """One readable line per attempt, e.g.
    ``attempt 2 customJobs/123 resumed from step 400 -> transient_crash, exit 139 -> resubmit (rule
    transient-crash, budget transient_crash 1/3)``."""
    lines = []
    for attempt in history:
        where = attempt.resource_name or "(not created)"
        resumed = (f"resumed from step {attempt.resumed_from_step}" if attempt.resumed_from_step is not None
                   else "from scratch")
        line = f"attempt {attempt.number} {where} {resumed}"
        if attempt.fallback_index >= 0:
            line += f" on fallback {attempt.fallback_index + 1}"
        for incident in attempt.incidents:
            d = incident.decision
            budget = f", budget {d.budget} {d.budget_used}/{d.budget_limit}" if d.budget and d.budget_limit else ""
            line += (f" -> {incident.failure.failure_class.value}"
                     f"{f' exit {incident.failure.exit_code}' if incident.failure.exit_code is not None else ''}"
                     f" -> {d.action.value} (rule {d.rule or '-'}{budget})")
        lines.append(line)
    return lines
