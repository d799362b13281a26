"""Seed 004's fault-tolerance checks on Vertex AI replicas: the container command wrapped by the worker runner
(``preflight=...`` on ``ResilientCustomJobOperator``), what the job spec carries, what is refused before submit,
and end to end on the emulator: checks logged per item, a GPU machine's ``gpu-check``, and a failed check read
as ``preflight_failure`` -- a new job on new machines, within the policy's ``preflight`` budget."""

from __future__ import annotations

import subprocess
import sys

import pytest

from airflow_provider_resilient.compat import AirflowFailException
from airflow_provider_resilient.policy import Backoff, Budget, RetryPolicy
from airflow_provider_resilient.specs.preflight import Preflight, wrap_container_command
from airflow_provider_resilient.specs.vertex import build_custom_job
from airflow_provider_resilient.worker import runner_source

from .test_vertex_operator_unit import context, operator

FAST = Backoff(initial_seconds=0.05, max_seconds=0.1)


def job_with(preflight: Preflight | None, machine: dict, container: dict) -> dict:
    return build_custom_job(display_name="j", worker_pool_specs=[{"machine_spec": machine, "replica_count": 1,
                                                                  "container_spec": container}],
                            labels={}, base_output_dir=None, scheduling={}, service_account=None, network=None,
                            fallback=None, env={"RESILIENT_ATTEMPT": "1"}, preflight=preflight,
                            runner_source=runner_source())


def test_the_wrapper_runs_the_checks_then_the_command_with_its_args_and_exit_status(tmp_path):
    """The wrapped command line, run by a real shell: the checks' lines, then the user's command and args
    verbatim (spaces and quotes included), its exit status passed through."""
    argv = wrap_container_command([sys.executable, "-c", "import sys; print('args', sys.argv[1:]); sys.exit(3)"],
                                  ["a b", "it's"], runner_source=runner_source(),
                                  runner_args=Preflight(min_root_free_bytes=0, min_shm_free_bytes=0,
                                                        hardware_check_seconds=0).runner_args())
    assert argv[:2] == ["/bin/sh", "-c"] and argv[3] == "resilient-runner"
    assert argv[argv.index("--") + 1:][-2:] == ["a b", "it's"] and "--max-restarts" in argv
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False,
                          env={"PATH": "/usr/bin:/bin", "TMPDIR": str(tmp_path)})  # the wrapper's files go there
    assert done.returncode == 3, done.stderr
    assert "args ['a b', \"it's\"]" in done.stdout
    assert "preflight ok: item disk-size root" in done.stderr and "no restart" in done.stderr  # --max-restarts 0


def test_a_gpu_pool_expects_its_gpus_and_args_move_into_the_command():
    job = job_with(Preflight(), {"machine_type": "a2-highgpu-2g", "accelerator_type": "NVIDIA_TESLA_A100",
                                 "accelerator_count": 2}, {"image_uri": "i", "command": ["python3", "t.py"],
                                                           "args": ["--lr", "0.1"]})
    container = job["job_spec"]["worker_pool_specs"][0]["container_spec"]
    command = container["command"]
    assert "args" not in container and command[-4:] == ["python3", "t.py", "--lr", "0.1"]
    assert command[command.index("--expect-gpus") + 1] == "2" and "--preflight" in command
    assert job_with(None, {"machine_type": "n1-standard-4"}, {"image_uri": "i", "command": ["x"]})[
        "job_spec"]["worker_pool_specs"][0]["container_spec"]["command"] == ["x"]  # off: untouched


def test_preflight_needs_a_container_command_to_wrap():
    pools = [{"machine_spec": {"machine_type": "n1-standard-4"}, "replica_count": 1,
              "python_package_spec": {"executor_image_uri": "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-12.py310:"
                                                            "latest", "package_uris": ["gs://b/p.tar.gz"],
                                      "python_module": "trainer.task"}}]
    with pytest.raises(AirflowFailException, match=r"worker_pool_specs\[0\]\.python_package_spec: .*preflight=False"):
        operator(worker_pool_specs=pools, preflight=True)
    operator(worker_pool_specs=pools, preflight=False)  # without the checks it is a valid job
    with pytest.raises(AirflowFailException, match=r"preflight\.min_shm_free_gb: unknown check setting"):
        operator(preflight={"min_shm_free_gb": 1})


def replica_log(emulator, job_name: str) -> str:
    (log,) = list(emulator.work_dir.rglob(f"*{job_name.rsplit('/', 1)[1]}*/workerpool0-0.log")) or list(
        emulator.work_dir.rglob("workerpool0-0.log"))
    return log.read_text()


def test_a_job_with_preflight_logs_each_item_and_runs_the_command(resilient_emulator):
    pools = [{"machine_spec": {"machine_type": "a2-highgpu-1g", "accelerator_type": "NVIDIA_TESLA_A100",
                               "accelerator_count": 1}, "replica_count": 1,
              "container_spec": {"image_uri": "python:3.11",
                                 "command": ["python3", "-c", "print('step 1'); print('trained')"]}}]
    result = operator(worker_pool_specs=pools, preflight=True).execute(context())
    assert [a["incidents"] for a in result["attempts"]] == [[]]
    log = replica_log(resilient_emulator, result["job_name"])
    for item in ("dns", "disk-size root", "disk-size shm", "ulimit", "gpu-check"):
        assert f"preflight ok: item {item}: " in log, log
    assert "preflight ok: item gpu-check: 1 of 1 GPUs visible" in log and "trained" in log


def test_a_failed_check_is_a_preflight_failure_resubmitted_within_its_budget(resilient_emulator):
    """Exit 78 through Vertex AI's own words ("exited with a non-zero status of 78") is ``preflight_failure``:
    a new job (new machines) per re-issue, seed 004's job-retry-num of them (here 1), then the run fails."""
    policy = RetryPolicy(backoff=FAST, failover_backoff=FAST, budgets={"preflight": Budget(max_retries=1)})
    ctx = context()
    with pytest.raises(AirflowFailException, match="preflight"):
        operator(preflight={"min_shm_free_bytes": 10**15}, resilience_policy=policy).execute(ctx)
    history = ctx["ti"].xcom["attempt_history"]
    assert [(i["failure"]["failure_class"], i["decision"]["action"]) for a in history for i in a["incidents"]] == [
        ("preflight_failure", "resubmit"), ("preflight_failure", "give_up")]
    assert "status of 78" in history[0]["incidents"][0]["failure"]["message"]
    log = replica_log(resilient_emulator, history[0]["resource_name"])
    assert "preflight failed: item disk-size shm: 50.0 GB free in " in log
    assert "ok" not in log.split("preflight failed")[-1].splitlines()[1:]  # the command never ran
