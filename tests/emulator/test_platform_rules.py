"""Each platform rule of seeds 000, 001 and 003, one test each, with the exact error texts."""

from __future__ import annotations

import json
import re
import time

import pytest
from google.api_core import exceptions

from ..platform_time import MANUAL
from .conftest import PARENT, custom_job, pool

pytestmark = pytest.mark.resilient_emulator(time_scale=0.002)

LONG = "import time; time.sleep(60)"
#: A primary that runs until the platform restarts it, then ends at once: its replica's working directory (the
#: job's log directory) keeps a mark across restarts, so the test needs no guess at how long a start takes.
FIRST_START_WAITS_FOR_THE_RESTART = ("import os, time\nif not os.path.exists('started'):\n"
                                     "    open('started', 'w').close(); time.sleep(60)")
#: A worker that says ``step 1`` only once the primary has left its mark (the replicas share that directory):
#: a fault at that step strikes a job whose primary is surely in its first start.
WORKER_AFTER_THE_PRIMARY_STARTED = ("import os, time\nwhile not os.path.exists('started'):\n    time.sleep(0.01)\n"
                                    "print('step 1', flush=True); time.sleep(60)")


def starts(emulator, job_name: str, replica: str = "workerpool0-0") -> int:
    """How many times the replica's process was started (one log header per start)."""
    return emulator.replica_log(job_name, replica).count("===== ")


def test_success_goes_queued_pending_running_succeeded(submit, resilient_emulator):
    job = submit(custom_job("print('trained')"))
    assert job.state.name == "JOB_STATE_SUCCEEDED"
    assert resilient_emulator.job_events(job.name) == ["QUEUED", "PENDING", "RUNNING", "SUCCEEDED"]
    assert job.create_time <= job.start_time <= job.end_time <= job.update_time
    assert "trained" in resilient_emulator.replica_log(job.name)


def test_replica_output_is_in_cloud_logging_as_vertex_ai_ships_it(submit, resilient_emulator):
    """Each line a replica prints is an entry, found with the filter ``gcloud ai custom-jobs stream-logs`` uses;
    a platform retry's restart is not a line of the workload's (no emulator header reaches the log)."""
    from airflow_provider_resilient.testing.emulator_clients import logging_client

    resilient_emulator.add_fault({"kind": "crash", "exit_code": 139, "times": 1})
    job = submit(custom_job(pools=[pool("import time; print('step 1', flush=True); time.sleep(0.3); print('step 2')"),
                                   pool("print('worker ready')")]))
    assert job.state.name == "JOB_STATE_SUCCEEDED"
    project, job_id = job.name.split("/")[1], job.name.rsplit("/", 1)[1]
    client = logging_client(project)
    entries = list(client.list_entries(filter_=f'resource.type="ml_job" AND resource.labels.job_id="{job_id}"'))
    by_task: dict[str, list[str]] = {}
    for entry in entries:
        by_task.setdefault(entry.resource.labels["task_name"], []).append(entry.payload)
        if entry.resource.labels["task_name"] == "service":  # the service's own entries (test_logging_sinks.py)
            assert entry.log_name == f"projects/{project}/logs/ml.googleapis.com%2F{job_id}"
            continue
        assert entry.log_name == f"projects/{project}/logs/{entry.resource.labels['task_name']}"
        assert entry.severity == "INFO" and entry.resource.labels["project_id"] == project
    assert by_task.pop("service") == ["The replica workerpool0-0 exited with a non-zero status of 139. "
                                      "Termination reason: Error.", "Job completed successfully."]
    # One line per run of the worker that got as far as printing (the retry may kill a run before it prints).
    assert set(by_task["workerpool1-0"]) == {"worker ready"}
    assert 1 <= len(by_task["workerpool1-0"]) <= starts(resilient_emulator, job.name, "workerpool1-0")
    assert by_task["workerpool0-0"][-2:] == ["step 1", "step 2"]  # the retried run; the struck one said step 1
    one = client.list_entries(filter_=f'resource.labels.job_id="{job_id}" AND resource.labels.task_name="workerpool0-0"'
                                      ' AND textPayload:"step 2"')
    assert [e.payload for e in one] == ["step 2"]


def test_a_replicas_last_lines_are_stamped_before_the_services_entry_about_its_exit(submit, resilient_emulator):
    """A replica that prints ``step 1`` and dies at once (exit 139, retried by the platform): its line was written
    before it exited, so Cloud Logging orders it before the service's "exited" entry -- what a reader of the job's
    logs (the operator's in-place restart allowance) relies on to tell the lines before an exit from those after."""
    from airflow_provider_resilient.testing.emulator_clients import logging_client

    code = ("import os\nif os.path.exists('started'):\n    print('step 2', flush=True)\nelse:\n"
            "    open('started', 'w').close(); print('step 1', flush=True); os._exit(139)")
    job = submit(custom_job(code))
    assert job.state.name == "JOB_STATE_SUCCEEDED"
    project, job_id = job.name.split("/")[1], job.name.rsplit("/", 1)[1]
    entries = list(logging_client(project).list_entries(
        filter_=f'resource.labels.job_id="{job_id}"', order_by="timestamp asc"))
    texts = [entry.payload for entry in entries]
    assert texts == ["step 1", "The replica workerpool0-0 exited with a non-zero status of 139. Termination "
                     "reason: Error.", "step 2", "Job completed successfully."], texts
    assert entries[0].timestamp <= entries[1].timestamp < entries[2].timestamp <= entries[3].timestamp


def test_user_code_error_fails_the_job_without_retry(submit, resilient_emulator):
    job = submit(custom_job("raise SystemExit(1)"))
    assert job.state.name == "JOB_STATE_FAILED"
    assert job.error.message == ("The replica workerpool0-0 exited with a non-zero status of 1. "
                                 "Termination reason: Error.")
    assert job.error.code == 3
    assert starts(resilient_emulator, job.name) == 1


@pytest.mark.parametrize("signal_code", [("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)", 139),
                                         ("import os; os.abort()", 134),
                                         ("raise SystemExit(6)", 6),
                                         ("raise SystemExit(11)", 11)], ids=["139", "134", "6", "11"])
def test_transient_exit_codes_are_retried_by_the_platform_three_times(submit, resilient_emulator, signal_code):
    code, exit_code = signal_code
    job = submit(custom_job(code))
    assert job.error.message == (f"The replica workerpool0-0 exited with a non-zero status of {exit_code}. "
                                 "Termination reason: Error.")
    assert starts(resilient_emulator, job.name) == 4  # first run + 3 platform retries
    events = resilient_emulator.job_events(job.name)
    assert sum(e.startswith("platform retry") for e in events) == 3


def test_a_transient_crash_that_stops_recurring_succeeds_after_a_platform_retry(submit, resilient_emulator):
    resilient_emulator.add_fault({"kind": "crash", "exit_code": 139, "times": 2})
    job = submit(custom_job("import time; time.sleep(0.3); print('done')"))
    assert job.state.name == "JOB_STATE_SUCCEEDED"
    assert starts(resilient_emulator, job.name) == 3


def test_injected_exit_code_is_reported_as_is(submit, resilient_emulator):
    resilient_emulator.add_fault({"kind": "crash", "exit_code": 2})
    job = submit(custom_job(LONG))
    assert job.error.message.startswith("The replica workerpool0-0 exited with a non-zero status of 2.")


def test_worker_failure_restarts_in_place_five_times_then_retries_the_job_three_times(submit, resilient_emulator):
    resilient_emulator.add_fault({"kind": "worker_failure", "replica": "workerpool1-0",
                                  "times": None})
    job = submit(custom_job(pools=[pool(LONG), pool(LONG)]), timeout=120)
    assert job.state.name == "JOB_STATE_FAILED"
    assert job.error.message == ("The replica workerpool1-0 exited with a non-zero status of 137. "
                                 "Termination reason: Error.")
    events = resilient_emulator.job_events(job.name)
    assert sum(e.startswith("restart workerpool1-0 in place") for e in events) == 5 * 4
    assert sum(e.startswith("platform retry") for e in events) == 3
    assert starts(resilient_emulator, job.name, "workerpool1-0") == 6 * 4
    assert starts(resilient_emulator, job.name, "workerpool0-0") == 4  # the primary only on job retries


def test_restart_job_on_worker_restart_restarts_every_replica(submit, resilient_emulator):
    resilient_emulator.add_fault({"kind": "worker_failure", "replica": "workerpool1-0", "at_step": 1,
                                  "step_source": "log"})
    job = submit(custom_job(pools=[pool(FIRST_START_WAITS_FOR_THE_RESTART), pool(WORKER_AFTER_THE_PRIMARY_STARTED)],
                            scheduling={"restart_job_on_worker_restart": True}))
    assert job.state.name == "JOB_STATE_SUCCEEDED"
    assert starts(resilient_emulator, job.name, "workerpool0-0") == 2


def test_out_of_memory_fails_with_the_ran_out_of_memory_text(submit, resilient_emulator):
    resilient_emulator.add_fault({"kind": "oom"})
    job = submit(custom_job(LONG))
    assert job.error.message == ("The replica workerpool0-0 ran out of memory and exited with a non-zero status "
                                 "of 137.")
    assert job.error.code == 8
    assert starts(resilient_emulator, job.name) == 1


def test_stockout_is_retried_three_times_then_fails(submit, resilient_emulator):
    resilient_emulator.add_fault({"kind": "stockout", "times": 4})
    job = submit(custom_job())
    assert job.state.name == "JOB_STATE_FAILED"
    assert job.error.message == ("Resources are insufficient in region: us-central1. "
                                 "Try a different region or use a different accelerator.")
    assert resilient_emulator.job_events(job.name).count("stockout in us-central1") == 4
    assert starts(resilient_emulator, job.name) == 0  # never got machines


@pytest.mark.resilient_emulator(time_scale=0.002,
                                fault_plan={"faults": [{"kind": "stockout", "times": 4, "match": {"nth": 2}}]})
def test_a_stockout_on_the_kth_create_fails_only_that_job(client, resilient_emulator):
    jobs = [client.create_custom_job(parent=PARENT, custom_job=custom_job(display_name=f"job-{i}"))
            for i in (1, 2, 3)]
    states = [resilient_emulator.wait_for_state(j.name, ["JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED"], 60)
              for j in jobs]
    assert states == ["JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_SUCCEEDED"]
    failed = client.get_custom_job(name=jobs[1].name)
    assert failed.error.message == ("Resources are insufficient in region: us-central1. "
                                    "Try a different region or use a different accelerator.")
    assert failed.error.code == 8
    assert resilient_emulator.job_events(jobs[1].name).count("stockout in us-central1") == 4  # 1 + 3 retries
    assert not any(e.startswith("stockout") for j in (jobs[0], jobs[2]) for e in resilient_emulator.job_events(j.name))
    assert resilient_emulator.faults.faults()[0]["fired"] == 4


def test_a_stockout_absorbed_by_platform_retries_runs(submit, resilient_emulator):
    resilient_emulator.add_fault({"kind": "stockout", "times": 3})
    assert submit(custom_job()).state.name == "JOB_STATE_SUCCEEDED"


def test_internal_error_is_retried_twice_then_fails(submit, resilient_emulator):
    resilient_emulator.add_fault({"kind": "internal_error", "times": None})
    job = submit(custom_job(LONG))
    assert job.error.message == "Internal error occurred for the current attempt."
    assert job.error.code == 13
    assert starts(resilient_emulator, job.name) == 3


def test_disable_retries_turns_every_platform_retry_off(submit, resilient_emulator):
    """REFERENCE.md: ``disable_retries`` turns off the platform's job retries and its worker restarts too."""
    resilient_emulator.add_fault({"kind": "crash", "exit_code": 139, "times": None, "match": {"display_name": "a"}})
    resilient_emulator.add_fault({"kind": "stockout", "times": 1, "match": {"display_name": "b"}})
    resilient_emulator.add_fault({"kind": "worker_failure", "replica": "workerpool1-0",
                                  "times": None, "match": {"display_name": "c"}})
    resilient_emulator.add_fault({"kind": "internal_error", "times": None,
                                  "match": {"display_name": "d"}})
    no_retries = {"disable_retries": True}
    crashed = submit(custom_job(LONG, display_name="a", scheduling=no_retries))
    assert starts(resilient_emulator, crashed.name) == 1 and "status of 139" in crashed.error.message
    stocked_out = submit(custom_job(display_name="b", scheduling=no_retries))
    assert stocked_out.error.message.startswith("Resources are insufficient in region")
    assert resilient_emulator.job_events(stocked_out.name).count("stockout in us-central1") == 1

    lost_worker = submit(custom_job(pools=[pool(LONG), pool(LONG)], display_name="c", scheduling=no_retries))
    assert lost_worker.state.name == "JOB_STATE_FAILED"
    assert lost_worker.error.message == ("The replica workerpool1-0 exited with a non-zero status of 137. "
                                         "Termination reason: Error.")
    assert starts(resilient_emulator, lost_worker.name, "workerpool1-0") == 1  # no restart in place
    assert starts(resilient_emulator, lost_worker.name, "workerpool0-0") == 1  # no job retry
    events = resilient_emulator.job_events(lost_worker.name)
    assert not any(e.startswith(("restart ", "platform retry")) for e in events)

    internal = submit(custom_job(LONG, display_name="d", scheduling=no_retries))
    assert internal.error.message == "Internal error occurred for the current attempt."
    assert internal.error.code == 13
    assert starts(resilient_emulator, internal.name) == 1
    assert not any(e.startswith("platform retry") for e in resilient_emulator.job_events(internal.name))


@MANUAL
def test_scheduling_timeout_expires_the_job(client, resilient_emulator):
    job = client.create_custom_job(parent=PARENT, custom_job=custom_job(LONG, scheduling={"timeout": "60s"}))
    resilient_emulator.advance(5 + 60)  # queued, provisioning
    assert client.get_custom_job(name=job.name).state.name == "JOB_STATE_RUNNING"
    resilient_emulator.advance(59)
    assert client.get_custom_job(name=job.name).state.name == "JOB_STATE_RUNNING"
    resilient_emulator.advance(1)  # 60 s of platform time since it started
    job = client.get_custom_job(name=job.name)
    assert job.state.name == "JOB_STATE_EXPIRED"
    assert job.error.code == 4  # google.rpc.Code.DEADLINE_EXCEEDED (RpcCodes.expired)
    assert job.error.message == "Job exceeded its scheduling.timeout of 60s."
    assert (job.end_time - job.start_time).total_seconds() == 60  # the timeout runs on the platform's clock
    assert resilient_emulator.job_events(job.name)[-2:] == ["RUNNING", "EXPIRED"]
    assert resilient_emulator.processes() == []


def test_cancel_goes_through_cancelling_and_kills_the_processes(client, submit, resilient_emulator):
    job = submit(custom_job(LONG), wait=False)
    resilient_emulator.wait_for_state(job.name, ["JOB_STATE_RUNNING"], 30)
    assert resilient_emulator.processes()
    client.cancel_custom_job(name=job.name)
    assert resilient_emulator.processes() == []
    resilient_emulator.wait_for_state(job.name, ["JOB_STATE_CANCELLED"], 30)
    assert resilient_emulator.job_events(job.name)[-2:] == ["CANCELLING", "CANCELLED"]


def test_the_primary_exiting_zero_succeeds_and_stops_the_other_workers(submit, resilient_emulator):
    job = submit(custom_job(pools=[pool("print('chief done')"), pool(LONG, replicas=2)]))
    assert job.state.name == "JOB_STATE_SUCCEEDED"
    assert resilient_emulator.processes() == []


def test_replicas_get_the_environment_vertex_gives(submit, resilient_emulator, tmp_path):
    dump = "import json, os; print('ENV=' + json.dumps(dict(os.environ)), flush=True)"
    # The job ends (and its other replicas are stopped) when the chief exits: it waits for the workers'
    # dumps, which each worker marks with a file, so no replica is stopped before it printed.
    worker = f"{dump}; open(os.path.join({str(tmp_path)!r}, os.environ['RANK']), 'w').close()"
    chief = (f"{dump}; import time; deadline = time.time() + 60\n"
             f"while len(os.listdir({str(tmp_path)!r})) < 2 and time.time() < deadline: time.sleep(0.01)")
    job = submit(custom_job(pools=[pool(chief, env={"MY_SETTING": "on"}), pool(worker, replicas=2)],
                            base_output_dir="gs://bucket/run"))
    envs = {}
    for replica in ("workerpool0-0", "workerpool1-0", "workerpool1-1"):
        line = next(x for x in resilient_emulator.replica_log(job.name, replica).splitlines()
                    if x.startswith("ENV="))
        envs[replica] = json.loads(line[4:])
    chief = envs["workerpool0-0"]
    assert chief["AIP_CHECKPOINT_DIR"] == "gs://bucket/run/checkpoints/"
    assert chief["AIP_MODEL_DIR"] == "gs://bucket/run/model/"
    assert chief["AIP_TENSORBOARD_LOG_DIR"] == "gs://bucket/run/logs/"
    assert chief["CLOUD_ML_JOB_ID"] == job.name.rsplit("/", 1)[1]
    assert chief["MY_SETTING"] == "on" and "MY_SETTING" not in envs["workerpool1-0"]
    assert chief["STORAGE_EMULATOR_HOST"] == resilient_emulator.storage.url
    cluster = json.loads(chief["CLUSTER_SPEC"])
    assert cluster["task"] == {"type": "workerpool0", "index": 0}
    assert len(cluster["cluster"]["workerpool1"]) == 2
    tf_config = json.loads(envs["workerpool1-1"]["TF_CONFIG"])
    assert tf_config["task"] == {"type": "worker", "index": 1} and set(tf_config["cluster"]) == {"chief", "worker"}
    assert [envs[r]["RANK"] for r in ("workerpool0-0", "workerpool1-0", "workerpool1-1")] == ["0", "1", "2"]
    assert {e["WORLD_SIZE"] for e in envs.values()} == {"3"}
    assert len({e["MASTER_ADDR"] + e["MASTER_PORT"] for e in envs.values()}) == 1
    # a temporary directory that goes with the emulator's work directory, as a container's /tmp goes with it
    assert {e["TMPDIR"] for e in envs.values()} == {str(resilient_emulator.work_dir / "tmp")}


def test_quota_exceeded_refuses_the_create_call(client, resilient_emulator):
    resilient_emulator.add_fault({"kind": "quota", "times": 2})
    for _ in range(2):
        with pytest.raises(exceptions.ResourceExhausted, match=re.escape(
                "quota metrics exceed quota limits: aiplatform.googleapis.com/custom_model_training_cpus")):
            client.create_custom_job(parent=PARENT, custom_job=custom_job())
    assert client.create_custom_job(parent=PARENT, custom_job=custom_job()).name
    assert [c.code for c in resilient_emulator.calls.list("CreateCustomJob")] == ["RESOURCE_EXHAUSTED"] * 2 + ["OK"]


def test_unavailable_on_the_kth_get_call(client, resilient_emulator):
    resilient_emulator.add_fault({"kind": "unavailable", "match": {"nth": 2}})
    job = client.create_custom_job(parent=PARENT, custom_job=custom_job())
    client.get_custom_job(name=job.name, retry=None)
    with pytest.raises(exceptions.ServiceUnavailable):
        client.get_custom_job(name=job.name, retry=None)
    client.get_custom_job(name=job.name, retry=None)
    assert [c.code for c in resilient_emulator.calls.list("GetCustomJob")] == ["OK", "UNAVAILABLE", "OK"]


def test_a_hang_keeps_the_job_running_with_a_frozen_process(client, submit, resilient_emulator):
    code = "import time\nfor i in range(10**6):\n    print('step', i, flush=True); time.sleep(0.01)"
    resilient_emulator.add_fault({"kind": "hang", "at_step": 5, "step_source": "log"})
    job = submit(custom_job(code), wait=False)
    resilient_emulator.wait_for_state(job.name, ["JOB_STATE_RUNNING"], 30)
    for _ in range(500):
        if any(e == "fault hang on workerpool0-0" for e in resilient_emulator.job_events(job.name)):
            break
        resilient_emulator._stop.wait(0.01)
    size = len(resilient_emulator.replica_log(job.name))
    resilient_emulator._stop.wait(0.3)
    assert len(resilient_emulator.replica_log(job.name)) == size  # no progress
    assert client.get_custom_job(name=job.name).state.name == "JOB_STATE_RUNNING"
    client.cancel_custom_job(name=job.name)  # a frozen process is still killed
    resilient_emulator.wait_for_state(job.name, ["JOB_STATE_CANCELLED"], 30)
    assert resilient_emulator.processes() == []


@pytest.mark.resilient_emulator(time_scale=0.002, rpc_codes={"user_error": 9})
def test_the_rpc_codes_are_configurable(submit):
    assert submit(custom_job("raise SystemExit(3)")).error.code == 9


@MANUAL
def test_the_error_appears_about_a_minute_after_the_end(client, resilient_emulator):
    """Seed 003: the job object gets its error ~1 min (``error_delay_seconds``: 60 s of platform time) after the
    job ends; until then it is RUNNING."""
    job = client.create_custom_job(parent=PARENT, custom_job=custom_job("raise SystemExit(1)"))
    resilient_emulator.advance(5 + 60)  # queued, provisioning
    assert client.get_custom_job(name=job.name).state.name == "JOB_STATE_RUNNING"
    # The workload exits in real time; the platform sees it at its next look.
    deadline = time.monotonic() + 30
    while not any(e.startswith("fail:") for e in resilient_emulator.job_events(job.name)):
        assert time.monotonic() < deadline, resilient_emulator.job_events(job.name)
        time.sleep(0.01)
    resilient_emulator.advance(59)
    assert client.get_custom_job(name=job.name).state.name == "JOB_STATE_RUNNING"  # error not set yet
    resilient_emulator.advance(1)
    failed = client.get_custom_job(name=job.name)
    assert failed.state.name == "JOB_STATE_FAILED" and "non-zero status of 1" in failed.error.message


def test_a_command_that_cannot_start_fails_its_job_with_start_error_and_stops_nothing_else(submit,
                                                                                           resilient_emulator):
    """Issue 13: ``Popen`` raising FileNotFoundError used to abort every engine tick, so no other job moved.
    The replica now ends as a container runtime reports it (exit 127, StartError) and the others go on."""
    healthy = submit(custom_job("import time; time.sleep(0.5); print('trained')"), wait=False)
    broken = pool("")
    broken["container_spec"]["command"] = ["no-such-command-anywhere"]
    job = submit(custom_job(pools=[broken]))
    assert job.state.name == "JOB_STATE_FAILED"
    assert job.error.message == ("The replica workerpool0-0 exited with a non-zero status of 127. "
                                 "Termination reason: StartError.")
    assert "no-such-command-anywhere" in resilient_emulator.replica_log(job.name)
    assert resilient_emulator.wait_for_state(healthy.name, ["JOB_STATE_SUCCEEDED"], 60) == "JOB_STATE_SUCCEEDED"
