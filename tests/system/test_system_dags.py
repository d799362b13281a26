"""The system-test DAGs (tests/system/dags/), each run once with ``dag.test()`` in a process of its own.

With ``SYSTEM_TESTS_GCP_PROJECT`` set they run against that project, with the credentials of the Airflow connection
``SYSTEM_TESTS_GCP_CONN_ID`` (``AIRFLOW_CONN_*`` in the environment; ``none``: Application Default Credentials) --
they create a bucket, a CustomJob and a TPU VM there, and delete them (see each DAG's docstring for what it costs).
Without it they run against the emulator, as CI runs them, so the DAGs are known to run.

    SYSTEM_TESTS_GCP_PROJECT=my-project SYSTEM_TESTS_GCP_CONN_ID=none .venv/bin/pytest -m system tests/system -n 0
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_provider_resilient.testing.emulator import Emulator, EmulatorConfig

pytestmark = [pytest.mark.system]

HERE = Path(__file__).parent
DAGS = HERE / "dags"
FIXED_RUN = HERE.parent / "e2e" / "dag_test_fixed_run.py"
AIRFLOW = str(Path(sys.executable).parent / "airflow")
REAL_PROJECT = os.environ.get("SYSTEM_TESTS_GCP_PROJECT")


@pytest.fixture(scope="module")
def system_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """An Airflow home with a migrated SQLite database, and the emulator's connection unless a real project is
    named."""
    home = tmp_path_factory.mktemp("system_airflow_home")
    env = {**os.environ, "AIRFLOW_HOME": str(home), "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS),
           "AIRFLOW__CORE__LOAD_EXAMPLES": "False", "GRPC_VERBOSITY": "ERROR", "PYTHONUNBUFFERED": "1",
           "PYTHONPATH": os.pathsep.join([str(DAGS), os.environ.get("PYTHONPATH", "")])}
    subprocess.run([AIRFLOW, "db", "migrate"], env=env, check=True, capture_output=True, timeout=300)
    if REAL_PROJECT:
        yield env
        return
    with Emulator(config=EmulatorConfig(time_scale=0.002)) as emulator:
        yield {**env, **emulator.env(), "SYSTEM_TESTS_POLL_SECONDS": "0.5",
               "SYSTEM_TESTS_MIN_DEFER_SECONDS": "0"}


@pytest.mark.parametrize("dag_file", sorted(p.name for p in DAGS.glob("example_system_*.py")))
def test_the_system_dag_runs_to_success_and_leaves_nothing(system_env, dag_file):
    dag_id = dag_file.removesuffix(".py")
    out = subprocess.run([sys.executable, str(FIXED_RUN), str(DAGS / dag_file), dag_id, "2026-04-01"],
                         env=system_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         timeout=3600 if REAL_PROJECT else 240, check=False)
    states = dict(line.split()[1:3] for line in out.stdout.splitlines() if line.startswith("TASK "))
    assert out.returncode == 0, out.stdout[-6000:]
    # setup, the operator, the nothing-left check and teardown all ran and succeeded
    assert set(states.values()) == {"success"} and len(states) == 4, states
