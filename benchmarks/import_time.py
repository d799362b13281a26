"""Import cost of the provider's operator modules over bare ``airflow.sdk`` -- what a DAG file pays at parse
time -- and of the Google provider's Vertex AI operator module when it is installed.

    python benchmarks/import_time.py [--repeat 5] [--quick]

Each figure is the minimum over ``--repeat`` fresh interpreters (``python -X importtime``'s cumulative
microseconds of the module), so the machine's noise inflates it as little as possible. Prints a Markdown
table; also reports whether any ``google.cloud`` module was imported.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys

MODULES = [
    ("airflow.sdk", "bare Airflow task SDK"),
    ("airflow_provider_resilient.operators.vertex_ai", "ResilientCustomJobOperator"),
    ("airflow_provider_resilient.operators.tpu", "ResilientTPUWorkloadOperator"),
    ("airflow_provider_resilient.sensors.tpu", "TPU sensors"),
    ("airflow.providers.google.cloud.operators.vertex_ai.custom_job", "Google provider's Vertex AI operators"),
]

#: Left out of ``--quick``: a row measured as every other provider module's is (the table's code paths -- the base,
#: a provider module, one not installed -- all run without it).
QUICK_SKIPS = {"airflow_provider_resilient.sensors.tpu"}


def cumulative_us(module: str) -> tuple[int | None, bool]:
    """(cumulative import microseconds of ``module`` in a fresh interpreter, whether google.cloud loaded)."""
    out = subprocess.run([sys.executable, "-X", "importtime", "-c", f"import {module}"], capture_output=True,
                         text=True, check=False)
    if out.returncode != 0:
        return None, False
    total = None
    google = False
    for line in out.stderr.splitlines():
        match = re.match(r"import time:\s+\d+ \|\s+(\d+) \|\s+(\s*)(\S+)", line)
        if not match:
            continue
        name = match[3]
        google = google or name.startswith("google.cloud.")
        if name == module:
            total = int(match[1])
    return total, google


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="one run each, without the modules in QUICK_SKIPS (CI "
                                                                 "checks that it works)")
    args = parser.parse_args()
    repeat = 1 if args.quick else args.repeat
    rows = []
    base = None
    for module, what in MODULES:
        if args.quick and module in QUICK_SKIPS:
            continue
        runs = [cumulative_us(module) for _ in range(repeat)]
        times = [t for t, _ in runs if t is not None]
        if not times:
            rows.append((what, module, "not installed", "-", "-"))
            continue
        best = min(times) / 1e6
        if module == "airflow.sdk":
            base = best
        over = "-" if base is None or module == "airflow.sdk" else f"{best - base:+.2f}"
        rows.append((what, module, f"{best:.2f}", over, "yes" if any(g for _, g in runs) else "no"))
    print(f"| what | module | import s (min of {repeat}) | over airflow.sdk s | imports google.cloud |")
    print("| --- | --- | --- | --- | --- |")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
