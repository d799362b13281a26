"""Wait out a TPU node's repair or re-create the node: decided from what the run has seen so far.

Cloud TPU's "Manage maintenance events with Cloud TPU Pods"
(https://cloud.google.com/tpu/docs/maintenance-events) says most maintenance events recover automatically (the
node is REPAIRING, then READY again, and the workload restarts), and that a TPU which does not recover is deleted
and re-created, resuming from a checkpoint. It gives no figure for how long a repair takes, so a fixed wait is a
guess. Both ways end the same: a VM that boots, the workload's start-up and its restore from the checkpoint. What
differs is the time before that boot: the rest of the repair, or a new node (the old one's deletion, the backoff
and the create). The run measures both as it goes:

* **a new node** -- for each attempt after a decision to re-create (or resubmit), from that decision to the
  attempt's node being submitted (:attr:`~.records.Attempt.started_at`; for a node created directly that is when
  it was READY): the backoff, the old node's deletion and the create, as this run's zone and project give them;
* **a repair** -- each maintenance event waited on before: from the event's first look to the last look that
  still saw it (plus that look's wait), whole when the node came back, a lower bound when the run gave up on it
  and re-created.

Then, at each look at a node in repair (``elapsed`` seconds after it was first seen):

* no new node measured yet: wait, as the ``maintenance_wait`` budget allows (nothing to weigh the repair against);
* the last repair was given up on (it outlasted the wait): re-create now;
* repairs waited out (their mean ``D``) and ``D >= new node``: re-create now -- a repair is expected to take
  longer than a new node;
* repairs waited out and ``D < new node``: wait for the repair, and give up on it once it is a new node's time
  past ``D`` (``elapsed >= D + new node``);
* no repair measured yet: wait a new node's time, then re-create (the ski-rental rule: never more than twice the
  better choice, whatever the repair's length turns out to be).

The ``maintenance_wait`` budget bounds every wait. ``RetryPolicy(weigh_repairs=False)``: the budget alone decides.
Pure: no clock, no I/O.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from .failures import FailureClass
from .parts import DecisionAction
from .records import Attempt, Incident

#: The actions after which the run's next attempt runs on a new node (a measure of a new node's cost).
_NEW_NODE = frozenset({DecisionAction.RECREATE_NODE, DecisionAction.RESUBMIT})
#: Seconds a workload may take to save on the SIGTERM of a maintenance event before a READY spare replaces its node in
#: repair (deleting the node ends the save): the 30 s a Spot VM gets between its ACPI G2 Soft Off and the G3 Mechanical
#: Off (Compute Engine, "Preemptible VM instances", preemption process,
#: https://cloud.google.com/compute/docs/instances/preemptible#preemption-process); Cloud TPU documents no notice
#: length of its own.
NOTICE_SAVE_SECONDS = 30.0
#: Two looks at a node in repair more than this many of the wait between them apart are two maintenance events
#: (the node came back in between), not one.
_SAME_EVENT_GAP = 3.0


@dataclass(frozen=True)
class RepairOutlook:
    """What the run's measures imply for the repair in progress: ``recreate`` it now instead of waiting, and
    ``why`` (one line with the figures, for the decision's reason)."""

    recreate: bool
    why: str


def new_node_seconds(history: Sequence[Attempt]) -> list[float]:
    """Seconds from each decision to re-create (or resubmit) to the next attempt's node submitted, oldest first,
    over ``history``: the cost of a new node as this run has paid it (backoff, deletion, create)."""
    found: list[float] = []
    for before, after in itertools.pairwise(history):
        if not before.incidents or after.resource_name is None or after.started_at is None:
            continue
        decision = before.incidents[-1].decision
        if decision.action in _NEW_NODE and decision.decided_at is not None:
            found.append(max(0.0, after.started_at - decision.decided_at))
    return found


def _is_repair_wait(incident: Incident) -> bool:
    return (incident.failure.failure_class == FailureClass.MAINTENANCE_EVENT
            and incident.decision.action == DecisionAction.WAIT)


def _seen(incident: Incident) -> float:
    decided = incident.decision.decided_at
    return decided if decided is not None else (incident.failure.timestamp or 0.0)


def continues_wait(before: Incident, seen: float) -> bool:
    """A look at ``seen`` (epoch seconds) continues the wait decided in ``before`` (a WAIT): it came within
    :data:`_SAME_EVENT_GAP` times that wait (at least a second) after the wait was over. A later look found the
    condition after it had cleared: a node back from its repair, then a new maintenance event."""
    wait = before.decision.delay_seconds
    return seen - (_seen(before) + wait) <= _SAME_EVENT_GAP * max(wait, 1.0)


def _streaks(history: Sequence[Attempt]) -> list[list[Incident]]:
    """Each maintenance event waited on, as its incidents in order: the waits, then the maintenance decision
    that gave up on it when one did."""
    streaks: list[list[Incident]] = []
    for attempt in history:
        current: list[Incident] = []
        for incident in attempt.incidents:
            if _is_repair_wait(incident):
                if current and not continues_wait(current[-1], _seen(incident)):
                    streaks.append(current)
                    current = []
                current.append(incident)
                continue
            if current and incident.failure.failure_class == FailureClass.MAINTENANCE_EVENT:
                current.append(incident)  # the run gave up on this repair
            if current:
                streaks.append(current)
            current = []
        if current:
            streaks.append(current)
    return streaks


@dataclass(frozen=True)
class Repair:
    """One earlier repair the run waited on: ``seconds`` from its first look to its last look plus that look's
    wait (``ended``: the node came back), or to the decision to re-create instead (not ``ended``: it lasted at
    least that long)."""

    seconds: float
    ended: bool


def earlier_repairs(history: Sequence[Attempt], now: float) -> tuple[list[Repair], float | None]:
    """``(the earlier repairs, oldest first; when the repair in progress was first seen)`` from ``history`` at
    ``now`` (epoch seconds). The repair in progress is the failing attempt's last run of waits when a look at
    ``now`` still continues it (:func:`continues_wait`); None: this look is a new event."""
    streaks = _streaks(history)
    ongoing: float | None = None
    if streaks and history and history[-1].incidents and streaks[-1][-1] is history[-1].incidents[-1] \
            and _is_repair_wait(streaks[-1][-1]) and continues_wait(streaks[-1][-1], now):
        ongoing = _seen(streaks[-1][0])
        streaks = streaks[:-1]
    repairs = []
    for streak in streaks:
        last = streak[-1]
        ended = _is_repair_wait(last)
        end = _seen(last) + (last.decision.delay_seconds if ended else 0.0)
        repairs.append(Repair(max(0.0, end - _seen(streak[0])), ended))
    return repairs, ongoing


def repair_outlook(history: Sequence[Attempt], now: float, *, spare_ready: bool = False) -> RepairOutlook | None:
    """Whether to re-create a node in repair (a MAINTENANCE_EVENT the ``maintenance-wait`` rule matched) now
    rather than wait, from the run's ``history`` (the failing attempt last) at ``now`` (epoch seconds), by the
    module's rules. None when no new node has been measured yet: the ``maintenance_wait`` budget alone decides.
    ``spare_ready``: a spare node is READY for the next attempt (:mod:`..supervisor.spare`): re-create once the repair
    has lasted :data:`NOTICE_SAVE_SECONDS` (the workload's save on the event's SIGTERM is not cut off by the node's
    deletion) -- the next attempt starts on the spare at once, and a repair, however short, ends in the same boot
    and restore."""
    repairs, ongoing = earlier_repairs(history, now)
    elapsed = 0.0 if ongoing is None else max(0.0, now - ongoing)
    if spare_ready:
        recreate = elapsed >= NOTICE_SAVE_SECONDS
        return RepairOutlook(recreate, "a spare node is READY for the next attempt: " + (
            "taking it beats waiting any repair" if recreate else
            f"taking it once the workload had {NOTICE_SAVE_SECONDS:.0f} s to save on the notice "
            f"({elapsed:.0f} s so far)"))
    new = new_node_seconds(history)
    if not new:
        return None
    node = statistics.fmean(new[-3:])  # the newest: this zone's and this hour's
    measured = f"a new node took {node:.0f} s in this run"
    if not repairs:
        recreate = elapsed >= node
        return RepairOutlook(recreate,
                             f"no repair seen yet, this one {elapsed:.0f} s so far; {measured}: "
                             + ("re-create, having waited as long as a new node takes" if recreate
                                else "wait up to that long"))
    if not repairs[-1].ended:
        return RepairOutlook(True,
                             f"the last repair was not over after {repairs[-1].seconds:.0f} s; {measured}: "
                             "re-create now")
    lengths = [r.seconds for r in repairs if r.ended]
    repair = statistics.fmean(lengths)
    seen = f"{len(lengths)} earlier repair(s) took {repair:.0f} s on average"
    if repair >= node:
        return RepairOutlook(True, f"{seen}; {measured}: re-create now")
    recreate = elapsed >= repair + node
    return RepairOutlook(recreate,
                         f"{seen}, this one {elapsed:.0f} s so far; {measured}: "
                         + ("re-create, overdue by a new node's time" if recreate else "wait for the repair"))


__all__ = ["Repair", "RepairOutlook", "continues_wait", "earlier_repairs", "new_node_seconds", "repair_outlook"]
