"""Run the benchmarks and write their tables to ``benchmarks/RESULTS.md`` with the machine and the date.

    python benchmarks/run_all.py [--quick] [--only goodput scale ...] [--output benchmarks/RESULTS.md]

With ``--only``, the sections of the benchmarks run replace theirs in the output file and the others are kept.

Each benchmark is a script in this directory that prints Markdown; this runs them one after another (they
measure time, so never in parallel), echoes their output, and writes one file: a header naming the
machine (CPU, cores, memory, OS, Python, Airflow) and the date, then one section per benchmark with the
command that made it and how long it took. A benchmark that fails is recorded as failed with its last
output lines, and the exit status is 1.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: name -> (script, what it measures), in the order they run.
BENCHMARKS = {
    "import_time": ("import_time.py", "import cost of the operator modules over bare `airflow.sdk`"),
    "triggerer_loop": ("triggerer_loop.py", "event-loop stall while the first trigger imports the client "
                       "libraries, and a full garbage collection's pause after"),
    "detection": ("detection.py", "fault-to-decision and decision-to-running latency per failure class"),
    "goodput": ("goodput.py", "goodput over 20 seeded fault traces: ours, Airflow task retries, the Google "
                              "provider with retries=3, retry loop"),
    "tpu_goodput": ("tpu_goodput.py", "goodput over 20 seeded Cloud TPU fault traces: ours, the maintenance "
                                      "page's recreate loop and its ssh loop"),
    "modelarts_goodput": ("modelarts_goodput.py", "goodput over seeded Huawei Cloud ModelArts fault traces: ours, the "
                                                  "platform's own re-issue alone, Airflow task retries"),
    "checkpoint_interval": ("checkpoint_interval.py", "goodput with the handed checkpoint interval against the fixed "
                                                      "interval of a wrong MTBF guess"),
    "maintenance": ("maintenance.py", "training progress lost per scheduled TPU maintenance event, with and without "
                                      "the early checkpoint"),
    "notice": ("notice.py", "training progress lost per Spot TPU preemption, with and without the checkpoint on "
                            "notice, for checkpoint costs inside and beyond the 30 s notice"),
    "multislice": ("multislice.py", "a multislice run's recovery time after one slice is preempted"),
    "scale": ("scale.py", "API calls per minute and CPU seconds of N watched jobs in one event loop"),
    "stack_scale": ("stack_scale.py", "N mapped deferred training tasks on the CeleryExecutor stack with two "
                                      "triggerers: API calls per minute, job end to task success, triggerer and "
                                      "scheduler cost per watched job, the 10,000-job projection"),
}

#: Arguments of a full (not --quick) run beyond the script's defaults. Both goodput traces run with a checkpoint
#: cost C of 20 s, so that a 6 s step and a save fit in the 30 s a Spot VM has between its preemption notice and its
#: stop (Compute Engine, "Preemptible VM instances"); the Vertex AI trace gains Spot reclaims as 30 % of its failures,
#: the Cloud TPU trace's share of preemptions (Google publishes no reclaim rate for training replicas).
FULL_ARGS = {"goodput": ["--seeds", "20", "--spot-share", "0.3", "--checkpoint-cost", "20",
                         "--plot", str(HERE / "goodput.png"), "--crash-loop"],
             "tpu_goodput": ["--seeds", "20", "--checkpoint-cost", "20", "--plot", str(HERE / "tpu_goodput.png")],
             "modelarts_goodput": ["--seeds", "20"]}


def machine() -> list[tuple[str, str]]:
    """(name, value) rows describing this machine."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = ""
    try:
        kib = int(next(line.split()[1] for line in Path("/proc/meminfo").read_text().splitlines()
                       if line.startswith("MemTotal")))
        memory = f"{kib / 1024 / 1024:.1f} GiB"
    except (OSError, StopIteration, ValueError):
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    versions = []
    for dist in ("apache-airflow", "google-cloud-aiplatform", "apache-airflow-providers-google",
                 "airflow-provider-resilient"):
        try:
            versions.append(f"{dist} {metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            versions.append(f"{dist} not installed")
    return [("date", dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")), ("CPU", f"{cpu}, {cores} cores"),
            ("memory", memory or "unknown"), ("OS", platform.platform()),
            ("Python", platform.python_version()), ("packages", ", ".join(versions))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="each benchmark's --quick mode")
    parser.add_argument("--only", nargs="+", choices=list(BENCHMARKS), help="run only these")
    parser.add_argument("--output", type=Path, default=HERE / "RESULTS.md")
    args = parser.parse_args()
    names = args.only or list(BENCHMARKS)
    sections, failed = [], False
    for name in names:
        script, what = BENCHMARKS[name]
        extra = ["--quick"] if args.quick else FULL_ARGS.get(name, [])
        command = [sys.executable, str(HERE / script), *extra]
        shown = " ".join(["python", f"benchmarks/{script}", *extra])
        print(f"\n===== {shown}", flush=True)
        began = time.monotonic()
        proc = subprocess.run(command, capture_output=True, text=True, check=False)
        took = time.monotonic() - began
        print(proc.stdout, end="", flush=True)
        body = proc.stdout.strip()
        if proc.returncode != 0:
            failed = True
            tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-20:])
            print(tail, file=sys.stderr)
            body = f"**failed** (exit {proc.returncode}):\n\n```\n{tail}\n```"
        day = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d")
        sections.append((name, f"## {name}: {what}\n\n`{shown}` -- {took:.0f} s, {day}\n\n{body}\n"))
    header = ["# Benchmark results", "", "Written by `make bench` (`python benchmarks/run_all.py`"
              f"{' --quick' if args.quick else ''}). Figures from one run on this machine"
              f"{' (each section says its date: --only runs replace theirs)' if args.only else ''}:", "",
              "| machine | |", "| --- | --- |", *(f"| {k} | {v} |" for k, v in machine()), ""]
    kept = kept_sections(args.output) if args.only else {}
    merged = {**kept, **dict(sections)}
    ordered = [merged[name] for name in BENCHMARKS if name in merged]
    args.output.write_text("\n".join(header) + "\n" + "\n".join(ordered))
    print(f"\nwrote {args.output}")
    return 1 if failed else 0


def kept_sections(path: Path) -> dict[str, str]:
    """The sections of an earlier results file, by benchmark name: from its ``## <name>: `` line to the next
    benchmark's (a benchmark's own output may hold ``##`` headings of its own)."""
    if not path.exists():
        return {}
    starts = {f"## {name}: ": name for name in BENCHMARKS}
    found: dict[str, list[str]] = {}
    current: str | None = None
    for line in path.read_text().splitlines():
        name = next((n for prefix, n in starts.items() if line.startswith(prefix)), None)
        if name is not None:
            current = name
            found[current] = []
        if current is not None:
            found[current].append(line)
    return {name: "\n".join(lines).rstrip() + "\n" for name, lines in found.items()}


if __name__ == "__main__":
    sys.exit(main())
