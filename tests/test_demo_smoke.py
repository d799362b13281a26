"""The README's first command runs scripts/run_demo.py: it must keep working."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_demo_script_runs_and_reports():
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "run_demo.py")], capture_output=True, text=True,
                         timeout=120, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "found step 200 at gs://demo-bucket/run/checkpoints/step_200" in out.stdout
    assert "failing over to fallback 1/1 (region=europe-west4)" in out.stdout
    assert "smoke check passed" in out.stdout
