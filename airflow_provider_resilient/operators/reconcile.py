"""``ResilientReconcileOperator``: release the jobs and nodes whose task instance no longer runs them.

Airflow 3.3 cleans up after a user's action only through ``on_kill`` -- the operator's in its worker, the
trigger's in the triggerer -- and calls neither when a task is marked failed or success before its trigger
has started or while no triggerer runs, when its DAG run is deleted, or when its worker is killed with
SIGKILL and the task is not retried. This operator closes those gaps. Schedule it in a small DAG of its
own: :func:`~..reconcile.reconcile_dag` makes that DAG in one line of your DAG folder, from the ``[resilient]``
section of Airflow's configuration; each run:

1. lists the live CustomJobs of ``project_id`` in ``regions`` that carry the provider's
   ``resilient-attempt`` label, the TPU nodes in ``zones`` that carry it, and -- with a
   ``huaweicloud_conn_id`` -- the live ModelArts training jobs of that connection's region and project that
   carry it as a tag (Creating, Pending, Running or Terminating: not yet ended);
2. reads, from each, the task instance that created it (:func:`..supervisor.reconcile.owner_from`);
3. asks Airflow for those task instances' states (``RuntimeTaskInstance.get_task_states``, one call per
   DAG and run: a task may not read the metadata database itself);
4. when that finds anything to release, lists the live resources again and judges that listing by the same
   states: a job listed live just before it ended -- it succeeded, then its task finished -- is not released
   (which would be a cancel of a job already ended); what is still live after its task instance finished is left
   behind for sure;
5. releases what :func:`..supervisor.reconcile.releases` says -- cancels the job, deletes the node (its
   queued resource with it), stops the ModelArts training job -- through each platform's ``release_all``, and
   logs one line per resource with the reason.

So a resource outlives its task instance by at most the DAG's schedule interval plus one run of this task (the
documentation's "Reconciler" page states the bound for the example DAG). It needs no triggerer. Resources created
before owners were recorded, or by hand, name no task instance: they are listed in the result and left alone, as
are nodes kept with ``keep_node``.

Returns (XCom ``return_value``): ``{"released": [{"name", "why"}], "kept": n, "unowned": [names]}``.

Importing this module imports no Google library.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from airflow.sdk import BaseOperator

from ..supervisor.reconcile import OwnedResource, Release, owner_states, releases

#: ``get_task_states(dag_id, run_ids)`` -> ``{run_id: {task_key: state}}``, as
#: ``RuntimeTaskInstance.get_task_states`` answers (``task_key``: ``task_id``, or ``task_id_<map_index>``).
TaskStates = Callable[[str, list[str]], Mapping[str, Mapping[str, Any]]]


class ResilientReconcileOperator(BaseOperator):
    """Release the CustomJobs, TPU nodes and ModelArts training jobs whose task instance has finished or is gone
    (module docstring).

    Args:
        project_id: Google Cloud project whose CustomJobs and nodes are checked (needed with ``regions`` or
            ``zones``).
        regions: Vertex AI regions to list CustomJobs in (include the operators' fallback regions).
        zones: Cloud TPU zones to list nodes in (include the fallback zones).
        huaweicloud_conn_id: an Airflow connection of ``conn_type`` ``huaweicloud`` (as the ModelArts operator's):
            its region's and project's training jobs are checked; None (default): no ModelArts.
        dry_run: log what would be released, release nothing.
        gcp_conn_id, impersonation_chain: as for the training operators.

    Raises:
        ValueError: neither ``regions``, ``zones`` nor ``huaweicloud_conn_id``, or regions or zones without a
            ``project_id``.
        AirflowException: (from the hooks) when listing or releasing fails past the API retries; the next
            scheduled run tries again.
    """

    template_fields: Sequence[str] = ("project_id", "regions", "zones", "huaweicloud_conn_id")
    ui_color = "#e8e8e8"

    def __init__(self, *, project_id: str | None = None, regions: Sequence[str] = (), zones: Sequence[str] = (),
                 huaweicloud_conn_id: str | None = None, dry_run: bool = False,
                 gcp_conn_id: str | None = "google_cloud_default",
                 impersonation_chain: str | Sequence[str] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not regions and not zones and not huaweicloud_conn_id:
            raise ValueError("ResilientReconcileOperator: give regions (CustomJobs) and/or zones (TPU nodes) with a "
                             "project_id, and/or a huaweicloud_conn_id (ModelArts training jobs)")
        if (regions or zones) and not project_id:
            raise ValueError("ResilientReconcileOperator: regions and zones need the project_id they are in")
        self.project_id = project_id
        self.regions = list(regions)
        self.zones = list(zones)
        self.huaweicloud_conn_id = huaweicloud_conn_id
        self.dry_run = dry_run
        self.gcp_conn_id = gcp_conn_id
        self.impersonation_chain = impersonation_chain

    def execute(self, context: Any) -> dict[str, Any]:
        if self.regions or self.zones:
            self.log.info("%s", (self._vertex() if self.regions else self._tpu()).endpoint_summary())
        if self.huaweicloud_conn_id:
            self.log.info("%s", self._modelarts().endpoint_summary())
        ti = context["ti"]
        return self.reconcile(lambda dag_id, run_ids: ti.get_task_states(dag_id=dag_id, run_ids=run_ids))

    def reconcile(self, task_states: TaskStates) -> dict[str, Any]:
        """One sweep (the module docstring's steps); ``task_states`` answers as
        ``RuntimeTaskInstance.get_task_states``."""
        resources = self._live_resources()
        owners = {r.owner for r in resources if r.owner is not None}
        states = owner_states(owners, task_states)
        todo = releases(resources, states)
        if todo:
            # Judged again on a listing made after the states were read: a job listed live just before it ended
            # (it succeeded, then its task finished) is gone from it -- a finished task never leaves a live job.
            resources = self._live_resources()
            todo = releases(resources, states)
        for release in todo:
            self.log.warning("%s %s: %s", "Would release" if self.dry_run else "Releasing", release.resource.name,
                             release.why)
            if not self.dry_run:
                self._release(release)
        unowned = [r.name for r in resources if r.owner is None]
        if unowned:
            self.log.info("Left alone (they name no task instance): %s", ", ".join(unowned))
        self.log.info("Reconciled %d live resource(s): %d released, %d unowned", len(resources), len(todo),
                      len(unowned))
        return {"released": [{"name": r.resource.name, "why": r.why} for r in todo],
                "kept": len(resources) - len(todo), "unowned": unowned}

    # ------------------------------------------------------------------ the shell
    def _live_resources(self) -> list[OwnedResource]:
        found: list[OwnedResource] = []
        if self.regions:
            from ..backends.vertex import live_jobs

            found += live_jobs(self._vertex(), str(self.project_id), self.regions)
        if self.zones:
            from ..backends.tpu import live_nodes

            found += live_nodes(self._tpu(), str(self.project_id), self.zones)
        if self.huaweicloud_conn_id:
            from ..backends.modelarts import live_jobs

            found += live_jobs(self._modelarts())
        return found

    def _release(self, release: Release) -> None:
        """Carry ``release`` out through its platform's backend (the way the operators and triggers release
        too): cancel the job, stop the ModelArts training job, or request the node's deletion (a queued
        resource's takes its node) -- none waits."""
        from ..backends import modelarts, vertex

        if release.resource.kind in vertex.JOB_KINDS:  # a CustomJob or a HyperparameterTuningJob
            vertex.release_all(self._vertex(), [release])
        elif release.resource.kind == modelarts.JOB_KIND:
            modelarts.release_all(self._modelarts(), [release])
        else:
            from ..backends import tpu

            tpu.release_all(self._tpu(), [release], wait_seconds=None)

    def _vertex(self) -> Any:
        if not hasattr(self, "_vertex_hook"):
            from ..hooks.vertex_ai import ResilientVertexAIHook

            self._vertex_hook = ResilientVertexAIHook(self.gcp_conn_id, self.impersonation_chain)
        return self._vertex_hook

    def _modelarts(self) -> Any:
        if not hasattr(self, "_modelarts_hook"):
            from ..hooks.modelarts import ResilientModelArtsHook

            self._modelarts_hook = ResilientModelArtsHook(str(self.huaweicloud_conn_id))
        return self._modelarts_hook

    def _tpu(self) -> Any:
        if not hasattr(self, "_tpu_hook"):
            from ..hooks.tpu import ResilientTPUHook

            self._tpu_hook = ResilientTPUHook(self.gcp_conn_id, self.impersonation_chain)
        return self._tpu_hook


__all__ = ["ResilientReconcileOperator", "owner_states"]
