"""ModelArts' fault tolerance and the ``service: modelarts`` faults, through the real SDK: the four scenarios of
"Training Fault Tolerance Check" (https://support.huaweicloud.com/intl/en-us/usermanual-standard-modelarts/
modelarts_trouble_0003.html) -- pre-check failure or hardware fault: the faulty node is isolated and the job re-issued,
at most fault-tolerance/job-retry-num times; the user's process failing on sound hardware: Failed, no re-issue --, the
30-minute queue limit of a re-issued job, and the quota / stockout / crash / hang / hardware / preflight faults."""

from __future__ import annotations

import time

import pytest

from airflow_provider_resilient.testing.emulator.faults import Fault

from .test_modelarts_conformance import (
    MANUAL,
    RETRY,
    create,
    details,
    events,
    job,
    sdk_client,
    stage_records,
    wait_phase,
)

pytestmark = pytest.mark.resilient_emulator(time_scale=0.002)
SLEEP = "import time; time.sleep(30)"


@pytest.fixture
def client(resilient_emulator):
    from huaweicloudsdkmodelarts.v1 import ModelArtsClient

    return sdk_client(ModelArtsClient, resilient_emulator)


def _phases(emulator, job_id: str) -> tuple[str, str]:
    with emulator.modelarts.lock:
        return emulator.modelarts.runs[job_id].phases()


def test_a_failed_precheck_isolates_the_node_and_reissues_the_job_which_then_completes(client, resilient_emulator):
    resilient_emulator.add_fault({"kind": "preflight", "service": "modelarts", "item": "disk-size root", "worker": 1,
                                  "match": {"display_name": "ft-*"}})
    job_id = create(client, job(name="ft-precheck", nodes=2, retries="2"))
    assert wait_phase(resilient_emulator, job_id, {"Completed", "Failed"}) == "Completed"
    first, second = stage_records(client, job_id)
    assert (first.record_order, second.record_order) == (1, 2)
    assert [s.name for s in first.stages] == ["scheduling", "preparing", "end"]  # never reached running
    assert [s.name for s in second.stages] == ["scheduling", "preparing", "running", "end"]
    assert [s.name for s in first.stages[1].sub_stages] == ["environment-pre-check"]
    records = details(client, job_id).status.running_records
    assert len(records) == 2 and records[0].end_recover == "job_reschedule_with_taint"
    [recover] = records[0].recover_records
    assert (recover.related_task, recover.fault_scenario, recover.recover_result) == ("worker-1", "node_fault",
                                                                                      "success")
    checks = events(client, job_id, pattern="item")
    assert "[ModelArts Service Log][worker-1] environment pre-check item: disk-size root, result: failed" in checks
    assert "[ModelArts Service Log][worker-0] environment pre-check item: dns, result: passed" in checks
    assert not any("gpu-check" in line or "ulimit" in line for line in checks)  # a CPU flavor, no InfiniBand
    assert "The training job has been restarted." in events(client, job_id, level="Warning")
    assert not events(client, job_id, pattern="error,exiting")


def test_without_fault_tolerance_there_is_no_precheck_and_a_preflight_fault_never_fires(client, resilient_emulator):
    index = resilient_emulator.add_fault({"kind": "preflight", "service": "modelarts", "item": "dns"})
    job_id = create(client, job(name="plain"))
    assert wait_phase(resilient_emulator, job_id, {"Completed", "Failed"}) == "Completed"
    assert resilient_emulator.faults.fired(index) == 0
    assert not events(client, job_id, pattern="item") and len(stage_records(client, job_id)) == 1


def test_a_hardware_fault_while_running_is_reissued_with_fault_tolerance(client, resilient_emulator, tmp_path):
    marker = tmp_path / "runs"
    code = f"import time; open('{marker}', 'a').write('x'); print('step 1', flush=True); time.sleep(0.5)"
    resilient_emulator.add_fault({"kind": "hardware", "service": "modelarts", "at_step": 1, "step_source": "log",
                                  "match": {"platform_attempt": 1}})
    job_id = create(client, job(code, name="hw-ft", retries="1"))
    assert wait_phase(resilient_emulator, job_id, {"Completed", "Failed"}) == "Completed"
    assert marker.read_text() == "xx"  # the workload ran on the first nodes and again on the new ones
    records = details(client, job_id).status.running_records
    assert [r.end_recover for r in records] == ["job_reschedule_with_taint", None]
    assert "hardware fault" in records[0].end_reason
    assert "[ModelArts Service Log][worker-0] hardware fault detected on the node." in events(client, job_id,
                                                                                            level="Error")


def test_a_hardware_fault_without_fault_tolerance_fails_the_job(client, resilient_emulator):
    resilient_emulator.add_fault({"kind": "hardware", "service": "modelarts", "after_seconds": 0.0})
    job_id = create(client, job(SLEEP, name="hw-plain"))
    assert wait_phase(resilient_emulator, job_id, {"Completed", "Failed"}) == "Failed"
    status = details(client, job_id).status
    assert (status.phase, status.secondary_phase) == ("Failed", "Failed")
    assert [(t.task, t.exit_code, t.message) for t in status.task_statuses] == [("worker-0", 137, "hardware fault")]
    assert len(status.running_records) == 1 and len(stage_records(client, job_id)) == 1
    assert resilient_emulator.processes() == []


def test_hardware_faulty_from_the_start_fails_a_job_without_fault_tolerance(client, resilient_emulator):
    resilient_emulator.add_fault({"kind": "hardware", "service": "modelarts"})  # no timing: a boot fault
    job_id = create(client, job(SLEEP, name="hw-boot"))
    assert wait_phase(resilient_emulator, job_id, {"Completed", "Failed"}) == "Failed"
    assert not events(client, job_id, pattern="item")


def test_the_user_process_failing_on_sound_hardware_fails_the_job_without_a_reissue(client, resilient_emulator):
    resilient_emulator.add_fault({"kind": "crash", "service": "modelarts", "exit_code": 3, "at_step": 2,
                                  "step_source": "log"})
    code = "import time\nfor s in range(100): print(f'step {s}', flush=True); time.sleep(0.05)"
    job_id = create(client, job(code, name="crash", retries="3"))
    assert wait_phase(resilient_emulator, job_id, {"Completed", "Failed"}) == "Failed"
    status = details(client, job_id).status
    assert status.task_statuses[0].exit_code == 137  # SIGKILL: the emulator cannot make a process exit with 3
    assert len(status.running_records) == 1 and not status.running_records[0].recover_records
    assert len(stage_records(client, job_id)) == 1
    assert "The training job has been restarted." not in events(client, job_id)


def test_a_spent_retry_budget_ends_the_job_with_error_exiting(client, resilient_emulator):
    resilient_emulator.add_fault({"kind": "preflight", "service": "modelarts", "item": "dns", "times": None})
    job_id = create(client, job(name="spent", retries="1"))
    assert wait_phase(resilient_emulator, job_id, {"Completed", "Failed"}) == "Failed"
    assert len(stage_records(client, job_id)) == 2
    [exiting] = events(client, job_id, pattern="error,exiting")
    assert "re-issued 1 of 1 times" in exiting
    records = details(client, job_id).status.running_records
    assert [r.recover_records[0].recover_result for r in records] == ["success", "quotaExceeded"]


@MANUAL
def test_a_stockout_keeps_the_job_pending_while_it_lasts(client, resilient_emulator):
    index = resilient_emulator.add_fault({"kind": "stockout", "service": "modelarts", "times": None})
    job_id = create(client, job(SLEEP, name="stock"))
    assert _phases(resilient_emulator, job_id) == ("Creating", "Creating")
    resilient_emulator.advance(5)
    assert _phases(resilient_emulator, job_id) == ("Pending", "Queuing")
    resilient_emulator.advance(3600)  # no limit on a first issue's queue
    status = details(client, job_id).status
    assert (status.phase, status.secondary_phase) == ("Pending", "Queuing") and status.start_time is None
    assert resilient_emulator.faults.fired(index) == 360  # one look every 10 s
    resilient_emulator.end_fault(index)
    resilient_emulator.advance(10)
    assert _phases(resilient_emulator, job_id) == ("Running", "Running")


@MANUAL
def test_a_stockout_for_times_looks_delays_the_job_that_many_looks(client, resilient_emulator):
    resilient_emulator.add_fault({"kind": "stockout", "service": "modelarts", "times": 3})
    job_id = create(client, job(SLEEP, name="stock3"))
    resilient_emulator.advance(5 + 30)
    assert _phases(resilient_emulator, job_id) == ("Pending", "Queuing")
    resilient_emulator.advance(10)
    assert _phases(resilient_emulator, job_id) == ("Running", "Running")


@MANUAL
def test_a_reissued_job_that_queues_over_30_minutes_fails(client, resilient_emulator):
    resilient_emulator.add_fault({"kind": "preflight", "service": "modelarts", "item": "disk-size shm",
                                  "match": {"platform_attempt": 1}})
    resilient_emulator.add_fault({"kind": "stockout", "service": "modelarts", "times": None,
                                  "match": {"platform_attempt": 2}})
    job_id = create(client, job(SLEEP, name="requeue", retries="2"))
    resilient_emulator.advance(5 + 10 + 10)  # created, scheduled, pre-check failed: re-issued and queuing
    assert _phases(resilient_emulator, job_id) == ("Pending", "Queuing")
    assert len(stage_records(client, job_id)) == 2
    resilient_emulator.advance(1790)
    assert _phases(resilient_emulator, job_id) == ("Pending", "Queuing")
    resilient_emulator.advance(15)
    status = details(client, job_id).status
    assert (status.phase, status.secondary_phase) == ("Failed", "Failed")
    assert any("Failed to be queued" in line for line in events(client, job_id, level="Error"))


def _stopped(pid: int) -> bool:
    """Whether process ``pid`` is stopped by a signal (``T`` in ``/proc/<pid>/stat``)."""
    from pathlib import Path

    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 2] in "Tt"


@MANUAL
def test_a_hang_stops_progress_and_the_job_stays_running_until_stopped(client, resilient_emulator, tmp_path):
    from huaweicloudsdkmodelarts.v1 import JobActionType, StopTrainingJobRequest

    beat = tmp_path / "beat"
    code = f"import time\nwhile True: open('{beat}', 'a').write('.'); time.sleep(0.02)"
    resilient_emulator.add_fault({"kind": "hang", "service": "modelarts", "after_seconds": 0.0})
    job_id = create(client, job(code, name="hang"))
    resilient_emulator.advance(15)
    assert _phases(resilient_emulator, job_id) == ("Running", "Running")
    deadline = time.monotonic() + 5
    while not any("suspended" in line for line in events(client, job_id)) and time.monotonic() < deadline:
        time.sleep(0.02)
    # The hang is a SIGSTOP: every node process is stopped (state T in /proc), so its heartbeat file stops growing.
    pids = resilient_emulator.processes()
    assert pids
    while not all(_stopped(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert all(_stopped(pid) for pid in pids)
    client.stop_training_job(StopTrainingJobRequest(training_job_id=job_id,
                                                    body=JobActionType(action_type="terminate")))
    resilient_emulator.advance(5)
    assert _phases(resilient_emulator, job_id) == ("Terminated", "Terminated")
    assert resilient_emulator.processes() == []


def test_faults_of_other_services_leave_modelarts_jobs_alone(client, resilient_emulator):
    index = resilient_emulator.add_fault({"kind": "crash", "exit_code": 139})  # a Vertex AI fault
    job_id = create(client, job(name="alone"))
    assert wait_phase(resilient_emulator, job_id, {"Completed", "Failed"}) == "Completed"
    assert resilient_emulator.faults.fired(index) == 0
    with pytest.raises(ValueError, match="ModelArts pre-check item"):
        Fault.model_validate({"kind": "preflight", "service": "tpu", "item": "ulimit"})


def test_job_retry_num_accepts_1_to_128(client, resilient_emulator):
    for value in ("1", "3", "128"):
        create(client, job(name=f"retry-{value}", retries=value))
    from huaweicloudsdkcore.exceptions.exceptions import ClientRequestException

    for value in ("0", "129", "two"):
        with pytest.raises(ClientRequestException, match=RETRY):
            create(client, job(name=f"bad-{value}", retries=value))


def test_an_at_step_fault_reads_the_newest_step_under_the_checkpoint_dir(client, resilient_emulator, tmp_path):
    ckpt = tmp_path / "ckpt"
    code = (f"import os, time\nfor s in range(1, 200):\n    os.makedirs('{ckpt}/step_%d' % s, exist_ok=True)\n"
            f"    open('{ckpt}/step_%d/model' % s, 'w').write('w')\n    time.sleep(0.02)")
    resilient_emulator.add_fault({"kind": "hardware", "service": "modelarts", "at_step": 5})
    job_id = create(client, job(code, name="ckpt", env={"RESILIENT_CHECKPOINT_DIR": str(ckpt)}))
    assert wait_phase(resilient_emulator, job_id, {"Completed", "Failed"}) == "Failed"
    steps = sorted(int(p.name.split("_")[1]) for p in ckpt.iterdir())
    assert 5 <= steps[-1] < 150  # struck once step 5 was written, long before the workload's end
