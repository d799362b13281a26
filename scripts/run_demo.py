"""The offline demo (the README's first command): train a real model through injected faults.

1. Sets up an Airflow home with SQLite (``.demo/airflow_home``; ``airflow db migrate`` on first use).
2. Starts the emulator in this process with ``dags/faults/vertex_demo.yaml``: attempt 1 crashes with exit
   139 past the platform's three retries, attempt 2 stocks out, attempt 3 hits internal errors.
3. Runs ``airflow dags test example_vertex_ai_resilient_training`` against it and prints the attempt
   history, the step each attempt resumed from, the platform's story of each job, the workload's own word
   on where each run of each replica started (its ``resuming from step N`` line, read from the replica
   logs, beside the newest checkpoint that run saved), and the model's held-out accuracy.
4. Does the same for ``example_tpu_resilient_training`` with ``dags/faults/tpu_demo.yaml``: a 2-worker TPU
   node has a maintenance event it recovers from, then one that terminates it; the node is re-created
   and training resumes from the checkpoint.
5. And for ``example_modelarts_resilient_training`` with ``dags/faults/modelarts_demo.yaml``: ModelArts re-issues
   the first training job once after a hardware fault (its own fault tolerance), the re-issued run's node fails too,
   and the operator takes over: a new job resumed from the checkpoint in OBS, whose flavor is sold out, then a job on
   the fallback flavor. (Full logs: ``.demo/<dag_id>.log``.)

With ``--dag DAG_ID`` it runs that example of :data:`PHASES` instead, e.g. ``example_tpu_fault_tolerance_checks`` with
``dags/faults/tpu_preflight.yaml`` (the fault-tolerance checks: a chip missing at boot, then one lost while training).

Exits 0 when the training finished and its accuracy was reported.

Environment: ``RESILIENT_DEMO_DIR`` (default ``.demo``) holds the Airflow home and the logs;
``RESILIENT_DEMO_TIME_SCALE`` (default 0.01: a minute of the platform's latencies -- queueing, provisioning, a
restart, the error delay, a TPU node's create -- takes 0.6 s) is a knob for the tests, which run some examples at a
smaller scale: what the platform and the workload do is the same, only its latencies pass sooner. So is
``RESILIENT_DEMO_EPOCH_SECONDS`` (read by the tuning and the legacy AI Platform examples; default 0.1): how long each
epoch of their workload sleeps -- their faults strike at steps, so only the pace changes.
"""

from __future__ import annotations

import gc
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEMO_DIR = Path(os.environ.get("RESILIENT_DEMO_DIR", ROOT / ".demo"))
TIME_SCALE = float(os.environ.get("RESILIENT_DEMO_TIME_SCALE", "0.01"))
DAG_ID = "example_vertex_ai_resilient_training"
TPU_DAG_ID = "example_tpu_resilient_training"
CHECKS_DAG_ID = "example_tpu_fault_tolerance_checks"
LEGACY_DAG_ID = "example_ai_platform_legacy_training"
TUNING_DAG_ID = "example_vertex_ai_hyperparameter_tuning"
MODELARTS_DAG_ID = "example_modelarts_resilient_training"


def airflow_env() -> dict[str, str]:
    home = DEMO_DIR / "airflow_home"
    home.mkdir(parents=True, exist_ok=True)
    return {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(ROOT / "dags"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
        # The reconciler of dags/resilient_reconcile.py (parsed with the folder; `dags test` does not run it).
        "AIRFLOW__RESILIENT__RECONCILE_PROJECTS": "resilient-demo",
        "AIRFLOW__RESILIENT__RECONCILE_REGIONS": "us-central1,europe-west4",
        "AIRFLOW__RESILIENT__RECONCILE_ZONES": "us-central2-b",
        "GRPC_VERBOSITY": "ERROR",
    }


#: The ``airflow`` command: the console script's entry point in this interpreter, which exits without the last full
#: collection of the heap it drops (``gc.freeze``; the CLI's own exit spent 2-5 s walking Airflow's heap after
#: ``dags test`` had finished). The same CLI, the same output.
AIRFLOW = [sys.executable, "-c", "import gc, sys; sys.argv[0] = 'airflow'; from airflow.__main__ import main; main(); "
                                 "gc.freeze()"]


def airflow(*args: str, env: dict[str, str], log: Path | None = None) -> int:
    """``airflow *args`` (:data:`AIRFLOW`) with ``env``; its output to ``log`` (or nowhere); its exit status."""
    command = [*AIRFLOW, *args]
    if log is None:
        return subprocess.run(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
                              check=False).returncode
    with log.open("w") as out:
        return subprocess.run(command, env=env, stdout=out, stderr=subprocess.STDOUT, check=False).returncode


def run_phase(dag_id: str, plan_file: str, env: dict[str, str], summary: str) -> tuple[int, list[str]]:
    """Start an emulator with ``plan_file``, run ``airflow dags test dag_id`` on it, print what happened."""
    from airflow_provider_resilient.testing.emulator import Emulator, EmulatorConfig, FaultPlan

    plan = FaultPlan.load(ROOT / "dags" / "faults" / plan_file)
    print(f"\n##### {dag_id}: {summary}")
    print(f"Faults injected (dags/faults/{plan_file}):")
    for fault in plan.faults:
        details = [f"exit {fault.exit_code}" if fault.exit_code else "",
                   f"at step {fault.at_step}" if fault.at_step is not None else "",
                   ("recovers" if fault.recover else "no recovery") if fault.kind == "maintenance" else ""]
        which = f"resource {fault.match.nth}" if fault.match.nth else f"job {fault.match.display_name}" + (
            f" run {fault.match.platform_attempt}" if fault.match.platform_attempt else "")
        print(f"  {which}: {fault.kind} " + ", ".join(d for d in details if d)
              + (f" ({fault.times} time(s))" if fault.times is not None else " (every time)"))
    log = DEMO_DIR / f"{dag_id}.log"
    with Emulator(fault_plan=plan, config=EmulatorConfig(time_scale=TIME_SCALE, seed=plan.seed)) as emulator:
        print(f"Emulator up at {emulator.address}; running `airflow dags test {dag_id}` ...", flush=True)
        code = airflow("dags", "test", dag_id, env={**env, **emulator.env()}, log=log)
        print("What the emulated platform did:")
        for name in sorted(emulator.vertex.runs, key=lambda n: int(n.rsplit("/", 1)[1])):
            events = [e for e in emulator.job_events(name) if e not in ("QUEUED", "PENDING", "RUNNING")]
            print(f"  {name.rsplit('/', 3)[1]}/{name.rsplit('/', 1)[1]}: " + "; ".join(events))
        for name in sorted(emulator.vertex.tuning, key=lambda n: int(n.rsplit("/", 1)[1])):
            events = [e for e in emulator.job_events(name) if e not in ("QUEUED", "RUNNING")]
            print(f"  {name.rsplit('/', 3)[1]}/{name.rsplit('/', 1)[1]} (tuning): " + "; ".join(events))
        for job in emulator.modelarts.summary():
            reissues = job["stage_records"] - 1
            print(f"  ModelArts {job['name']} ({job['id']}): {job['phase']}"
                  + (f", re-issued {reissues} time(s) by its own fault tolerance" if reissues else ""))
        resumes = workload_resumes(emulator) + tpu_workload_story(emulator) + modelarts_workload_story(emulator)
        if resumes:
            print("What the workload said (replica logs; one line per run of a replica, in order):")
            print("\n".join(resumes))
        for call in emulator.calls.list():
            if call.method in ("CreateNode", "DeleteNode"):
                print(f"  {call.method} {call.resource.rsplit('/', 1)[1]} -> {call.code}")
        audits, _ = emulator.logging.list_log_entries(["projects/resilient-demo"],
                                                      '"tpu.nodes.terminate" OR "tpu.nodes.restart"', "", 0, "")
        for entry in audits:
            payload = entry.proto_payload
            print(f"  audit log: {payload.type_url.rsplit('.', 1)[-1]} entry at {entry.timestamp.isoformat()}")
    text = log.read_text(errors="replace")
    for line in re.findall(r"(SCHEDULED PENDING .*?asking the workload for a checkpoint \(.*?\))", text):
        print(f"  operator: {line}")
    report = _report(text)
    print("\n".join(report) if report else f"(no report: see {log})")
    print(f"full log: {log}")
    return code, report


#: Every example DAG the script runs, with its fault plan and a summary; the first three are the demo.
PHASES = [
    (DAG_ID, "vertex_demo.yaml", "Vertex AI CustomJob through a crash, a stockout and internal errors"),
    (TPU_DAG_ID, "tpu_demo.yaml", "a 2-worker TPU slice through two maintenance events"),
    (MODELARTS_DAG_ID, "modelarts_demo.yaml", "a ModelArts training job through hardware faults past the platform's "
                                              "own re-issue and a sold-out flavor"),
    (CHECKS_DAG_ID, "tpu_preflight.yaml", "fault-tolerance checks: a TPU chip missing at boot, "
                                         "then one lost while training"),
    (LEGACY_DAG_ID, "ai_platform_legacy.yaml", "a DAG written for AI Platform Training, on Vertex AI, through a "
                                               "crash and internal errors"),
    (TUNING_DAG_ID, "vertex_tuning.yaml", "a learning-rate study through a crashed trial and internal errors, "
                                          "no finished trial run again"),
]


def main(argv: list[str] | None = None) -> int:
    """``run_demo.py``: the demo (the first three of :data:`PHASES`); ``run_demo.py --dag DAG_ID``: that one."""
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--dag", choices=[p[0] for p in PHASES], help="run this example DAG only")
    args = parser.parse_args(argv)
    phases = [p for p in PHASES if p[0] == args.dag] if args.dag else PHASES[:3]
    started = time.monotonic()
    env = airflow_env()
    if not (Path(env["AIRFLOW_HOME"]) / "airflow.db").exists():
        print(f"Setting up Airflow (SQLite) in {env['AIRFLOW_HOME']} ...", flush=True)
        if airflow("db", "migrate", env=env) != 0:
            print("airflow db migrate failed", file=sys.stderr)
            return 1
    failed = []
    for dag_id, plan, summary in phases:
        code, report = run_phase(dag_id, plan, env, summary)
        if code != 0 or not any("FINAL HELD-OUT ACCURACY" in line for line in report):
            failed.append(f"{dag_id} (airflow dags test exited {code})")
    print(f"\nDemo took {time.monotonic() - started:.0f} s.")
    if failed:
        print("FAILED: " + ", ".join(failed), file=sys.stderr)
        return 1
    return 0


#: A replica log's header line, written by the emulator at each start of the replica's process.
_RUN_HEADER = re.compile(r"^===== \S+ (?P<replica>\S+) platform attempt (?P<attempt>\d+)(?: restart (?P<restart>\d+))? "
                         r"=====$", re.MULTILINE)


def workload_resumes(emulator: Any) -> list[str]:
    """One line per run of a replica of every CustomJob and of every tuning trial (creation order, then start
    order): where the workload itself says it started and the newest checkpoint it saved, e.g.
    ``  workload: us-central1/1000000000000042000 workerpool0-0 platform attempt 2: resuming from step 9;
    saved up to step 15`` (a trial's: ``us-central1/1000000000000042001 trial 1 workerpool0-0 ...``).
    ``tests/test_demo.py`` reads these lines."""
    vertex = emulator.vertex
    logs = []
    for name in sorted(vertex.runs, key=lambda n: int(n.rsplit("/", 1)[1])):
        job = f"{name.rsplit('/', 3)[1]}/{name.rsplit('/', 1)[1]}"
        logs.extend((job, emulator.replica_log(name, plan.name)) for plan in vertex.runs[name].plans)
    for name in sorted(vertex.tuning, key=lambda n: int(n.rsplit("/", 1)[1])):
        job = f"{name.rsplit('/', 3)[1]}/{name.rsplit('/', 1)[1]}"
        for path in sorted(vertex.log_dir(name).glob("trial-*/workerpool0-0.log"),
                           key=lambda p: int(p.parent.name.split("-")[1])):
            logs.append((f"{job} trial {path.parent.name.split('-')[1]}", path.read_text(errors="replace")))
    lines = []
    for job, text in logs:
        headers = list(_RUN_HEADER.finditer(text))
        for index, header in enumerate(headers):
            body = text[header.end():headers[index + 1].start() if index + 1 < len(headers) else len(text)]
            resumed = re.search(r"^resuming from step (\d+)$", body, re.MULTILINE)
            saved = [int(s) for s in re.findall(r"^saved checkpoint \S*?step_(\d+)$", body, re.MULTILINE)]
            restart = f" restart {header['restart']}" if header["restart"] else ""
            lines.append(f"  workload: {job} {header['replica']} platform attempt {header['attempt']}{restart}: "
                         f"resuming from step {resumed[1] if resumed else '?'}; "
                         f"saved up to step {max(saved) if saved else '-'}")
    return lines


def tpu_workload_story(emulator: Any) -> list[str]:
    """One line per boot of worker 0 of every TPU node (creation order): where the workload resumed, the newest
    checkpoint it saved, the step it saved on a checkpoint request before a maintenance window and the one it saved
    on the notice of a SIGTERM (checkpoint on notice), e.g.
    ``  workload: node example-tpu-...-a1 worker 0 boot 2: resuming from step 15; saved up to step 24``.
    ``tests/test_demo.py`` reads these lines."""
    lines = []
    logs = sorted((emulator.work_dir / "tpu").glob("*/worker-0.log"), key=lambda p: p.stat().st_ctime)
    for path in logs:
        text = path.read_text(errors="replace")
        for boot, body in re.findall(r"^===== worker 0 boot (\d+) =====\n(.*?)(?=^===== worker 0 boot |\Z)", text,
                                     re.MULTILINE | re.DOTALL):
            resumed = re.search(r"^resuming from step (\d+)$", body, re.MULTILINE)
            saved = [int(s) for s in re.findall(r"^saved checkpoint \S*?step_(\d+)", body, re.MULTILINE)]
            asked = re.search(r"^saved checkpoint \S*?step_(\d+) on request \(((?!notice-).*)\)$", body, re.MULTILINE)
            notice = re.search(r"^saved checkpoint \S*?step_(\d+) on request \(notice-", body, re.MULTILINE)
            lines.append(f"  workload: node {path.parent.name} worker 0 boot {boot}: "
                         f"resuming from step {resumed[1] if resumed else '?'}; "
                         f"saved up to step {max(saved) if saved else '-'}"
                         + (f"; saved step {asked[1]} on request ({asked[2]})" if asked else "")
                         + (f"; saved step {notice[1]} on the SIGTERM's notice" if notice else ""))
    return lines


def modelarts_workload_story(emulator: Any) -> list[str]:
    """One line per run of node 0 of every ModelArts training job (creation order): the job's issue (ModelArts
    re-issues it on new nodes after a hardware fault), where the workload resumed and the newest checkpoint it saved,
    e.g. ``  workload: job digits-mlp-4a2ee9e4-a1 issue 2: resuming from step 6; saved up to step 9``.
    ``tests/test_demo.py`` reads these lines."""
    lines = []
    for job in emulator.modelarts.summary():
        path = emulator.work_dir / "modelarts" / job["id"] / "worker-0.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        for issue, body in re.findall(r"^===== modelarts-job-\S+ worker-0 issue (\d+) =====\n(.*?)(?=^===== |\Z)",
                                      text, re.MULTILINE | re.DOTALL):
            resumed = re.search(r"^resuming from step (\d+)$", body, re.MULTILINE)
            saved = [int(s) for s in re.findall(r"^saved checkpoint \S*?step_(\d+)", body, re.MULTILINE)]
            lines.append(f"  workload: job {job['name']} issue {issue}: "
                         f"resuming from step {resumed[1] if resumed else '?'}; "
                         f"saved up to step {max(saved) if saved else '-'}")
    return lines


def _report(text: str) -> list[str]:
    """The report task's printed table and accuracy, without the log prefixes."""
    lines = []
    capture = False
    for raw in text.splitlines():
        line = re.sub(r"^.*?\[info\s*\]\s*", "", raw) if "[info" in raw else raw
        line = re.sub(r"\s+\[[\w.]+\]\s+loc=\S+$", "", line)
        line = re.sub(r"\s+chan=stdout.*$", "", line)
        if "ATTEMPT HISTORY ===" in line:
            capture = True
        if capture and (line.startswith(("===", "attempt")) or line[:1].isdigit()):
            lines.append(line.rstrip())
        if "FINAL HELD-OUT ACCURACY" in line:
            break
    return lines


if __name__ == "__main__":
    status = main()
    gc.freeze()  # no last full collection of the heap the process drops as it exits (seconds with Airflow)
    sys.exit(status)
