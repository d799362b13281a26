"""Goodput ledger: how much of a run's wall time became training progress, and where the rest went.

Definitions follow Google's ml-goodput-measurement package (https://pypi.org/project/ml-goodput-measurement/):
goodput = productive time / total time, total = first attempt's start to the last attempt's end, across every
restart. Badput buckets:

* ``wasted_progress`` -- steps done again after resuming from an older step, plus work lost after the
  last step report of an attempt that failed (each redone step is counted once);
* ``detection`` -- from the failure to our decision about it (``Failure.timestamp`` -> ``decided_at``), for a
  failure the platform shows (a job that ended, a node terminated or in repair): the look that saw it, which
  ``poll_interval`` and ``event_topic`` decide;
* ``hang_detection`` -- the same span for a failure that only a timeout reveals (:data:`TIMEOUT_SEEN`: a hang,
  from the last progress seen to ``hang_timeout`` later and the look after it; a worker silent past
  ``startup_timeout``): the waiting the timeout takes, which no poll or event shortens -- only a shorter timeout;
* ``recovery`` -- from the decision to the next attempt running (backoff, capacity wait, provisioning,
  TPU re-create), and the whole of an attempt that failed before its workload trained (:data:`NEVER_RAN`: a
  launch stockout's queue timeout is no wasted progress);
* ``repair_wait`` -- within an attempt, from the first look that decided to wait an event out (a TPU node in
  repair: the ``maintenance-wait`` rule) until the workload reports a step again (the repair, the VM's boot and
  the workload's restart), or until the run gave up on it and re-created the node (:mod:`..policy.repair`);
* ``checkpoint_restore`` -- from an attempt's start to its first step report, and on until its step moves past
  the step it resumed from (a first look that finds the workload still at that step saw it starting), and after
  a waited-out event (a TPU maintenance event with recovery) until the step moves again (program startup and
  loading the checkpoint);
* ``checkpoint_save`` -- the time the known saves (``saves``: ``CheckpointSave.span``, first object to last) were
  being written within a span between two step reports, as far as that span is slower than the run's pace: a
  blocking save holds training up (ml-goodput-measurement's UNPRODUCTIVE_CHECKPOINT_SAVE_TIME);
* ``in_place_restart`` -- a restart of the workload's process within an attempt: the platform's (Vertex AI,
  "Understand the custom training service": a replica whose worker fails is restarted in place; ModelArts'
  re-issue) or a worker runner's. Seen by the restarted process's start report (``StepReport.start``: the
  workload printed ``start step S``), it is the span from the last report before it to that start, but for the
  step the process was making when it died (``wasted_progress``, at the run's pace); the restored process's way
  back to its step is then ``checkpoint_restore``, as after an attempt's start;
* ``stall`` -- a span between two step reports more than :data:`STALL_FACTOR` times slower than the run's pace,
  with no restart seen in it: the work at the pace is work, the rest a stall (slow steps, a save the ledger is
  not given, a restart whose start report was not seen);
* ``other`` -- what no report explains: steps going back within an attempt with no start report (a restart seen
  only by its effect), and time outside every span (the ledger's blind spots). Reported, never hidden.

The buckets add up to the total. Input: the attempt history (:mod:`..policy.decide`) and, when the
workload reports them (runner heartbeats, checkpoint steps), step observations ``(time, step)``. Without
step reports an attempt's running time counts as productive when it succeeded and as wasted when it
failed: an upper and a lower bound, stated in :attr:`Ledger.basis`.

Pure: no clock, no I/O.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ..checkpoints.formats import CheckpointSave
from ..policy import Attempt, DecisionAction, FailureClass

BUCKETS = ("productive", "wasted_progress", "detection", "hang_detection", "recovery", "repair_wait",
           "in_place_restart", "checkpoint_restore", "checkpoint_save", "stall", "other")
#: Buckets added after the first ledgers were pushed to XCom: a stored ledger without them reads them as 0.
LATER_BUCKETS = frozenset({"checkpoint_save", "in_place_restart", "stall", "repair_wait", "hang_detection"})
#: Each badput bucket as ml-goodput-measurement's ``BadputType`` (``goodput_utils.BadputType``), so a team that
#: reads Google's badput breakdown reads ours the same way:
#:
#: * ``wasted_progress`` -> WASTED_PROGRESS_FROM_DISRUPTION ("time that was spent on productive training but lost
#:   after restart");
#: * ``detection``, ``hang_detection``, ``recovery``, ``repair_wait`` and ``in_place_restart`` ->
#:   INFRASTRUCTURE_RECOVERY_FROM_DISRUPTION ("the time
#:   taken by the infrastructure to restart the workload after a disruption": noticing it is part of that);
#: * ``checkpoint_restore`` -> UNPRODUCTIVE_CHECKPOINT_RESTORE_TIME: from an attempt's start to its first step,
#:   which also holds what Google splits into TPU_INITIALIZATION, TRAINING_PREP and PROGRAM_STARTUP (seen from
#:   outside the workload they are one span);
#: * ``checkpoint_save`` -> UNPRODUCTIVE_CHECKPOINT_SAVE_TIME;
#: * ``stall`` and ``other`` -> OTHER.
#:
#: Data loading (DATA_LOADING_SYNC) falls between two step reports and counts as productive here, and so does a
#: save the ledger is not given (a workload that keeps only its newest saves deletes the others; a span holding
#: one is a ``stall`` when it is more than :data:`STALL_FACTOR` times the pace): only the workload's own
#: goodput events split them out exactly.
BADPUT_TYPES = {"wasted_progress": "WASTED_PROGRESS_FROM_DISRUPTION",
                "detection": "INFRASTRUCTURE_RECOVERY_FROM_DISRUPTION",
                "hang_detection": "INFRASTRUCTURE_RECOVERY_FROM_DISRUPTION",
                "recovery": "INFRASTRUCTURE_RECOVERY_FROM_DISRUPTION",
                "repair_wait": "INFRASTRUCTURE_RECOVERY_FROM_DISRUPTION",
                "in_place_restart": "INFRASTRUCTURE_RECOVERY_FROM_DISRUPTION",
                "checkpoint_restore": "UNPRODUCTIVE_CHECKPOINT_RESTORE_TIME",
                "checkpoint_save": "UNPRODUCTIVE_CHECKPOINT_SAVE_TIME", "stall": "OTHER", "other": "OTHER"}


@dataclass(frozen=True)
class StepReport:
    """The workload reached ``step`` at ``time`` (seconds since the epoch); with ``start``, a process of the
    workload started at ``time`` resuming from ``step`` (its ``start step S`` line: an attempt's first process, or
    one the platform or a runner restarted in place)."""

    time: float
    step: int
    start: bool = False


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
    in_place_restart: float = 0.0
    stall: float = 0.0
    repair_wait: float = 0.0
    hang_detection: float = 0.0

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
        bucket of :data:`LATER_BUCKETS` (a ledger pushed before that bucket existed) is 0."""
        return cls(basis=str(data["basis"]), **{f: float(data.get(f, 0.0) if f in LATER_BUCKETS else data[f])
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
#: Failures of an attempt before its workload trained: a failed attempt of one of these classes without a step
#: report lost no progress -- its time is ``recovery`` (the wait for capacity or a start), not wasted progress.
NEVER_RAN = frozenset({FailureClass.CAPACITY_STOCKOUT, FailureClass.QUOTA_EXCEEDED, FailureClass.QUEUE_TIMEOUT,
                       FailureClass.CONTAINER_START_ERROR, FailureClass.PREFLIGHT_FAILURE})


#: Failures only a timeout reveals: their detection is ``hang_detection``, the waiting the timeout takes.
TIMEOUT_SEEN = frozenset({FailureClass.HANG, FailureClass.WORKER_SILENT})
#: Second sightings: a step seen again with nothing between (a save, then the poll that lists it; a trigger's
#: sighting, then the operator's look) was reached at its first sighting; the later one is no event -- the workload
#: trained on. (Counted as a span without progress, each step's save-to-poll delay was "other", and the shortened span
#: after it set a pace that made ordinary spans stalls: the demo's Vertex AI ledger read 41 % other.) After a
#: waited-out event the same step seen again is the workload restarting, and stays an event.


def run_pace(reports: Sequence[StepReport]) -> float | None:
    """The run's pace, seconds per step: the lower quartile of seconds per step over consecutive step reports
    that moved forward in time and steps (``reports`` oldest first), or None with fewer than :data:`PACE_SPANS` of
    them. The lower quartile: the pace of undisturbed training, which spans holding a restart or a save do not
    skew."""
    first = [r for i, r in enumerate(reports) if i == 0 or reports[i - 1].step != r.step]  # no second sightings
    paces = [(b.time - a.time) / (b.step - a.step) for a, b in itertools.pairwise(first)
             if b.step > a.step and b.time > a.time]  # two lines shipped at one time say nothing of the pace
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
        if report.start or report.step >= floor:  # a process's start is never stale
            kept.append(report)
    return kept


def attempt_end(attempt: Attempt, end: float) -> float:
    """When ``attempt`` ended, seconds since the epoch: its ``ended_at``, else its last decision's time (a failed
    attempt whose end was not recorded), else ``end`` (the run's end or now: it is still running)."""
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
    seen = {(r.time, r.step, r.start) for r in steps} | {(s.completed_at, s.step, False) for s in mine_saves}
    reports = [StepReport(t, n, start) for t, n, start in sorted(seen)]

    def saving(after: float, until: float) -> float:
        """Seconds of ``(after, until)`` the known saves were being written (each save's seen span)."""
        return sum(max(0.0, min(until, s.span[1]) - max(after, s.span[0])) for s in mine_saves)

    pace = run_pace(reports)
    best_step = -1  # the furthest step reached by any earlier attempt
    for index, attempt in enumerate(ran):
        assert attempt.started_at is not None
        begin, finish = attempt.started_at, min(attempt_end(attempt, end), end)
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
        timed_out = ending is not None and ending.failure.failure_class in TIMEOUT_SEEN
        buckets["hang_detection" if timed_out else "detection"] += finish - failed_at
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
            restarting = False  # after a waited-out event or an in-place restart, until the workload moves again
            resumed = mine[0].step if mine[0].start else start_step  # the step the running process resumed from
            started = mine[0].start  # the attempt's first process has said it started
            for report in mine:
                span = report.time - previous.time
                gained = report.step - previous.step
                if report.start and report is not mine[0]:
                    # a restart once a process said it started or the attempt moved past its resume step
                    if started or max(r.step for r in mine if r.time <= previous.time) > start_step:
                        # A process restarted in place: the step it was making when it died is lost (at the pace;
                        # the steps before it that it redoes are wasted when redone), the rest is the restart.
                        lost = min(span, pace) if pace is not None else 0.0
                        buckets["wasted_progress"] += lost
                        buckets["in_place_restart"] += span - lost
                        restarting, previous = True, report
                    # else the first process's start, read after a look had seen its step: no event
                    started, resumed = True, report.step
                    continue
                waited = [w for w in waits if previous.time <= w <= report.time]
                if gained == 0 and not waited and not restarting and report is not mine[0]:
                    continue  # a second sighting: the workload trained on since the first
                # A span holding our first WAIT look at an event is work until that look, a repair wait after it.
                work = (min(waited) - previous.time) if waited else span
                if waited:
                    buckets["repair_wait"] += span - work
                if work > 0 and gained > 0:  # a blocking save held the span up beyond its steps' pace
                    saved = min(saving(previous.time, report.time), work - gained * (pace or 0.0))
                    if saved > 0:
                        buckets["checkpoint_save"] += saved
                        work -= saved
                if work > 0 and gained > 0 and pace is not None and work > STALL_FACTOR * gained * pace:
                    # the process had not moved from its resume step yet: it was starting; else a stall (slow
                    # steps, an unknown save, an in-place restart whose start was not seen)
                    buckets["checkpoint_restore" if previous.step <= resumed else "stall"] += work - gained * pace
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
            held = [w for w in waits if previous.time <= w <= failed_at]
            if failed and held:  # waited on a repair, then gave up on it: from the first wait on, a repair wait
                buckets["repair_wait"] += failed_at - min(held)
                tail = min(held) - previous.time
            saved = min(saving(previous.time, failed_at), tail)
            buckets["checkpoint_save"] += saved
            buckets["wasted_progress" if failed else "productive"] += tail - saved
        following = ran[index + 1] if index + 1 < len(ran) else None
        if following is not None and following.started_at is not None:
            buckets["recovery"] += max(0.0, following.started_at - finish)
    accounted = sum(buckets.values())  # steps going back with no start seen are already in "other"
    buckets["other"] += max(0.0, total - accounted)
    return Ledger(total=sum(buckets.values()), basis="steps" if reports else "attempts", **buckets)
