"""Training progress seen through checkpoints: the newest complete step of a running attempt, since when,
and whether it has stalled for longer than a hang timeout (DESIGN.md rules table: "no heartbeat / no
checkpoint progress for a set time" is a hang). Pure: the caller lists the checkpoints and gives the time.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class ProgressWatch:
    """Follows the newest checkpoint step of one running attempt.

    Attributes:
        hang_timeout: seconds without a new step after which :meth:`hang` reports a hang; None: never.
        step: the newest step seen (None: no checkpoint yet).
        since: when that step was first seen, seconds since the epoch (None before the first look).
    """

    hang_timeout: float | None = None
    step: int | None = None
    since: float | None = None

    def observe(self, step: int | None, now: float) -> bool:
        """Note a look at ``now`` that found ``step``; True when it is the first look or a new step (the
        first look dates the step the attempt resumed from)."""
        if self.since is not None and step == self.step:
            return False
        self.step, self.since = step, now
        return True

    def hang(self, now: float) -> str | None:
        """Why the attempt counts as hung at ``now``, or None."""
        if self.hang_timeout is None or self.since is None:
            return None
        stalled = now - self.since
        if stalled <= self.hang_timeout:
            return None
        where = f"step {self.step}" if self.step is not None else "no checkpoint"
        return f"no new checkpoint past {where} for {stalled:.0f} s (hang_timeout {self.hang_timeout:.0f} s)"
