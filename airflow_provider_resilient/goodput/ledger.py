"""Goodput ledger: how much of a run's wall time became training progress, and where the rest went.

Definitions follow Google's ml-goodput-measurement package (https://pypi.org/project/ml-goodput-measurement/):
goodput = productive time / total time, total = first attempt's start to the last attempt's end, across every
restart. Badput buckets:

* ``wasted_progress`` -- steps done again after resuming from an older step, plus work lost after the
  last step report of an attempt that failed (each redone step is counted once);
* ``detection`` -- from the failure to our decision about it (``Failure.timestamp`` -> ``decided_at``);
* ``recovery`` -- from the decision to the next attempt running (backoff, capacity wait, provisioning,
  TPU re-create), waits for a maintenance event to pass within an attempt, and the whole of an attempt that failed
  before its workload trained (:data:`NEVER_RAN`: a launch stockout's queue timeout is no wasted progress);
* ``checkpoint_restore`` -- from an attempt's start to its first step report, and on until its step moves past
  the step it resumed from (a first look that finds the workload still at that step saw it starting), and after
  a waited-out event (a TPU maintenance event with recovery) until the step moves again (program startup and
  loading the checkpoint);
* ``checkpoint_save`` -- the time the known saves (``saves``: ``CheckpointSave.span``, first object to last) were
  being written within a span between two step reports, as far as that span is slower than the run's pace: a
  blocking save holds training up (ml-goodput-measurement's UNPRODUCTIVE_CHECKPOINT_SAVE_TIME);
* ``other`` -- the rest, reported, never hidden: stalls (a span between two step reports more than
  :data:`STALL_FACTOR` times slower than the run's pace -- an in-place restart by the platform (Vertex AI,
  "Understand the custom training service": a worker is restarted in place), which the attempt history does not see
  -- counts as work at the pace and the rest as other), and time no report explains.

The buckets add up to the total. Input: the attempt history (:mod:`..policy.decide`) and, when the
workload reports them (runner heartbeats, checkpoint steps), step observations ``(time, step)``. Without
step reports an attempt's running time counts as productive when it succeeded and as wasted when it
failed: an upper and a lower bound, stated in :attr:`Ledger.basis`.

Pure: no clock, no I/O.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ..checkpoints.formats import CheckpointSave
from ..policy import Attempt, DecisionAction, FailureClass

BUCKETS = ("productive", "wasted_progress", "detection", "recovery", "checkpoint_restore", "checkpoint_save",
           "other")
#: Each badput bucket as ml-goodput-measurement's ``BadputType`` (``goodput_utils.BadputType``), so a team that
#: reads Google's badput breakdown reads ours the same way:
#:
#: * ``wasted_progress`` -> WASTED_PROGRESS_FROM_DISRUPTION ("time that was spent on productive training but lost
#:   after restart");
#: * ``detection`` and ``recovery`` -> INFRASTRUCTURE_RECOVERY_FROM_DISRUPTION ("the time taken by the
#:   infrastructure to restart the workload after a disruption": noticing it is part of that);
#: * ``checkpoint_restore`` -> UNPRODUCTIVE_CHECKPOINT_RESTORE_TIME: from an attempt's start to its first step,
#:   which also holds what Google splits into TPU_INITIALIZATION, TRAINING_PREP and PROGRAM_STARTUP (seen from
#:   outside the workload they are one span);
#: * ``checkpoint_save`` -> UNPRODUCTIVE_CHECKPOINT_SAVE_TIME;
#: * ``other`` -> OTHER.
#:
#: Data loading (DATA_LOADING_SYNC) falls between two step reports and counts as productive here, and so does a
#: save the ledger is not given (a workload that keeps only its newest saves deletes the others; a span holding
#: one is a stall, ``other``, when it is more than :data:`STALL_FACTOR` times the pace): only the workload's own
#: goodput events split them out exactly.
BADPUT_TYPES = {"wasted_progress": "WASTED_PROGRESS_FROM_DISRUPTION",
                "detection": "INFRASTRUCTURE_RECOVERY_FROM_DISRUPTION",
                "recovery": "INFRASTRUCTURE_RECOVERY_FROM_DISRUPTION",
                "checkpoint_restore": "UNPRODUCTIVE_CHECKPOINT_RESTORE_TIME",
                "checkpoint_save": "UNPRODUCTIVE_CHECKPOINT_SAVE_TIME", "other": "OTHER"}


@dataclass(frozen=True)
class StepReport:
    """The workload reached ``step`` at ``time`` (seconds since the epoch)."""

    time: float
    step: int


@dataclass(frozen=True)
class Ledger:
    """Seconds per bucket; ``total`` is their sum. ``basis``: "steps" or "attempts" (no step reports)."""

    total: float
    productive: float
    wasted_progress: float
    detection: float
    recovery: float
    checkpoint_restore: float
    other: float
    basis: str
    checkpoint_save: float = 0.0

    @property
    def goodput(self) -> float:
        """Productive time / total time, 0 to 1 (0 for an empty run)."""
        return self.productive / self.total if self.total > 0 else 0.0

    def badput_breakdown(self) -> dict[str, float]:
        """Badput in percent of the total per ml-goodput-measurement ``BadputType`` name (:data:`BADPUT_TYPES`),
        as its ``get_job_goodput(include_badput_breakdown=True)`` reports it; every type of the mapping is there."""
        breakdown = dict.fromkeys(BADPUT_TYPES.values(), 0.0)
        for bucket, kind in BADPUT_TYPES.items():
            breakdown[kind] += 100.0 * getattr(self, bucket) / self.total if self.total > 0 else 0.0
        return {kind: round(share, 2) for kind, share in breakdown.items()}

    def as_dict(self) -> dict[str, Any]:
        """The buckets (seconds), ``basis``, ``goodput`` (0 to 1), ``badput_breakdown`` (:meth:`badput_breakdown`)."""
        data: dict[str, Any] = asdict(self)
        data["goodput"] = round(self.goodput, 4)
        data["badput_breakdown"] = self.badput_breakdown()
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Ledger:
        """The ledger of :meth:`as_dict` (e.g. pulled from XCom ``goodput``); extra keys are ignored, a missing
        ``checkpoint_save`` (a ledger pushed before that bucket existed) is 0."""
        return cls(basis=str(data["basis"]), **{f: float(data.get(f, 0.0) if f == "checkpoint_save" else data[f])
                                                for f in ("total", *BUCKETS)})

    def summary(self) -> str:
        """One line: goodput and the share of each badput bucket."""
        parts = [f"goodput {self.goodput:.1%} of {self.total:.0f} s"]
        for name in BUCKETS[1:]:
            seconds = getattr(self, name)
            if seconds > 0:
                parts.append(f"{name.replace('_', ' ')} {seconds:.0f} s ({seconds / self.total:.1%})")
        return "; ".join(parts) + f" [from {self.basis}]"


#: A span between two step reports slower than this many times the run's pace holds a stall (see ``other``).
STALL_FACTOR = 2.0
#: The fewest spans of progress from which the run's pace is taken.
PACE_SPANS = 4


#: Second sightings: a step seen again with nothing between (a save, then the poll that lists it; a trigger's
#: sighting, then the operator's look) was reached at its first sighting; the later one is no event -- the workload
#: trained on. (Counted as a span without progress, each step's save-to-poll delay was "other", and the shortened span
#: after it set a pace that made ordinary spans stalls: the demo's Vertex AI ledger read 41 % other.) After a
#: waited-out event the same step seen again is the workload restarting, and stays an event.


def run_pace(reports: Sequence[StepReport]) -> float | None:
    """The run's pace, seconds per step: the lower quartile of seconds per step over consecutive step reports
    that moved forward (``reports`` oldest first), or None with fewer than :data:`PACE_SPANS` of them. The
    lower quartile: the pace of undisturbed training, which spans holding a restart or a save do not skew."""
    first = [r for i, r in enumerate(reports) if i == 0 or reports[i - 1].step != r.step]  # no second sightings
    paces = [(b.time - a.time) / (b.step - a.step) for a, b in itertools.pairwise(first) if b.step > a.step]
    if len(paces) < PACE_SPANS:
        return None
    return statistics.quantiles(paces, n=4)[0]


def _current(reports: Sequence[StepReport], saves: Sequence[CheckpointSave], begin: float,
             finish: float) -> list[StepReport]:
    """The reports (oldest first) of ``[begin, finish]`` that are not stale. A report behind a complete save made
    earlier in the same attempt (``saves``, the attempt's) is stale -- a look's newest logged line, read before the
    line of the step the save holds had reached the log -- and no restart: any restart resumes from that save or a
    newer one. (Counted, it read as steps going back, and the steps after it as redone.)"""
    ordered = sorted(saves, key=lambda s: s.completed_at)
    kept, floor, k = [], -1, 0
    for report in reports:
        if not begin <= report.time <= finish:
            continue
        while k < len(ordered) and ordered[k].completed_at <= report.time:
            floor, k = max(floor, ordered[k].step), k + 1
        if report.step >= floor:
            kept.append(report)
    return kept


def _end(attempt: Attempt, end: float) -> float:
    if attempt.ended_at is not None:
        return attempt.ended_at
    decided = [i.decision.decided_at for i in attempt.incidents if i.decision.decided_at is not None]
    return max(decided, default=end)


def goodput_ledger(history: Sequence[Attempt], steps: Sequence[StepReport] = (), *, end: float,
                   saves: Sequence[CheckpointSave] = ()) -> Ledger:
    """The ledger of a run.

    Args:
        history: the attempts, oldest first (``started_at`` set on each that ran).
        steps: step observations over the whole run, any order.
        end: when the run ended (or now, for a running one), seconds since the epoch.
        saves: the run's complete checkpoints (:func:`..checkpoints.list_checkpoint_saves`): each is a step the
            workload reached, written where no process can lose it -- the step reports a SIGKILLed triggerer's
            trigger had seen die with it -- and joins ``steps`` (saves from before the run's first attempt are
            another run's and are left out); the time each was being written (``CheckpointSave.span``) is
            ``checkpoint_save`` as far as the span between two step reports that holds it is slower than the pace.

    Raises:
        ValueError: when no attempt has a ``started_at``.
    """
    ran = [a for a in history if a.started_at is not None]
    if not ran:
        raise ValueError("goodput_ledger: no attempt has started")
    start = min(a.started_at for a in ran if a.started_at is not None)
    total = max(0.0, end - start)
    buckets = dict.fromkeys(BUCKETS, 0.0)
    mine_saves = [s for s in saves if s.completed_at >= start]
    seen = {(r.time, r.step) for r in steps} | {(s.completed_at, s.step) for s in mine_saves}
    reports = [StepReport(t, n) for t, n in sorted(seen)]

    def saving(after: float, until: float) -> float:
        """Seconds of ``(after, until)`` the known saves were being written (each save's seen span)."""
        return sum(max(0.0, min(until, s.span[1]) - max(after, s.span[0])) for s in mine_saves)

    pace = run_pace(reports)
    best_step = -1  # the furthest step reached by any earlier attempt
    for index, attempt in enumerate(ran):
        assert attempt.started_at is not None
        begin, finish = attempt.started_at, min(_end(attempt, end), end)
        ending = next((i for i in attempt.incidents
                       if i.decision.action.is_terminal or i.decision.action.starts_new_attempt), None)
        failed = ending is not None
        waits = [i.decision.decided_at for i in attempt.incidents
                 if i.decision.action == DecisionAction.WAIT and i.decision.decided_at is not None]
        mine = _current(reports, [s for s in mine_saves if begin <= s.completed_at <= finish], begin, finish)
        # The time from the failure to our decision is detection; the work before it since the last report
        # (or the start) was lost.
        last_seen = mine[-1].time if mine else begin
        failed_at = finish
        if ending is not None and ending.failure.timestamp is not None:
            failed_at = min(finish, max(last_seen, ending.failure.timestamp))
        buckets["detection"] += finish - failed_at
        if not mine:
            # An attempt that never got to train (no capacity, quota, a queue timeout, a container or pre-check
            # that failed before the workload) lost no progress: its time was the wait for a start -- recovery.
            never_ran = ending is not None and ending.failure.failure_class in NEVER_RAN
            buckets["recovery" if never_ran else "wasted_progress" if failed else "productive"] += max(
                0.0, failed_at - begin)
        else:
            # From the start to the first report: start-up and restore, then the steps up to that report. A
            # workload that keeps only its newest saves has deleted the proof of the earlier steps, so the steps
            # it made there are timed at the run's pace (else this attempt's own: its reports' seconds per step).
            head, start_step = mine[0].time - begin, attempt.resumed_from_step or 0
            head_steps = mine[0].step - start_step
            head_pace = pace if pace is not None else (
                (mine[-1].time - mine[0].time) / (mine[-1].step - mine[0].step) if mine[-1].step > mine[0].step
                else None)
            head_work = min(head, head_steps * head_pace) if head_pace is not None and head_steps > 0 else 0.0
            buckets["checkpoint_restore"] += head - head_work
            if head_work > 0:
                redone = max(0, min(mine[0].step, best_step) - start_step)
                buckets["wasted_progress"] += head_work * redone / head_steps
                buckets["productive"] += head_work * (head_steps - redone) / head_steps
            previous = mine[0]
            restarting = False  # after a waited-out event, until the workload moves again
            for report in mine:
                span = report.time - previous.time
                gained = report.step - previous.step
                waited = [w for w in waits if previous.time <= w <= report.time]
                if gained == 0 and not waited and not restarting and report is not mine[0]:
                    continue  # a second sighting: the workload trained on since the first
                # A span holding our first WAIT look at an event is work until that look, recovery after it.
                work = (min(waited) - previous.time) if waited else span
                if waited:
                    buckets["recovery"] += span - work
                if work > 0 and gained > 0:  # a blocking save held the span up beyond its steps' pace
                    saved = min(saving(previous.time, report.time), work - gained * (pace or 0.0))
                    if saved > 0:
                        buckets["checkpoint_save"] += saved
                        work -= saved
                if work > 0 and gained > 0 and pace is not None and work > STALL_FACTOR * gained * pace:
                    # the attempt had not moved from its resume step yet: it was starting; else a stall (an
                    # in-place restart, slow steps)
                    buckets["checkpoint_restore" if previous.step <= start_step else "other"] += work - gained * pace
                    work = gained * pace
                if work > 0 and gained <= 0:
                    buckets["checkpoint_restore" if restarting else "other"] += work
                elif work > 0:
                    restarting = False
                    redone = max(0, min(report.step, best_step) - previous.step)
                    buckets["wasted_progress"] += work * redone / gained
                    buckets["productive"] += work * (gained - redone) / gained
                restarting = restarting or bool(waited)
                previous = report
                best_step = max(best_step, report.step)
            tail = max(0.0, failed_at - previous.time)  # after the last report: the final save, if known, then work
            saved = min(saving(previous.time, failed_at), tail)
            buckets["checkpoint_save"] += saved
            buckets["wasted_progress" if failed else "productive"] += tail - saved
        following = ran[index + 1] if index + 1 < len(ran) else None
        if following is not None and following.started_at is not None:
            buckets["recovery"] += max(0.0, following.started_at - finish)
    accounted = sum(buckets.values())  # stalls without a known cause are already in "other"
    buckets["other"] += max(0.0, total - accounted)
    return Ledger(total=sum(buckets.values()), basis="steps" if reports else "attempts", **buckets)


def young_daly_interval(checkpoint_cost: float, mtbf: float) -> float:
    """Young/Daly's optimal checkpoint interval, ``sqrt(2 * C * MTBF)`` seconds (C: seconds to save one).

    Raises:
        ValueError: on a non-positive cost or MTBF.
    """
    if checkpoint_cost <= 0 or mtbf <= 0:
        raise ValueError("checkpoint_cost and mtbf must be > 0 seconds")
    return math.sqrt(2 * checkpoint_cost * mtbf)


def goodput_ceiling(checkpoint_cost: float, restart_cost: float, mtbf: float) -> float:
    """The best achievable goodput with optimal checkpointing: ``1 - sqrt(2C/MTBF) - R/MTBF`` (>= 0)."""
    if mtbf <= 0:
        raise ValueError("mtbf must be > 0 seconds")
    return max(0.0, 1.0 - math.sqrt(2 * checkpoint_cost / mtbf) - restart_cost / mtbf)


def trace_budget(work: float, gaps: Sequence[float], checkpoint_cost: float, restart_cost: float,
                 interval: float) -> dict[str, float]:
    """Where the wall time of :func:`trace_wall_time` goes, in seconds: ``work`` (the training itself),
    ``checkpoint`` (the saves), ``wasted_progress`` (work since the last save when a failure struck, and the part
    of a save it interrupted), ``restart`` (``restart_cost`` per failure) and ``total`` (their sum; ``math.inf``
    when the gaps end before the work does, the other entries then being what was spent until then). This is the
    ceiling's own budget, to set beside a run's ledger: it explains the gap to the ceiling.

    Raises:
        ValueError: on a non-positive ``interval`` or ``work``, or a negative cost.
    """
    if interval <= 0 or work <= 0 or checkpoint_cost < 0 or restart_cost < 0:
        raise ValueError("interval and work must be > 0 seconds, the costs >= 0")
    budget = dict.fromkeys(("work", "checkpoint", "wasted_progress", "restart"), 0.0)
    done = 0.0
    for gap in gaps:
        left = work - done
        saves = math.ceil(left / interval) - 1
        if gap >= left + checkpoint_cost * saves:  # no save after the last step
            budget["work"] += left
            budget["checkpoint"] += checkpoint_cost * saves
            return {**budget, "total": sum(budget.values())}
        completed = math.floor(gap / (interval + checkpoint_cost))  # segments of work and save before the failure
        done += interval * completed
        budget["work"] += interval * completed
        budget["checkpoint"] += checkpoint_cost * completed
        budget["wasted_progress"] += gap - completed * (interval + checkpoint_cost)
        budget["restart"] += restart_cost
    return {**budget, "total": math.inf}


def trace_wall_time(work: float, gaps: Sequence[float], checkpoint_cost: float, restart_cost: float,
                    interval: float) -> float:
    """Wall seconds to finish ``work`` seconds of training that checkpoints after every ``interval`` seconds of
    work (each save costs ``checkpoint_cost`` seconds), when failures strike after the running times ``gaps``
    (seconds since the run started, then since each restart), each costing ``restart_cost`` seconds and the
    work since the last save; no save after the last step. ``math.inf`` when the gaps end first
    (:func:`trace_budget` splits it up).

    Raises:
        ValueError: on a non-positive ``interval`` or ``work``, or a negative cost.
    """
    return trace_budget(work, gaps, checkpoint_cost, restart_cost, interval)["total"]


def trace_ceiling(work: float, gaps: Sequence[float], checkpoint_cost: float, restart_cost: float,
                  points: int = 400) -> tuple[float, float]:
    """The best goodput any way could reach on this exact trace (a ceiling per trace): the fixed
    checkpoint interval best for the failures that struck (:func:`trace_wall_time`, searched over ``points``
    log-spaced intervals from ``checkpoint_cost / 10`` -- at least 1 ms -- to ``work``), the minimal restart
    cost, no capacity wait. Unlike :func:`goodput_ceiling`, which assumes the *expected* MTBF, it does not swing
    with the trace's luck. Returns ``(goodput, interval)``: 0 to 1, and seconds.

    Raises:
        ValueError: as :func:`trace_wall_time`.
    """
    low, high = max(1e-3, checkpoint_cost / 10), max(work, 2e-3)
    best = (0.0, high)
    for k in range(points):  # the last exactly ``high``: a rounded power just below it would add a save
        interval = high if k == points - 1 else low * (high / low) ** (k / (points - 1))
        wall = trace_wall_time(work, gaps, checkpoint_cost, restart_cost, interval)
        if wall < math.inf and work / wall > best[0]:
            best = (work / wall, interval)
    return best


#: Failures that interrupt running training and so count towards the MTBF (not capacity, quota, queue,
#: preflight or permanent errors, which stop a run from starting or end it for good).
INTERRUPTIONS = frozenset({FailureClass.TRANSIENT_CRASH, FailureClass.INTERNAL_ERROR, FailureClass.WORKER_FAILURE,
                           FailureClass.MAINTENANCE_EVENT, FailureClass.PREEMPTION, FailureClass.NODE_UNHEALTHY,
                           FailureClass.HANG, FailureClass.UNKNOWN})
#: Failures of an attempt before its workload trained: a failed attempt of one of these classes without a step
#: report lost no progress -- its time is ``recovery`` (the wait for capacity or a start), not wasted progress.
NEVER_RAN = frozenset({FailureClass.CAPACITY_STOCKOUT, FailureClass.QUOTA_EXCEEDED, FailureClass.QUEUE_TIMEOUT,
                       FailureClass.CONTAINER_START_ERROR, FailureClass.PREFLIGHT_FAILURE})
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
            running += max(0.0, min(_end(attempt, end), end) - attempt.started_at)
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
