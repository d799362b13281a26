"""The ModelArts goodput benchmark in --quick mode: it runs and prints its tables (no figure or timing is asserted), in
the style of tests/test_benchmarks.py."""

from __future__ import annotations

import itertools
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_modelarts_goodput_benchmark_prints_the_trace_a_row_per_way_and_the_failures_struck():
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "modelarts_goodput.py"), "--quick"],
                         capture_output=True, text=True, timeout=300, check=False)
    assert out.returncode == 0, out.stderr[-4000:]
    assert "| Young/Daly ceiling | " in out.stdout and "| ceiling of the failures that struck | " in out.stdout
    lines = out.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("| way | finished |"))
    assert lines[header].rstrip(" |").endswith("machine time (node-s)"), lines[header]
    rows = list(itertools.takewhile(lambda line: line.startswith("| "), lines[header + 2:]))
    assert [r.split("|")[1].strip() for r in rows] == ["ours", "platform re-issue", "task retries"], out.stdout
    for row in rows:
        cells = [c.strip() for c in row.split("|")]
        assert cells[4] == "0 (gave up)" or float(cells[4].lstrip("< ")) > 0  # a figure, not a timing assertion
        assert int(cells[6]) >= 1  # the trace's first failure struck every way
        assert int(cells[7]) >= 1 and float(cells[10]) >= 0  # jobs created, node-seconds while Running
    assert rows[0].split("|")[2].strip() == "yes", out.stdout  # ours finished
    assert "ours, attempt by attempt:" in out.stdout and any(line.startswith("* ours: ") for line in lines)
    assert any(line.startswith("Where the time went") for line in lines), out.stdout
