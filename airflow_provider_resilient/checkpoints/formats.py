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
  Inside a step directory (``step_N/ckpt-N.index`` ...) the same holds: the state file, the index and every
  shard, or it is torn.
* **safetensors** (Hugging Face) -- a sharded save is complete with every ``*-NNNNN-of-MMMMM.safetensors``
  shard and its ``*.safetensors.index.json``; a file still being written has a temporary name
  (``model.safetensors.tmp``).
* **Plain directories** -- ``step_N/``, ``checkpoint-N/``, ``ckpt_N/``; with the user's marker file
  (``checkpoint_marker``), complete when the marker is there. Without one, a documented fallback: complete
  when it holds at least one file directly and *no* entry with a temporary name (``*.tmp``, ``*.partial``,
  ``*.incomplete``, ``tmp-*``, ``*-tmp-*``, ``*~``) -- a save in progress. A directory with sub-directories
  only (``510/default/``: an Orbax item without its step's metadata) proves nothing.
* **Bare numbers** (``100/``, Orbax's default) count only with a format's proof (Orbax, DCP, TensorFlow,
  safetensors) or the user's marker: a bare number is also a date (``20260101/``), a run id or an epoch.
* **Steps** have at most :data:`MAX_STEP_DIGITS` digits: a longer number is not a training step. Two names of
  one step (``step_200`` and ``step_0200``) are judged in a fixed order -- the name without leading zeros
  first, then by name -- so the same tree always gives the same answer.

What a step name is (:func:`parse_step`, the one reading of a step from a name): the whole base name is an
optional lower-case prefix (``step``, ``checkpoint``, ``ckpt``, ``global_step``, ``iter``, ``iteration``, then
an optional ``_`` or ``-``) and 1 to :data:`MAX_STEP_DIGITS` ASCII digits ``0-9`` (leading zeros allowed: a
fixed-width name). Nothing else, so a name is a step only as a framework writes it:

* Orbax ``CheckpointManager``: ``<step>`` by default, ``<prefix>_<step>`` with ``step_prefix``, zero-padded with
  ``step_format_fixed_length`` (``NameFormat`` / ``standard_name_format``,
  https://orbax.readthedocs.io/en/stable/api_reference/checkpoint.path.step.html);
* PyTorch DCP: the caller names the directory (``checkpoint_id``,
  https://pytorch.org/docs/stable/distributed.checkpoint.html); torchtitan writes ``step-<N>``
  (https://github.com/pytorch/torchtitan/blob/main/torchtitan/components/checkpoint.py);
* TensorFlow ``tf.train.CheckpointManager``: files under the prefix ``<checkpoint_name>-<N>`` (``ckpt-3.index``,
  default ``checkpoint_name='ckpt'``), named by the ``checkpoint`` state file
  (https://www.tensorflow.org/api_docs/python/tf/train/CheckpointManager); ``tf.compat.v1.train.Saver`` writes
  ``model.ckpt-<global_step>`` the same way -- read by :func:`parse_tf_step`;
* Hugging Face ``Trainer``: ``checkpoint-<N>`` (``PREFIX_CHECKPOINT_DIR``, read back by ``get_last_checkpoint``,
  https://github.com/huggingface/transformers/blob/main/src/transformers/trainer_utils.py);
* DeepSpeed ``global_step<N>`` (https://github.com/deepspeedai/DeepSpeed/blob/master/deepspeed/runtime/engine.py)
  and Megatron-LM ``iter_<N, 7 digits>``
  (https://github.com/NVIDIA/Megatron-LM/blob/main/megatron/training/checkpointing.py).

Python's number reading is lax, and none of it is used on a name: ``\\d`` matches any Unicode decimal digit
(fullwidth U+FF11 U+FF12, Arabic-Indic U+0663, mathematical bold U+1D7D7), ``$`` matches before a trailing
newline (``100\\n``), ``int()`` takes ``1_000``, ``+5``, a number in spaces and a fullwidth zero, and
``str.isdigit()`` is true for superscript two (U+00B2, which ``int()`` refuses). So ``STEP_100``, ``step_`` and
fullwidth digits, ``100\\n``, ``1e5``, ``100.0``, ``0x10``, ``-5``, ``100.tmp``, ``100%2F`` and a number of more than
:data:`MAX_STEP_DIGITS` digits are not steps: they are never candidates, so never chosen -- and a candidate
that is a step still needs its format's proof (above) before it is chosen over an older complete save.
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime

#: The most digits a step number has, leading zeros included (10^15 steps is far beyond any training run, and
#: fits an int64): a longer number is junk, refused before it is converted.
MAX_STEP_DIGITS = 15
#: Step directory names (the module docstring): ``step_100``, ``step-100``, ``checkpoint-100``, ``ckpt_100``,
#: ``global_step100``, ``iter_0000100`` or a bare ``100`` (Orbax's default). Matched whole (``fullmatch``), ASCII
#: digits only (``[0-9]``, never ``\d``), prefixes in lower case as the frameworks write them.
STEP_DIR_RE = re.compile(r"(?P<prefix>(?:step|checkpoint|ckpt|global_step|iter|iteration)[_-]?)?"
                         rf"(?P<step>[0-9]{{1,{MAX_STEP_DIGITS}}})", re.ASCII)
#: Names of files and directories that are saves in progress, never complete (and never a proof).
TEMPORARY_RE = re.compile(r"orbax-checkpoint-tmp|\.tmp$|^tmp[_-]|[_.-]tmp[_.-]|\.partial$|\.incomplete$|~$",
                          re.IGNORECASE)

DCP_METADATA = ".metadata"
DCP_DATA_SUFFIX = ".distcp"
ORBAX_COMMIT_FILE = "commit_success.txt"
ORBAX_METADATA = "_CHECKPOINT_METADATA"
TF_STATE_FILE = "checkpoint"
#: A TensorFlow checkpoint prefix's base name: ``<name>-<N>`` (``ckpt-3``, ``model.ckpt-100``), matched whole.
TF_CHECKPOINT_RE = re.compile(rf"(?P<prefix>.*[^-])-(?P<step>[0-9]{{1,{MAX_STEP_DIGITS}}})", re.ASCII)
#: What looks like a TensorFlow data shard (``.data-00000-of-00002``): enough to tell the format (loosely, so a
#: look-alike makes a save TensorFlow's -- and torn without its real shards -- never a plain directory).
TF_DATA_RE = re.compile(r"\.data-(?P<shard>\d+)-of-(?P<total>\d+)$")
#: A TensorFlow data shard as TensorFlow names it, counted towards a complete save: ASCII digits, the name's end.
TF_SHARD_RE = re.compile(r"\.data-(?P<shard>[0-9]{1,15})-of-(?P<total>[0-9]{1,15})\Z", re.ASCII)
SAFETENSORS_SUFFIX = ".safetensors"
#: What looks like a safetensors shard (``model-00001-of-00002.safetensors``), loosely ...
SAFETENSORS_LOOSE_SHARD_RE = re.compile(r"-\d+-of-\d+\.safetensors$")
#: ... and a shard as Hugging Face names it, ASCII digits, the whole name: a look-alike that is not one is torn.
SAFETENSORS_SHARD_RE = re.compile(r"(?P<stem>.+)-(?P<shard>[0-9]{1,15})-of-(?P<total>[0-9]{1,15})\.safetensors",
                                  re.ASCII | re.DOTALL)


class CheckpointFormat(enum.StrEnum):
    """The format a checkpoint was recognised as."""

    PYTORCH_DCP = "pytorch_dcp"
    ORBAX = "orbax"
    TENSORFLOW = "tensorflow"
    SAFETENSORS = "safetensors"
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
        write_seconds: from its first written object to its last (a lower bound of the save's cost).
        started_at: when its first object was written, seconds since the epoch (None: not known; the save then
            ends at ``completed_at``). A plain directory is proven by a state file that may be written first, so
            ``completed_at`` can be the start of the save's span.
    """

    step: int
    completed_at: float
    write_seconds: float
    started_at: float | None = None

    @property
    def span(self) -> tuple[float, float]:
        """``(first object, last object)`` written, seconds since the epoch: the part of the save that is seen."""
        began = self.started_at if self.started_at is not None else self.completed_at - max(0.0, self.write_seconds)
        return began, began + max(0.0, self.write_seconds)


def step_number(digits: str) -> int | None:
    """The step a run of digits in a name stands for, or None: 1 to :data:`MAX_STEP_DIGITS` ASCII digits
    ``0-9`` and nothing else (no sign, space, ``_``, Unicode digit or trailing newline, which ``int()`` or
    ``\\d`` would take). Every step read from a name goes through it; the length is checked first, so a name of
    thousands of digits is refused at once (``int()`` would raise past 4300 digits)."""
    if not 0 < len(digits) <= MAX_STEP_DIGITS or not digits.isascii() or not digits.isdigit():
        return None
    return int(digits)


def _step_name(name: str) -> tuple[int, bool, str] | None:
    """(step, bare?, digits) of a step directory's whole base name (the module docstring), or None: not a step."""
    if len(name) > 64:  # the longest prefix and MAX_STEP_DIGITS digits are far shorter: never scan junk
        return None
    match = STEP_DIR_RE.fullmatch(name)
    step = step_number(match["step"]) if match else None
    if match is None or step is None:
        return None
    return step, match["prefix"] is None, match["step"]


def parse_step(name: str) -> int | None:
    """The step number of a step directory's base name, or None: not a step name as a framework writes it
    (the module docstring) -- temporary, padded with spaces, Unicode digits, a sign, a suffix, a trailing
    newline, upper case, or more than :data:`MAX_STEP_DIGITS` digits."""
    parsed = _step_name(name)
    return parsed[0] if parsed else None


def parse_tf_step(prefix_name: str) -> int | None:
    """The step of a TensorFlow checkpoint prefix's base name (``ckpt-3`` -> 3, ``model.ckpt-100`` -> 100), or
    None: no ``-<N>`` ending of ASCII digits (``ckpt``, ``ckpt-1e5``, ``ckpt--5``, Unicode digits)."""
    match = TF_CHECKPOINT_RE.fullmatch(prefix_name) if len(prefix_name) <= 1024 else None
    return step_number(match["step"]) if match else None


def is_bare_step(name: str) -> bool:
    """Whether a step directory's name is a bare number (``100``, ``0100``), which counts only with a proof.
    The same reading as :func:`parse_step`: a name that is not a step is not a bare step either."""
    parsed = _step_name(name)
    return parsed is not None and parsed[1]


def step_order(name: str) -> tuple[int, bool, str]:
    """The sort key of a step directory (sorted in reverse: newest first): its step, then the name without
    leading zeros before a padded one, then the name -- a fixed order for two names of one step. A name that
    is not a step sorts last (step -1)."""
    parsed = _step_name(name)
    if parsed is None:
        return -1, True, name
    step, _, digits = parsed
    return step, not (len(digits) > 1 and digits.startswith("0")), name


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
    bare: bool = False,
) -> Verdict:
    """Judge one step directory from the names directly inside it (the rules: the module docstring).

    Args:
        files: base names of the files in it.
        dirs: base names of the sub-directories in it.
        marker: a user's completion marker file name that must be present too, when set.
        orbax_metadata: the content of ``_CHECKPOINT_METADATA``, when the caller read it (only needed
            for Orbax saves without ``commit_success.txt`` on a local file system).
        object_store: True for ``gs://`` and other stores without atomic rename: an Orbax save is then
            complete only with ``commit_success.txt``.
        bare: the directory's name is a bare number (:func:`is_bare_step`): it needs a format's proof or the
            marker.
    """
    if marker is not None and marker not in files:
        fmt = _guess_format(files, dirs)
        return Verdict(False, fmt, why=f"marker {marker!r} is missing")
    proven = _format_verdict(files, dirs, orbax_metadata=orbax_metadata, object_store=object_store)
    if proven is not None:  # a format's own proof decides, marker or not (a torn DCP save stays torn)
        return proven
    if marker is not None:
        return Verdict(True, CheckpointFormat.DIRECTORY, marker)
    if bare:
        return Verdict(False, CheckpointFormat.DIRECTORY,
                       why="a bare-number directory without a format's proof (set checkpoint_marker to accept it)")
    temporary = sorted(n for n in (*files, *dirs) if TEMPORARY_RE.search(n))
    if temporary:
        return Verdict(False, CheckpointFormat.DIRECTORY, why=f"a save in progress: {', '.join(temporary[:3])}")
    if files:
        return Verdict(True, CheckpointFormat.DIRECTORY, max(files))
    if dirs:
        return Verdict(False, CheckpointFormat.DIRECTORY,
                       why="sub-directories only and no format's proof (set checkpoint_marker to accept it)")
    return Verdict(False, CheckpointFormat.DIRECTORY, why="empty directory")


def _format_verdict(files: Collection[str], dirs: Collection[str], *, orbax_metadata: bytes | None,
                    object_store: bool) -> Verdict | None:
    """The verdict of the format the names show (complete with its proof, or torn), or None: no known format."""
    if DCP_METADATA in files:
        return Verdict(True, CheckpointFormat.PYTORCH_DCP, DCP_METADATA)
    if any(f.endswith(DCP_DATA_SUFFIX) for f in files) or f"{DCP_METADATA}.tmp" in files:
        return Verdict(False, CheckpointFormat.PYTORCH_DCP, why="torn DCP save: no .metadata")
    if ORBAX_COMMIT_FILE in files:
        return Verdict(True, CheckpointFormat.ORBAX, ORBAX_COMMIT_FILE)
    if ORBAX_METADATA in files or any(TEMPORARY_RE.search(d) and "orbax" in d.lower() for d in dirs):
        if not object_store and orbax_metadata is not None and orbax_committed(orbax_metadata):
            return Verdict(True, CheckpointFormat.ORBAX, ORBAX_METADATA)
        if object_store:
            return Verdict(False, CheckpointFormat.ORBAX,
                           why="Orbax save on an object store without commit_success.txt")
        return Verdict(False, CheckpointFormat.ORBAX, why="Orbax save without commit_success.txt or commit time")
    if any(f.endswith(".index") or TF_DATA_RE.search(f) for f in files):
        prefixes = sorted(f[:-len(".index")] for f in files if f.endswith(".index"))
        whole = [p for p in prefixes if tf_checkpoint_complete(p, files)]
        if whole and TF_STATE_FILE in files:
            return Verdict(True, CheckpointFormat.TENSORFLOW, TF_STATE_FILE)
        why = "index or data shards missing" if not whole else "no 'checkpoint' state file (written last)"
        return Verdict(False, CheckpointFormat.TENSORFLOW, why=f"torn TensorFlow save: {why}")
    if any(SAFETENSORS_SUFFIX in f for f in files):
        return _safetensors_verdict(files)
    return None


def _safetensors_verdict(files: Collection[str]) -> Verdict:
    """A safetensors save: every shard ``<stem>-i-of-N.safetensors`` and its index, and no temporary file."""
    temporary = sorted(f for f in files if TEMPORARY_RE.search(f))
    if temporary:
        return Verdict(False, CheckpointFormat.SAFETENSORS, why=f"a file still being written: {temporary[0]}")
    odd = sorted(f for f in files if SAFETENSORS_LOOSE_SHARD_RE.search(f) and not SAFETENSORS_SHARD_RE.fullmatch(f))
    if odd:
        return Verdict(False, CheckpointFormat.SAFETENSORS, why=f"a shard name that is not a shard's: {odd[0]!r}")
    shards = [m for f in files if (m := SAFETENSORS_SHARD_RE.fullmatch(f))]
    for stem in sorted({m["stem"] for m in shards}):
        mine = [m for m in shards if m["stem"] == stem]
        if not _every_shard({int(m["shard"]) for m in mine}, int(mine[0]["total"]), first=(0, 1)):
            return Verdict(False, CheckpointFormat.SAFETENSORS, why=f"shards of {stem} missing")
        if f"{stem}{SAFETENSORS_SUFFIX}.index.json" not in files:
            return Verdict(False, CheckpointFormat.SAFETENSORS, why=f"{stem}.safetensors.index.json is missing")
    whole = sorted(f for f in files if f.endswith(SAFETENSORS_SUFFIX))
    if not whole:
        return Verdict(False, CheckpointFormat.SAFETENSORS, why="no whole .safetensors file")
    return Verdict(True, CheckpointFormat.SAFETENSORS, whole[-1])


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
    shards = [m for f in files
              if f.startswith(prefix_name + ".data-") and (m := TF_SHARD_RE.fullmatch(f, len(prefix_name)))]
    if not shards:
        return False
    return _every_shard({int(m["shard"]) for m in shards}, int(shards[0]["total"]), first=(0,))


def _every_shard(numbers: set[int], total: int, *, first: tuple[int, ...]) -> bool:
    """Whether ``numbers`` are exactly ``total`` consecutive shard numbers from one of ``first`` (counted, never
    enumerated: a name claiming 10^15 shards costs nothing)."""
    return total > 0 and len(numbers) == total and min(numbers) in first and max(numbers) == min(numbers) + total - 1
