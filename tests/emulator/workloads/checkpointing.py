"""A test workload: counts steps, checkpoints every --every steps to AIP_CHECKPOINT_DIR (keeping the newest --keep),
resumes.

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
args = parser.parse_args()

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
    time.sleep(args.step_seconds)
    print(f"step {step}", flush=True)
    if step % args.every == 0:
        fs.pipe(f"{path}/step_{step}/state.json", json.dumps({"step": step}).encode())
        fs.pipe(f"{path}/step_{step}/COMMITTED", b"")
        if args.keep:
            saved = sorted(int(p.rsplit("_", 1)[1]) for p in fs.ls(path, detail=False, refresh=True))
            for old in saved[:-args.keep]:
                fs.rm(f"{path}/step_{old}", recursive=True)
print("training complete", flush=True)
