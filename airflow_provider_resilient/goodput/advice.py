"""Checkpoint-interval advice: whether a run checkpoints too rarely or too often, judged from its own observed saves
and interruptions against Young/Daly's optimum (:func:`.ceiling.young_daly_interval`), and the interval handed to
the next attempt (``RESILIENT_CHECKPOINT_INTERVAL_SECONDS``).

Input: the attempt history (:mod:`..policy.decide`: running time, interruptions -> the MTBF) and the complete
checkpoints found (:func:`..checkpoints.list_checkpoint_saves`: the interval and the save cost C). Pure: no clock,
no I/O.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from ..checkpoints.formats import CheckpointSave
from ..policy import Attempt, DecisionAction, FailureClass
from .ceiling import young_daly_interval
from .ledger import attempt_end

#: Failures that interrupt running training and so count towards the MTBF (not capacity, quota, queue,
#: preflight or permanent errors, which stop a run from starting or end it for good).
INTERRUPTIONS = frozenset({FailureClass.TRANSIENT_CRASH, FailureClass.INTERNAL_ERROR, FailureClass.WORKER_FAILURE,
                           FailureClass.MAINTENANCE_EVENT, FailureClass.PREEMPTION, FailureClass.NODE_UNHEALTHY,
                           FailureClass.HANG, FailureClass.UNKNOWN})
#: Seconds: "at least every four hours" (Vertex AI, "Understand the custom training service",
#: https://cloud.google.com/vertex-ai/docs/training/understanding-training-service).
SEED_000_INTERVAL = 4 * 3600.0
#: Seconds: about every hour (Cloud TPU, "Manage maintenance events with Cloud TPU Pods",
#: https://cloud.google.com/tpu/docs/maintenance-events).
SEED_002_INTERVAL = 3600.0
#: The least save cost the advice assumes (seconds): a save whose files all carry one time shows none.
COST_FLOOR = 1e-3


@dataclass(frozen=True)
class CheckpointAdvice:
    """Whether a run checkpoints too rarely or too often, from what was observed.

    Attributes (seconds; None when not observed):
        interval: median time between consecutive saves.
        cost: median visible write time of one save (a lower bound of C).
        mtbf: running time / interruptions; None without an interruption.
        running: the attempts' running time the MTBF is taken over.
        interruptions: failures counted (:data:`INTERRUPTIONS`).
        optimum: Young/Daly ``sqrt(2 C MTBF)``; with no interruption, the optimum for an MTBF of the
            running time (a lower bound: failures are rarer than that).
        verdict: "too rarely", "too often", "about right", "not judged: no interruption yet" (only
            "too often" can be told without one), or "unknown" (fewer than two saves seen).
    """

    interval: float | None
    cost: float | None
    mtbf: float | None
    running: float
    interruptions: int
    optimum: float | None
    verdict: str

    def as_dict(self) -> dict[str, float | int | str | None]:
        data: dict[str, float | int | str | None] = asdict(self)
        data["seed_000_interval"] = SEED_000_INTERVAL
        data["seed_002_interval"] = SEED_002_INTERVAL
        return data

    def summary(self) -> str:
        """One line for the run summary: the observed interval against Young/Daly and Google's rules of thumb."""
        thumb = (f"Vertex AI: at least every {SEED_000_INTERVAL:.0f} s; Cloud TPU: about every "
                 f"{SEED_002_INTERVAL:.0f} s")
        if self.interval is None or self.cost is None or self.optimum is None:
            return f"checkpoint interval: too few checkpoints seen to judge ({thumb})"
        mtbf = (f"MTBF {_seconds(self.mtbf)} ({self.interruptions} interruptions in {_seconds(self.running)} "
                "running)" if self.mtbf is not None else f"no interruption in {_seconds(self.running)} running")
        return (f"checkpoints every {_seconds(self.interval)}, {_seconds(self.cost)} each: {self.verdict} -- "
                f"Young/Daly optimum {_seconds(self.optimum)} for {mtbf} ({thumb})")


def _seconds(value: float) -> str:
    """``1234 s``, ``12.3 s``, ``0.042 s``: whole seconds from 100 up, else three significant digits."""
    return f"{value:.0f} s" if value >= 100 else f"{value:.3g} s"


def count_interruptions(history: Sequence[Attempt]) -> int:
    """The interruptions of running training in ``history`` (:data:`INTERRUPTIONS`). The looks at one
    ongoing event that were answered with WAIT -- a node REPAIRING through a maintenance event, seen at
    every poll -- count once: an incident right after a WAIT of the same class and node state in the
    same attempt is the same event."""
    count = 0
    for attempt in history:
        previous = None
        for incident in attempt.incidents:
            failure = incident.failure
            same_event = (previous is not None and previous.decision.action == DecisionAction.WAIT
                          and previous.failure.failure_class == failure.failure_class
                          and previous.failure.node_state == failure.node_state)
            if failure.failure_class in INTERRUPTIONS and not same_event:
                count += 1
            previous = incident
    return count


def advise_checkpointing(history: Sequence[Attempt], saves: Sequence[CheckpointSave], *, end: float,
                         tolerance: float = 1.5) -> CheckpointAdvice:
    """Judge the run's checkpoint interval against Young/Daly's optimum from its observed failures and saves.

    Args:
        history: the attempts; their running time and interruptions give the MTBF. A platform's own
            in-place restarts (Vertex AI's retries) are not in it, so the MTBF is an upper bound.
        saves: the checkpoints written (:func:`..checkpoints.list_checkpoint_saves`); a gap that spans a
            failure is longer than the workload's interval, so the median gap is used.
        end: now or the run's end, seconds since the epoch.
        tolerance: an interval within ``[optimum / tolerance, optimum * tolerance]`` is "about right"
            (the goodput curve is flat near the optimum: 1.5x off loses under 10 % of the best overhead).
    """
    running = 0.0
    for attempt in history:
        if attempt.started_at is not None:
            running += max(0.0, min(attempt_end(attempt, end), end) - attempt.started_at)
    interruptions = count_interruptions(history)
    ordered = sorted(saves, key=lambda s: s.completed_at)
    gaps = [b.completed_at - a.completed_at for a, b in itertools.pairwise(ordered)
            if b.completed_at > a.completed_at]
    if not gaps:
        return CheckpointAdvice(None, None, None, running, interruptions, None, "unknown")
    interval = statistics.median(gaps)
    cost = max(statistics.median(s.write_seconds for s in ordered), COST_FLOOR)
    mtbf = running / interruptions if interruptions else None
    optimum = young_daly_interval(cost, mtbf if mtbf is not None else max(running, interval))
    if mtbf is None:  # the true optimum is above this one: only "too often" can be said
        verdict = "too often" if interval < optimum / tolerance else "not judged: no interruption yet"
    elif interval > tolerance * optimum:
        verdict = "too rarely"
    elif interval < optimum / tolerance:
        verdict = "too often"
    else:
        verdict = "about right"
    return CheckpointAdvice(interval, cost, mtbf, running, interruptions, optimum, verdict)


def handed_interval(advice: CheckpointAdvice, cap: float | None = None) -> float | None:
    """The checkpoint interval (seconds) handed to the next attempt as ``RESILIENT_CHECKPOINT_INTERVAL_SECONDS``:
    Young/Daly's optimum ``sqrt(2 C MTBF)`` from the run's own observed save cost and interruptions
    (:func:`advise_checkpointing`), at most Vertex AI's "at least every four hours" (14400 s) and
    ``cap`` (the operator's ``checkpoint_interval_cap``, seconds; None: no cap of the user's).

    None -- the workload keeps its own interval -- until at least two saves and one interruption were seen:
    without an interruption the optimum is only a lower bound (failures are rarer than the running time so far),
    and handing it would make the job checkpoint more often than it should. None too when no save showed its
    cost (every file of a save with one time, :data:`COST_FLOOR`): ``sqrt(2 C MTBF)`` of an unseen C would be
    far too short.

    Raises:
        ValueError: ``cap`` is not positive.
    """
    if cap is not None and cap <= 0:
        raise ValueError(f"the checkpoint interval cap must be > 0 seconds, got {cap}")
    if advice.optimum is None or advice.mtbf is None or advice.cost is None or advice.cost <= COST_FLOOR:
        return None
    return min(advice.optimum, SEED_000_INTERVAL, cap if cap is not None else math.inf)


__all__ = [
    "COST_FLOOR",
    "INTERRUPTIONS",
    "SEED_000_INTERVAL",
    "SEED_002_INTERVAL",
    "CheckpointAdvice",
    "advise_checkpointing",
    "count_interruptions",
    "handed_interval",
]
