"""Find the newest *complete* checkpoint under a prefix, over fsspec (``gs://`` via gcsfs, ``obs://`` via
:mod:`.obs`, local paths).

Cost model -- it lists by prefix and delimiter, never scans a bucket:

1. one listing of the prefix itself (``ls``: on GCS one ``objects.list`` with ``delimiter=/``, paged);
2. then one listing per candidate step directory, newest first, stopping at the first complete one.

With N complete step directories that is 2 listings whatever N is; each torn or partial newer save
adds one. There is no cap on the second phase: a cap that ran out would turn many torn saves into "no
checkpoint" and a silent fresh start from step 0. :func:`scan_checkpoints` also reports the torn saves it
passed over, so a caller that finds none complete can say so (the operators' ``torn_checkpoints`` option).
A TensorFlow ``checkpoint`` state file at the prefix costs one small read.
"""

from __future__ import annotations

import logging
import os
import posixpath
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from .formats import (
    ORBAX_METADATA,
    TF_STATE_FILE,
    Checkpoint,
    CheckpointFormat,
    CheckpointSave,
    is_bare_step,
    judge_directory,
    needs_orbax_metadata,
    parse_step,
    parse_tf_state,
    parse_tf_step,
    step_order,
    tf_checkpoint_complete,
)

log = logging.getLogger(__name__)


def _filesystem(prefix: str, storage_options: Mapping[str, Any] | None) -> tuple[Any, str]:
    if os.environ.get("STORAGE_EMULATOR_HOST"):
        # Without this, gcsfs probes every bucket's type and waits ~60 s per call against an emulator.
        os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")
    from fsspec.core import url_to_fs

    fs, path = url_to_fs(prefix, **dict(storage_options or {}))
    return fs, path


def _resolve(caller: str, prefix: str, storage_options: Mapping[str, Any] | None, fs: Any) -> tuple[Any, str]:
    """(filesystem, path without a trailing slash) of ``prefix``; ValueError naming ``caller`` when empty."""
    if not prefix:
        raise ValueError(f"{caller}: prefix must be an object-store URL (gs://, obs://) or a local path, got ''")
    if fs is None:
        fs, path = _filesystem(prefix, storage_options)
    else:
        path = fs._strip_protocol(prefix)
    return fs, path.rstrip("/") or "/"


def _is_local(fs: Any) -> bool:
    protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
    return protocol in ("file", "local")


def _uri(fs: Any, path: str) -> str:
    return path if _is_local(fs) else str(fs.unstrip_protocol(path))


def _mtime(entry: Mapping[str, Any] | None) -> datetime | None:
    if not entry:
        return None
    for key in ("mtime", "updated", "LastModified", "last_modified", "timeCreated", "created"):
        value = entry.get(key)
        if value is None:
            continue
        if isinstance(value, datetime):
            return value if value.tzinfo else value.replace(tzinfo=UTC)
        if isinstance(value, int | float):
            return datetime.fromtimestamp(float(value), tz=UTC)
        if isinstance(value, str):
            try:
                parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
            except ValueError:
                continue
            return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    return None


def _listing(fs: Any, path: str) -> list[Mapping[str, Any]]:
    fs.invalidate_cache(path)  # a long-running watcher must see checkpoints written since its last look
    try:
        entries: list[Mapping[str, Any]] = fs.ls(path, detail=True)
    except (FileNotFoundError, NotADirectoryError):
        return []
    return entries


def _split(path: str, entries: list[Mapping[str, Any]]) -> tuple[dict[str, Mapping[str, Any]], dict[str, Any]]:
    files: dict[str, Mapping[str, Any]] = {}
    dirs: dict[str, Any] = {}
    base_path = path.rstrip("/")
    for entry in entries:
        name = str(entry.get("name", "")).rstrip("/")
        if not name or name == base_path:
            continue  # GCS "directory placeholder" objects list themselves
        base = posixpath.basename(name)
        if entry.get("type") == "directory":
            dirs[base] = entry
        else:
            files[base] = entry
    return files, dirs


@dataclass(frozen=True)
class TornSave:
    """A step directory that looked like a save and is not complete: its step, where it is, and why."""

    step: int
    uri: str
    why: str


@dataclass(frozen=True)
class CheckpointScan:
    """What :func:`scan_checkpoints` saw.

    Attributes:
        latest: the newest complete checkpoint, or None.
        torn: the torn, partial or unproven saves newer than ``latest`` (all of them when there is none),
            newest first.
    """

    latest: Checkpoint | None
    torn: tuple[TornSave, ...] = ()


def scan_checkpoints(
    prefix: str,
    *,
    marker: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
    fs: Any = None,
    exclude: Collection[int] = (),
) -> CheckpointScan:
    """The newest complete checkpoint directly under ``prefix`` and the torn saves newer than it.

    Args:
        prefix: ``gs://bucket/path/checkpoints``, ``obs://bucket/path/checkpoints`` or a local directory; its
            children are the step directories (``step_N``, ``checkpoint-N``, ``ckpt_N``, ``N``) or TensorFlow
            checkpoint files.
        marker: a completion marker file name the workload writes last (e.g. ``COMMITTED``); when set,
            a step directory without it is never chosen, whatever its format.
        storage_options: passed to fsspec (e.g. ``{"token": "anon"}`` or a project for gcsfs).
        fs: an fsspec filesystem to use instead of resolving ``prefix`` (then ``prefix`` is a path in it).
        exclude: steps never chosen (checkpoints demoted by the supervisor: complete, but they would not load).

    Raises:
        ValueError: when ``prefix`` is empty.
        OSError: errors of the filesystem other than "not found" (permissions, network) propagate: the caller
            must not mistake "cannot see" for "no checkpoint" and restart from step 0.
    """
    fs, path = _resolve("scan_checkpoints", prefix, storage_options, fs)

    files, dirs = _split(path, _listing(fs, path))
    best = _latest_tensorflow(fs, path, files, marker)
    if best is not None and best.step in exclude:
        best = None  # a demoted TensorFlow checkpoint: the older step directories may still serve
    torn: list[TornSave] = []

    candidates = sorted(((step, name) for name in dirs if (step := parse_step(name)) is not None),
                        key=lambda c: step_order(c[1]), reverse=True)
    for step, name in candidates:
        if best is not None and step <= best.step:
            break
        if step in exclude:
            log.info("Skipping checkpoint %s: demoted (it would not load)", _uri(fs, f"{path}/{name}"))
            continue
        step_path = f"{path}/{name}"
        verdict, inner_files = _judge(fs, step_path, name, marker)
        if verdict.complete:
            proof = inner_files.get(verdict.proof) if verdict.proof else None
            return CheckpointScan(Checkpoint(step, _uri(fs, step_path), verdict.format, _mtime(proof)), tuple(torn))
        log.info("Skipping checkpoint %s: %s", _uri(fs, step_path), verdict.why)
        torn.append(TornSave(step, _uri(fs, step_path), verdict.why))
    return CheckpointScan(best, tuple(torn))


def _judge(fs: Any, step_path: str, name: str, marker: str | None) -> tuple[Any, dict[str, Mapping[str, Any]]]:
    """(:func:`~.formats.judge_directory`'s verdict, the files in it) for the step directory ``step_path``:
    one listing, and one small read for an Orbax save that needs its metadata."""
    inner_files, inner_dirs = _split(step_path, _listing(fs, step_path))
    object_store = not _is_local(fs)
    content = None
    if needs_orbax_metadata(inner_files, object_store=object_store):
        content = fs.cat_file(f"{step_path}/{ORBAX_METADATA}")
    verdict = judge_directory(inner_files, inner_dirs, marker=marker, orbax_metadata=content,
                              object_store=object_store, bare=is_bare_step(name))
    return verdict, inner_files


def find_latest_checkpoint(
    prefix: str,
    *,
    marker: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
    fs: Any = None,
) -> Checkpoint | None:
    """The newest complete checkpoint directly under ``prefix`` (:func:`scan_checkpoints`' ``latest``; the
    rules: :mod:`.formats`), or None when the prefix is missing, empty or holds only torn, partial and
    temporary saves.

    Raises:
        ValueError: when ``prefix`` is empty.
        OSError: errors of the filesystem other than "not found" propagate (see :func:`scan_checkpoints`).
    """
    return scan_checkpoints(prefix, marker=marker, storage_options=storage_options, fs=fs).latest


def _latest_tensorflow(fs: Any, path: str, files: Mapping[str, Mapping[str, Any]],
                       marker: str | None) -> Checkpoint | None:
    """The newest complete checkpoint named by a TensorFlow ``checkpoint`` state file at ``path``."""
    if TF_STATE_FILE not in files or (marker is not None and marker not in files):
        return None
    try:
        content = fs.cat_file(f"{path}/{TF_STATE_FILE}").decode("utf-8", "replace")
    except FileNotFoundError:
        return None
    for prefix_name in parse_tf_state(content):
        base = posixpath.basename(prefix_name)
        step = parse_tf_step(base)
        if step is None:
            log.info("Skipping TensorFlow checkpoint %r: its name ends in no step (<name>-<N>)", base)
            continue
        if tf_checkpoint_complete(base, files):
            return Checkpoint(step, _uri(fs, f"{path}/{base}"), CheckpointFormat.TENSORFLOW,
                              _mtime(files.get(f"{base}.index")))
        log.info("Skipping TensorFlow checkpoint %s: index or data shards missing", base)
    return None


def list_checkpoint_saves(
    prefix: str,
    *,
    marker: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
    fs: Any = None,
    max_saves: int = 20,
) -> list[CheckpointSave]:
    """When the newest complete checkpoints under ``prefix`` were written and how long each write took.

    For each of the ``max_saves`` newest complete step directories: the time its completion proof was
    written (marker, DCP ``.metadata``, Orbax commit file) and the span from its first written object to its
    last (the proof, or a later file: a plain directory is proven by a state file that may be written first)
    -- the visible part of the save (serialising before the first byte is not seen, so this is a lower bound
    of the checkpoint cost C). Costs one listing of the prefix and one per step directory.

    Args:
        prefix, marker, storage_options, fs: as for :func:`find_latest_checkpoint`.
        max_saves: how many step directories, newest first, to look at (>= 1).

    Returns:
        Saves oldest first; empty when the prefix is missing or the store gives no modification times.

    Raises:
        ValueError: on an empty prefix or ``max_saves`` < 1. Filesystem errors other than "not found"
            propagate.
    """
    if max_saves < 1:
        raise ValueError(f"list_checkpoint_saves: max_saves must be >= 1, got {max_saves}")
    fs, path = _resolve("list_checkpoint_saves", prefix, storage_options, fs)
    _, dirs = _split(path, _listing(fs, path))
    saves: list[CheckpointSave] = []
    for step, name in sorted(((s, n) for n in dirs if (s := parse_step(n)) is not None),
                             key=lambda c: step_order(c[1]), reverse=True):
        if len(saves) >= max_saves:
            break
        verdict, inner_files = _judge(fs, f"{path}/{name}", name, marker)
        if not verdict.complete:
            continue
        times = [t for entry in inner_files.values() if (t := _mtime(entry)) is not None]
        proof = _mtime(inner_files.get(verdict.proof)) if verdict.proof else None
        completed = proof or (max(times) if times else None)
        if completed is None:
            continue
        # The save's span ends at its last object: a plain directory's proof (its state file) may come first.
        began, last = min([*times, completed]), max([*times, completed])
        saves.append(CheckpointSave(step, completed.timestamp(), (last - began).total_seconds(), began.timestamp()))
    return sorted(saves, key=lambda s: s.completed_at)
