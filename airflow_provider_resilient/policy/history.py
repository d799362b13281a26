"""JSON round-trips for the attempt history, and its one-line-per-attempt rendering.

The history must travel through trigger payloads, XCom and Airflow's task state store, all of which
take JSON only. The (de)serialisation is pydantic's ``TypeAdapter`` over the plain dataclasses of
:mod:`.decide` -- imported lazily, so importing the policy stays cheap.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any

from .records import Attempt

#: How :attr:`Attempt.ended_by` reads in the history.
ENDED_BY = {"clear": "ended by a Clear of the running task (no failure, no budget)",
            "maintenance": "moved off its node before a maintenance window (no failure, no budget)"}


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
        if attempt.ended_by:
            line += f" -> {ENDED_BY[attempt.ended_by]}"
        lines.append(line)
    return lines


def history_table(history: Any) -> list[str]:
    """The attempt history (objects or their JSON) as an aligned text table, one row per incident:
    attempt, resource, fallback, resumed-from step, what happened (class, exit code, node state, terminate
    reason) and the decision. Repeats of the same incident in a row (a wait looked at every poll) are one
    row with a count."""
    attempts = history_from_json(history) if history and isinstance(history[0], dict) else tuple(history or ())
    rows = [("attempt", "resource", "fallback", "resumed from", "what happened", "decision")]
    for attempt in attempts:
        resource = (attempt.resource_name or "(not created)").rsplit("/", 1)[-1]
        fallback = "-" if attempt.fallback_index < 0 else str(attempt.fallback_index + 1)
        step = "-" if attempt.resumed_from_step is None else f"step {attempt.resumed_from_step}"
        incidents = attempt.incidents or ()
        reissued = (f" (after {attempt.platform_restarts} platform re-issue"
                    f"{'s' if attempt.platform_restarts > 1 else ''})") if attempt.platform_restarts else ""
        if not incidents and not attempt.ended_by:
            rows.append((str(attempt.number), resource, fallback, step, ("succeeded" if attempt.ended_at else
                                                                         "running") + reissued, "-"))
        for index, incident in enumerate(incidents):
            f = incident.failure
            what = f.failure_class.value
            what += f" exit {f.exit_code}" if f.exit_code is not None else ""
            what += f" node {f.node_state}" if f.node_state else ""
            what += f" ({f.terminate_reason})" if f.terminate_reason and f.terminate_reason != "Error" else ""
            what += reissued if index == len(incidents) - 1 else ""
            row = (str(attempt.number), resource, fallback, step, what, incident.decision.action.value)
            previous = rows[-1]
            if previous[:4] == row[:4] and previous[4].split(" (x")[0] == what and previous[5] == row[5]:
                count = int(previous[4].rsplit(" (x", 1)[1][:-1]) + 1 if " (x" in previous[4] else 2
                rows[-1] = (*row[:4], f"{what} (x{count})", row[5])
            else:
                rows.append(row)
        if attempt.ended_by:
            rows.append((str(attempt.number), resource, fallback, step, ENDED_BY[attempt.ended_by], "new attempt"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]
