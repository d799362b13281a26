"""The goodput ceiling: the best goodput checkpointing allows, to set beside a run's ledger (:mod:`.ledger`).

* :func:`young_daly_interval` and :func:`goodput_ceiling` -- Young/Daly's optimal checkpoint interval
  ``sqrt(2 C MTBF)`` and the goodput it gives, ``1 - sqrt(2C/MTBF) - R/MTBF``, for an *expected* MTBF;
* :func:`trace_wall_time`, :func:`trace_budget` and :func:`trace_ceiling` -- one exact trace of failures replayed:
  the wall time a fixed interval takes, where it goes, and the best fixed interval for that trace.

All times are seconds: C the cost of one save, R the cost of one restart, MTBF the mean running time between
failures. Pure: no clock, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


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


__all__ = ["goodput_ceiling", "trace_budget", "trace_ceiling", "trace_wall_time", "young_daly_interval"]
