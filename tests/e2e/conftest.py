"""End-to-end through the real Airflow (`dag.test()` in a process of its own, SQLite) against the emulator."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_resilient.testing.emulator import Emulator

DAGS = Path(__file__).parent / "dags"
AIRFLOW = str(Path(sys.executable).parent / "airflow")
FIXED_RUN = Path(__file__).parent / "dag_test_fixed_run.py"


@pytest.fixture(scope="session")
def airflow_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """An Airflow home with a migrated SQLite database, shared by the session's e2e tests."""
    home = tmp_path_factory.mktemp("airflow_home")
    env = {**os.environ, "AIRFLOW_HOME": str(home), "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS),
           "AIRFLOW__CORE__LOAD_EXAMPLES": "False", "GRPC_VERBOSITY": "ERROR"}
    subprocess.run([AIRFLOW, "db", "migrate"], env=env, check=True, capture_output=True, timeout=300)
    return env


@dataclass
class TaskRuns:
    """One ``dag.test()`` run of ``e2e_vertex`` with several independent tasks (one scenario each)."""

    returncode: int
    log: str
    states: dict[str, str]  # task_id -> its final state ("success", "failed", ...)

    def task_log(self, task_id: str) -> str:
        """The lines ``dag.test()`` logged while it ran ``task_id``: each of its tries and resumptions after a
        deferral, from its ``starting`` line to its ``end task`` line (Airflow 3.1 runs other tasks between them)."""
        start, end = f"[DAG TEST] starting task_id={task_id} ", f"[DAG TEST] end task task_id={task_id} "
        kept, inside = [], False
        for line in self.log.splitlines():
            inside = inside or start in line
            if inside:
                kept.append(line)
            inside = inside and end not in line
        assert kept, f"dag.test() never ran {task_id}"
        return "\n".join(kept)


def e2e_env(airflow_env: dict[str, str], emulator: Emulator, tasks: dict[str, dict[str, Any]]
            ) -> tuple[dict[str, str], str]:
    """The environment of a ``dag.test()`` process running ``tasks`` and the DAG id they get: one per set of task
    ids (Airflow 3.1 and 3.2 keep the structure a DAG id was first run with)."""
    dag_id = "e2e_vertex_" + hashlib.sha256(" ".join(sorted(tasks)).encode()).hexdigest()[:8]
    return {**airflow_env, **emulator.env(), "RESILIENT_E2E": json.dumps({"tasks": tasks, "dag_id": dag_id})}, dag_id


def run_tasks(airflow_env: dict[str, str], emulator: Emulator, tasks: dict[str, dict[str, Any]], *,
              day: str = "2026-03-03", timeout: float = 300) -> TaskRuns:
    """Run ``e2e_vertex`` once with one task per entry of ``tasks`` (``{task_id: settings}``, the DAG's keys):
    several scenarios for the price of one Airflow start. ``dag.test()`` runs the tasks one after another; a
    failed task stops none of the others."""
    env, dag_id = e2e_env(airflow_env, emulator, tasks)
    # one stream, unbuffered: Airflow 3.1 logs a task's lines to stderr and dag.test()'s own to stdout
    out = subprocess.run([sys.executable, str(FIXED_RUN), str(DAGS / "e2e_vertex.py"), dag_id, day],
                         env={**env, "PYTHONUNBUFFERED": "1"}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, timeout=timeout, check=False)
    states = dict(line.split()[1:3] for line in out.stdout.splitlines() if line.startswith("TASK "))
    return TaskRuns(out.returncode, out.stdout, states)
