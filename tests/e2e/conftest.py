"""End-to-end through the real Airflow (`dag.test()` in a process of its own, SQLite) against the emulator."""

from __future__ import annotations

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
        """The lines ``dag.test()`` logged while it ran ``task_id`` (its tries, triggers and resumptions)."""
        start, end = f"[DAG TEST] starting task_id={task_id} ", f"[DAG TEST] end task task_id={task_id} "
        lines = self.log.splitlines()
        first = next(i for i, line in enumerate(lines) if start in line)
        last = next(i for i, line in enumerate(lines) if end in line and i > first)
        return "\n".join(lines[first:last + 1])


def run_tasks(airflow_env: dict[str, str], emulator: Emulator, tasks: dict[str, dict[str, Any]], *,
              day: str = "2026-03-03", timeout: float = 300) -> TaskRuns:
    """Run ``e2e_vertex`` once with one task per entry of ``tasks`` (``{task_id: settings}``, the DAG's keys):
    several scenarios for the price of one Airflow start. ``dag.test()`` runs the tasks one after another; a
    failed task stops none of the others."""
    env = {**airflow_env, **emulator.env(), "RESILIENT_E2E": json.dumps({"tasks": tasks})}
    out = subprocess.run([sys.executable, str(FIXED_RUN), str(DAGS / "e2e_vertex.py"), "e2e_vertex", day], env=env,
                         capture_output=True, text=True, timeout=timeout, check=False)
    log = out.stdout + out.stderr
    states = dict(line.split()[1:3] for line in out.stdout.splitlines() if line.startswith("TASK "))
    return TaskRuns(out.returncode, log, states)
