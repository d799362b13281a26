"""The offline demo (the README's first command): train a real model through injected faults.

1. Sets up an Airflow home with SQLite (``.demo/airflow_home``; ``airflow db migrate`` on first use).
2. Starts the emulator in this process with ``dags/faults/vertex_demo.yaml``: attempt 1 crashes with exit
   139 past the platform's three retries, attempt 2 stocks out, attempt 3 hits internal errors.
3. Runs ``airflow dags test example_vertex_ai_resilient_training`` against it (full log:
   ``.demo/dags_test.log``) and prints the attempt history, the step each attempt resumed from, the
   platform's story of each job, and the model's held-out accuracy.

Exits 0 when the training finished and its accuracy was reported.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEMO_DIR = Path(os.environ.get("RESILIENT_DEMO_DIR", ROOT / ".demo"))
DAG_ID = "example_vertex_ai_resilient_training"


def airflow_env() -> dict[str, str]:
    home = DEMO_DIR / "airflow_home"
    home.mkdir(parents=True, exist_ok=True)
    return {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(ROOT / "dags"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
        "GRPC_VERBOSITY": "ERROR",
    }


def airflow(*args: str, env: dict[str, str], log: Path | None = None) -> int:
    command = [str(Path(sys.executable).parent / "airflow"), *args]
    if log is None:
        return subprocess.run(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
                              check=False).returncode
    with log.open("w") as out:
        return subprocess.run(command, env=env, stdout=out, stderr=subprocess.STDOUT, check=False).returncode


def main() -> int:
    from airflow_provider_resilient.testing.emulator import Emulator, EmulatorConfig, FaultPlan

    started = time.monotonic()
    env = airflow_env()
    if not (Path(env["AIRFLOW_HOME"]) / "airflow.db").exists():
        print("Setting up Airflow (SQLite) in .demo/airflow_home ...", flush=True)
        if airflow("db", "migrate", env=env) != 0:
            print("airflow db migrate failed", file=sys.stderr)
            return 1
    plan = FaultPlan.load(ROOT / "dags" / "faults" / "vertex_demo.yaml")
    print("Faults injected (dags/faults/vertex_demo.yaml):")
    for fault in plan.faults:
        print(f"  job {fault.match.nth}: {fault.kind}" + (f" exit {fault.exit_code}" if fault.exit_code else "")
              + (f" at step {fault.at_step}" if fault.at_step is not None else "") + f", {fault.times} time(s)")
    log = DEMO_DIR / "dags_test.log"
    with Emulator(fault_plan=plan, config=EmulatorConfig(time_scale=0.01, seed=plan.seed)) as emulator:
        print(f"Emulator up at {emulator.address}; running `airflow dags test {DAG_ID}` ...", flush=True)
        code = airflow("dags", "test", DAG_ID, env={**env, **emulator.env()}, log=log)
        jobs = [c.resource for c in emulator.calls.list("CreateCustomJob") if c.code == "OK"]
        names = sorted(emulator.vertex.runs, key=lambda n: int(n.rsplit("/", 1)[1]))
        print("\nWhat the emulated platform did with each job:")
        for name in names:
            events = [e for e in emulator.job_events(name) if e not in ("QUEUED", "PENDING", "RUNNING")]
            print(f"  {name.rsplit('/', 3)[1]}/{name.rsplit('/', 1)[1]}: " + "; ".join(events))
    text = log.read_text(errors="replace")
    report = _report(text)
    print()
    print("\n".join(report) if report else "(no report: see .demo/dags_test.log)")
    print(f"\n{len(jobs)} CustomJob(s) created; demo took {time.monotonic() - started:.0f} s; full log: {log}")
    if code != 0 or not any("FINAL HELD-OUT ACCURACY" in line for line in report):
        print(f"airflow dags test exited {code}", file=sys.stderr)
        return 1
    return 0


def _report(text: str) -> list[str]:
    """The report task's printed table and accuracy, without the log prefixes."""
    lines = []
    capture = False
    for raw in text.splitlines():
        line = re.sub(r"^.*?\[info\s*\]\s*", "", raw) if "[info" in raw else raw
        line = re.sub(r"\s+\[[\w.]+\]\s+loc=\S+$", "", line)
        line = re.sub(r"\s+chan=stdout.*$", "", line)
        if "=== ATTEMPT HISTORY ===" in line:
            capture = True
        if capture and (line.startswith(("===", "attempt")) or line[:1].isdigit()):
            lines.append(line.rstrip())
        if "=== FINAL HELD-OUT ACCURACY" in line:
            break
    return lines


if __name__ == "__main__":
    sys.exit(main())
