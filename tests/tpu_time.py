"""Platform time for the Cloud TPU tests: the emulator's ``ManualClock``, the TPU operator's clock and sleep and
its trigger's, moved as one time.

On :data:`STEPPED` the emulator's platform time stands still (``testing/emulator/clock.py``); the latencies are
the real platform's (``time_scale=1.0``: a node is CREATING 90 s, REPAIRING 300 s, DELETING 30 s). A test hands
the code under test a :class:`PlatformTime` (:meth:`PlatformTime.drive`): each time the operator, its hooks or
its trigger would wait -- a poll interval, a backoff, a maintenance wait, the poll of a long-running operation,
a trigger's look-again time -- the platform's time moves on by that much at once and the platform acts on it
(``emulator.advance``), and the operator's and the trigger's clock read that same time. So a 300 s repair, a
30 min queue timeout or a 10 min backoff cost a few looks, never their length, and what happens when is the
test's to say, not the machine's speed.

What stays real: the workloads (the worker runner and the command under it, processes on the emulated VMs)
and everything they do -- steps, exits, checkpoints. While a worker VM runs a process, each stepped wait also
gives them :data:`PAUSE_SECONDS` of real time, so a workload makes progress while the operator looks (about 20
looks a second: with ``poll_interval`` 1 s, the platform's time runs some 20 times faster than the wall clock's
then, and as fast as the test can step it while nothing real runs); a test waits for what a workload does
with :meth:`PlatformTime.wait_for` (bounded, real time), never for the platform. The VMs read the platform's
time too (their runner's heartbeat: ``worker/runner.py``, ``vm_time``), so a heartbeat is never "old" just
because the platform's time ran ahead of the wall clock.

A wait the test cannot step -- a kill's own hook in ``on_kill`` waiting for its deletions -- runs inside
:meth:`PlatformTime.moving`, which moves the platform's time on in the background meanwhile.

What is not stepped: the Cloud Storage emulator stamps objects with the wall clock, so a test that compares
checkpoint saves' times with the run's (the goodput ledger's split) runs on real time.

Platform-neutral parts (for ``tests/platform_time.py``): :meth:`now`, :meth:`sleep`, :meth:`sleep_async`,
:meth:`moving`, :meth:`advance_until`, :meth:`wait_for` only need an emulator with ``advance`` and ``clock``
(and, for the pause, a way to tell whether a workload process runs: here ``emulator.tpu.worker_pids()``);
:meth:`drive` sets the ``_clock`` / ``_sleep`` attributes every operator (``operators/base.py``) and the TPU
trigger have.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest

#: The emulator on a manual clock with the real platform's latencies.
STEPPED = pytest.mark.resilient_emulator(clock="manual", time_scale=1.0)
#: Real seconds each stepped wait gives the workloads (real processes) while a worker VM runs one.
PAUSE_SECONDS = 0.05
#: The bound of every real-time wait for a workload (seconds): a bound, never a measured time.
WAIT_SECONDS = 60.0

T = TypeVar("T")


@contextlib.contextmanager
def stepped_emulator() -> Iterator[Any]:
    """An emulator as :data:`STEPPED` gives the ``resilient_emulator`` fixture (a manual clock, the platform's
    latencies), its environment exported, stopped afterwards: for a module-scoped fixture that runs one scenario
    for the tests of several of its facts."""
    from airflow_provider_resilient.testing.emulator.clock import ManualClock
    from airflow_provider_resilient.testing.emulator.config import EmulatorConfig
    from airflow_provider_resilient.testing.emulator.server import Emulator
    from airflow_provider_resilient.testing.storage import patched_environ

    emulator = Emulator(config=EmulatorConfig(time_scale=1.0), clock=ManualClock())
    with emulator, patched_environ(emulator.env()):
        yield emulator


class PlatformTime:
    """One time for the emulator and the code under test (see the module docstring).

    Args:
        emulator: the ``resilient_emulator`` fixture's emulator, on a ``ManualClock``.
        pause: real seconds each stepped wait gives the workloads.
    """

    def __init__(self, emulator: Any, pause: float = PAUSE_SECONDS) -> None:
        self.emulator = emulator
        self.pause = pause
        self.waited = 0.0  # platform seconds the code under test waited in all
        #: While this returns true, the platform's time does not move: a wait first waits in real time
        #: (bounded) for what a workload owes the test (:meth:`hold_while`).
        self.held: Callable[[], object] = lambda: False

    def now(self) -> float:
        """The platform's time, epoch seconds: what the operator's and the trigger's clock read."""
        return float(self.emulator.clock.time())

    def _step(self, seconds: float) -> float:
        """Move the platform's time on by ``seconds``; the real seconds to pause then: :attr:`pause` while a
        worker VM runs a process (the workloads need real time, and the looks must not starve them of the CPU),
        none otherwise (nothing real is waiting: a creation, a deletion, a backoff)."""
        seconds = max(0.0, seconds)
        self.waited += seconds
        self.emulator.advance(seconds)
        return self.pause if self.emulator.tpu.worker_pids() else 0.0

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` of platform time: the platform moves on and acts at once; running workloads get
        :attr:`pause` of real time. Held (:meth:`hold_while`), it first waits for the workloads."""
        self.wait_for(lambda: not self.held())
        time.sleep(self._step(seconds))

    async def sleep_async(self, seconds: float) -> None:
        """:meth:`sleep` for a trigger's event loop."""
        deadline = time.monotonic() + WAIT_SECONDS
        while self.held():
            assert time.monotonic() < deadline, f"still held after {WAIT_SECONDS} s: {self.held}"
            await asyncio.sleep(self.pause)
        await asyncio.sleep(self._step(seconds))

    def hold_while(self, condition: Callable[[], object]) -> None:
        """Keep the platform's time still while ``condition()`` is true -- something a workload does in real
        time must happen before the platform's next moment (a checkpoint saved on request before the window
        begins): the test says when the platform acts, not the machine's speed."""
        self.held = condition

    def drive(self, subject: T) -> T:
        """Give ``subject`` -- an operator (``_sleep``, ``_clock``; its hooks take its sleep) or a
        ``TPUNodeTrigger`` (async ``_sleep``, ``_clock``) -- this time; returns it."""
        from airflow.triggers.base import BaseTrigger

        subject._sleep = self.sleep_async if isinstance(subject, BaseTrigger) else self.sleep  # type: ignore[attr-defined]
        subject._clock = self.now  # type: ignore[attr-defined]
        return subject

    @contextlib.contextmanager
    def moving(self, step: float = 10.0) -> Iterator[None]:
        """While the block runs, move the platform's time on by ``step`` seconds every :attr:`pause` of real time,
        for a wait the test cannot step: a kill's own hook (``on_kill`` makes one, with the wall clock's sleep)
        waiting for its deletions. That hook polls them every :attr:`pause` meanwhile, not every second
        (``hooks.tpu.OPERATION_POLL_SECONDS``, the first pause of every TPU hook's wait)."""
        from airflow_provider_resilient.hooks import tpu as tpu_hooks

        done = threading.Event()
        first_pause, tpu_hooks.OPERATION_POLL_SECONDS = tpu_hooks.OPERATION_POLL_SECONDS, self.pause

        def run() -> None:
            while not done.wait(self.pause):
                self.emulator.advance(step)

        mover = threading.Thread(target=run, name="platform-time", daemon=True)
        mover.start()
        try:
            yield
        finally:
            done.set()
            mover.join()
            tpu_hooks.OPERATION_POLL_SECONDS = first_pause

    def advance_until(self, condition: Callable[[], T], step: float = 1.0, limit: float = 3600.0) -> T:
        """Move the platform's time on ``step`` seconds at a time until ``condition()`` is true (a deletion is
        over, a request expired); returns its value.

        Raises:
            AssertionError: still false after ``limit`` seconds of platform time.
        """
        moved = 0.0
        while not (value := condition()):
            assert moved < limit, f"not within {limit} s of platform time: {condition}"
            self.sleep(step)
            moved += step
        return value

    def wait_for(self, condition: Callable[[], T], timeout: float = WAIT_SECONDS) -> T:
        """Wait in real time (bounded by ``timeout``) until ``condition()`` is true -- for what a workload
        does, never for the platform; returns its value.

        Raises:
            AssertionError: not within ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        while not (value := condition()):
            assert time.monotonic() < deadline, f"not within {timeout} s: {condition}"
            time.sleep(self.pause)
        return value


#: On real time (the emulator on the wall clock, its latencies scaled to fractions of a second): the longest wait
#: of an operator or a hook -- a poll, a backoff, the poll of a long-running operation.
REAL_TIME_POLL_SECONDS = 0.05


def on_real_time(operator: T) -> T:
    """An operator for a test that runs on real time (the goodput ledger's split against checkpoints that Cloud
    Storage stamps with the wall clock): its waits, and its hooks' (a node's creation, deletion), last at most
    :data:`REAL_TIME_POLL_SECONDS`, so the fractions of a second the scaled platform takes are not polled for a
    second at a time. Returns it."""
    operator._sleep = lambda seconds: time.sleep(min(seconds, REAL_TIME_POLL_SECONDS))  # type: ignore[attr-defined]
    return operator
