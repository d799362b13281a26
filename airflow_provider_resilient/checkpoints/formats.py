"""Checkpoint formats: how a step is named and how a complete checkpoint is told from a torn one.

Each rule works on one directory listing (names of the files and sub-directories directly inside a
candidate step directory), so discovery never walks a tree. The rules, by format:

* **PyTorch Distributed Checkpoint (DCP)** -- ``.metadata`` is written last: ``FileSystemWriter.finish``
  writes ``.metadata.tmp`` after every ``*.distcp`` data file and then renames it. Data files without
  ``.metadata`` are a torn save.
* **Orbax** -- an in-progress save lives in ``<step>.orbax-checkpoint-tmp`` (older releases:
  ``<step>.orbax-checkpoint-tmp-<timestamp>``) and is renamed when done on file systems that rename
  atomically. On object stores (``gs://``) there is no rename: Orbax writes ``commit_success.txt`` into
  the step directory last. Orbax 0.12 writes ``commit_success.txt`` in both modes, and stamps
  ``commit_timestamp_nsecs`` in ``_CHECKPOINT_METADATA`` at commit. On a local file system (where the
  rename already made the step directory whole) either one proves completion; on an object store only
  ``commit_success.txt`` does, as for Orbax's own reader: the metadata is written before the commit
  file, so a save that died between the two has a commit time but is not finalised.
* **TensorFlow** -- the ``checkpoint`` state file names the newest checkpoint prefix and is rewritten
  after ``<prefix>.index`` and its ``<prefix>.data-NNNNN-of-MMMMM`` shards exist.
* **Plain directories** -- ``step_N/``, ``checkpoint-N/``, ``ckpt_N/`` or a bare ``N/``; complete when
  the user's marker file is present (when one is configured) and the directory is not empty.
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime

#: Step directory names: ``step_100``, ``step-100``, ``checkpoint-100``, ``ckpt_100``, ``global_step100``,
#: ``iter_0000100`` or a bare ``100`` (Orbax's default). Anchored, so temporary names never match.
STEP_DIR_RE = re.compile(r"^(?:(?:step|checkpoint|ckpt|global_step|iter|iteration)[_-]?)?(?P<step>\d+)$",
                         re.IGNORECASE)
#: Names of directories that are saves in progress, never complete.
TEMPORARY_RE = re.compile(r"orbax-checkpoint-tmp|\.tmp$|^tmp[_-]|\.partial$|\.incomplete$", re.IGNORECASE)

DCP_METADATA = ".metadata"
DCP_DATA_SUFFIX = ".distcp"
ORBAX_COMMIT_FILE = "commit_success.txt"
ORBAX_METADATA = "_CHECKPOINT_METADATA"
TF_STATE_FILE = "checkpoint"
TF_CHECKPOINT_RE = re.compile(r"(?P<prefix>.*?)-?(?P<step>\d+)$")
TF_DATA_RE = re.compile(r"\.data-(?P<shard>\d+)-of-(?P<total>\d+)$")


class CheckpointFormat(enum.StrEnum):
    """The format a checkpoint was recognised as."""

    PYTORCH_DCP = "pytorch_dcp"
    ORBAX = "orbax"
    TENSORFLOW = "tensorflow"
    DIRECTORY = "directory"


@dataclass(frozen=True)
class Checkpoint:
    """The newest complete checkpoint found under a prefix.

    Attributes:
        step: the training step it holds (from its name).
        uri: where it is: ``gs://bucket/path/step_100`` or a local path; for TensorFlow the checkpoint
            prefix (``.../ckpt-3``) that ``tf.train.Checkpoint.restore`` takes.
        format: how it was recognised.
        time: when it was completed (its completion marker's modification time, UTC), if known.
    """

    step: int
    uri: str
    format: CheckpointFormat
    time: datetime | None = None


@dataclass(frozen=True)
class CheckpointSave:
    """One complete checkpoint as written.

    Attributes:
        step: the training step it holds.
        completed_at: when its completion proof was written, seconds since the epoch.
        write_seconds: from its first written object to the proof (a lower bound of the save's cost).
    """

    step: int
    completed_at: float
    write_seconds: float


def parse_step(name: str) -> int | None:
    """The step number of a step directory's base name, or None (temporary or not a step)."""
    if TEMPORARY_RE.search(name):
        return None
    match = STEP_DIR_RE.match(name)
    return int(match["step"]) if match else None


@dataclass(frozen=True)
class Verdict:
    """Whether a candidate directory holds a complete checkpoint, and which file proves it."""

    complete: bool
    format: CheckpointFormat
    proof: str | None = None
    why: str = ""


def judge_directory(
    files: Collection[str],
    dirs: Collection[str],
    *,
    marker: str | None = None,
    orbax_metadata: bytes | None = None,
    object_store: bool = False,
) -> Verdict:
    """Judge one step directory from the names directly inside it.

    Args:
        files: base names of the files in it.
        dirs: base names of the sub-directories in it.
        marker: a user's completion marker file name that must be present too, when set.
        orbax_metadata: the content of ``_CHECKPOINT_METADATA``, when the caller read it (only needed
            for Orbax saves without ``commit_success.txt`` on a local file system).
        object_store: True for ``gs://`` and other stores without atomic rename: an Orbax save is then
            complete only with ``commit_success.txt``.
    """
    if marker is not None and marker not in files:
        fmt = _guess_format(files, dirs)
        return Verdict(False, fmt, why=f"marker {marker!r} is missing")
    if DCP_METADATA in files:
        return Verdict(True, CheckpointFormat.PYTORCH_DCP, DCP_METADATA)
    if any(f.endswith(DCP_DATA_SUFFIX) for f in files):
        return Verdict(False, CheckpointFormat.PYTORCH_DCP, why="torn DCP save: data without .metadata")
    if ORBAX_COMMIT_FILE in files:
        return Verdict(True, CheckpointFormat.ORBAX, ORBAX_COMMIT_FILE)
    if ORBAX_METADATA in files or any(TEMPORARY_RE.search(d) for d in dirs):
        if not object_store and orbax_metadata is not None and orbax_committed(orbax_metadata):
            return Verdict(True, CheckpointFormat.ORBAX, ORBAX_METADATA)
        if object_store:
            return Verdict(False, CheckpointFormat.ORBAX,
                           why="Orbax save on an object store without commit_success.txt")
        return Verdict(False, CheckpointFormat.ORBAX, why="Orbax save without commit_success.txt or commit time")
    if TF_STATE_FILE in files and any(f.endswith(".index") for f in files):
        return Verdict(True, CheckpointFormat.TENSORFLOW, TF_STATE_FILE)
    if marker is not None:
        return Verdict(True, CheckpointFormat.DIRECTORY, marker)
    if files or dirs:
        proof = max(files) if files else None
        return Verdict(True, CheckpointFormat.DIRECTORY, proof)
    return Verdict(False, CheckpointFormat.DIRECTORY, why="empty directory")


def needs_orbax_metadata(files: Collection[str], *, object_store: bool = False) -> bool:
    """Whether :func:`judge_directory` would need ``_CHECKPOINT_METADATA``'s content to decide."""
    return not object_store and ORBAX_METADATA in files and ORBAX_COMMIT_FILE not in files and DCP_METADATA not in files


def orbax_committed(content: bytes) -> bool:
    """Whether Orbax's ``_CHECKPOINT_METADATA`` JSON has a ``commit_timestamp_nsecs`` (set at commit)."""
    try:
        data = json.loads(content)
    except (ValueError, UnicodeDecodeError):
        return False
    return isinstance(data, dict) and data.get("commit_timestamp_nsecs") is not None


def _guess_format(files: Collection[str], dirs: Collection[str]) -> CheckpointFormat:
    if DCP_METADATA in files or any(f.endswith(DCP_DATA_SUFFIX) for f in files):
        return CheckpointFormat.PYTORCH_DCP
    if ORBAX_METADATA in files or ORBAX_COMMIT_FILE in files:
        return CheckpointFormat.ORBAX
    return CheckpointFormat.DIRECTORY


def parse_tf_state(content: str) -> list[str]:
    """Checkpoint prefixes named by a TensorFlow ``checkpoint`` state file, newest first.

    The file is a text ``CheckpointState`` proto: ``model_checkpoint_path: "ckpt-3"`` and
    ``all_model_checkpoint_paths: "ckpt-1"`` lines. Unparseable content gives an empty list.
    """
    newest: list[str] = []
    others: list[str] = []
    for line in content.splitlines():
        key, _, value = line.partition(":")
        value = value.strip().strip('"')
        if not value:
            continue
        if key.strip() == "model_checkpoint_path":
            newest.append(value)
        elif key.strip() == "all_model_checkpoint_paths":
            others.append(value)
    ordered = newest + [p for p in reversed(others) if p not in newest]
    return ordered


def tf_checkpoint_complete(prefix_name: str, files: Collection[str]) -> bool:
    """Whether ``<prefix>.index`` and every ``<prefix>.data-NNNNN-of-MMMMM`` shard are in ``files``."""
    if f"{prefix_name}.index" not in files:
        return False
    shards = [m for f in files if f.startswith(prefix_name + ".data-") and (m := TF_DATA_RE.search(f))]
    if not shards:
        return False
    total = int(shards[0]["total"])
    return {int(m["shard"]) for m in shards} == set(range(total))
