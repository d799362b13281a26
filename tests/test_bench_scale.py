"""benchmarks/scale.py --quick executes and prints its table with rows for both modes (no timing is asserted)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_scale_benchmark_prints_a_row_per_mode_and_n_and_the_shared_poller_ratio():
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "scale.py"), "--quick"],
                         capture_output=True, text=True, timeout=300, check=True)
    rows = [line.split("|")[1:-1] for line in out.stdout.splitlines() if line.startswith("| ") and "---" not in line]
    assert [c.strip() for c in rows[0]] == ["mode", "N", "API calls/min", "calls/min per job", "CPU s",
                                            "CPU ms per job-minute"]
    assert [(r[0].strip(), int(r[1])) for r in rows[1:]] == [("per-job", 10), ("per-job", 100), ("shared", 10),
                                                             ("shared", 100)]
    for row in rows[1:]:
        assert all(float(cell) >= 0 for cell in row[2:])  # figures, not timing assertions
    assert "shared poller: calls/min at N=100 / calls/min at N=10 = " in out.stdout
