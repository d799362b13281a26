"""The emulator's one clock: every verb and every engine tick reads the time from it.

Two kinds, with the same three readings (``monotonic()`` seconds for latencies and fault timing, ``now()``
an aware UTC datetime for the resources' timestamps, ``time()`` epoch seconds):

* :class:`SystemClock` -- real time. The standalone server, the demo and the benchmarks run on it.
* :class:`ManualClock` -- time stands still until :meth:`ManualClock.advance` moves it (moto's and
  ``freezegun``'s habit). A test says *when* the platform acts (``emulator.advance(300)``: the repair is
  over) instead of guessing how long a machine takes; ``@pytest.mark.resilient_emulator(clock="manual")``
  gives the fixture one. Its wall time starts at the real time it was made, so timestamps stay plausible
  to clients that compare them with their own clock.

The workloads are real processes: their own progress (steps, exits, checkpoints) runs in real time on any
clock. What the manual clock controls is the platform's side: latencies (``Latencies``, scaled by
``time_scale``), ``after_seconds`` / ``grace_seconds`` / ``active_seconds`` of faults, queued resources'
``valid_until_duration``, ``scheduling.timeout``.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    """What the emulator reads the time from."""

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back (latencies, fault timing)."""
        ...

    def now(self) -> datetime:
        """The wall time (aware, UTC): create/update/start/end times, audit log entries."""
        ...

    def time(self) -> float:
        """The wall time in epoch seconds."""
        ...


class SystemClock:
    """Real time: ``time.monotonic()``, ``datetime.now(UTC)``, ``time.time()``."""

    def monotonic(self) -> float:
        return time.monotonic()

    def now(self) -> datetime:
        return datetime.now(tz=UTC)

    def time(self) -> float:
        return time.time()

    def __repr__(self) -> str:
        return "SystemClock()"


class ManualClock:
    """Time that moves only when :meth:`advance` is called. Thread-safe.

    Args:
        start: the wall time at which it stands (aware datetime; default: the real time now).
    """

    def __init__(self, start: datetime | None = None) -> None:
        self._start = start or datetime.now(tz=UTC)
        if self._start.tzinfo is None:
            raise ValueError(f"ManualClock(start=...) needs an aware datetime, got {self._start!r}")
        self._elapsed = 0.0
        self._lock = threading.Lock()

    @property
    def elapsed(self) -> float:
        """Seconds advanced in all."""
        with self._lock:
            return self._elapsed

    def monotonic(self) -> float:
        return self.elapsed

    def now(self) -> datetime:
        return self._start + timedelta(seconds=self.elapsed)

    def time(self) -> float:
        return self.now().timestamp()

    def advance(self, seconds: float) -> None:
        """Move the time on by ``seconds`` (>= 0).

        Raises:
            ValueError: ``seconds`` is negative (time never goes back).
        """
        if seconds < 0:
            raise ValueError(f"a clock only moves forward: advance({seconds})")
        with self._lock:
            self._elapsed += seconds

    def __repr__(self) -> str:
        return f"ManualClock(elapsed={self.elapsed}s)"
