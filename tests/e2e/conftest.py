"""End-to-end through the real Airflow (`airflow dags test`, SQLite) against the emulator."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_resilient.testing.emulator import Emulator, EmulatorConfig

DAGS = Path(__file__).parent / "dags"
AIRFLOW = str(Path(sys.executable).parent / "airflow")


@pytest.fixture(scope="session")
def airflow_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """An Airflow home with a migrated SQLite database, shared by the session's e2e tests."""
    home = tmp_path_factory.mktemp("airflow_home")
    env = {**os.environ, "AIRFLOW_HOME": str(home), "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS),
           "AIRFLOW__CORE__LOAD_EXAMPLES": "False", "GRPC_VERBOSITY": "ERROR"}
    subprocess.run([AIRFLOW, "db", "migrate"], env=env, check=True, capture_output=True, timeout=300)
    return env


@dataclass
class DagRun:
    returncode: int
    log: str


@pytest.fixture
def emulator(request: pytest.FixtureRequest) -> Iterator[Emulator]:
    """An emulator at time scale 0.002; more EmulatorConfig fields through indirect parametrisation:
    ``@pytest.mark.parametrize("emulator", [{"platform": {...}}], indirect=True)``."""
    options = {"time_scale": 0.002, **getattr(request, "param", {})}
    with Emulator(config=EmulatorConfig(**options)) as emu:
        yield emu


@pytest.fixture
def run_dag(airflow_env: dict[str, str], emulator: Emulator) -> Any:
    """Run ``e2e_vertex`` once with a config; returns (returncode, log)."""

    def run(config: dict[str, Any], *, logical_date: str = "2026-01-01", timeout: float = 300) -> DagRun:
        env = {**airflow_env, **emulator.env(), "RESILIENT_E2E": json.dumps(config)}
        out = subprocess.run([AIRFLOW, "dags", "test", "e2e_vertex", logical_date], env=env, capture_output=True,
                             text=True, timeout=timeout, check=False)
        return DagRun(out.returncode, out.stdout + out.stderr)

    return run
