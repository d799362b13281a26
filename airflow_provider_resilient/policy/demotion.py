"""Checkpoint demotion: the rule that a checkpoint which looks complete but will not load is given up.

A save can be whole on the storage side -- every file there, the marker written -- and still not load (a framework's
format change, a truncated tensor, a bug in the restore code). The latest-complete-checkpoint rule would resume from
it again and again. The rule here tells such a step from an ordinary failure, from what the supervisor knows of the
attempt that resumed from it; the supervisor (:func:`..supervisor.machine.step`, on ``JobFailed``) asks
:func:`checkpoint_to_demote`, records the step in its state (``RunState.demoted``: never resumed from again) and
hands :func:`demoted_failure` to :func:`~.decide.decide`, whose ``checkpoint-restore`` rule resubmits from the
checkpoint before it within the ``demote_checkpoint`` budget.

Pure: plain values in, a step (or None) out; no I/O, no clock.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import replace

from .decide import DEFAULT_POLICY
from .failures import Failure, FailureClass
from .records import Attempt
from .rules import RetryPolicy

#: The workload's own failures (not the platform's, not capacity): what a checkpoint that will not load causes.
WORKLOAD_FAILURES = frozenset({FailureClass.TRANSIENT_CRASH, FailureClass.PERMANENT_USER_ERROR, FailureClass.UNKNOWN,
                               FailureClass.HANG, FailureClass.WORKER_FAILURE})
#: Words of a failure message that name a restore (a traceback's exception, a framework's error).
RESTORE_WORDS = re.compile(r"checkpoint|restor|unpickl|deserializ|corrupt|safetensors|orbax|load_state_dict|"
                           r"EOFError|truncated", re.IGNORECASE)


def checkpoint_to_demote(failure: Failure, resumed_from: int | None, seen: Collection[int] | None, *,
                         demoted: Collection[int] = (), spent: int = 0, resumed_before: int | None = None,
                         failed_before: FailureClass | None = None,
                         policy: RetryPolicy = DEFAULT_POLICY) -> int | None:
    """The checkpoint step to demote for ``failure`` of an attempt, or None: a checkpoint that looks complete but
    will not load.

    The attempt resumed from step N (``resumed_from``), failed with one of :data:`WORKLOAD_FAILURES`, and the
    observer saw no progress past N in it (no step of ``seen`` above N); then N is demoted when

    * the failure's message names a restore (:data:`RESTORE_WORDS`: an unpickling error, a corrupt file ...;
      not a hang's, which is the observer's own text),
    * it is a permanent error (a traceback right after loading) while the attempt was watched (``seen`` not None:
      its progress known), or
    * the attempt before it resumed from N too and also failed that way (``resumed_before``, ``failed_before``):
      twice in a row from N (a newer checkpoint would have been resumed from, had the first made any).

    At most the policy's ``demote_checkpoint`` budget per segment (2 by default); past it the failure goes to its
    own rule. A step already demoted is not demoted again.

    Args:
        failure: what ended the attempt, as classified (before any demotion).
        resumed_from: the step the attempt resumed from (``Attempt.resumed_from_step``); None: from scratch,
            nothing to demote.
        seen: the steps the observer saw in this attempt (its progress clocks' steps); None when the observer
            has no memory of this attempt (it was not watched: its progress is unknown), empty when it was
            watched and saw no step.
        demoted: the steps demoted before, in any segment.
        spent: the demotions spent in the current segment (:func:`demotions_spent`).
        resumed_before: the step the attempt before it in the segment resumed from (None: none, or from scratch).
        failed_before: the class of the last failure of the attempt before it in the segment (None: no attempt
            before, or it recorded none).
        policy: the retry rules; their ``demote_checkpoint`` budget bounds the demotions per segment.
    """
    if resumed_from is None or resumed_from in demoted or failure.failure_class not in WORKLOAD_FAILURES:
        return None
    watched = seen is not None
    if seen is not None and any(step > resumed_from for step in seen):
        return None  # it made progress: the checkpoint loaded
    if spent >= (policy.effective_budgets["demote_checkpoint"].max_retries or 0):
        return None
    again = resumed_before == resumed_from and failed_before in WORKLOAD_FAILURES
    # A hang's message is the observer's own ("no new checkpoint past step N"), not the workload's words.
    restore = failure.failure_class != FailureClass.HANG and bool(RESTORE_WORDS.search(failure.message or ""))
    permanent = failure.failure_class == FailureClass.PERMANENT_USER_ERROR and watched
    return resumed_from if restore or permanent or again else None


def demotions_spent(segment: Sequence[Attempt]) -> int:
    """The demotions spent in ``segment`` (the attempts of the current segment): its incidents of class
    ``checkpoint_restore``, one per demotion (:func:`demoted_failure`)."""
    return sum(1 for a in segment for i in a.incidents if i.failure.failure_class == FailureClass.CHECKPOINT_RESTORE)


def demoted_failure(failure: Failure, step: int) -> Failure:
    """``failure`` as the demotion of checkpoint ``step`` (class ``checkpoint_restore``), its own class and message
    kept in the new message: what the policy decides on and the attempt history records."""
    return replace(failure, failure_class=FailureClass.CHECKPOINT_RESTORE, message=(
        f"step {step} demoted: it looks complete but will not load -- no progress after resuming from it "
        f"({failure.failure_class.value}: {failure.message})"))


__all__ = ["RESTORE_WORDS", "WORKLOAD_FAILURES", "checkpoint_to_demote", "demoted_failure", "demotions_spent"]
