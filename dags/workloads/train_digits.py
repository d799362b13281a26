"""Train a small MLP on scikit-learn's digits, checkpointing to Cloud Storage and resuming after failures.

Runs as a Vertex AI CustomJob replica (on the emulator: a local subprocess). Standalone on purpose: it
uses only the standard library, numpy, scikit-learn and fsspec (gcsfs for ``gs://``), never the provider.

Checkpoints: ``<checkpoint_dir>/step_<N>/model.pkl`` (the whole pickled estimator, optimizer state
included), then ``state.json`` ({"step": N, "loss": ...}), then the empty ``COMMITTED`` marker, written
last: a crash in between leaves a torn save without the marker, which resuming never picks.

Resuming: from the newer of ``RESILIENT_RESUME_FROM`` (a step directory URI, with ``RESILIENT_RESUME_STEP``
or the step parsed from its name: the newest complete checkpoint when the provider submitted this attempt)
and the newest ``step_N`` with ``COMMITTED`` directly under the checkpoint directory -- the platform's own
restarts within an attempt (Vertex AI retrying exit 139, a TPU VM back from maintenance) reuse the
attempt's variables, while this run may have checkpointed further since. Steps listed in
``RESILIENT_DEMOTED_STEPS`` (checkpoints the provider found would not load) are skipped. Each epoch
shuffles with ``RandomState(seed * 1000 + epoch)``, so a resumed run ends bit-for-bit like an
uninterrupted one.

``RESILIENT_CHECKPOINT_INTERVAL_SECONDS`` (set by the provider from a run's second attempt on, once it has seen
an interruption): a checkpoint is then due that many seconds after the last one, instead of every
``--checkpoint-every`` epochs.

On a Cloud TPU VM the provider puts its checkpoint-request helper on ``PYTHONPATH`` (``resilient_checkpoint``):
before an announced maintenance window the operator asks for a checkpoint, and this workload saves at the end
of the epoch it is in and acknowledges, so the event costs (almost) no training.

A tuning trial (the platform set ``CLOUD_ML_HP_METRIC_FILE``) gets ``--learning_rate=V``; run by the provider
(``RESILIENT_CHECKPOINT_DIR`` set) it checkpoints under ``<RESILIENT_CHECKPOINT_DIR>/trials/learning_rate=V/`` --
the provider's trial key, where the same grid point run again after an interruption resumes -- and reports its
held-out ``accuracy`` as ``cloudml-hypertune`` does (a JSON line appended to that file).

    python train_digits.py --epochs 30 --checkpoint-every 3 --checkpoint-dir gs://bucket/run/checkpoints
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import posixpath
import re
import sys
import time
from typing import Any

from fsspec.core import url_to_fs

MARKER = "COMMITTED"
MODEL_FILE = "model.pkl"
STATE_FILE = "state.json"
#: This workload's step directories: ``step_<N>``, N of 1 to 15 ASCII digits, the whole name. The provider's rule
#: (``airflow_provider_resilient.checkpoints.formats``, not imported: this file runs alone) restricted to the one
#: naming written here, so both read a name as the same step: ``\\d`` would take Unicode digits (``step_`` and
#: fullwidth 12), ``$`` a trailing newline (``step_12\\n``), ``int()`` signs, spaces and ``_``.
STEP_DIR_RE = re.compile(r"step_(?P<step>[0-9]{1,15})", re.ASCII)
#: Any step directory the provider may hand over in ``RESILIENT_RESUME_FROM`` (the provider's ``STEP_DIR_RE``).
ANY_STEP_DIR_RE = re.compile(r"(?:(?:step|checkpoint|ckpt|global_step|iter|iteration)[_-]?)?(?P<step>[0-9]{1,15})",
                             re.ASCII)
BATCH_SIZE = 32


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--epochs", type=int, default=30, help="total epochs (default 30)")
    parser.add_argument("--checkpoint-every", type=int, default=3, help="epochs between checkpoints (default 3)")
    parser.add_argument("--checkpoint-dir", default=os.environ.get("AIP_CHECKPOINT_DIR") or None,
                        help="gs:// URI or local path (default: $AIP_CHECKPOINT_DIR)")
    parser.add_argument("--epoch-seconds", type=float, default=0.0, help="extra sleep per epoch (default 0)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the per-epoch shuffles (default 0)")
    parser.add_argument("--model-dir", default=os.environ.get("AIP_MODEL_DIR") or None,
                        help="where to write the final model and metrics.json (default: $AIP_MODEL_DIR)")
    parser.add_argument("--learning-rate", "--learning_rate", dest="learning_rate", type=float, default=1e-3,
                        help="Adam's initial learning rate (default 0.001; a tuning trial gets --learning_rate=V)")
    args = parser.parse_args(argv)
    if os.environ.get("CLOUD_ML_HP_METRIC_FILE") and os.environ.get("RESILIENT_CHECKPOINT_DIR"):
        # A trial of a tuning study run by the provider: its checkpoints live under its parameters, where the
        # same grid point run again after an interruption finds them (supervisor.study.trial_key).
        args.checkpoint_dir = (f"{os.environ['RESILIENT_CHECKPOINT_DIR'].rstrip('/')}/trials/"
                               f"learning_rate={format_value(args.learning_rate)}")
    if not args.checkpoint_dir:
        parser.exit(2, f"{parser.prog}: error: no checkpoint directory: pass --checkpoint-dir "
                       "or set AIP_CHECKPOINT_DIR\n")
    if args.epochs < 0 or args.checkpoint_every < 1:
        parser.error("--epochs must be >= 0 and --checkpoint-every >= 1")
    return args


def format_value(value: float) -> str:
    """A parameter value as the provider's trial key writes it: ``0.001``, ``32`` for 32.0."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def report_metric(tag: str, value: float, step: int) -> None:
    """Report a tuning trial's metric as ``cloudml-hypertune`` does: a JSON line appended to the file named by
    ``CLOUD_ML_HP_METRIC_FILE``, the last line being the final measurement (nothing outside a trial)."""
    path = os.environ.get("CLOUD_ML_HP_METRIC_FILE")
    if not path:
        return
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    line = {"timestamp": time.time(), "trial": os.environ.get("AIP_TRIAL_ID", "0"), tag: value, "global_step": step}
    with open(path, "a") as out:
        out.write(json.dumps(line) + "\n")
    print(f"reported {tag}={value:.4f} at step {step}", flush=True)


def filesystem(uri: str) -> tuple[Any, str]:
    """The fsspec filesystem and path of ``uri`` (gcsfs honours ``STORAGE_EMULATOR_HOST``)."""
    if os.environ.get("STORAGE_EMULATOR_HOST"):
        # Without this, gcsfs probes each bucket's hierarchical-namespace type and waits ~60 s on an emulator.
        os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")
    fs, path = url_to_fs(uri)
    return fs, path.rstrip("/") or "/"


def is_writer() -> bool:
    """Whether this process writes checkpoints and the model: worker 0 of slice 0 of a TPU slice or multislice group
    (``TPU_WORKER_ID``, ``MEGASCALE_SLICE_ID``), node 0 of a multi-node ModelArts job (``VC_TASK_INDEX``, ModelArts
    "Environment Variables of a Training Container"), or the only process."""
    return all(os.environ.get(name, "0") == "0" for name in ("TPU_WORKER_ID", "MEGASCALE_SLICE_ID", "VC_TASK_INDEX"))


def is_local(fs: Any) -> bool:
    protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
    return protocol in ("file", "local")


def uri(fs: Any, path: str) -> str:
    return path if is_local(fs) else str(fs.unstrip_protocol(path))


def write_files(fs: Any, directory: str, files: list[tuple[str, bytes]]) -> None:
    """Write ``files`` into ``directory`` in order (object stores have no directories to create)."""
    if is_local(fs):
        fs.makedirs(directory, exist_ok=True)
    for name, data in files:
        fs.pipe_file(f"{directory}/{name}", data)


def step_number(digits: str) -> int | None:
    """The step ``digits`` stand for: 1 to 15 ASCII digits and nothing else (``int()`` also takes ``+5``,
    ``1_000``, spaces around and Unicode digits), or None."""
    if not 0 < len(digits) <= 15 or not digits.isascii() or not digits.isdigit():
        return None
    return int(digits)


def step_of(name: str, pattern: re.Pattern[str]) -> int | None:
    """The step of a step directory's base name matched whole by ``pattern``, or None: not a step."""
    match = pattern.fullmatch(name) if len(name) <= 64 else None
    return step_number(match["step"]) if match else None


def latest_committed(fs: Any, root: str) -> tuple[int, str] | None:
    """The newest ``step_N`` directly under ``root`` that holds the marker: one listing, then one check each."""
    fs.invalidate_cache(root)
    try:
        entries = fs.ls(root, detail=True)
    except (FileNotFoundError, NotADirectoryError):
        return None
    steps = []
    for entry in entries:
        name = posixpath.basename(str(entry["name"]).rstrip("/"))
        step = step_of(name, STEP_DIR_RE)
        if step is not None and entry.get("type") == "directory":
            steps.append((step, f"{root}/{name}"))
    demoted = {step for s in os.environ.get("RESILIENT_DEMOTED_STEPS", "").split(",")
               if (step := step_number(s.strip())) is not None}
    for step, path in sorted(steps, reverse=True):
        if step in demoted:
            print(f"skipping demoted checkpoint {uri(fs, path)}: it would not load", flush=True)
            continue
        if fs.exists(f"{path}/{MARKER}"):
            return step, path
        print(f"skipping torn checkpoint {uri(fs, path)}: no {MARKER}", flush=True)
    return None


def resume_point(root_fs: Any, root: str) -> tuple[int, Any, str] | None:
    """(step, filesystem, directory) of the checkpoint to resume from, or None for a fresh start."""
    explicit = os.environ.get("RESILIENT_RESUME_FROM", "").strip()
    found = latest_committed(root_fs, root)
    if explicit and not (found and found[0] > _explicit_step(explicit)):
        return _explicit_point(explicit)
    return (found[0], root_fs, found[1]) if found else None


def _explicit_step(explicit: str) -> int:
    return _explicit_point(explicit)[0]


def _explicit_point(explicit: str) -> tuple[int, Any, str]:
    """The checkpoint named by RESILIENT_RESUME_FROM / RESILIENT_RESUME_STEP."""
    if explicit:
        fs, path = filesystem(explicit)
        step_text = os.environ.get("RESILIENT_RESUME_STEP", "").strip()
        step = step_number(step_text) if step_text else step_of(posixpath.basename(path.rstrip("/")), ANY_STEP_DIR_RE)
        if step is None:
            raise SystemExit(f"cannot tell the step of RESILIENT_RESUME_FROM={explicit!r} "
                             f"(RESILIENT_RESUME_STEP={step_text!r}): set RESILIENT_RESUME_STEP to its step")
        return step, fs, path
    raise ValueError("no RESILIENT_RESUME_FROM")


def load_data() -> tuple[Any, Any, Any, Any]:
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    digits = load_digits()
    x_train, x_test, y_train, y_test = train_test_split(digits.data, digits.target, test_size=0.25, random_state=0)
    scaler = StandardScaler().fit(x_train)
    return scaler.transform(x_train), scaler.transform(x_test), y_train, y_test


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)  # before the heavy imports: a bad command line fails at once
    for name in ("RESILIENT_ATTEMPT", "RESILIENT_FAILURE_CLASS"):
        if os.environ.get(name):
            print(f"{name}={os.environ[name]}", flush=True)
    # Where this run starts, said before the heavy imports: a run stopped early still leaves the line
    # (scripts/run_demo.py reads it from the replica logs).
    fs, root = filesystem(args.checkpoint_dir)
    point = resume_point(fs, root)
    start = 0 if point is None else point[0]
    if point is not None:
        print(f"resume checkpoint: {uri(point[1], point[2])}", flush=True)
    print(f"resuming from step {start}", flush=True)

    import numpy as np
    from sklearn.neural_network import MLPClassifier

    x_train, x_test, y_train, y_test = load_data()
    model = MLPClassifier(hidden_layer_sizes=(64,), solver="adam", learning_rate_init=args.learning_rate,
                          shuffle=False, random_state=0)  # batch_size "auto": one batch per call
    if point is not None:
        _, ckpt_fs, ckpt_path = point
        try:
            model = pickle.loads(ckpt_fs.cat_file(f"{ckpt_path}/{MODEL_FILE}"))
        except FileNotFoundError:
            print(f"error: no {MODEL_FILE} in checkpoint {uri(ckpt_fs, ckpt_path)}", file=sys.stderr, flush=True)
            return 1

    # The interval the provider hands a new attempt (Young/Daly for the run's observed failures and save cost):
    # when it is set, a checkpoint is due that long after the last one instead of every --checkpoint-every epochs.
    interval = float(os.environ.get("RESILIENT_CHECKPOINT_INTERVAL_SECONDS") or 0)
    if interval > 0:
        print(f"checkpoint interval: {interval:g} s (RESILIENT_CHECKPOINT_INTERVAL_SECONDS)", flush=True)
    try:  # on a TPU VM under the provider's runner; elsewhere nothing is ever requested
        from resilient_checkpoint import acknowledge, requested
    except ImportError:
        def requested() -> str | None:
            return None

        def acknowledge(token: str) -> None:
            return None
    last_save = time.monotonic()
    n = len(x_train)
    for epoch in range(start + 1, args.epochs + 1):
        order = np.random.RandomState(args.seed * 1000 + epoch).permutation(n)
        total = 0.0
        for begin in range(0, n, BATCH_SIZE):
            batch = order[begin:begin + BATCH_SIZE]
            if hasattr(model, "classes_"):
                model.partial_fit(x_train[batch], y_train[batch])
            else:
                model.partial_fit(x_train[batch], y_train[batch], classes=np.arange(10))
            total += model.loss_ * len(batch)
        loss = total / n
        if args.epoch_seconds > 0:
            time.sleep(args.epoch_seconds)
        print(f"step {epoch} loss {loss:.6f}", flush=True)
        # On a multi-host TPU slice -- and on every slice of a multislice group -- and on every node of a multi-node
        # ModelArts job, every worker trains the same replica; the first alone writes checkpoints.
        writer = is_writer()
        due = time.monotonic() - last_save >= interval if interval > 0 else epoch % args.checkpoint_every == 0
        token = requested()  # a checkpoint asked for before a maintenance window
        if writer and (due or token or epoch == args.epochs):
            last_save = time.monotonic()
            state = json.dumps({"step": epoch, "loss": loss}).encode()
            write_files(fs, f"{root}/step_{epoch}",
                        [(MODEL_FILE, pickle.dumps(model)), (STATE_FILE, state), (MARKER, b"")])
            print(f"saved checkpoint {uri(fs, f'{root}/step_{epoch}')}"
                  + (f" on request ({token})" if token else ""), flush=True)
        if token:
            acknowledge(token)  # worker 0 saved it; the other workers hold nothing of their own to save

    if not hasattr(model, "classes_"):
        print("error: no epoch to train and no checkpoint to evaluate", file=sys.stderr, flush=True)
        return 1
    accuracy = float(model.score(x_test, y_test))
    if args.model_dir and is_writer():
        model_fs, model_path = filesystem(args.model_dir)
        metrics = {"test_accuracy": accuracy, "epochs": args.epochs, "seed": args.seed}
        write_files(model_fs, model_path, [(MODEL_FILE, pickle.dumps(model)),
                                           ("metrics.json", json.dumps(metrics).encode())])
    print(f"final test accuracy: {accuracy:.4f}", flush=True)
    report_metric("accuracy", accuracy, args.epochs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
