"""What a run reports besides its result: the attempt history and the goodput ledger (XCom and the task log), the
checkpoint-interval advice, and the workload's own goodput events -- the inputs of :mod:`..goodput`, gathered by
the operators' shell.

Every function here only reads (checkpoint listings, Cloud Logging) and reports; a read that fails is a warning,
never a failed task: the run's outcome stands.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..policy import history_table, history_to_json
from ..supervisor import RunState
from .run_store import RunStore

#: How many of the newest complete checkpoints the run summary reads (one listing each): their steps join the
#: goodput ledger's step reports; the newest :data:`ADVICE_SAVES` of them judge the checkpoint interval.
LEDGER_SAVES = 100
ADVICE_SAVES = 20


def checkpoint_saves(location: str | None, marker: str | None, log: logging.Logger | Any) -> list[Any] | None:
    """The newest :data:`LEDGER_SAVES` complete checkpoints under ``location`` (``checkpoints.CheckpointSave``,
    oldest first), or None without a location or when they cannot be listed (logged)."""
    if not location:
        return None
    from ..checkpoints import list_checkpoint_saves

    try:
        return list_checkpoint_saves(location, marker=marker, max_saves=LEDGER_SAVES)
    except Exception as exc:
        log.warning("Could not list the checkpoints for the ledger and the interval advice: %s", exc)
        return None


def note_saves(store: RunStore, state: RunState, saves: Sequence[Any]) -> None:
    """Note the run's complete checkpoints (``checkpoints.CheckpointSave``) as step reports for the goodput
    ledger, before a new attempt starts: a workload that keeps only its newest saves (Orbax ``max_to_keep``, a
    step-folder rotation) deletes the proof of an earlier attempt's progress, and the ledger would count that
    attempt's work as lost. Saves from before the run's first start and steps already noted at that time are left
    out."""
    from ..goodput import StepReport

    started = [a.started_at for a in state.history if a.started_at is not None]
    if not started:
        return
    seen = {(r.time, r.step) for r in store.steps}
    new = [StepReport(s.completed_at, s.step) for s in saves
           if s.completed_at >= min(started) and (s.completed_at, s.step) not in seen]
    if new:
        store.merge(new)


def handed_interval(state: RunState, attempt: int, saves: Sequence[Any] | None, *, cap: float | None, now: float,
                    log: logging.Logger | Any, steps: Sequence[Any] = ()) -> float | None:
    """The checkpoint interval (seconds) handed to attempt ``attempt``: :func:`~..goodput.handed_interval` of the
    run's history, ``saves`` (its newest complete checkpoints) and ``steps`` (its step reports: which interruptions
    a save covered), at most ``cap``; logged with why. None for a first attempt, before an interruption, or when the
    saves could not be listed."""
    if attempt <= 1 or not state.history or not saves:
        return None
    from ..goodput import advise_checkpointing
    from ..goodput import handed_interval as interval_of
    from ..goodput.advice import losing_mtbf

    advice = advise_checkpointing(state.history, saves[-ADVICE_SAVES:], end=now, steps=steps)
    interval = interval_of(advice, cap)
    if interval is not None:
        log.info("Attempt %d: checkpoint every %.3g s (RESILIENT_CHECKPOINT_INTERVAL_SECONDS) -- Young/Daly for "
                 "saves of %.3g s and %.3g s between failures that lose progress: %.3g s running, %d interruption(s), "
                 "%d covered by a save, and the %.3g s interval kept counted as one more failure's worth", attempt,
                 interval, advice.cost or 0.0, losing_mtbf(advice) or 0.0, advice.running, advice.interruptions,
                 advice.covered, advice.interval or 0.0)
    return interval


def log_history(state: RunState, log: logging.Logger | Any) -> None:
    """The attempt history as one aligned table block in the task log (readable in the UI's log view)."""
    log.info("Attempt history:\n%s", "\n".join(history_table(state.history)))


@dataclass(frozen=True)
class WorkloadEvents:
    """Where the workload records its own goodput events with ml-goodput-measurement: the operator's
    ``project_id``, ``goodput_job_name``, ``goodput_logger_name``, and the connection to read them through."""

    project_id: str
    job_name: str
    logger_name: str | None
    gcp_conn_id: str | None
    impersonation_chain: Any = None


def push_summary(context: Any, state: RunState, steps: Sequence[Any], saves: Sequence[Any] | None, *, now: float,
                 log: logging.Logger | Any, workload: WorkloadEvents | None = None,
                 extra: Mapping[str, Any] | None = None) -> None:
    """Push the attempt history (XCom ``attempt_history``) and the run's goodput ledger with the
    checkpoint-interval advice (XCom ``goodput``), and log both as the run's summary.

    Args:
        context: the task's context (its ``ti`` pushes).
        state: the run.
        steps: its step reports (``goodput.StepReport``).
        saves: its newest complete checkpoints (:func:`checkpoint_saves`; None: not listed, no advice).
        now: the run's end (epoch seconds).
        workload: where the workload records its own goodput events (:func:`workload_goodput` reads them), when it
            does.
        extra: more figures of the run, added to the summary as they are (the TPU operator's spare nodes).
    """
    from ..goodput import advise_checkpointing, goodput_ledger

    context["ti"].xcom_push(key="attempt_history", value=history_to_json(state.history))
    if not any(a.started_at is not None for a in state.history):
        return
    ledger = goodput_ledger(state.history, steps, end=now, saves=saves or ())
    summary: dict[str, Any] = dict(ledger.as_dict())
    log.info("Goodput: %s", ledger.summary())
    log.info("Badput as ml-goodput-measurement names it (%% of the run): %s", ", ".join(
        f"{kind} {share:.1f}" for kind, share in ledger.badput_breakdown().items()))
    if saves is not None:
        advice = advise_checkpointing(state.history, saves[-ADVICE_SAVES:], end=now, steps=steps)
        log.info("Checkpointing: %s", advice.summary())
        summary["checkpoint_advice"] = {**advice.as_dict(), "summary": advice.summary()}
    if workload is not None:
        summary.update(workload_goodput(workload, log))
    summary.update(extra or {})
    context["ti"].xcom_push(key="goodput", value=summary)


def workload_goodput(events: WorkloadEvents, log: logging.Logger | Any) -> dict[str, Any]:
    """The workload's own goodput events (``goodput_job_name`` of the operator), read with
    ml-goodput-measurement's calculator through the connection's Cloud Logging client: ``{"workload_events":
    {...}}`` (logged), or ``{"workload_events_error": "..."}`` when they cannot be read (a warning: the estimate
    from checkpoints stands)."""
    from ..goodput.events import read_workload_goodput
    from ..hooks.base import GoogleApiHook
    from ..logging_clients import logging_client

    job_name = events.job_name
    try:
        hook = GoogleApiHook(events.gcp_conn_id, events.impersonation_chain)
        client = logging_client(events.project_id, credentials=hook.credentials, emulator=hook.emulator)
        figures = read_workload_goodput(client, job_name, events.logger_name)
    except Exception as exc:  # the run's outcome stands; only this report is missing
        log.warning("Could not read the workload's goodput events (goodput_job_name %r): %s; the goodput above is "
                    "estimated from checkpoints", job_name, exc)
        return {"workload_events_error": f"{type(exc).__name__}: {exc}"}
    log.info("Goodput from the workload's ml-goodput-measurement events: %s", figures.summary())
    return {"workload_events": figures.as_dict()}


__all__ = [
    "ADVICE_SAVES",
    "LEDGER_SAVES",
    "WorkloadEvents",
    "checkpoint_saves",
    "handed_interval",
    "log_history",
    "note_saves",
    "push_summary",
    "workload_goodput",
]
