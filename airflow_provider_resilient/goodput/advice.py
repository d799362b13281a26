"""Checkpoint-interval advice: whether a run checkpoints too rarely or too often, judged from its own observed saves
and interruptions against Young/Daly's optimum (:func:`.ceiling.young_daly_interval`), and the interval handed to
the next attempt (``RESILIENT_CHECKPOINT_INTERVAL_SECONDS``).

Input: the attempt history (:mod:`..policy.decide`: running time, interruptions -> the MTBF), the complete
checkpoints found (:func:`..checkpoints.list_checkpoint_saves`: the interval and the save cost C) and the step
reports (which interruptions a save covered). Pure: no clock, no I/O.

**Interruptions a save covered.** Young/Daly's ``sqrt(2 C MTBF)`` assumes every failure strikes without warning
and loses half an interval of progress on average. A run that saves on notice -- a Spot VM's preemption or a TPU
maintenance event reaches the workload as a SIGTERM 30 s before the kill, and the worker runner asks it for a
checkpoint -- loses almost nothing to such a failure, whatever the interval. With a share ``r`` of the failures
covered so, the optimum period is ``sqrt(2 C MTBF / (1 - r))``: Young/Daly for the failures that do lose progress
(G. Aupy, Y. Robert, F. Vivien, D. Zaidouni, "Checkpointing algorithms and fault prediction", Journal of Parallel
and Distributed Computing 74(2), 2014: a predictor of recall ``r`` whose predictions leave time for a proactive
checkpoint). The run measures ``r`` itself (:func:`covered_interruptions`): an interruption whose newest save
before it holds a step within :data:`COVERED_SHARE` of an interval of the last step reported before it lost
nothing a save on notice could have kept; it is taken as ``covered / (interruptions + 1)``, short of the share
seen, so that one lucky failure does not make the interval long. The interval handed to the next attempt weighs
the same figures with the interval the workload has kept (:func:`losing_mtbf`).
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
from .ledger import StepReport, attempt_end

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
#: An interruption whose newest save before it is less than this share of a checkpoint interval (in steps, the
#: median step gap between saves) behind the last step reported before it is *covered*: a save kept its progress (on
#: notice, or by chance just before it). A failure without warning falls that close after a periodic save about
#: this often, plus a heartbeat's reporting lag: the share of covered failures is over-counted by that much at most.
COVERED_SHARE = 1 / 8


@dataclass(frozen=True)
class CheckpointAdvice:
    """Whether a run checkpoints too rarely or too often, from what was observed.

    Attributes (seconds; None when not observed):
        interval: median time between consecutive saves.
        cost: median visible write time of one save (a lower bound of C).
        mtbf: running time / interruptions; None without an interruption.
        running: the attempts' running time the MTBF is taken over.
        interruptions: failures counted (:data:`INTERRUPTIONS`).
        optimum: Young/Daly ``sqrt(2 C MTBF / (1 - r))`` with ``r = covered / (interruptions + 1)`` (0 when no
            interruption was covered: ``sqrt(2 C MTBF)``); with no interruption, the optimum for an MTBF of the
            running time (a lower bound: failures are rarer than that).
        verdict: "too rarely", "too often", "about right", "not judged: no interruption yet" (only
            "too often" can be told without one), or "unknown" (fewer than two saves seen).
        covered: interruptions a save covered (:func:`covered_interruptions`; 0 without step reports).
    """

    interval: float | None
    cost: float | None
    mtbf: float | None
    running: float
    interruptions: int
    optimum: float | None
    verdict: str
    covered: int = 0

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
        covered = f", {self.covered} of them covered by a save" if self.covered else ""
        mtbf = (f"MTBF {_seconds(self.mtbf)} ({self.interruptions} interruptions{covered} in "
                f"{_seconds(self.running)} running)" if self.mtbf is not None
                else f"no interruption in {_seconds(self.running)} running")
        return (f"checkpoints every {_seconds(self.interval)}, {_seconds(self.cost)} each: {self.verdict} -- "
                f"Young/Daly optimum {_seconds(self.optimum)} for {mtbf} ({thumb})")


def _seconds(value: float) -> str:
    """``1234 s``, ``12.3 s``, ``0.042 s``: whole seconds from 100 up, else three significant digits."""
    return f"{value:.0f} s" if value >= 100 else f"{value:.3g} s"


def interruption_times(history: Sequence[Attempt]) -> list[float]:
    """When each interruption of running training in ``history`` (:data:`INTERRUPTIONS`) struck, seconds since the
    epoch: its failure's ``timestamp`` (else when it was decided on). The looks at one ongoing event that were
    answered with WAIT -- a node REPAIRING through a maintenance event, seen at every poll -- count once: an
    incident right after a WAIT of the same class and node state in the same attempt is the same event."""
    times: list[float] = []
    for attempt in history:
        previous = None
        for incident in attempt.incidents:
            failure = incident.failure
            same_event = (previous is not None and previous.decision.action == DecisionAction.WAIT
                          and previous.failure.failure_class == failure.failure_class
                          and previous.failure.node_state == failure.node_state)
            if failure.failure_class in INTERRUPTIONS and not same_event:
                at = failure.timestamp if failure.timestamp is not None else incident.decision.decided_at
                times.append(at if at is not None else attempt.started_at or 0.0)
            previous = incident
    return times


def count_interruptions(history: Sequence[Attempt]) -> int:
    """How many interruptions of running training ``history`` holds (:func:`interruption_times`)."""
    return len(interruption_times(history))


def covered_interruptions(times: Sequence[float], steps: Sequence[StepReport],
                          saves: Sequence[CheckpointSave]) -> int:
    """How many of the interruptions at ``times`` (epoch seconds) a checkpoint save covered: the newest save
    completed by then holds a step less than :data:`COVERED_SHARE` of an interval (the median step gap between
    consecutive ``saves``) behind the last step reported before it (``steps``: the workload's step reports, a
    process's start lines left out). An interruption with no step report before it, or no save before it among
    ``saves`` (only the newest are listed), is not counted as covered; nor any when fewer than two saves show the
    interval."""
    ordered = sorted(saves, key=lambda s: s.completed_at)
    gaps = [b.step - a.step for a, b in itertools.pairwise(ordered) if b.step > a.step]
    if not gaps:
        return 0
    within = COVERED_SHARE * statistics.median(gaps)
    reports = sorted((r for r in steps if not r.start), key=lambda r: r.time)
    covered = 0
    for at in times:
        last = next((r.step for r in reversed(reports) if r.time <= at), None)
        saved = next((s.step for s in reversed(ordered) if s.completed_at <= at), None)
        if last is not None and saved is not None and last - saved < within:
            covered += 1
    return covered


def advise_checkpointing(history: Sequence[Attempt], saves: Sequence[CheckpointSave], *, end: float,
                         tolerance: float = 1.5, steps: Sequence[StepReport] = ()) -> CheckpointAdvice:
    """Judge the run's checkpoint interval against Young/Daly's optimum from its observed failures and saves.

    Args:
        history: the attempts; their running time and interruptions give the MTBF. A platform's own
            in-place restarts (Vertex AI's retries) are not in it, so the MTBF is an upper bound.
        saves: the checkpoints written (:func:`..checkpoints.list_checkpoint_saves`); a gap that spans a
            failure is longer than the workload's interval, so the median gap is used.
        end: now or the run's end, seconds since the epoch.
        steps: the run's step reports (:class:`~.ledger.StepReport`), to tell the interruptions a save covered
            (:func:`covered_interruptions`); none: every interruption counts as one without warning.
        tolerance: an interval within ``[optimum / tolerance, optimum * tolerance]`` is "about right"
            (the goodput curve is flat near the optimum: 1.5x off loses under 10 % of the best overhead).
    """
    running = 0.0
    for attempt in history:
        if attempt.started_at is not None:
            running += max(0.0, min(attempt_end(attempt, end), end) - attempt.started_at)
    times = interruption_times(history)
    interruptions = len(times)
    ordered = sorted(saves, key=lambda s: s.completed_at)
    gaps = [b.completed_at - a.completed_at for a, b in itertools.pairwise(ordered)
            if b.completed_at > a.completed_at]
    if not gaps:
        return CheckpointAdvice(None, None, None, running, interruptions, None, "unknown")
    interval = statistics.median(gaps)
    cost = max(statistics.median(s.write_seconds for s in ordered), COST_FLOOR)
    mtbf = running / interruptions if interruptions else None
    covered = covered_interruptions(times, steps, ordered) if steps else 0
    losing = mtbf / (1 - covered / (interruptions + 1)) if mtbf is not None else max(running, interval)
    optimum = young_daly_interval(cost, losing)
    if mtbf is None:  # the true optimum is above this one: only "too often" can be said
        verdict = "too often" if interval < optimum / tolerance else "not judged: no interruption yet"
    elif interval > tolerance * optimum:
        verdict = "too rarely"
    elif interval < optimum / tolerance:
        verdict = "too often"
    else:
        verdict = "about right"
    return CheckpointAdvice(interval, cost, mtbf, running, interruptions, optimum, verdict, covered)


def handed_interval(advice: CheckpointAdvice, cap: float | None = None) -> float | None:
    """The checkpoint interval (seconds) handed to the next attempt as ``RESILIENT_CHECKPOINT_INTERVAL_SECONDS``:
    Young/Daly ``sqrt(2 C M)`` for :func:`losing_mtbf` ``M`` -- the mean time between the failures that lose
    progress, from the run's running time, its interruptions less those a save covered, and the interval the
    workload has kept -- at most Vertex AI's "at least every four hours" (14400 s) and ``cap`` (the operator's
    ``checkpoint_interval_cap``, seconds; None: no cap of the user's).

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
    losing = losing_mtbf(advice)
    if losing is None or advice.cost is None:
        return None
    return min(young_daly_interval(advice.cost, losing), SEED_000_INTERVAL, cap if cap is not None else math.inf)


def losing_mtbf(advice: CheckpointAdvice) -> float | None:
    """The mean time (seconds) between failures that lose progress, as :func:`handed_interval` estimates it:
    ``(running + M0) / (interruptions - covered + 1)``, where ``M0 = interval ** 2 / (2 C)`` is the MTBF for which the
    interval the workload has kept is Young/Daly's optimum. That interval counts as one more failure's worth of
    evidence -- the gamma prior of an exponential failure rate, whose posterior mean rate this is -- so that the
    first one or two failures of a run, which may come close together by chance, do not make the interval as short
    as they alone would (two failures 300 s apart: 110 s at C = 20 s, where a true MTBF of 1800 s wants 268 s); as
    failures accrue the run's own figures outweigh it. None when the advice has no interruption, no interval or no
    visible save cost (:data:`COST_FLOOR`)."""
    if (advice.mtbf is None or advice.interval is None or advice.cost is None or advice.cost <= COST_FLOOR
            or advice.interruptions < 1):
        return None
    prior = advice.interval ** 2 / (2 * advice.cost)
    return (advice.running + prior) / (advice.interruptions - advice.covered + 1)


__all__ = [
    "COST_FLOOR",
    "COVERED_SHARE",
    "INTERRUPTIONS",
    "SEED_000_INTERVAL",
    "SEED_002_INTERVAL",
    "CheckpointAdvice",
    "advise_checkpointing",
    "count_interruptions",
    "covered_interruptions",
    "handed_interval",
    "interruption_times",
    "losing_mtbf",
]
