"""``python -m trainer.task``: a training program written for AI Platform Training, unchanged for Vertex AI.

It reads what AI Platform gave it: ``--job-dir`` (the job's ``jobDir``), hyperparameters as ``--name=value`` flags,
``TF_CONFIG`` (printed: ``TF_CONFIG task: master 0``), and trains the demo model
(:mod:`trainer.train_digits`, packed beside it) with checkpoints under ``AIP_CHECKPOINT_DIR`` (Vertex AI's, from
the job's ``base_output_directory``; ``<job-dir>/checkpoints`` without it) and the model under
``<job-dir>/model``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--job-dir", required=True, help="the job's jobDir (gs://...)")
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--epoch-seconds", type=float, default=0.0)
    args = parser.parse_args(argv)
    task = json.loads(os.environ.get("TF_CONFIG") or "{}").get("task") or {}
    print(f"TF_CONFIG task: {task.get('type', '-')} {task.get('index', '-')}; trainer from "
          f"{os.path.dirname(os.path.abspath(__file__))}", flush=True)
    job_dir = args.job_dir.rstrip("/")
    checkpoints = os.environ.get("AIP_CHECKPOINT_DIR") or f"{job_dir}/checkpoints"

    from trainer import train_digits

    return train_digits.main(["--epochs", str(args.epochs), "--checkpoint-every", "3", "--epoch-seconds",
                              str(args.epoch_seconds), "--checkpoint-dir", checkpoints, "--model-dir",
                              f"{job_dir}/model"])


if __name__ == "__main__":
    sys.exit(main())
