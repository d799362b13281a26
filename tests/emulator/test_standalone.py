"""The emulator as users run it: the standalone command with its HTTP control API, the README example,
and no replica process left behind however a test ends."""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

import pytest

from airflow_provider_resilient.testing.emulator_clients import tpu_client, vertex_job_client

from .conftest import PARENT, PLUGIN, custom_job

ROOT = Path(__file__).resolve().parents[2]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for our purposes.
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def read_pid(path: Path, timeout: float = 30) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = path.read_text() if path.exists() else ""
        for line in text.splitlines():
            if line.startswith("PID="):
                return int(line[4:])
        time.sleep(0.02)
    raise TimeoutError(f"no PID= line in {path}")


PID_AND_SLEEP = "import os, time; print(f'PID={os.getpid()}', flush=True); time.sleep(600)"


def read_banner(proc: subprocess.Popen[str]) -> tuple[str | None, dict[str, str]]:
    """(control API URL, ``export`` lines) from the standalone emulator's start-up banner."""
    exports: dict[str, str] = {}
    control = None
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("Control API"):
            control = line.split()[3]
        if line.strip().startswith("export "):
            key, value = line.strip()[7:].split("=", 1)
            exports[key] = shlex.split(value)[0]
        if "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT" in line:
            break
    return control, exports


def test_standalone_server_control_api_and_clean_shutdown(tmp_path: Path):
    plan = tmp_path / "plan.yaml"
    plan.write_text("faults:\n  - kind: quota\n    match: {display_name: refused}\n")
    proc = subprocess.Popen([sys.executable, "-m", "airflow_provider_resilient.testing.emulator", "--time-scale",
                             "0.002", "--fault-plan", str(plan), "--work-dir", str(tmp_path / "work")],
                            stdout=subprocess.PIPE, text=True)
    try:
        control, exports = read_banner(proc)
        assert control and control.startswith("http://127.0.0.1:")
        assert set(exports) >= {"RESILIENT_EMULATOR_HOST", "STORAGE_EMULATOR_HOST", "AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT"}
        assert json.loads(exports["AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT"]) == {  # what points the operators at it
            "conn_type": "google_cloud_platform", "extra": {"emulator_host": exports["RESILIENT_EMULATOR_HOST"]}}
        client = vertex_job_client("us-central1", emulator=exports["RESILIENT_EMULATOR_HOST"])

        with pytest.raises(Exception, match="quota"):
            client.create_custom_job(parent=PARENT, custom_job=custom_job(display_name="refused"))
        request = urllib.request.Request(f"{control}/faults", method="POST",
                                         data=json.dumps({"kind": "unavailable"}).encode())
        assert json.load(urllib.request.urlopen(request))["index"] == 1
        job = client.create_custom_job(parent=PARENT, custom_job=custom_job(PID_AND_SLEEP))
        with pytest.raises(Exception, match="unavailable"):
            client.get_custom_job(name=job.name, retry=None)
        calls = json.load(urllib.request.urlopen(f"{control}/calls"))
        assert [(c["method"], c["code"]) for c in calls] == [
            ("CreateCustomJob", "RESOURCE_EXHAUSTED"), ("CreateCustomJob", "OK"), ("GetCustomJob", "UNAVAILABLE")]
        faults = json.load(urllib.request.urlopen(f"{control}/faults"))
        assert [f["fired"] for f in faults] == [1, 1]

        tpu = tpu_client(emulator=exports["RESILIENT_EMULATOR_HOST"])
        node = tpu.create_node(parent="projects/test-project/locations/us-central2-b", node_id="listed", node={
            "accelerator_type": "v4-8", "runtime_version": "tpu-ubuntu2204-base", "labels": {"team": "ml"},
            "metadata": {"startup-script": "sleep 60"}}).result(timeout=60)
        listed = json.load(urllib.request.urlopen(f"{control}/nodes"))
        assert [(n["name"], n["state"], n["labels"]) for n in listed["nodes"]] == [(node.name, "READY", {"team": "ml"})]
        assert listed["queued_resources"] == []
        tpu.transport.close()

        job_id = job.name.rsplit("/", 1)[1]
        pid = read_pid(tmp_path / "work" / "vertex" / job_id / "workerpool0-0.log")
        assert alive(pid)
        client.transport.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    assert not alive(pid)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # the thread that died binding
def test_the_storage_emulator_refuses_a_taken_port_instead_of_waiting_forever():
    """gcp-storage-emulator's ``Server.start`` waits for a thread that died binding; ours raises."""
    from airflow_provider_resilient.testing.storage import StorageEmulator

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        emulator = StorageEmulator(port=taken.getsockname()[1])
        with pytest.raises(OSError, match=r"could not bind 127\.0\.0\.1"):
            emulator.start()


#: A workload that uploads an object through the Cloud Storage endpoint its environment names.
UPLOAD = ("import os, urllib.request; url = os.environ['STORAGE_EMULATOR_HOST'] + "
          "'/upload/storage/v1/b/shared/o?uploadType=media&name=hello.txt'; "
          "urllib.request.urlopen(urllib.request.Request(url, data=b'from a replica', method='POST')).read()")


def test_standalone_binds_every_interface_on_fixed_ports_and_advertises_a_host(tmp_path: Path):
    """What docker compose runs: ``--host 0.0.0.0`` on fixed ports, advertised under another name. A socket
    bound to 127.0.0.1 does not answer on 127.0.0.2, so reaching every endpoint there proves the wildcard
    bind; the exports, and the replicas' environment, name the advertised host."""
    from airflow_provider_resilient.testing.emulator.__main__ import build

    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.2", 0))
        except OSError:
            pytest.skip("127.0.0.2 is not a loopback address here (macOS configures 127.0.0.1 only)")
    assert build(["--host", "0.0.0.0"]).advertise_host == "127.0.0.1"  # a wildcard is never advertised
    assert build([]).advertise_host == "127.0.0.1"
    for _ in range(3):  # a port free_port() found can be taken by another process before the emulator binds it
        port, control_port, storage_port = free_port(), free_port(), free_port()
        proc = subprocess.Popen([sys.executable, "-m", "airflow_provider_resilient.testing.emulator", "--host",
                                 "0.0.0.0", "--advertise-host", "127.0.0.2", "--port", str(port), "--control-port",
                                 str(control_port), "--storage-port", str(storage_port), "--time-scale", "0.002",
                                 "--work-dir", str(tmp_path / "work")], stdout=subprocess.PIPE, text=True)
        control, exports = read_banner(proc)
        if control is not None:
            break
        assert proc.wait(timeout=30) != 0  # no banner: it exited with an error (a port was taken)
    try:
        assert control == f"http://127.0.0.2:{control_port}"
        assert exports["RESILIENT_EMULATOR_HOST"] == f"127.0.0.2:{port}"
        assert exports["STORAGE_EMULATOR_HOST"] == f"http://127.0.0.2:{storage_port}"
        assert json.load(urllib.request.urlopen(f"{control}/healthz", timeout=10)) == {"status": "ok"}

        client = vertex_job_client("us-central1", emulator=exports["RESILIENT_EMULATOR_HOST"])
        job = client.create_custom_job(parent=PARENT, custom_job=custom_job(UPLOAD, display_name="upload"))
        deadline = time.monotonic() + 60
        while (state := client.get_custom_job(name=job.name).state.name) not in ("JOB_STATE_SUCCEEDED",
                                                                                   "JOB_STATE_FAILED"):
            assert time.monotonic() < deadline, state
            time.sleep(0.05)
        job_id = job.name.rsplit("/", 1)[1]
        assert state == "JOB_STATE_SUCCEEDED", (tmp_path / "work" / "vertex" / job_id / "workerpool0-0.log").read_text()
        url = f"{exports['STORAGE_EMULATOR_HOST']}/storage/v1/b/shared/o/hello.txt?alt=media"
        assert urllib.request.urlopen(url, timeout=10).read() == b"from a replica"
        client.transport.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0


def test_no_replica_survives_a_test_that_fails_mid_job(pytester: pytest.Pytester, tmp_path: Path):
    pid_file = tmp_path / "pid"
    pytester.makepyfile(test_inner=textwrap.dedent(f"""
        import time
        from airflow_provider_resilient.testing.emulator_clients import vertex_job_client

        def test_dies_mid_job(resilient_emulator):
            client = vertex_job_client("us-central1")
            job = client.create_custom_job(parent="{PARENT}", custom_job={{
                "display_name": "orphan?", "job_spec": {{"worker_pool_specs": [{{
                    "machine_spec": {{"machine_type": "n1-standard-4"}}, "replica_count": 1,
                    "container_spec": {{"image_uri": "x", "command": ["python", "-c", {PID_AND_SLEEP!r}]}}}}]}}}})
            resilient_emulator.wait_for_state(job.name, ["JOB_STATE_RUNNING"], 30)
            while not resilient_emulator.processes():
                time.sleep(0.01)
            open({str(pid_file)!r}, "w").write(str(resilient_emulator.processes()[0]))
            raise AssertionError("the test fails while the job runs")
    """))
    # the fixture's teardown is what is tested
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-p", PLUGIN)
    result.assert_outcomes(failed=1)
    pid = int(pid_file.read_text())
    assert not alive(pid)


def test_readme_quickstart_example_runs_with_and_without_faults():
    script = ROOT / "examples" / "emulator_quickstart.py"
    ok = subprocess.run([sys.executable, str(script), "--time-scale", "0.002"], capture_output=True, text=True,
                        timeout=120, check=True)
    assert "terminal state: JOB_STATE_SUCCEEDED" in ok.stdout
    failed = subprocess.run([sys.executable, str(script), "--time-scale", "0.002", "--fault-plan",
                             str(ROOT / "examples" / "crash_139.yaml")], capture_output=True, text=True, timeout=120,
                            check=True)
    assert failed.stdout.count("platform retry") == 3
    assert ("final error (code 3): The replica workerpool0-0 exited with a non-zero status of 139. "
            "Termination reason: Error.") in failed.stdout
    assert "terminal state: JOB_STATE_FAILED" in failed.stdout
