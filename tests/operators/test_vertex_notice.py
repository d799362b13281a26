"""Checkpoint on notice on Vertex AI (``checkpoint_on_notice=True`` on ``ResilientCustomJobOperator``): a Spot
replica's preemption notice -- SIGTERM, then the machine stops -- becomes a checkpoint request the workload's helper
reads, so the worker Vertex AI restarts on another VM resumes from the step the preempted one reached. What the job
spec carries, what is refused before submit, and end to end on the emulator with and without it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_provider_resilient.compat import AirflowFailException
from airflow_provider_resilient.specs.preflight import wrap_container_command
from airflow_provider_resilient.specs.vertex import build_custom_job
from airflow_provider_resilient.worker import helper_source, runner_source
from airflow_provider_resilient.worker.protocol import RUNNER_START_TEXT

from .test_vertex_operator_unit import context, operator

WORKLOAD = Path(__file__).resolve().parents[2] / "benchmarks" / "workloads" / "steady_training.py"


#: A pool whose command is Vertex AI's own (a Python package): the worker runner cannot wrap it.
PACKAGE_POOLS = [{"machine_spec": {"machine_type": "n1-standard-4"}, "replica_count": 1,
                  "python_package_spec": {"executor_image_uri": "us-docker.pkg.dev/vertex-ai/training/"
                                                                "tf-cpu.2-12.py310:latest",
                                          "package_uris": ["gs://b/p.tar.gz"], "python_module": "trainer.task"}}]


def container_of(checkpoint_on_notice: bool) -> dict:
    job = build_custom_job(display_name="j", worker_pool_specs=[{
        "machine_spec": {"machine_type": "n1-standard-4"}, "replica_count": 1,
        "container_spec": {"image_uri": "i", "command": ["python3", "t.py"], "args": ["--lr", "0.1"]}}],
        labels={}, base_output_dir=None, scheduling={"strategy": "SPOT"}, service_account=None, network=None,
        fallback=None, env={}, runner_source=runner_source(), checkpoint_on_notice=checkpoint_on_notice,
        helper_source=helper_source())
    return job["job_spec"]["worker_pool_specs"][0]["container_spec"]


def test_the_notice_wraps_the_command_with_the_runner_and_the_helper_on_pythonpath():
    wrapped = container_of(True)
    command = wrapped["command"]
    assert "args" not in wrapped and command[-4:] == ["python3", "t.py", "--lr", "0.1"]
    assert "resilient_checkpoint.py" in command[2] and "export PYTHONPATH=" in command[2]
    assert "--preflight" not in command  # the checks are not asked for
    assert container_of(False) == {"image_uri": "i", "command": ["python3", "t.py"], "args": ["--lr", "0.1"],
                                   "env": []}  # off: untouched


def test_the_wrapped_helper_turns_a_sigterm_into_a_saved_checkpoint(tmp_path):
    """A real shell runs the wrapper: the workload imports ``resilient_checkpoint`` from the wrapper's directory, the
    runner passes the SIGTERM on as a request, the workload saves and ends 143."""
    code = ("import os, signal, time\nfrom resilient_checkpoint import save_if_requested\n"
            "save_if_requested(0, print)\n"  # a workload in its loop already: the helper's SIGTERM handler is in place
            "os.kill(os.getppid(), signal.SIGTERM)\n"  # the runner: the replica's notice
            "for step in range(1, 2000):\n"
            "    time.sleep(0.01)\n"
            "    save_if_requested(step, lambda s: print('saved', s, flush=True))\n")
    argv = wrap_container_command([sys.executable, "-c", code], [], runner_source=runner_source(),
                                  runner_args=[], helper_source=helper_source())
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False,
                          env={"PATH": "/usr/bin:/bin", "TMPDIR": str(tmp_path)})
    assert done.returncode == 143, done.stderr
    assert re.search(r"^saved \d+$", done.stdout, re.M) and "checkpoint saved on notice" in done.stdout


def test_the_notice_needs_a_container_command_and_a_flag():
    with pytest.raises(AirflowFailException, match=r"worker_pool_specs\[0\]\.python_package_spec: "
                                                   r"checkpoint_on_notice .*checkpoint_on_notice=False"):
        operator(worker_pool_specs=PACKAGE_POOLS, checkpoint_on_notice=True)
    with pytest.raises(AirflowFailException, match=r"checkpoint_on_notice: give True or False, got 'yes'"):
        operator(checkpoint_on_notice="yes")


def resumed_steps(emulator, job_name: str) -> list[int]:
    (log,) = list(emulator.work_dir.rglob(f"*{job_name.rsplit('/', 1)[1]}*/workerpool0-0.log")) or list(
        emulator.work_dir.rglob("workerpool0-0.log"))
    return [int(n) for n in re.findall(r"^start step (\d+)$", log.read_text(), re.M)]


@pytest.mark.parametrize("on_notice", [True, False])
def test_a_preempted_spot_replica_resumes_from_the_step_saved_on_its_notice(resilient_emulator, on_notice):
    """The replica is preempted once it logged step 15 (periodic checkpoints every 10 steps); Vertex AI restarts it
    in place. With the notice the restarted worker starts from step 15 or later (the save on the notice); without,
    from step 10, the last periodic checkpoint -- 5 or more steps done again."""
    resilient_emulator.add_fault({"kind": "preemption", "at_step": 15, "step_source": "log", "grace_seconds": 5.0,
                                  "match": {"display_name": "notice"}})
    pools = [{"machine_spec": {"machine_type": "n1-standard-4"}, "replica_count": 1,
              "container_spec": {"image_uri": "python:3.11", "command": [
                  sys.executable, str(WORKLOAD), "--steps", "30", "--step-seconds", "0.05", "--every", "10",
                  "--log-steps", "--on-request", "--resume", "scan"]}}]
    result = operator(display_name="notice", worker_pool_specs=pools, strategy="SPOT",
                      checkpoint_on_notice=on_notice).execute(context())
    assert result["state"] == "JOB_STATE_SUCCEEDED"
    first, restarted = resumed_steps(resilient_emulator, result["job_name"])
    assert first == 0
    assert restarted >= 15 if on_notice else restarted == 10
    # each start of the replica's container says so first, under the runner (read as a restart: restart_timeout)
    log = resilient_emulator.replica_log(result["job_name"])
    assert log.count(RUNNER_START_TEXT) == (2 if on_notice else 0)


def test_a_hang_under_the_runner_freezes_the_training_command_not_only_the_runner(resilient_emulator):
    """The runner starts the training command in a session of its own; a hang must freeze that command too, or it
    trains on (and checkpoints) while the job looks hung. The hang strikes once step 5 is logged (checkpoints every
    2 steps); the resubmitted job resumes from step 4 -- not from where an unfrozen workload would have got to."""
    resilient_emulator.add_fault({"kind": "hang", "at_step": 5, "step_source": "log",
                                  "match": {"display_name": "hung"}})
    pools = [{"machine_spec": {"machine_type": "n1-standard-4"}, "replica_count": 1,
              "container_spec": {"image_uri": "python:3.11", "command": [
                  sys.executable, str(WORKLOAD), "--steps", "60", "--step-seconds", "0.05", "--every", "2",
                  "--log-steps", "--on-request", "--resume", "scan"]}}]
    result = operator(display_name="hung", worker_pool_specs=pools, checkpoint_on_notice=True,
                      hang_timeout=6.0).execute(context())
    assert [i["failure"]["failure_class"] for a in result["attempts"] for i in a["incidents"]] == ["hang"]
    (resumed,) = resumed_steps(resilient_emulator, result["job_name"])
    assert 4 <= resumed <= 6, resumed  # the step the hang froze it at (a save of step 6 may have been under way)



def test_the_worker_watchdog_restarts_a_hung_command_in_place_instead_of_a_new_job(resilient_emulator):
    """The hang freezes the training command, not the runner; with ``worker_hang_timeout`` the runner aborts the
    command after 1 s without a step line (exit 134) and Vertex AI retries the job in place: one job, no hang for
    the provider to judge, resumed from the step the hang froze it at. Without the watchdog (the test above) the
    provider's ``hang_timeout`` finds it and a new job is made."""
    resilient_emulator.add_fault({"kind": "hang", "at_step": 5, "step_source": "log",
                                  "match": {"display_name": "watched"}})
    pools = [{"machine_spec": {"machine_type": "n1-standard-4"}, "replica_count": 1,
              "container_spec": {"image_uri": "python:3.11", "command": [
                  sys.executable, str(WORKLOAD), "--steps", "60", "--step-seconds", "0.05", "--every", "2",
                  "--log-steps", "--resume", "scan"]}}]
    result = operator(display_name="watched", worker_pool_specs=pools, hang_timeout=6.0,
                      worker_hang_timeout=1.0).execute(context())
    assert result["state"] == "JOB_STATE_SUCCEEDED"
    assert len(result["attempts"]) == 1
    assert "hang" not in [i["failure"]["failure_class"] for a in result["attempts"] for i in a["incidents"]]
    first, resumed = resumed_steps(resilient_emulator, result["job_name"])
    assert first == 0 and 4 <= resumed <= 6, resumed
    log = resilient_emulator.replica_log(result["job_name"])
    assert "hang: no step line for" in log and "after step 5" in log


def test_the_worker_watchdog_is_shorter_than_hang_timeout_and_needs_a_container_command():
    with pytest.raises(AirflowFailException, match=r"worker_hang_timeout: 60.0 must be less than hang_timeout"):
        operator(hang_timeout=60.0, worker_hang_timeout=60.0)
    with pytest.raises(AirflowFailException, match=r"worker_hang_timeout: -1 must be > 0 seconds"):
        operator(worker_hang_timeout=-1)
    with pytest.raises(AirflowFailException, match=r"python_package_spec: worker_hang_timeout .*"
                                                   r"worker_hang_timeout=None"):
        operator(worker_pool_specs=PACKAGE_POOLS, worker_hang_timeout=30.0)


def test_the_watchdog_wraps_the_chiefs_command_with_its_allowances():
    """Only the chief's (the first pool's): its steps are the ones the provider reads, and other ranks often print
    none; a collective's hang stops the chief too."""
    pool = {"machine_spec": {"machine_type": "n1-standard-4"}, "replica_count": 1,
            "container_spec": {"image_uri": "i", "command": ["python3", "t.py"]}}
    job = build_custom_job(display_name="j", worker_pool_specs=[pool, {**pool, "replica_count": 2}],
                           labels={}, base_output_dir=None, scheduling={}, service_account=None, network=None,
                           fallback=None, env={}, runner_source=runner_source(),
                           watchdog=["--hang-seconds", "60.0", "--start-seconds", "300.0"])
    chief, workers = (p["container_spec"]["command"] for p in job["job_spec"]["worker_pool_specs"])
    assert chief[3:] == ["resilient-runner", "--hang-seconds", "60.0", "--start-seconds", "300.0",
                         "--max-restarts", "0", "--", "python3", "t.py"]
    assert "resilient_checkpoint.py" not in chief[2]  # no notice asked: no helper
    assert workers == ["python3", "t.py"]  # not wrapped
    # a python package in a pool the watchdog does not wrap is fine
    operator(worker_pool_specs=[pool, *PACKAGE_POOLS], worker_hang_timeout=30.0, hang_timeout=60.0)
