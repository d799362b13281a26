"""Carrying out the supervisor's ``Submit``: find the attempt's resource, else look up what it resumes from and
create it. The judgements -- may it be created beside the live resources of other runs, what does it resume from
when only torn saves exist -- are the core's (:mod:`..supervisor.launch`); this module lists and creates.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..backends.base import AttemptSpec, Backend
from ..compat import AirflowException
from ..policy import Fallback, Platform
from ..supervisor import RunState, Submit, SubmitFailed
from ..supervisor.launch import ResumePoint, checkpoint_dir_conflict, resume_point
from ..supervisor.reconcile import Owner
from . import report
from .run_store import RunStore


def attempt_spec(action: Submit, task: Owner, fallbacks: Sequence[Fallback], labels: Mapping[str, str]
                 ) -> AttemptSpec:
    """What ``action`` asks the backend to create for ``task``: its fallback (``action.fallback_index`` into
    ``fallbacks``; -1: none), the user's ``labels`` with the provider's, and the owner variables the reconciler
    reads back."""
    from ..specs.common import job_labels
    from ..supervisor.reconcile import owner_env

    index = action.fallback_index
    own = job_labels(task.dag_id, task.task_id, task.run_id, task.map_index, action.attempt)
    owner = owner_env(task.dag_id, task.task_id, task.run_id, task.map_index)
    return AttemptSpec(action.attempt, task, fallbacks[index] if index >= 0 else None, index if index >= 0 else -1,
                       {**labels, **own}, own, owner, owner)


def scan_resume_point(location: str, *, marker: str | None, demoted: Collection[int], torn_checkpoints: str,
                      platform: Platform, log: logging.Logger | Any) -> ResumePoint:
    """The resume point of a new attempt (:func:`~..supervisor.launch.resume_point`) from a scan of ``location``
    (:func:`~..checkpoints.scan_checkpoints`, ``demoted`` steps left out), its warning logged.

    Raises:
        AirflowException: the checkpoints cannot be listed (never a silent restart from step 0; Airflow's task
            retries apply).
    """
    from ..checkpoints import scan_checkpoints

    try:
        scan = scan_checkpoints(location, marker=marker, exclude=demoted)
    except Exception as exc:  # cannot see the checkpoints: never silently restart from step 0
        raise AirflowException(f"cannot list checkpoints under {location}: {exc}") from exc
    point = resume_point(scan, location, torn_checkpoints, platform)
    if point.warning:
        (log.error if point.failure else log.warning)("%s", point.warning)
    return point


def submit_attempt(backend: Backend, spec: AttemptSpec, state: RunState, action: Submit, *, location: str | None,
                   marker: str | None, torn_checkpoints: str, interval_cap: float | None, store: RunStore,
                   saves: Callable[[], list[Any] | None], clock: Callable[[], float],
                   log: logging.Logger | Any, resume: bool = True) -> Any:
    """Carry out ``Submit``: watch the resource the attempt already has (:meth:`~..backends.base.Backend.find`),
    else look up the latest complete checkpoint under ``location`` and create the attempt resuming from it (the
    ``RESILIENT_*`` variables, :func:`~..specs.common.resume_env`, with the checkpoint interval handed to it).
    ``resume`` False: the run has no one line of checkpoints to resume from (a tuning study: each trial resumes
    from its own), only ``location``'s other writers are checked.

    Returns:
        ``Submitted``, or ``SubmitFailed`` (the create refused, another run writing to ``location``, only torn saves
        with ``torn_checkpoints="fail"``).

    Raises:
        AirflowException: the checkpoints cannot be listed.
    """
    from ..specs.common import resume_env

    found = backend.find(spec)
    if found is not None:
        return found
    checkpoint = None
    if location and (conflict := checkpoint_dir_conflict(backend.live_owned(), spec.task, location,
                                                         backend.platform)):
        log.error("Not submitting: %s", conflict.message)
        return SubmitFailed(conflict, clock())
    if location and resume:
        point = scan_resume_point(location, marker=marker, demoted=state.demoted, torn_checkpoints=torn_checkpoints,
                                  platform=backend.platform, log=log)
        if point.failure is not None:
            return SubmitFailed(point.failure, clock())
        checkpoint = point.checkpoint
    uri, step_ = (checkpoint.uri, checkpoint.step) if checkpoint else (None, None)
    listed = saves() if location and action.attempt > 1 and state.history else None
    if listed:
        report.note_saves(store, state, listed)
    interval = report.handed_interval(state, action.attempt, listed, cap=interval_cap, now=clock(), log=log,
                                      steps=store.steps)
    env = resume_env(attempt=action.attempt, checkpoint_dir=str(location), resume_uri=uri, resume_step=step_,
                     failure_class=action.failure_class, demoted=state.demoted, checkpoint_interval=interval)
    return backend.submit(replace(spec, env={**spec.env, **env}, resume_uri=uri, resume_step=step_))


__all__ = ["attempt_spec", "scan_resume_point", "submit_attempt"]
