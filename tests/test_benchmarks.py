"""Benchmarks run in --quick mode: they execute and print their tables (no timing is asserted)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_import_time_benchmark_prints_its_table_and_no_google_import():
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "import_time.py"), "--quick"],
                         capture_output=True, text=True, timeout=300, check=True)
    rows = {line.split("|")[2].strip(): line for line in out.stdout.splitlines() if line.startswith("| ")}
    for module in ("airflow_provider_resilient.operators.vertex_ai", "airflow_provider_resilient.operators.tpu"):
        assert rows[module].rstrip(" |").endswith("no"), rows[module]  # no google.cloud module imported
