"""Platform time for tests: the emulated platform's clock and an operator's (or a trigger's) clock, stepped together.

Under ``@pytest.mark.resilient_emulator(clock="manual", time_scale=1.0)`` the emulator's platform acts only when
its :class:`~airflow_provider_resilient.testing.emulator.clock.ManualClock` is moved on (``emulator.advance``).
:class:`PlatformTime` gives an operator that clock: ``platform.wire(op)`` sets ``op._sleep`` to
:meth:`PlatformTime.sleep` and ``op._clock`` to :meth:`PlatformTime.now`, so every wait the operator makes -- a
poll interval, a backoff -- is that much of the platform's time, and the time it stamps attempts, incidents and
progress with is the platform's. A queue timeout of 30 minutes, a 60 s provisioning, a one-minute error delay or
a hang timeout then take no real time, and happen at their own second::

    MANUAL = pytest.mark.resilient_emulator(clock="manual", time_scale=1.0)

    @MANUAL
    def test_queue_timeout(resilient_emulator):
        platform = PlatformTime(resilient_emulator)
        op = platform.wire(operator(poll_interval=60))  # looks once a minute of platform time
        ...

The rule (:meth:`PlatformTime.sleep`): platform time passes **at once** while nothing real runs -- a job QUEUED or
PENDING, the error delay after an exit, a backoff, a workload frozen by a ``hang`` fault -- and **with real time**
while a workload process runs, since its progress (steps, checkpoints, its exit) is real. A test so waits only
for work that really runs, and a running workload is never judged against platform time that raced ahead of it.
What counts as "running" is :meth:`PlatformTime.busy` (any live process of the emulator, unless one of them is
stopped: a frozen process is a hang the platform waits out); a test may hand its own predicate.

Deferred, a trigger waits in its event loop in real time, outside the operator's ``_sleep``: ``with
platform.passing():`` moves platform time on in a thread, a step after each of the trigger's looks (each API call
the emulator answers), by the same rule; ``platform.wire(trigger)`` gives the trigger (``CustomJobTrigger._clock``)
the platform's clock.

Platform-neutral: it knows the emulator's ``advance``, ``processes`` and ``clock`` only, so it serves the Vertex
AI and the Cloud TPU operators and triggers alike (anything with ``_sleep`` / ``_clock``).

Caveat: the workloads' own timestamps (a checkpoint object's time, a goodput event's) are real time, while the
platform's clock runs ahead of real time once an idle span has passed at once. A test that relates the two
(checkpoint save times against attempt start times) stays on the real clock.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest

from airflow_provider_resilient.testing.emulator.clock import ManualClock

T = TypeVar("T")

#: The longest span of platform time passed at once before looking again whether a workload started.
IDLE_STEP_SECONDS = 1.0
#: The span of real time (and so of platform time) waited at a time while a workload runs.
REAL_SLICE_SECONDS = 0.02
#: Real seconds :meth:`PlatformTime.passing` waits between two looks at the emulator's record of calls.
PASSING_REST_SECONDS = 0.002


def _stopped(pid: int) -> bool:
    """Whether process ``pid`` is stopped (SIGSTOP: a ``hang`` fault); False when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] in ("T", "t")
    except (OSError, IndexError):
        return False


class PlatformTime:
    """The emulator's manual clock as an operator's and a trigger's time (see the module docstring).

    Args:
        emulator: an :class:`~airflow_provider_resilient.testing.emulator.Emulator` on a ``ManualClock``.
        busy: whether a workload runs now (platform time then passes with real time); default
            :meth:`busy`.

    Raises:
        TypeError: the emulator runs on real time.
    """

    def __init__(self, emulator: Any, busy: Callable[[], bool] | None = None) -> None:
        if not isinstance(emulator.clock, ManualClock):
            raise TypeError("PlatformTime needs @pytest.mark.resilient_emulator(clock='manual'), the emulator runs "
                            f"on {emulator.clock!r}")
        self.emulator = emulator
        self._busy = busy or self.busy

    def now(self) -> float:
        """The platform's time in epoch seconds (what an operator's ``_clock`` returns)."""
        return float(self.emulator.clock.time())

    def busy(self) -> bool:
        """Whether a workload runs: some process of the emulator is alive and none is stopped."""
        pids = self.emulator.processes()
        return bool(pids) and not any(_stopped(pid) for pid in pids)

    def _step(self, most: float) -> float:
        """Pass at most ``most`` seconds of platform time (see :meth:`sleep`); the seconds passed."""
        if self._busy():
            step = min(most, REAL_SLICE_SECONDS)
            time.sleep(step)
        else:
            step = min(most, IDLE_STEP_SECONDS)
        self.emulator.advance(step)
        return step

    def sleep(self, seconds: float) -> None:
        """Let ``seconds`` of platform time pass (an operator's ``_sleep``): at once while no workload runs, with
        real time while one does; the platform acts on every second of it (``Emulator.advance``)."""
        left = float(seconds)
        while left > 1e-9:
            left -= self._step(left)

    def until(self, condition: Callable[[], bool], *, most: float = 3600.0, real_timeout: float = 60.0) -> float:
        """Let platform time pass by the rule of :meth:`sleep`, a second at a time, until ``condition()`` holds (a
        test that drives the platform itself, with no operator); the platform seconds passed.

        Raises:
            TimeoutError: ``most`` seconds of platform time or ``real_timeout`` seconds of real time passed first.
        """
        passed, deadline = 0.0, time.monotonic() + real_timeout
        while not condition():
            if passed >= most or time.monotonic() > deadline:
                raise TimeoutError(f"still not so after {passed:.0f} s of platform time")
            passed += self._step(IDLE_STEP_SECONDS)
        return passed

    def wire(self, thing: T) -> T:
        """Give ``thing`` -- an operator (``_sleep`` and ``_clock``) or a trigger (``_clock``) -- the platform's
        time; returns it."""
        if hasattr(thing, "_sleep"):
            thing._sleep = self.sleep  # type: ignore[attr-defined]
        thing._clock = self.now  # type: ignore[attr-defined]
        return thing

    @contextlib.contextmanager
    def passing(self, step: float = 5.0) -> Iterator[PlatformTime]:
        """Move platform time on in a thread while the block runs (a trigger waiting in its event loop): after each
        API call the emulator answers -- a trigger's look -- ``step`` seconds pass, by the rule of :meth:`sleep`
        (with real time while a workload runs). So platform time moves in step with the trigger's looks, like an
        operator's polls: a trigger that reads its clock after a slow look (a listing in a worker thread) finds
        its look at most a step or two old, however loaded the machine. Pick ``step`` like a poll interval: a
        fraction of the timeout the trigger judges."""
        stop = threading.Event()
        failed: list[BaseException] = []

        def pass_step() -> None:
            left = step
            while left > 1e-9 and not stop.is_set():
                left -= self._step(left)

        def run() -> None:
            seen = len(self.emulator.calls.list())
            try:
                while not stop.is_set():
                    calls = len(self.emulator.calls.list())
                    if calls > seen:
                        seen = calls
                        pass_step()
                    elif self._busy():  # a workload runs: its time is real, looked at or not
                        self._step(REAL_SLICE_SECONDS)
                    else:
                        stop.wait(PASSING_REST_SECONDS)
            except BaseException as exc:  # said in the test, not lost in a thread
                failed.append(exc)

        thread = threading.Thread(target=run, name="platform-time", daemon=True)
        thread.start()
        try:
            yield self
        finally:
            stop.set()
            thread.join(timeout=30)
        if failed:
            raise failed[0]


def manual(**config: Any) -> pytest.MarkDecorator:
    """The emulator on a manual clock with the platform's real latencies (``Latencies``: queued 5 s, provisioning
    60 s, an error a minute after the exit, ...) and more :class:`~airflow_provider_resilient.testing.emulator.
    EmulatorConfig` fields, e.g. ``manual(platform={"transient_job_retries": 0})``: a test marked with it moves
    time with :class:`PlatformTime`."""
    return pytest.mark.resilient_emulator(clock="manual", time_scale=1.0, **config)


#: :func:`manual` with nothing more.
MANUAL = manual()
