"""A training job of fixed length for the goodput benchmark: ``--steps`` steps of ``--step-seconds`` each,
a checkpoint every ``--every`` steps that costs ``--save-seconds`` (C), written as ``step_N/state.json``, C, then
the ``step_N/COMMITTED`` marker under ``$AIP_CHECKPOINT_DIR`` (the plain step-folder format our checkpoint
discovery reads). The ``--keep`` newest checkpoints are kept (default 2, as Orbax ``max_to_keep=2``; 0: all).

The steps and saves keep their nominal pace: step k is due ``--step-seconds`` after step k-1 (a save's
``--save-seconds`` after the step it follows), so the process's own work between sleeps -- printing, the
storage calls of a save -- is part of a step's time, not added to it, as a real step's host work is part of its
measured step time. At the benchmarks' time scale one real millisecond is 50 platform milliseconds: a save's
storage calls beyond C (the marker, the listing, the deletes) took 1.3 s of platform time (median; up to 7 s)
on top of C, about 30 s over a 2 h job that the ceilings, computed for the nominal C, do not have; now 0.3 s,
inside the next step. (Plain steps hardly drift: 200 steps of 0.12 s took 24.3 s either way beside three
benchmark processes, start-up included.) A step that finds itself late is not made up for.

``--resume scan`` resumes from the newest committed checkpoint: the newer of ``RESILIENT_RESUME_FROM`` /
``RESILIENT_RESUME_STEP`` (what our operator hands over) and its own scan of the checkpoint directory (what
a retry loop relies on, and what the platform's own restarts need). ``--resume none`` always
starts from step 0, as a script that is not wired for resumption does (it still pays for checkpoints).

``--handed-interval``: once the provider hands ``RESILIENT_CHECKPOINT_INTERVAL_SECONDS``, checkpoint by time instead.

``--on-request``: also save when the provider's worker runner asks for a checkpoint (a maintenance window ahead, a
preemption notice): the helper ``resilient_checkpoint`` it puts on ``PYTHONPATH`` on a TPU VM, read once per step;
where it is absent (another tool's VM) nothing is ever asked. Prints ``saved step N on request (TOKEN)``.

On a multi-host TPU slice every worker trains; worker 0 (``TPU_WORKER_ID``) writes the checkpoints.

Standard library plus fsspec/gcsfs (``gs://`` reaches the emulated bucket through STORAGE_EMULATOR_HOST).
Prints ``start step S`` when training begins and ``done steps N`` at the end; exits 0 when all steps ran.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time

MARKER = "COMMITTED"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, required=True, help="total steps of the job")
    parser.add_argument("--step-seconds", type=float, required=True, help="seconds of work per step")
    parser.add_argument("--every", type=int, required=True, help="checkpoint every this many steps")
    parser.add_argument("--save-seconds", type=float, default=0.0, help="seconds one checkpoint costs (C)")
    parser.add_argument("--resume", choices=("scan", "none"), default="scan")
    parser.add_argument("--crash-at-step", type=int, default=0, help="a deterministic bug: exit 139 on reaching "
                                                                     "this step, every run (0: never)")
    parser.add_argument("--log-steps", action="store_true", help="print 'step N' after every step (a TPU worker "
                                                                  "runner reports it as the heartbeat's step)")
    parser.add_argument("--keep", type=int, default=2, help="keep this many newest checkpoints (0: all)")
    parser.add_argument("--handed-interval", action="store_true",
                        help="checkpoint every RESILIENT_CHECKPOINT_INTERVAL_SECONDS (real seconds) when the provider "
                             "hands one, instead of every --every steps")
    parser.add_argument("--on-request", action="store_true",
                        help="save when the worker runner asks (resilient_checkpoint), as well as on schedule")
    args = parser.parse_args(argv)
    root = os.environ.get("AIP_CHECKPOINT_DIR", "").rstrip("/")
    if not root:
        sys.stderr.write("AIP_CHECKPOINT_DIR is not set\n")
        return 2
    os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")  # no HNS probe against an emulator
    from fsspec.core import url_to_fs

    fs, base = url_to_fs(root)
    step = resume_step(fs, base) if args.resume == "scan" else 0
    print(f"start step {step}", flush=True)
    interval = float(os.environ.get("RESILIENT_CHECKPOINT_INTERVAL_SECONDS") or 0) if args.handed_interval else 0.0
    if interval > 0:
        print(f"checkpoint interval {interval:g} s (handed)", flush=True)
    requested, acknowledge = request_helper() if args.on_request else (lambda: None, lambda token: None)
    last_save = deadline = time.monotonic()
    while step < args.steps:
        deadline = pace(deadline, args.step_seconds)
        step += 1
        if args.log_steps:
            print(f"step {step}", flush=True)
        if step == args.crash_at_step:
            sys.stderr.write(f"Segmentation fault at step {step}\n")
            return 139
        due = time.monotonic() - last_save >= interval if interval > 0 else step % args.every == 0
        token = requested()
        if due or token or step == args.steps:
            if os.environ.get("TPU_WORKER_ID", "0") == "0":  # a multi-host slice: worker 0 writes, as process 0 does
                save(fs, base, step, args.save_seconds, args.keep)
            else:
                time.sleep(args.save_seconds)  # the others take part in the (collective) save
            deadline += args.save_seconds  # the save's storage calls beyond C come out of the next step's time
            last_save = time.monotonic()
        if token:
            print(f"saved step {step} on request ({token})", flush=True)
            acknowledge(token)  # on a notice: the process ends here (143), as its SIGTERM would have ended it
    print(f"done steps {step}", flush=True)
    return 0


def request_helper():
    """``(requested, acknowledge)`` of the provider's helper on a TPU VM; where it is absent, two that do nothing."""
    try:
        from resilient_checkpoint import acknowledge, requested
    except ImportError:
        return (lambda: None), (lambda token: None)
    return requested, acknowledge


def pace(due: float, seconds: float) -> float:
    """Sleep until ``seconds`` after ``due`` (monotonic seconds) and return that deadline, or now when it has
    already passed (a step that is late is not made up for by shorter ones after it)."""
    due += seconds
    left = due - time.monotonic()
    if left > 0:
        time.sleep(left)
        return due
    return time.monotonic()


def committed_steps(fs, base: str) -> list[int]:
    """The steps of the committed checkpoints under ``base``, oldest first: one listing of the markers."""
    fs.invalidate_cache(base)
    steps = []
    for path in fs.glob(f"{base}/step_*/{MARKER}"):
        match = re.fullmatch(r"step_(\d+)", path.rstrip("/").rsplit("/", 2)[-2])
        if match:
            steps.append(int(match.group(1)))
    return sorted(steps)


def resume_step(fs, base: str) -> int:
    scanned = committed_steps(fs, base)
    handed = int(os.environ.get("RESILIENT_RESUME_STEP") or 0) if os.environ.get("RESILIENT_RESUME_FROM") else 0
    return max([handed, *scanned])


def save(fs, base: str, step: int, cost: float, keep: int = 2) -> None:
    """One checkpoint: the state's first file, the rest of the checkpoint cost C (writing the rest of the state),
    then the marker -- so that the visible write time of a save, first file to marker, is C (what the provider
    measures); then all but the ``keep`` newest are deleted (0: none)."""
    began = time.monotonic()
    fs.pipe_file(f"{base}/step_{step}/state.json", f'{{"step": {step}}}'.encode())
    time.sleep(max(0.0, began + cost - time.monotonic()))  # serialising and writing the state: C in all
    fs.pipe_file(f"{base}/step_{step}/{MARKER}", b"")
    if keep > 0:
        for old in committed_steps(fs, base)[:-keep]:
            fs.rm(f"{base}/step_{old}", recursive=True)


if __name__ == "__main__":
    sys.exit(main())
