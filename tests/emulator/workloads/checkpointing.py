"""A test workload: counts steps, checkpoints every --every steps to AIP_CHECKPOINT_DIR (keeping the newest --keep),
resumes. With --goodput-job, it records ml-goodput-measurement events (job start, every step's start, job end)
under that job name in the emulator's Cloud Logging, as a workload using the package does on Google Cloud.

Each checkpoint is ``step_N/state.json`` then ``step_N/COMMITTED`` (data first, marker last), written
with fsspec -- gcsfs for gs:// -- exactly as a training script would on Vertex AI.
"""

import argparse
import json
import os
import time

import fsspec

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=50)
parser.add_argument("--every", type=int, default=10)
parser.add_argument("--step-seconds", type=float, default=0.005)
parser.add_argument("--keep", type=int, default=0, help="keep only the newest N saves (0: all), as max_to_keep does")
parser.add_argument("--goodput-job", default="", help="record goodput events under this job_name")
parser.add_argument("--goodput-project", default="test-project", help="the project of the goodput events")
parser.add_argument("--crash-once-at-step", type=int, default=0,
                    help="exit 139 on reaching this step, once per checkpoint directory (a marker beside it remembers)")
args = parser.parse_args()
recorder = None
if args.goodput_job:
    from airflow_provider_resilient.testing.goodput_events import goodput_recorder

    recorder = goodput_recorder(args.goodput_job, project=args.goodput_project)
    recorder.record_job_start_time()

root = os.environ["AIP_CHECKPOINT_DIR"].rstrip("/")
fs, path = fsspec.core.url_to_fs(root)
start = 0
try:
    done = [int(p.rsplit("_", 1)[1]) for p in fs.ls(path, detail=False) if fs.exists(f"{p}/COMMITTED")]
    start = max(done, default=0)
except FileNotFoundError:
    pass
print(f"resuming from step {start}", flush=True)
for step in range(start + 1, args.steps + 1):
    if recorder is not None:
        recorder.record_step_start_time(step - 1)  # the package counts from 0: the step about to run
    time.sleep(args.step_seconds)
    print(f"step {step}", flush=True)
    if step == args.crash_once_at_step and not fs.exists(f"{path}.crashed"):
        fs.pipe(f"{path}.crashed", b"")
        raise SystemExit(139)  # a crash that still runs atexit: the recorder's queued entries are sent
    if step % args.every == 0:
        fs.pipe(f"{path}/step_{step}/state.json", json.dumps({"step": step}).encode())
        fs.pipe(f"{path}/step_{step}/COMMITTED", b"")
        if args.keep:
            saved = sorted(int(p.rsplit("_", 1)[1]) for p in fs.ls(path, detail=False, refresh=True))
            for old in saved[:-args.keep]:
                fs.rm(f"{path}/step_{old}", recursive=True)
if recorder is not None:
    recorder.record_job_end_time()
    recorder.flush()
print("training complete", flush=True)
