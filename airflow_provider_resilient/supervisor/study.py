"""A hyperparameter study across the attempts of one run: which trials are kept, which are owed, what a
tuning job's end means, and the best trial -- pure functions (no I/O, no clock, no Google import).

A run of :class:`~..operators.vertex_ai_tuning.ResilientHyperparameterTuningJobOperator` is one *study* of
``max_trial_count`` trials, carried out by one Vertex AI HyperparameterTuningJob per attempt. The trials of
every attempt's job (read back from the platform by their labels, so they survive task retries, process kills
and an emptied task state store) make the study's record:

* **kept** trials are never run again: a SUCCEEDED trial (its metric is kept), and a trial that failed with a
  permanent user error -- it counts toward ``max_failed_trial_count`` as the platform counts it ("the number of
  failed Trials that need to be seen before failing the HyperparameterTuningJob", the field's documentation).
* **owed** trials are the rest of ``max_trial_count``: trials interrupted by the job's end, or failed for a
  transient reason (a crash, an internal error, a lost replica: the policy's retryable classes). A transient
  trial failure does not waste the study: the next attempt runs it again, and it does not count toward
  ``max_failed_trial_count``.

The next attempt's job (:func:`owed`) asks for the owed trials only: ``max_trial_count`` is what is owed,
``max_failed_trial_count`` what is left of the user's, and a GRID_SEARCH study's parameter values are narrowed
to the grid points not yet kept (exact for a one-parameter grid and whenever the points left form a grid).

A trial finds its predecessor's checkpoints by its parameters: Vertex AI's per-trial ``AIP_CHECKPOINT_DIR``
(``<base>/<trial id>/checkpoints``) restarts its trial ids at 1 in each job, so the provider's convention is
``<RESILIENT_CHECKPOINT_DIR>/trials/<trial_key(parameters)>/`` (:func:`trial_key`), which a re-run trial with
the same parameters -- the next grid point after an interruption -- finds and resumes from.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..policy import Failure, FailureClass, Platform, classify_vertex_job, is_permanent

#: ``Trial.State`` names of a trial that ended (the others: REQUESTED, ACTIVE, STOPPING).
TRIAL_DONE = frozenset({"SUCCEEDED", "INFEASIBLE"})
GOALS = ("MAXIMIZE", "MINIMIZE")
ParameterValue = float | int | str


def format_value(value: ParameterValue) -> str:
    """A parameter value as the trial key writes it: an integral float as the platform passes it to the
    workload's flag would read back (``0.001`` -> ``0.001``, ``32.0`` -> ``32``), a string as it is."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    return str(value)


_SAFE = re.compile(r"^[A-Za-z0-9_.+-]+$")


def trial_key(parameters: Mapping[str, ParameterValue] | Iterable[tuple[str, ParameterValue]]) -> str:
    """The directory name of a trial's checkpoints: ``<id>=<value>`` pairs sorted by parameter id, joined by
    ``,`` -- ``learning_rate=0.001,units=64`` -- when every part is made of ``[A-Za-z0-9_.+-]`` and the whole
    is at most 120 characters; otherwise ``sha256-<first 16 hex digits>`` of that text. Values are written
    by :func:`format_value`, so a workload reading ``--learning_rate=0.001`` as a float finds the same key.
    """
    pairs = sorted((dict(parameters) if not isinstance(parameters, Mapping) else parameters).items())
    parts = [f"{name}={format_value(value)}" for name, value in pairs]
    text = ",".join(parts)
    if len(text) <= 120 and all(_SAFE.match(p.replace("=", "", 1)) for p in parts):
        return text
    return "sha256-" + hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Study:
    """What the user asked of the whole run.

    Attributes:
        metric_id, goal: the one metric the study optimizes and ``MAXIMIZE`` or ``MINIMIZE``.
        max_trial_count: trials in all, across attempts (>= 1).
        max_failed_trial_count: permanently failed trials that fail the study (0: Vertex AI decides -- the
            emulator, like the platform, fails a job only when all its trials failed).
        algorithm: ``StudySpec.Algorithm`` name (``ALGORITHM_UNSPECIFIED`` is Vertex AI's Bayesian default).
        parameters: the ``StudySpec.ParameterSpec`` dicts (snake_case), as given.
    """

    metric_id: str
    goal: str
    max_trial_count: int
    max_failed_trial_count: int = 0
    algorithm: str = "ALGORITHM_UNSPECIFIED"
    parameters: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True)
class TrialRecord:
    """One trial of one attempt's tuning job, as the platform reported it.

    Attributes:
        attempt: the attempt whose job ran it (1-based).
        job_name: that HyperparameterTuningJob's resource name.
        trial_id: the platform's id within that job (``"1"``, ``"2"`` ...; ids restart in each job).
        parameters: ``(parameter_id, value)`` pairs.
        state: the ``Trial.State`` name.
        metric: the final measurement of the study's metric, or None.
        failure: for an INFEASIBLE trial, its ``infeasible_reason`` classified (:func:`classify_trial`).
        start_time, end_time: epoch seconds, or None.
    """

    attempt: int
    job_name: str
    trial_id: str
    parameters: tuple[tuple[str, ParameterValue], ...]
    state: str
    metric: float | None = None
    failure: Failure | None = None
    start_time: float | None = None
    end_time: float | None = None

    @property
    def key(self) -> str:
        """:func:`trial_key` of the parameters: where its checkpoints are."""
        return trial_key(self.parameters)

    @property
    def succeeded(self) -> bool:
        return self.state == "SUCCEEDED"

    @property
    def failed_permanently(self) -> bool:
        """INFEASIBLE for a reason retrying cannot fix: it counts toward ``max_failed_trial_count``. A trial stopped
        because its job was cancelled is not (the cancel is the job's, decided by the job's own failure)."""
        return (self.state == "INFEASIBLE" and self.failure is not None
                and self.failure.failure_class is not FailureClass.CANCELLED
                and is_permanent(self.failure.failure_class))

    @property
    def kept(self) -> bool:
        """Never run again: succeeded, or failed permanently."""
        return self.succeeded or self.failed_permanently

    def as_dict(self) -> dict[str, Any]:
        """JSON form (the operator's return value and XCom)."""
        return {"attempt": self.attempt, "job_name": self.job_name, "trial_id": self.trial_id,
                "parameters": dict(self.parameters), "state": self.state, "metric": self.metric,
                "failure_class": self.failure.failure_class.value if self.failure else None,
                "failure": self.failure.message if self.failure else None, "key": self.key}


def classify_trial(reason: str | None, timestamp: float | None = None) -> Failure:
    """A failed trial's ``infeasible_reason`` (its CustomJob's error message) classified by the rules of a
    CustomJob (:func:`~..policy.classify_vertex_job`): exit 1 is a permanent user error, exit 139 a transient
    crash, "Internal error occurred" an internal error... A trial the platform stopped because its job was
    cancelled is CANCELLED (owed again: the provider's cancel is not the trial's fault)."""
    text = reason or ""
    if "was cancelled" in text or "was stopped" in text:
        return Failure(FailureClass.CANCELLED, Platform.VERTEX_AI, message=text, timestamp=timestamp)
    failure = classify_vertex_job("JOB_STATE_FAILED", None, text or "The trial failed without a reason.",
                                  started=True, timestamp=timestamp)
    assert failure is not None  # FAILED is always a failure
    return failure


def _values(spec: Mapping[str, Any]) -> list[ParameterValue] | None:
    """The grid values of one ParameterSpec dict; None for a continuous (double) parameter."""
    if "discrete_value_spec" in spec:
        return [float(v) for v in spec["discrete_value_spec"].get("values", [])]
    if "categorical_value_spec" in spec:
        return [str(v) for v in spec["categorical_value_spec"].get("values", [])]
    if "integer_value_spec" in spec:
        lo, hi = int(spec["integer_value_spec"]["min_value"]), int(spec["integer_value_spec"]["max_value"])
        return list(range(lo, hi + 1))
    return None


def grid_points(parameters: Sequence[Mapping[str, Any]]) -> list[dict[str, ParameterValue]] | None:
    """Every point of the grid of ``parameters`` (the product of their values, first parameter slowest), or
    None when one is continuous (a double range has no grid)."""
    axes = []
    for spec in parameters:
        values = _values(spec)
        if values is None:
            return None
        axes.append([(spec["parameter_id"], v) for v in values])
    return [dict(point) for point in itertools.product(*axes)]


def _narrowed(spec: Mapping[str, Any], values: Sequence[ParameterValue]) -> dict[str, Any]:
    spec = dict(spec)
    if "discrete_value_spec" in spec:
        spec["discrete_value_spec"] = {**spec["discrete_value_spec"], "values": list(values)}
    elif "categorical_value_spec" in spec:
        spec["categorical_value_spec"] = {**spec["categorical_value_spec"], "values": list(values)}
    elif "integer_value_spec" in spec:  # an integer range narrows to its discrete values
        del spec["integer_value_spec"]
        spec["discrete_value_spec"] = {"values": [float(v) for v in values]}
    return spec


@dataclass(frozen=True)
class Owed:
    """The next attempt's share of the study.

    Attributes:
        max_trial_count: trials the next job runs (0: nothing owed, the study is complete).
        max_failed_trial_count: the next job's limit (0 when the user gave none).
        parameters: the ParameterSpec dicts of the next job (narrowed for a grid).
        kept: trials kept so far (succeeded + failed permanently).
        rerun_keys: grid points already kept that the narrowed grid still holds (it cannot always be cut
            exactly): they may run again, and resume from their final checkpoints.
        note: one line for the log.
    """

    max_trial_count: int
    max_failed_trial_count: int
    parameters: tuple[Mapping[str, Any], ...]
    kept: int
    rerun_keys: tuple[str, ...] = field(default_factory=tuple)
    note: str = ""


def owed(study: Study, trials: Sequence[TrialRecord]) -> Owed:
    """What the next attempt's tuning job must run, given every trial of the earlier attempts."""
    kept = [t for t in trials if t.kept]
    permanent = sum(1 for t in kept if t.failed_permanently)
    remaining = max(0, study.max_trial_count - len(kept))
    failed_left = max(1, study.max_failed_trial_count - permanent) if study.max_failed_trial_count else 0
    parameters = tuple(dict(p) for p in study.parameters)
    if study.algorithm != "GRID_SEARCH" or not kept or remaining == 0:
        note = (f"{len(kept)} of {study.max_trial_count} trials kept, {remaining} owed" if trials else
                f"{study.max_trial_count} trials")
        return Owed(remaining, failed_left, parameters, len(kept), (), note)
    grid = grid_points(study.parameters)
    if grid is None:  # validation refuses a grid with a continuous parameter
        return Owed(remaining, failed_left, parameters, len(kept), (), f"{remaining} trials owed")
    done = {t.key for t in kept}
    left = [p for p in grid if trial_key(p) not in done]
    narrowed = []
    for spec in study.parameters:
        pid = spec["parameter_id"]
        values = list(dict.fromkeys(point[pid] for point in left))
        narrowed.append(_narrowed(spec, values))
    covered = grid_points(narrowed) or []
    rerun = tuple(k for k in (trial_key(p) for p in covered) if k in done)
    count = min(remaining + len(rerun), len(covered))
    note = (f"{len(kept)} of {study.max_trial_count} trials kept, {remaining} owed: the grid narrowed to "
            f"{len(covered)} point(s)" + (f", {len(rerun)} of them kept already (the grid cannot be cut "
                                           f"exactly; they resume from their final checkpoints)" if rerun else ""))
    return Owed(count, failed_left, tuple(narrowed), len(kept), rerun, note)


def best_trial(study: Study, trials: Iterable[TrialRecord]) -> TrialRecord | None:
    """The succeeded trial with the best final metric across every attempt (ties: the earliest), or None."""
    scored = [t for t in trials if t.succeeded and t.metric is not None and math.isfinite(t.metric)]
    if not scored:
        return None
    sign = -1.0 if study.goal == "MAXIMIZE" else 1.0
    return min(scored, key=lambda t: (sign * (t.metric or 0.0), t.attempt, int(t.trial_id) if t.trial_id.isdigit()
                                      else 0))


def outcome(study: Study, trials: Sequence[TrialRecord], attempt: int, job_state: str,
            job_failure: Failure | None, now: float) -> Failure | None:
    """What the end of attempt ``attempt``'s tuning job means for the study: None when it is complete
    (nothing owed), otherwise the failure the policy decides on.

    Args:
        study: the run's study.
        trials: every trial of every attempt so far, this one's included.
        attempt: the attempt whose job ended.
        job_state: its ``JobState`` name (``JOB_STATE_SUCCEEDED`` ...).
        job_failure: the job's own classified failure (None for SUCCEEDED).
        now: epoch seconds, the time of a failure made here.

    Returns, in order:
        * permanent failures reaching ``max_failed_trial_count`` (every trial failed, without one) ->
          PERMANENT_USER_ERROR naming them;
        * nothing owed -> None (success, whatever the job's state: the study has every trial it asked for);
        * a transient trial failure in this attempt -> that trial's failure (its class decides: a crash, an
          internal error ...), dated when the trial ended, its message naming the trial and what is owed;
        * the job's own failure (a stockout, a quota wait, a cancel...) -> it;
        * a job that SUCCEEDED short of trials with none failed transiently -> UNKNOWN.
    """
    mine = [t for t in trials if t.attempt == attempt]
    permanent = [t for t in trials if t.failed_permanently]
    limit = study.max_failed_trial_count
    succeeded = [t for t in trials if t.succeeded]
    if (limit and len(permanent) >= limit) or (permanent and not succeeded and not owed(study, trials).max_trial_count
                                                and not limit):
        last = permanent[-1]
        named = "; ".join(f"trial {t.trial_id} of attempt {t.attempt} ({format_params(t.parameters)})"
                          for t in permanent[:5])
        reach = f"max_failed_trial_count {limit}" if limit else f"every one of the {study.max_trial_count} trials"
        assert last.failure is not None
        return replace(last.failure, failure_class=FailureClass.PERMANENT_USER_ERROR, message=(
            f"{len(permanent)} trial(s) failed permanently, reaching {reach}: {named}. The last: "
            f"{last.failure.message}"))
    left = owed(study, trials)
    if left.max_trial_count == 0:
        return None
    transient = [t for t in mine if t.state == "INFEASIBLE" and not t.failed_permanently and t.failure
                 and t.failure.failure_class is not FailureClass.CANCELLED]
    if transient:
        first = transient[0]
        assert first.failure is not None
        return replace(first.failure, timestamp=first.end_time or first.failure.timestamp or now, message=(
            f"trial {first.trial_id} ({format_params(first.parameters)}) failed: {first.failure.message} "
            f"-- {left.max_trial_count} trial(s) owed"))
    if job_failure is not None:
        return job_failure
    return Failure(FailureClass.UNKNOWN, Platform.VERTEX_AI, timestamp=now, message=(
        f"the tuning job ended {job_state} with {left.max_trial_count} trial(s) of the study still owed"))


def format_params(parameters: Iterable[tuple[str, ParameterValue]]) -> str:
    """``learning_rate=0.001, units=64``."""
    return ", ".join(f"{k}={format_value(v)}" for k, v in parameters)


def trial_seconds(trials: Iterable[TrialRecord]) -> dict[str, float]:
    """Seconds of trial time (each trial's ``end_time - start_time``; trials without both are left out):
    ``kept`` -- of trials whose result the study keeps; ``lost`` -- of trials that ended without one (their
    run again resumes from their checkpoints, so part of it is recovered); ``goodput`` -- kept / all."""
    kept = lost = 0.0
    for t in trials:
        if t.start_time is None or t.end_time is None:
            continue
        if t.kept:
            kept += max(0.0, t.end_time - t.start_time)
        else:
            lost += max(0.0, t.end_time - t.start_time)
    return {"kept": round(kept, 3), "lost": round(lost, 3),
            "goodput": round(kept / (kept + lost), 4) if kept + lost > 0 else 0.0}


def study_summary(study: Study, trials: Sequence[TrialRecord]) -> dict[str, Any]:
    """The run's result: the best trial across every attempt (``parameters``, ``metric``, ``job_name``,
    ``trial_id``, ``attempt``), counts (``trials_run``: trials that ended, ``trials_succeeded``,
    ``trials_failed_permanently``, ``trials_rerun``: GRID_SEARCH trials run with the parameters of a trial kept by
    an earlier attempt), the trial time kept and lost (:func:`trial_seconds`) and every trial's record."""
    best = best_trial(study, trials)
    kept_keys: dict[str, int] = {}
    rerun = 0
    for t in sorted(trials, key=lambda t: (t.attempt, int(t.trial_id) if t.trial_id.isdigit() else 0)):
        if kept_keys.get(t.key, t.attempt) < t.attempt and study.algorithm == "GRID_SEARCH":
            rerun += 1
        if t.kept:
            kept_keys.setdefault(t.key, t.attempt)
    return {
        "metric_id": study.metric_id, "goal": study.goal,
        "best_trial": ({"parameters": dict(best.parameters), "metric": best.metric, "job_name": best.job_name,
                        "trial_id": best.trial_id, "attempt": best.attempt, "key": best.key} if best else None),
        "trials_run": sum(1 for t in trials if t.state in TRIAL_DONE),
        "trials_succeeded": sum(1 for t in trials if t.succeeded),
        "trials_failed_permanently": sum(1 for t in trials if t.failed_permanently),
        "trials_rerun": rerun,
        "trial_seconds": trial_seconds(trials),
        "trials": [t.as_dict() for t in trials],
    }


__all__ = ["GOALS", "TRIAL_DONE", "Owed", "Study", "TrialRecord", "best_trial", "classify_trial", "format_params",
           "format_value", "grid_points", "outcome", "owed", "study_summary", "trial_key", "trial_seconds"]
