"""A workload's ml-goodput-measurement events: written by the package's real GoodputRecorder to the emulator's
Cloud Logging, read back with the package's own calculator through the provider's client."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from airflow_provider_resilient.goodput.events import WorkloadGoodput, read_workload_goodput
from airflow_provider_resilient.logging_clients import logging_client
from airflow_provider_resilient.testing.goodput_events import goodput_recorder

pytest.importorskip("ml_goodput_measurement")
PROJECT = "test-project"


def record_a_disrupted_run(emulator, job: str, logger: str | None = None) -> None:
    """Backfilled events of a run (seconds from t0): TPU init 0-20, training prep 20-30, steps 0..39 every 10 s
    from 30; a crash at 430 (step 39 started at 420, the last save kept step 20); a restart at 500 with training
    prep 500-520 and steps 20..49 every 10 s from 520; the end at 820."""
    recorder = goodput_recorder(job, logger, project=PROJECT, emulator=emulator.address)
    t0 = datetime.now(tz=UTC) - timedelta(seconds=1000)

    def at(seconds: float) -> datetime:
        return t0 + timedelta(seconds=seconds)

    recorder.record_job_start_time(at(0))
    recorder.record_tpu_init_start_time(at(0))
    recorder.record_tpu_init_end_time(at(20))
    recorder.record_training_preparation_start_time(at(20))
    recorder.record_training_preparation_end_time(at(30))
    for step in range(40):
        recorder.record_step_start_time(step, at(30 + 10 * step))
    recorder.record_job_start_time(at(500))
    recorder.record_training_preparation_start_time(at(500))
    recorder.record_training_preparation_end_time(at(520))
    for step in range(20, 50):
        recorder.record_step_start_time(step, at(520 + 10 * (step - 20)))
    recorder.record_job_end_time(at(820))
    recorder.flush()


def test_the_workloads_events_are_read_with_the_packages_calculator(resilient_emulator):
    record_a_disrupted_run(resilient_emulator, "run-a")
    record_a_disrupted_run(resilient_emulator, "run-b")  # another job in the same log name space: not mixed in
    figures = read_workload_goodput(logging_client(PROJECT, emulator=resilient_emulator.address), "run-a")
    assert figures.logger_name == "goodput_run-a"
    assert figures.total_seconds == pytest.approx(820)
    # Productive: 40 steps of attempt 1 whose progress up to step 20 was kept, and steps 20..49 of attempt 2.
    assert figures.goodput_seconds == pytest.approx(500)
    seconds = figures.badput_seconds
    assert seconds["WASTED_PROGRESS_FROM_DISRUPTION"] == pytest.approx(190)  # steps 20..39 run twice (less a step)
    assert seconds["INFRASTRUCTURE_RECOVERY_FROM_DISRUPTION"] == pytest.approx(80)  # the crash to the restart
    assert seconds["TPU_INITIALIZATION"] == pytest.approx(20) and seconds["TRAINING_PREP"] == pytest.approx(30)
    assert figures.disruptions == 1 and figures.last_productive_step == 49
    data = figures.as_dict()
    assert data["source"] == "ml-goodput-measurement events" and data["goodput"] == pytest.approx(500 / 820, abs=1e-4)
    assert data["badput_breakdown"]["WASTED_PROGRESS_FROM_DISRUPTION"] == pytest.approx(100 * 190 / 820, abs=0.01)
    assert "1 disruption(s), last productive step 49" in figures.summary()


def test_a_job_name_without_events_is_a_clear_error(resilient_emulator):
    record_a_disrupted_run(resilient_emulator, "run-a", logger="shared-log")
    client = logging_client(PROJECT, emulator=resilient_emulator.address)
    with pytest.raises(ValueError, match=r"no goodput events of job 'run-c' in log 'shared-log'.*GoodputRecorder"):
        read_workload_goodput(client, "run-c", "shared-log")
    assert read_workload_goodput(client, "run-a", "shared-log").disruptions == 1


@pytest.mark.parametrize(("job", "logger", "message"), [
    ("", None, "goodput_job_name must be a non-empty string"),
    ("run", "bad name with spaces", "not a Cloud Logging log ID"),
])
def test_bad_names_are_refused_before_any_read(job, logger, message):
    with pytest.raises(ValueError, match=message):
        read_workload_goodput(object(), job, logger)  # the client is never touched


def test_details_of_another_shape_are_a_value_error():
    with pytest.raises(ValueError, match="not as expected"):
        WorkloadGoodput.from_details("run", "log", {"goodput_time": {}})
