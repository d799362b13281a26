"""Before an attempt is created: what the run resumes from, and whether it may be created at all -- pure
judgements over what the operators' shell listed (the live resources of the provider, the checkpoint directory's
scan).

* :func:`checkpoint_dir_conflict` -- another task instance's live job or node writes checkpoints where this run
  would: the attempt is refused as a permanent user error (two runs in one directory resume from each other's
  saves and overwrite them).
* :func:`resume_point` -- the newest complete checkpoint, or none; when the directory holds saves but none is
  complete, ``torn_checkpoints`` says whether the run starts from step 0 (with a warning naming the newest torn
  save) or fails as a permanent user error, so that a person looks before progress is thrown away.

No I/O here: the shell lists (:func:`~..checkpoints.scan_checkpoints`, the backend's ``live_owned``) and carries
out what these return.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..policy import Failure, FailureClass, Platform
from .reconcile import OwnedResource, Owner, other_writers

#: The values of ``torn_checkpoints``: what a new attempt does when the checkpoint directory holds saves but none
#: is complete.
TORN_CHECKPOINT_CHOICES = ("start_fresh", "fail")


def checkpoint_dir_conflict(live: Iterable[OwnedResource], me: Owner, checkpoint_dir: str,
                            platform: Platform) -> Failure | None:
    """The permanent user error that refuses an attempt when another task instance's live resource writes
    checkpoints where ``me``'s would (:func:`~.reconcile.other_writers`), naming it and the fix; None when none
    does.

    Args:
        live: the live resources carrying the provider's labels (the backend's ``live_owned``).
        me: the task instance about to submit.
        checkpoint_dir: where its workload writes (``gs://...`` or a local path).
        platform: the failure's platform.
    """
    others = other_writers(live, me, checkpoint_dir)
    if not others:
        return None
    other, theirs = others[0], others[0].owner
    assert theirs is not None  # other_writers keeps only resources that name their task instance
    who = f"{other.name} of {theirs.dag_id}.{theirs.task_id} run {theirs.run_id}"
    return Failure(FailureClass.PERMANENT_USER_ERROR, platform, message=(
        f"another run writes checkpoint_dir {checkpoint_dir}: give each run its own (put {{{{ run_id }}}} in the "
        f"path) or stop that run -- {who}"))


@dataclass(frozen=True)
class ResumePoint:
    """What a new attempt resumes from.

    Attributes:
        checkpoint: the newest complete checkpoint (``checkpoints.Checkpoint``), or None: from step 0.
        failure: set when the run must stop instead (only torn saves and ``torn_checkpoints="fail"``).
        warning: what to say loudly (only torn saves: the run starts from step 0), or None.
    """

    checkpoint: Any = None
    failure: Failure | None = None
    warning: str | None = None


def resume_point(scan: Any, checkpoint_dir: str, torn_checkpoints: str, platform: Platform) -> ResumePoint:
    """The resume point of a new attempt from ``scan`` (a ``checkpoints.CheckpointScan`` of ``checkpoint_dir``, the
    demoted steps left out).

    Args:
        scan: its ``latest`` complete checkpoint (or None) and its ``torn`` saves, newest first.
        checkpoint_dir: where it was scanned (named in the messages).
        torn_checkpoints: one of :data:`TORN_CHECKPOINT_CHOICES`.
        platform: the failure's platform.

    Raises:
        ValueError: ``torn_checkpoints`` is not one of the choices (the operators refuse it at parse time).
    """
    if torn_checkpoints not in TORN_CHECKPOINT_CHOICES:
        raise ValueError(f"torn_checkpoints must be one of {TORN_CHECKPOINT_CHOICES}, got {torn_checkpoints!r}")
    if scan.latest is not None or not scan.torn:
        return ResumePoint(scan.latest)
    newest = scan.torn[0]
    seen = (f"no complete checkpoint under {checkpoint_dir}: {len(scan.torn)} torn save(s), the newest "
            f"{newest.uri} (step {newest.step}: {newest.why})")
    if torn_checkpoints == "fail":
        return ResumePoint(None, Failure(FailureClass.PERMANENT_USER_ERROR, platform, message=(
            f"only torn checkpoints ({len(scan.torn)}) and torn_checkpoints='fail': repair or remove them, or set "
            f"torn_checkpoints='start_fresh'; newest step {newest.step}: {newest.why} ({newest.uri})")),
            f"{seen}: torn_checkpoints='fail' stops the run")
    return ResumePoint(None, None, f"{seen}: starting from step 0 (torn_checkpoints='start_fresh')")


__all__ = ["TORN_CHECKPOINT_CHOICES", "ResumePoint", "checkpoint_dir_conflict", "resume_point"]
