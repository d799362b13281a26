"""The emulator's clock: a manual clock moves the platform only when the test says so."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from airflow_provider_resilient.testing.emulator.clock import ManualClock, SystemClock

from .conftest import PLUGIN, custom_job

MANUAL = pytest.mark.resilient_emulator(clock="manual", time_scale=1.0)
START = datetime(2026, 11, 24, 6, 0, tzinfo=UTC)


def test_a_manual_clock_stands_still_until_advanced():
    clock = ManualClock(START)
    assert (clock.monotonic(), clock.now(), clock.time()) == (0.0, START, START.timestamp())
    clock.advance(90)
    clock.advance(0.5)
    assert clock.monotonic() == clock.elapsed == 90.5
    assert clock.now() == START + timedelta(seconds=90.5)
    assert clock.time() == START.timestamp() + 90.5


def test_a_manual_clock_never_goes_back_and_needs_an_aware_start():
    clock = ManualClock(START)
    with pytest.raises(ValueError, match=r"advance\(-1\)"):
        clock.advance(-1)
    assert clock.elapsed == 0.0
    with pytest.raises(ValueError, match="aware datetime"):
        ManualClock(datetime(2026, 11, 24))  # a naive datetime


def test_a_manual_clock_starts_at_the_real_time_by_default():
    before = datetime.now(tz=UTC)
    assert before <= ManualClock().now() <= datetime.now(tz=UTC)


def test_the_system_clock_reads_real_time():
    clock = SystemClock()
    assert abs(clock.time() - time.time()) < 5
    assert clock.now().tzinfo is UTC
    first = clock.monotonic()
    assert clock.monotonic() >= first


def test_advance_refuses_an_emulator_on_real_time(resilient_emulator):
    with pytest.raises(TypeError, match="ManualClock"):
        resilient_emulator.advance(1)


def _phase(emulator, name: str) -> str:
    return emulator.vertex.runs[name].phase


@MANUAL
def test_a_custom_job_moves_through_its_states_only_as_the_clock_moves(client, resilient_emulator):
    """Seed 003's states at the latencies of ``Latencies`` (queued 5 s, provisioning 60 s, success 5 s), each
    state change stamped with the clock's time -- no window of real time guessed anywhere."""
    clock = resilient_emulator.clock
    created = client.create_custom_job(parent="projects/test-project/locations/us-central1",
                                       custom_job=custom_job("print('trained')"))
    assert created.create_time == clock.now()
    state = lambda: client.get_custom_job(name=created.name).state.name  # noqa: E731
    ticks = time.monotonic() + 10 * resilient_emulator.config.tick_seconds  # real time: ten looks of the engine
    while time.monotonic() < ticks:  # real time passes; the platform's does not
        assert state() == "JOB_STATE_QUEUED"
    resilient_emulator.advance(4.9)
    assert state() == "JOB_STATE_QUEUED"
    resilient_emulator.advance(0.1)
    assert state() == "JOB_STATE_PENDING"
    resilient_emulator.advance(60)
    job = client.get_custom_job(name=created.name)
    assert job.state.name == "JOB_STATE_RUNNING"
    assert job.start_time == clock.now()
    # The workload is a real process: wait (in real time) until the platform has seen its primary exit 0.
    deadline = time.monotonic() + 30
    while _phase(resilient_emulator, created.name) != "succeeding":
        assert time.monotonic() < deadline, "the primary never exited"
        time.sleep(0.02)
    resilient_emulator.advance(4)
    assert state() == "JOB_STATE_RUNNING"
    resilient_emulator.advance(1)
    done = client.get_custom_job(name=created.name)
    assert done.state.name == "JOB_STATE_SUCCEEDED"
    assert done.end_time == clock.now() == created.create_time + timedelta(seconds=70)


@MANUAL
def test_an_after_seconds_fault_strikes_at_the_clocks_second(client, resilient_emulator):
    resilient_emulator.add_fault({"kind": "internal_error", "after_seconds": 30})
    created = client.create_custom_job(parent="projects/test-project/locations/us-central1",
                                       custom_job=custom_job("import time; time.sleep(600)"))
    resilient_emulator.advance(65)  # queued + provisioning: RUNNING from here
    assert client.get_custom_job(name=created.name).state.name == "JOB_STATE_RUNNING"
    resilient_emulator.advance(29)
    assert resilient_emulator.vertex.events(created.name).count("fault internal_error on workerpool0-0") == 0
    resilient_emulator.advance(1)
    assert "fault internal_error on workerpool0-0" in resilient_emulator.vertex.events(created.name)


def test_the_marker_refuses_an_unknown_clock(pytester):
    pytester.makepyfile("""
        import pytest

        @pytest.mark.resilient_emulator(clock="frozen")
        def test_it(resilient_emulator):
            pass
    """)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-p", PLUGIN)
    result.stdout.fnmatch_lines(["*clock=...*'real' or 'manual', got 'frozen'*"])
