"""The native production stack comes up healthy, parses the demo DAGs, survives a triggerer kill, and leaves no
process behind when stopped. Marked ``stack``: ``make stack-test``."""

from __future__ import annotations

import subprocess
import textwrap
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from devtools.stack import (
    DEFAULT_DAGS_FOLDER,
    HEALTH_COMPONENTS,
    NativeStack,
)

pytestmark = pytest.mark.stack

DEMO_DAGS = {"example_vertex_ai_resilient_training", "example_tpu_resilient_training"}


def poll(what: str, probe: Any, timeout: float = 120.0, interval: float = 1.0) -> Any:
    """``probe()`` until it returns something truthy; that. Fails naming ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        got = probe()
        if got:
            return got
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not so after {timeout:.0f} s")
        time.sleep(interval)


def _alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return stat[stat.rindex(b")") + 2:].split()[0] not in (b"Z", b"X")


def test_stack_is_healthy(stack: NativeStack) -> None:
    health = stack.health()
    assert {c: health[c]["status"] for c in HEALTH_COMPONENTS} == dict.fromkeys(HEALTH_COMPONENTS, "healthy")
    components = {"airflow-apiserver", "airflow-scheduler", "airflow-dag-processor", "airflow-triggerer"}
    if stack.executor == "celery":
        components |= {"redis", "airflow-worker-1", "airflow-worker-2", "airflow-triggerer-2"}
    assert set(stack.services) == {"emulator", "airflow-init"} | components
    for name in components:
        assert stack.pids(name), f"{name} is not running"
    assert stack.emulator_get("/healthz") == {"status": "ok"}
    assert isinstance(stack.emulator_get("/jobs"), list)
    assert set(stack.emulator_env) == {"RESILIENT_EMULATOR_HOST", "STORAGE_EMULATOR_HOST",
                                       "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "OBS_ENDPOINT", "OBS_ACCESS_KEY_ID",
                                       "OBS_SECRET_ACCESS_KEY"}
    assert isinstance(stack.emulator_get("/modelarts-jobs"), list)


def test_demo_dags_are_parsed_without_import_errors(stack: NativeStack) -> None:
    def parsed() -> set[str] | None:
        status, body = stack.api("GET", "/api/v2/dags?limit=100")
        assert status == 200, body
        ids = {d["dag_id"] for d in body["dags"]}
        return ids if ids >= DEMO_DAGS else None

    poll("the dag-processor parsed the demo DAGs", parsed)
    status, errors = stack.api("GET", "/api/v2/importErrors")
    assert status == 200
    assert errors["total_entries"] == 0, errors["import_errors"]
    for dag_id in DEMO_DAGS:
        status, dag = stack.api("GET", f"/api/v2/dags/{dag_id}")
        assert status == 200 and dag["is_paused"] is False, dag


def test_airflow_cli_reaches_the_stack(stack: NativeStack) -> None:
    done = subprocess.run(["airflow", "dags", "list-import-errors", "--output", "json"], env=stack.env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] in ("[]", "No data found"), done.stdout[-2000:]


def test_triggerer_killed_and_started_again_is_healthy(stack: NativeStack) -> None:
    before = stack.pids("airflow-triggerer")
    assert before
    starts = stack.component_log("triggerer").count("start: ")  # other tests may have restarted it
    killed_at = datetime.now(UTC)
    stack.kill_component("airflow-triggerer")
    assert stack.pids("airflow-triggerer") == []
    assert not set(before) & set(stack.processes())
    stack.start_component("airflow-triggerer")  # returns once health shows a heartbeat after the restart
    health = stack.health()
    assert health["triggerer"]["status"] == "healthy"
    assert datetime.fromisoformat(health["triggerer"]["latest_triggerer_heartbeat"]) > killed_at
    assert set(stack.pids("airflow-triggerer")).isdisjoint(before)
    assert stack.component_log("triggerer").count("start: ") == starts + 1


PROBE_DAG = '''
from airflow.sdk import dag, task


@dag(schedule=None, catchup=False)
def stack_stop_probe():
    @task
    def sleeper():
        import subprocess
        import time

        # A grandchild that leaves the task's process group and session: only the stack's marker finds it.
        subprocess.Popen(["sleep", "600"], start_new_session=True)
        time.sleep(600)

    sleeper()


stack_stop_probe()
'''


def test_stop_leaves_no_process(tmp_path: Path) -> None:
    """A stack of its own, with a task running (a LocalExecutor worker's task process in its own process group,
    and a daemon in its own session): stop() ends every process of it and removes its directory."""
    (tmp_path / "probe").mkdir()
    (tmp_path / "probe" / "stack_stop_probe.py").write_text(textwrap.dedent(PROBE_DAG))
    native = NativeStack(dags=[DEFAULT_DAGS_FOLDER, tmp_path / "probe"], fault_plan=None)
    try:
        native.start()

        def triggered() -> bool:
            status, _ = native.api("POST", "/api/v2/dags/stack_stop_probe/dagRuns", {"logical_date": None})
            return status == 200

        poll("stack_stop_probe triggered", triggered, timeout=120)

        def sleeping() -> list[int]:
            return [p for p in native.processes() if Path(f"/proc/{p}/cmdline").read_bytes() == b"sleep\x00600\x00"]

        daemon = poll("the task started its daemon", sleeping, timeout=120)
        status, tis = native.api("GET", "/api/v2/dags/stack_stop_probe/dagRuns/~/taskInstances")
        assert status == 200 and [t["state"] for t in tis["task_instances"]] == ["running"], tis
        everything = native.processes()
        assert set(daemon) <= set(everything)
        work = native.work_dir
    finally:
        native.stop()
    print(f"\nstop-probe stack: healthy in {native.start_seconds:.1f} s, stopped with a task running in "
          f"{native.stop_seconds:.1f} s ({len(everything)} processes)")
    assert native.processes() == []
    alive = [p for p in everything if _alive(p)]
    assert alive == [], f"survived stop(): {alive}"
    assert not work.exists()
    assert native.stop_seconds is not None and native.stop_seconds < 60
    native.stop()  # idempotent
