"""A HyperparameterTuningJob's life on the emulated platform: up to ``parallel_trial_count`` trials at once, each
a :class:`~.runs.JobRun` made by the backend."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any, Protocol

from ..clock import Clock
from ..config import EmulatorConfig
from ..errors import FailedPrecondition
from ..faults import FaultBook
from .runs import JobRun


class TrialHost(Protocol):
    """What a tuning job needs of the service that runs its trials (the emulator's Vertex AI service)."""

    config: EmulatorConfig
    clock: Clock
    faults: FaultBook

    def log_dir(self, name: str) -> Path:
        """Where the replica logs of job ``name`` go."""
        ...

    def make_run(self, job: Any, region: str, *, extra_args: list[str] | None = None,
                 trial_id: str | None = None, log_dir: Path | None = None) -> JobRun:
        """A :class:`~.runs.JobRun` of CustomJob ``job`` (a trial's: with its ``trial_id`` and arguments), not yet
        started."""
        ...

TERMINAL = frozenset({"JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED", "JOB_STATE_EXPIRED",
                      "JOB_STATE_PARTIALLY_SUCCEEDED"})


def _types() -> Any:
    from google.cloud.aiplatform_v1 import types

    return types


class TuningRun:
    """A HyperparameterTuningJob: up to ``parallel_trial_count`` trials run at once (at least 1), each a
    CustomJob-like run; a new trial starts as soon as one ends, until ``max_trial_count`` have started.

    Parameters are drawn from ``study_spec.parameters`` (GRID_SEARCH walks the combinations in order;
    otherwise random with the emulator's seed) and passed as ``--<parameter_id>=<value>`` arguments.
    A trial reports its metric by writing JSON lines ``{"<metric_id>": value}`` to the file named by
    ``CLOUD_ML_HP_METRIC_FILE`` (what the ``cloudml-hypertune`` library does); the last line is the
    final measurement. A trial whose run fails is INFEASIBLE, with the run's error as
    ``infeasible_reason``.

    The job FAILS once ``max_failed_trial_count`` trials have failed -- "the number of failed Trials that
    need to be seen before failing the HyperparameterTuningJob" (the field's documentation in
    ``google.cloud.aiplatform_v1``) -- without starting more trials; with 0 ("Vertex AI decides") it fails
    only when every trial failed. The trials still running when it fails are stopped and end INFEASIBLE ("stopped
    because its HyperparameterTuningJob failed"). Otherwise it SUCCEEDS when ``max_trial_count`` trials have
    ended.

    Cancel goes QUEUED/RUNNING -> CANCELLING -> CANCELLED like a CustomJob (the same cancel path and
    latency). The running trials' processes are killed at once and each trial is STOPPING ("the Trial should
    stop according to the service"); once CANCELLED the trial is done without a final measurement, so it
    ends INFEASIBLE, which ``Trial.State`` defines as "done but missing the final_measurement" (the enum has
    no cancelled state), with ``infeasible_reason`` saying it was stopped by the cancel.
    """

    def __init__(self, backend: TrialHost, job: Any, region: str) -> None:
        self.backend = backend
        self.job = job
        self.region = region
        #: The running trials: trial id -> (its run, its metric file).
        self.running: dict[str, tuple[JobRun, Path]] = {}
        self.failed = 0
        self.rng = random.Random(f"{backend.config.seed}:{job.name}")
        self.next_at = backend.clock.monotonic() + backend.config.scaled(backend.config.latencies.queued_seconds)
        self.events: list[str] = ["QUEUED"]

    @property
    def current(self) -> list[JobRun]:
        """The runs of the trials running now."""
        return [run for run, _ in self.running.values()]

    def kill_all(self) -> None:
        for run in self.current:
            run.kill_all()

    def _trial(self, trial_id: str) -> Any:
        return next(t for t in self.job.trials if t.id == trial_id)

    def _set_state(self, state: str) -> None:
        types = _types()
        self.job.state = getattr(types.JobState, f"JOB_STATE_{state}")
        self.job.update_time = self.backend.clock.now()
        if state == "RUNNING":
            self.job.start_time = self.job.update_time
        if f"JOB_STATE_{state}" in TERMINAL:
            self.job.end_time = self.job.update_time
        self.events.append(state)

    def cancel(self, now: float) -> None:
        """CANCELLING now (the running trial STOPPING, its processes killed); CANCELLED after the cancel latency.

        Raises:
            FailedPrecondition: the job is already in a terminal state.
        """
        types = _types()
        if self.job.state.name in TERMINAL:
            raise FailedPrecondition(f'Cannot cancel HyperparameterTuningJob "{self.job.name}": it is already in '
                                     f"state {self.job.state.name}.")
        if self.job.state == types.JobState.JOB_STATE_CANCELLING:
            return
        self._set_state("CANCELLING")
        for trial_id, (run, _) in self.running.items():
            trial = self._trial(trial_id)
            trial.state = types.Trial.State.STOPPING
            run.cancel(now)  # kills the trial's processes
            self.events.append(f"trial {trial.id} STOPPING")
        self.next_at = now + self.backend.config.scaled(self.backend.config.latencies.cancel_seconds)

    def _finish(self, state: str, error: dict[str, Any] | None = None) -> None:
        if error:
            self.job.error = error
        self._set_state(state)

    def _parameters(self, index: int) -> list[tuple[str, Any]]:
        types = _types()
        grid = self.job.study_spec.algorithm == types.StudySpec.Algorithm.GRID_SEARCH
        params = []
        combos = 1
        for spec in self.job.study_spec.parameters:
            values: list[Any]
            if "double_value_spec" in spec:
                lo, hi = spec.double_value_spec.min_value, spec.double_value_spec.max_value
                values = [lo, (lo + hi) / 2, hi]
            elif "integer_value_spec" in spec:
                values = list(range(spec.integer_value_spec.min_value, spec.integer_value_spec.max_value + 1))
            elif "categorical_value_spec" in spec:
                values = list(spec.categorical_value_spec.values)
            else:
                values = list(spec.discrete_value_spec.values)
            if grid:
                params.append((spec.parameter_id, values[(index // combos) % len(values)]))
                combos *= len(values)
            elif "double_value_spec" in spec:
                params.append((spec.parameter_id, self.rng.uniform(values[0], values[-1])))
            else:
                params.append((spec.parameter_id, self.rng.choice(values)))
        return params

    def _start_trial(self, now: float) -> None:
        types = _types()
        trial_id = str(len(self.job.trials) + 1)
        params = self._parameters(len(self.job.trials))
        job_name = f"{self.job.name}/trials/{trial_id}"
        job = types.CustomJob(display_name=f"{self.job.display_name}-trial-{trial_id}", name=job_name,
                              job_spec=self.job.trial_job_spec, labels=dict(self.job.labels))
        log_dir = self.backend.log_dir(self.job.name) / f"trial-{trial_id}"
        run = self.backend.make_run(job, self.region, extra_args=[f"--{k}={v}" for k, v in params],
                                     trial_id=trial_id, log_dir=log_dir)
        metric_file = log_dir / "hypertune.metrics"
        for plan_index, plan in enumerate(run.plans):
            env = dict(plan.env, CLOUD_ML_HP_METRIC_FILE=str(metric_file))
            run.plans[plan_index] = type(plan)(plan.name, plan.pool, plan.index, plan.argv, tuple(env.items()))
        self.backend.faults.job_created(job_name, job.display_name, dict(job.labels))
        trial = types.Trial(id=trial_id, state=types.Trial.State.ACTIVE, start_time=self.backend.clock.now(),
                            parameters=[{"parameter_id": k, "value": v} for k, v in params])
        self.job.trials.append(trial)
        run.start(now)
        self.running[trial_id] = (run, metric_file)
        self.events.append(f"trial {trial_id} ACTIVE")

    def _end_trial(self, trial_id: str) -> None:
        types = _types()
        run, metric_file = self.running.pop(trial_id)
        trial = self._trial(trial_id)
        trial.end_time = self.backend.clock.now()
        succeeded = run.job.state.name == "JOB_STATE_SUCCEEDED"
        metrics = _last_metrics(metric_file)
        if succeeded:
            trial.state = types.Trial.State.SUCCEEDED
            if metrics:
                trial.final_measurement = {"metrics": [{"metric_id": k, "value": v} for k, v in metrics.items()]}
        else:
            trial.state = types.Trial.State.INFEASIBLE
            trial.infeasible_reason = run.job.error.message
            self.failed += 1
        self.events.append(f"trial {trial.id} {trial.state.name}")

    def _stop_running(self, why: str) -> None:
        """End every running trial now: its processes killed, INFEASIBLE ("done but missing the
        final_measurement") with ``infeasible_reason`` ``why``."""
        types = _types()
        for trial_id, (run, _) in list(self.running.items()):
            run.kill_all()
            trial = self._trial(trial_id)
            trial.end_time = self.backend.clock.now()
            trial.state = types.Trial.State.INFEASIBLE
            trial.infeasible_reason = why
            self.events.append(f"trial {trial.id} INFEASIBLE")
        self.running.clear()

    def _end_cancelled(self) -> None:
        """The cancel latency is over: the stopped trials end INFEASIBLE and the job CANCELLED."""
        self._stop_running("The trial was stopped because its HyperparameterTuningJob was cancelled.")
        self._finish("CANCELLED", {"code": self.backend.config.rpc_codes.cancelled, "message": "CANCELED"})

    def advance(self, now: float) -> None:
        types = _types()
        if self.job.state.name in TERMINAL or now < self.next_at:
            return
        if self.job.state == types.JobState.JOB_STATE_CANCELLING:
            self._end_cancelled()
            return
        if self.job.state == types.JobState.JOB_STATE_QUEUED:
            self._set_state("RUNNING")
        for trial_id, (run, _) in list(self.running.items()):
            run.advance(now)
            if run.done:
                self._end_trial(trial_id)
        max_failed = self.job.max_failed_trial_count
        if (max_failed and self.failed >= max_failed) or (self.failed and self.failed == self.job.max_trial_count):
            last = next(t for t in reversed(self.job.trials) if t.state.name == "INFEASIBLE")
            limit = (f"max_failed_trial_count {max_failed}" if max_failed else
                     f"all {self.job.max_trial_count} trials")
            self._stop_running("The trial was stopped because its HyperparameterTuningJob failed.")
            self._finish("FAILED", {
                "code": self.backend.config.rpc_codes.trials_failed,
                "message": f"{self.failed} of {len(self.job.trials)} trials failed, reaching {limit}. "
                           f"The last failed trial, {last.id}: {last.infeasible_reason}"})
            return
        parallel = max(1, self.job.parallel_trial_count)
        while len(self.job.trials) < self.job.max_trial_count and len(self.running) < parallel:
            self._start_trial(now)
        if not self.running:
            self._finish("SUCCEEDED")


def _last_metrics(path: Path) -> dict[str, float]:
    import json

    try:
        lines = [line for line in path.read_text().splitlines() if line.strip()]
    except FileNotFoundError:
        return {}
    for line in reversed(lines):
        try:
            data = json.loads(line)
        except ValueError:
            continue
        return {k: float(v) for k, v in data.items() if isinstance(v, int | float) and not k.startswith("global")}
    return {}
