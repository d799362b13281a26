"""``ResilientModelArtsTrainingJobOperator``: a Huawei Cloud ModelArts training job that finishes despite crashes,
hardware faults, failed environment pre-checks, sold-out flavors and hangs.

The same guarantees as the Vertex AI operator, on the same shell (:class:`~.base.SupervisedOperator`) and the same
pure supervisor: every attempt is one training job named for its task instance and attempt (a lost reply or a task
retry finds it by that name, never a second job), tagged with the provider's labels; a new attempt resumes from the
latest complete checkpoint under ``checkpoint_dir`` (an ``obs://`` URL, read through the provider's OBS filesystem)
through ``RESILIENT_RESUME_FROM`` / ``RESILIENT_RESUME_STEP``; a deferred task waits in
:class:`~..triggers.modelarts.ModelArtsTrainingJobTrigger`; Clear, Mark failed, Mark success and kills behave as on
every platform (a real kill stops the job; a stalled worker or triggerer leaves it be).

ModelArts' own fault tolerance stays on where the platform offers it: ``job_retry_num`` sets the
``fault-tolerance/job-retry-num`` annotation (ModelArts "Training Fault Tolerance Check":
https://support.huaweicloud.com/intl/en-us/develop-modelarts/modelarts_trouble_0003.html), so the platform runs its
environment pre-check and re-issues the job on new nodes after a hardware fault, up to that many times, within one
attempt; its re-issues are read from the job's stages into the log and the result. The policy works above them:
once the platform gives up (its re-issues spent, a re-issued job that queued over 30 minutes, a crash on sound
hardware) the job's phase, exit code, events and fault scenario are classified and the next attempt -- resumed
from the checkpoint, perhaps on a fallback flavor or resource pool -- follows the rules; a user error is never
retried; no new job starts while one is live.

Importing this module imports no Huawei Cloud library.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from ..backends.base import AttemptSpec
from ..links.modelarts import ModelArtsTrainingJobLink, push_links
from ..specs.common import SpecError
from ..supervisor import RunState
from .arguments import flag_problems, has_template, seconds_problems
from .base import SupervisedOperator

log = logging.getLogger(__name__)

#: Key of the supervisor's state in the task state store. Renaming it breaks in-flight runs.
STATE_KEY = "resilient_modelarts_training_job"


class ResilientModelArtsTrainingJobOperator(SupervisedOperator):
    """Run a ModelArts training job to completion through crashes, hardware faults, pre-check failures, stockouts and
    hangs.

    Args:
        name: the job name prefix (1 to 40 letters, digits, ``-`` or ``_``); each attempt's job is
            ``<name>-<8 hex of the task instance>-a<attempt>``.
        flavor_id: the resource flavor, e.g. ``modelarts.vm.cpu.8u`` (``spec.resource.flavor_id``).
        node_count: nodes (``spec.resource.node_count``, default 1).
        pool_id: a dedicated resource pool (None: the public pool).
        command, image_url: a custom image job's command (run with ``/bin/sh -c``) and image (SWR URL); or
        code_dir, boot_file, engine: a preset engine job's OBS code directory, boot file and engine (a dict:
            ``engine_id``, or ``engine_name`` and ``engine_version``).
        parameters: the job's run parameters (``{name: value}``, strings).
        environments: environment variables of every node (``{name: value}``); the operator adds the
            ``RESILIENT_*`` ones (owner, attempt, checkpoint directory, resume point).
        inputs, outputs: the API's ``algorithm.inputs`` / ``outputs`` entries, as given.
        annotations: more ``metadata.annotations`` (not ``fault-tolerance/job-retry-num``: use ``job_retry_num``).
        job_retry_num: ModelArts' own re-issues after a failed pre-check or a hardware fault
            (``fault-tolerance/job-retry-num``; 1 to 128 -- the "Training Fault Tolerance Check" page gives 1 to 3,
            "Unconditional Auto Restart" up to 128); None (default): off, as on ModelArts (no pre-check).
        description, workspace_id: the job's.
        region: the ModelArts region (None: the connection's extra ``region``).
        checkpoint_dir: the ``obs://`` prefix the workload writes checkpoints under (required; a local absolute path
            only where the nodes and the worker share a disk, as the emulator's do).
        hang_timeout: seconds a Running job may go without a new complete checkpoint before it counts as hung (the
            job is stopped and resumed in a new attempt); None (default): never.
        cancel_on_kill: stop the live job when the task is killed (``on_kill`` / the trigger's ``on_kill``).
        huaweicloud_conn_id: the Airflow connection (``conn_type`` ``huaweicloud``: ``login`` AK, ``password`` SK,
            extra ``region``, ``project_id``, optional ``security_token``, ``endpoint``; see
            :mod:`..hooks.modelarts`); default ``huaweicloud_default``.
        project_id: the Huawei Cloud project id (None: the connection's).

    ``checkpoint_marker``, ``torn_checkpoints``, ``labels``, ``resilience_policy``, ``fallbacks`` (a ModelArts
    fallback names another ``flavor_id`` and/or ``pool_id``), ``deferrable``, ``poll_interval``,
    ``rerun_after_success``, ``min_defer_seconds`` and ``checkpoint_interval_cap`` are the arguments every operator of
    the provider shares, documented on :class:`~.base.SupervisedOperator`.

    Returns (and pushes to XCom as ``return_value``): ``{"job_name", "job_id", "state", "platform_reissues",
    "checkpoint": {"uri", "step"} | None, "attempts": [...]}``; the attempt history is also pushed as
    ``attempt_history``, the goodput ledger as ``goodput``.

    Raises:
        AirflowFailException: a bad argument -- as the DAG is parsed for literal arguments, after rendering for
            templated ones; before anything is submitted; one line per problem naming the field and the fix
            (:func:`~..specs.modelarts.validate_training_job`) --, a permanent failure, or a spent budget.
        AirflowException: an infrastructure error (the connection cannot be read, OBS cannot be listed): Airflow's
            task retries apply, and the retried task reattaches.
    """

    STATE_KEY = STATE_KEY
    PLATFORM = "modelarts"
    template_fields: Sequence[str] = ("name", "flavor_id", "pool_id", "command", "image_url", "code_dir", "boot_file",
                                      "parameters", "environments", "checkpoint_dir", "labels", "description",
                                      "region")
    template_fields_renderers = {"parameters": "json", "environments": "json", "labels": "json"}
    operator_extra_links = (ModelArtsTrainingJobLink(),)
    ui_color = "#ffd9c2"

    def __init__(self, *, name: str, flavor_id: str, node_count: int = 1, pool_id: str | None = None,
                 command: str | None = None, image_url: str | None = None, code_dir: str | None = None,
                 boot_file: str | None = None, engine: Mapping[str, Any] | None = None,
                 parameters: Mapping[str, str] | None = None, environments: Mapping[str, str] | None = None,
                 inputs: Sequence[Mapping[str, Any]] | None = None,
                 outputs: Sequence[Mapping[str, Any]] | None = None, annotations: Mapping[str, str] | None = None,
                 job_retry_num: int | None = None, description: str | None = None, workspace_id: str | None = None,
                 region: str | None = None, hang_timeout: float | None = None, cancel_on_kill: bool = True,
                 huaweicloud_conn_id: str = "huaweicloud_default", project_id: str | None = None,
                 **kwargs: Any) -> None:
        kwargs.setdefault("gcp_conn_id", None)  # a Google connection is never read by this operator
        super().__init__(project_id=project_id, **kwargs)  # type: ignore[arg-type]
        self.name = name
        self.flavor_id = flavor_id
        self.node_count = node_count
        self.pool_id = pool_id
        self.command = command
        self.image_url = image_url
        self.code_dir = code_dir
        self.boot_file = boot_file
        self.engine = engine
        self.parameters = parameters
        self.environments = environments
        self.inputs = inputs
        self.outputs = outputs
        self.annotations = annotations
        self.job_retry_num = job_retry_num
        self.description = description
        self.workspace_id = workspace_id
        self.region = region
        self.hang_timeout = hang_timeout
        self.cancel_on_kill = cancel_on_kill
        self.huaweicloud_conn_id = huaweicloud_conn_id
        self._live_job: str | None = None
        self._validate(skip={name for name in self.template_fields if has_template(getattr(self, name))})

    # ------------------------------------------------------------------ Airflow entry points
    def execute(self, context: Any) -> Any:
        self._validate()
        self._polling_before_airflow_3_3()
        self.log.info("%s", self._hook().endpoint_summary())
        self.log.info("%s on %s x%d; checkpoints: %s", self.name, self.flavor_id, self.node_count, self.checkpoint_dir)
        return self._start(context)

    def _conn_id(self) -> str | None:
        return self.huaweicloud_conn_id

    def _polling_before_airflow_3_3(self) -> None:
        """Before Airflow 3.3 the task watches its job in the worker (:data:`~..compat.MODELARTS_TRIGGER`)."""
        from ..compat import MODELARTS_TRIGGER

        if self.deferrable and not MODELARTS_TRIGGER:
            self.log.warning("deferrable=True: this Airflow's triggerer is not known to run the ModelArts trigger "
                             "safely (needs Airflow 3.3): the task watches its job from the worker instead")
            self.deferrable = False

    def _prepare_resume(self) -> None:
        self._polling_before_airflow_3_3()

    def _resumed(self, context: Any, state: RunState, event: Any) -> Any:
        """The trigger's event (:class:`~..supervisor.watch_event.WatchEvent`): the job it saw end or judged failed
        while live, with the observer's memory going on; anything else -> one look here."""
        summary = self._judged_summary(event)
        if summary is None:
            from ..backends.modelarts import read_summary

            summary = read_summary(self._hook(), state.job_name)
        return self._backend().event(summary)

    def _live_resources(self) -> list[Any]:
        from ..backends.modelarts import live_resources

        return live_resources(self._live_job, self.cancel_on_kill)

    # ------------------------------------------------------------------ the shell
    def _make_backend(self) -> Any:
        from ..backends.modelarts import ModelArtsTrainingJobBackend

        return ModelArtsTrainingJobBackend(
            self._hook(), name=self.name, fallbacks=self.resilience_policy.fallbacks, training_job=self._training_job,
            checkpoint_dir=str(self.checkpoint_dir), checkpoint_marker=self.checkpoint_marker,
            hang_timeout=self.hang_timeout, queue_timeout=self.resilience_policy.queue_timeout_seconds,
            poll_interval=self.poll_interval, clock=self._clock)

    def _training_job(self, spec: AttemptSpec, job_name: str) -> dict[str, Any]:
        """The ``Job`` body of one attempt (:func:`~..specs.modelarts.build_training_job`): the operator's job on the
        attempt's fallback, with the attempt's ``RESILIENT_*`` environment."""
        from ..specs.modelarts import build_training_job

        changes = spec.fallback.changes() if spec.fallback else {}
        return build_training_job(
            job_name=job_name, description=self.description, workspace_id=self.workspace_id,
            flavor_id=changes.get("flavor_id", self.flavor_id), node_count=self.node_count,
            pool_id=changes.get("pool_id", self.pool_id), command=self.command, image_url=self.image_url,
            code_dir=self.code_dir, boot_file=self.boot_file, engine=self.engine, parameters=self.parameters,
            environments={**(self.environments or {}), **spec.env}, inputs=self.inputs, outputs=self.outputs,
            annotations=self.annotations, job_retry_num=self.job_retry_num)

    def _recover(self, context: Any, state: RunState) -> RunState:
        """Rebuild the run from this task instance's jobs when the task state store holds none."""
        return self._backend().rebuild(self._task_instance(context), self.rerun_after_success) or state

    def _begin_watch(self, context: Any, state: RunState, job_name: str) -> None:
        self._backend().known_absent = None
        push_links(context, job_name)
        self._live_job = job_name
        if self.deferrable:
            self._defer_watch(state, job_name)

    def _defer_watch(self, state: RunState, job_name: str) -> None:
        """Wait in a :class:`~..triggers.modelarts.ModelArtsTrainingJobTrigger` until the job ends or is judged
        failed."""
        from ..triggers.modelarts import ModelArtsTrainingJobTrigger

        trigger = ModelArtsTrainingJobTrigger(
            job_name, self.poll_interval, self.huaweicloud_conn_id, self.cancel_on_kill,
            hang_timeout=self.hang_timeout, checkpoint_dir=str(self.checkpoint_dir) if self.hang_timeout else None,
            checkpoint_marker=self.checkpoint_marker, queue_timeout=self.resilience_policy.queue_timeout_seconds,
            fire_not_before=self._fire_not_before(), watch=self._watch_memory(state).to_json())
        self.defer(trigger=trigger, method_name="execute_complete")

    def _finish(self, context: Any, state: RunState, job_name: str) -> dict[str, Any]:
        from ..checkpoints import find_latest_checkpoint
        from ..hooks.modelarts import job_id_of
        from ..policy import history_to_json

        self._live_job = None
        checkpoint = None
        try:
            found = find_latest_checkpoint(str(self.checkpoint_dir), marker=self.checkpoint_marker)
            checkpoint = {"uri": found.uri, "step": found.step} if found else None
        except Exception as exc:  # the job succeeded; a missing listing does not change that
            self.log.warning("Could not list the final checkpoint: %s", exc)
        reissues = {a.resource_name: a.platform_restarts for a in state.history
                    if a.resource_name and a.platform_restarts}  # the platform's own, by the jobs' stages
        return {"job_name": job_name, "job_id": job_id_of(job_name), "state": "Completed",
                "platform_reissues": reissues, "checkpoint": checkpoint,
                "attempts": history_to_json(state.history)}

    # ------------------------------------------------------------------ helpers
    def _hook(self) -> Any:
        if not hasattr(self, "_hook_instance"):
            from ..hooks.modelarts import ResilientModelArtsHook

            self._hook_instance = ResilientModelArtsHook(self.huaweicloud_conn_id, self.region, sleep=self._sleep)
        return self._hook_instance

    def _checkpoint_location(self) -> str | None:
        return str(self.checkpoint_dir) if self.checkpoint_dir else None

    def _validate(self, skip: Collection[str] = ()) -> None:
        """Every problem of the arguments at once (but those of ``skip``: templated, judged after rendering).

        Raises:
            AirflowFailException: one line per problem, naming the field, the value and the fix.
        """
        self._refuse(self._problems(), skip)

    def _problems(self) -> list[SpecError]:
        from ..specs.modelarts import validate_training_job

        problems = [*self._common_problems(),
                    *seconds_problems("hang_timeout", self.hang_timeout, optional=True),
                    *flag_problems("cancel_on_kill", self.cancel_on_kill)]
        if self.event_topic is not None:
            problems.append(SpecError("event_topic", "events come from a Google Cloud Logging sink; a ModelArts "
                                                     "training job is watched by polling: drop event_topic"))
        conn = self.huaweicloud_conn_id
        if not isinstance(conn, str) or not conn.strip():
            problems.append(SpecError("huaweicloud_conn_id", f"{conn!r} is not a connection id"))
        try:
            validate_training_job(
                name=self.name, region=self.region, flavor_id=self.flavor_id, node_count=self.node_count,
                command=self.command, image_url=self.image_url, code_dir=self.code_dir, boot_file=self.boot_file,
                engine=self.engine, pool_id=self.pool_id, parameters=self.parameters, environments=self.environments,
                annotations=self.annotations, job_retry_num=self.job_retry_num, checkpoint_dir=self.checkpoint_dir,
                labels=self.labels, fallbacks=self.resilience_policy.fallbacks,
                fallback_problems=self.fallback_problems)
        except SpecError as exc:
            problems.insert(0, exc)
        return problems


__all__ = ["STATE_KEY", "ResilientModelArtsTrainingJobOperator"]
