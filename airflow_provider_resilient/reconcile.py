"""The reconciler as one line of a DAG folder: :func:`reconcile_dag` makes the DAG that runs
:class:`~.operators.reconcile.ResilientReconcileOperator` on a schedule, for the projects, regions and zones and the
Huawei Cloud connections that Airflow's configuration names.

A task's ``on_kill`` releases its job or node when Airflow calls it; Airflow calls none when a deferred task is
marked failed or success while its trigger is not running, when a DAG run is deleted, or when a worker is killed
and the task is not retried. The reconciler releases what such a task left behind, within its schedule interval
plus one run. Put this file in your DAG folder::

    # dags/resilient_reconcile.py
    from airflow_provider_resilient.reconcile import reconcile_dag

    reconcile_dag()

and configure it in the ``[resilient]`` section of ``airflow.cfg`` (or with ``AIRFLOW__RESILIENT__*``
environment variables)::

    [resilient]
    reconcile_projects = my-project
    reconcile_regions = us-central1, europe-west4
    reconcile_zones = us-central2-b
    reconcile_huaweicloud_conn_ids = huaweicloud_default
    reconcile_schedule = 300

List every region and zone your resilient tasks use, fallbacks included, and the Huawei Cloud connection of each
ModelArts region and project they use (one connection names one region and project). Either the Google Cloud
options or the Huawei Cloud one may be left empty. Arguments of :func:`reconcile_dag` win over the configuration.

Importing this module imports neither Airflow nor a Google library; :func:`reconcile_dag` imports Airflow.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

#: The ``[resilient]`` section of Airflow's configuration and its options (see :func:`reconcile_dag`).
SECTION = "resilient"
OPTIONS = ("reconcile_projects", "reconcile_regions", "reconcile_zones", "reconcile_huaweicloud_conn_ids",
           "reconcile_schedule")
DEFAULT_DAG_ID = "resilient_reconcile"
#: Runs of the reconciler's DAG at once. More than one: a run whose task was lost with a Celery worker killed under
#: it stays running until Airflow gives the task up (``[scheduler] task_queued_timeout``, 10 minutes by default) --
#: with one run at a time it would hold every later run back that long, and a leak with it (the stack tests' SIGKILLed
#: Celery worker did). Two runs that meet release the same job or node twice, which is harmless: a release of an
#: ended job or a deleted node is a no-op.
MAX_ACTIVE_RUNS = 3
#: How often the reconciler runs when neither the argument nor ``reconcile_schedule`` says (seconds).
DEFAULT_SCHEDULE_SECONDS = 300.0

_SEPARATORS = re.compile(r"[\s,]+")


def split_list(value: str | Sequence[str] | None) -> list[str]:
    """A configuration list as a list: ``"a, b c"`` -> ``["a", "b", "c"]`` (commas and/or whitespace); a sequence
    of strings as given, without empty items; None -> ``[]``."""
    if value is None:
        return []
    items = _SEPARATORS.split(value) if isinstance(value, str) else [str(v).strip() for v in value]
    return [item for item in items if item]


def parse_schedule(value: str | float | timedelta | None) -> Any:
    """A ``reconcile_schedule``: a number of seconds (``300``, ``"300"``, a ``timedelta``) -> a ``timedelta``;
    anything else (a cron expression such as ``"*/5 * * * *"``, a preset such as ``"@hourly"``) is Airflow's
    ``schedule`` as given. None or empty: :data:`DEFAULT_SCHEDULE_SECONDS`.

    Raises:
        ValueError: a number of seconds that is not > 0.
    """
    if value is None or (isinstance(value, str) and not value.strip()):
        return timedelta(seconds=DEFAULT_SCHEDULE_SECONDS)
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    else:
        text = str(value).strip()
        try:
            seconds = float(text)
        except ValueError:
            return text  # a cron expression or a preset: Airflow validates it with the DAG
    if not seconds > 0:
        raise ValueError(f"reconcile_schedule must be > 0 seconds, got {value!r}")
    return timedelta(seconds=seconds)


def _conf_get(option: str) -> str | None:
    try:
        from airflow.sdk import conf
    except ImportError:  # pragma: no cover - Airflow releases whose task SDK has no conf
        from airflow.configuration import conf  # type: ignore[no-redef]
    value = conf.get(SECTION, option, fallback=None)
    return None if value is None else str(value)


def reconcile_settings(*, projects: str | Sequence[str] | None = None, regions: str | Sequence[str] | None = None,
                       zones: str | Sequence[str] | None = None,
                       huaweicloud_conn_ids: str | Sequence[str] | None = None,
                       schedule: str | float | timedelta | None = None) -> dict[str, Any]:
    """What :func:`reconcile_dag` builds from: each argument given, else its ``[resilient]`` option.

    Returns:
        ``{"projects": [...], "regions": [...], "zones": [...], "huaweicloud_conn_ids": [...],
        "schedule": timedelta | str}``.

    Raises:
        ValueError: no project, or neither a region nor a zone, from either source (the message names the options
            and the arguments) -- unless Huawei Cloud connections are given and no Google Cloud option is --, or a
            schedule of seconds that is not > 0.
    """
    got = {"projects": split_list(projects if projects is not None else _conf_get("reconcile_projects")),
           "regions": split_list(regions if regions is not None else _conf_get("reconcile_regions")),
           "zones": split_list(zones if zones is not None else _conf_get("reconcile_zones")),
           "huaweicloud_conn_ids": split_list(huaweicloud_conn_ids if huaweicloud_conn_ids is not None
                                              else _conf_get("reconcile_huaweicloud_conn_ids"))}
    google = got["projects"] or got["regions"] or got["zones"]
    if (google or not got["huaweicloud_conn_ids"]) and (not got["projects"] or not (got["regions"] or got["zones"])):
        missing = "project" if not got["projects"] else "region or zone"
        raise ValueError(
            f"reconcile_dag: no {missing} to reconcile. Name the Google Cloud projects and the Vertex AI regions "
            f"and/or Cloud TPU zones your resilient tasks use (fallbacks included) in Airflow's configuration, "
            f"section [{SECTION}]: reconcile_projects, reconcile_regions, reconcile_zones (or the environment "
            "variables AIRFLOW__RESILIENT__RECONCILE_PROJECTS, ..._REGIONS, ..._ZONES), or pass "
            "reconcile_dag(projects=[...], regions=[...], zones=[...]); for Huawei Cloud ModelArts alone, name its "
            "connections in reconcile_huaweicloud_conn_ids (reconcile_dag(huaweicloud_conn_ids=[...])). "
            f"Found: projects {got['projects']}, regions {got['regions']}, zones {got['zones']}, "
            f"huaweicloud_conn_ids {got['huaweicloud_conn_ids']}.")
    got["schedule"] = parse_schedule(schedule if schedule is not None else _conf_get("reconcile_schedule"))
    return got


def reconcile_dag(*, projects: str | Sequence[str] | None = None, regions: str | Sequence[str] | None = None,
                  zones: str | Sequence[str] | None = None, huaweicloud_conn_ids: str | Sequence[str] | None = None,
                  schedule: str | float | timedelta | None = None,
                  dag_id: str = DEFAULT_DAG_ID, dry_run: bool = False,
                  gcp_conn_id: str | None = "google_cloud_default",
                  impersonation_chain: str | Sequence[str] | None = None, **dag_kwargs: Any) -> Any:
    """The reconciler's DAG (module docstring): one ``ResilientReconcileOperator`` task per project
    (``release_orphans``, or ``release_orphans_<project>`` for several) and one per Huawei Cloud connection
    (``release_orphans_modelarts``, or ``release_orphans_modelarts_<conn id>`` for several), every ``schedule``,
    up to :data:`MAX_ACTIVE_RUNS` runs at once, no catch-up, no task retries (the next scheduled run is the retry), a
    run timeout of 10 minutes. Call it at the top level of a file in the DAG folder; the DAG is registered there
    (its file is the caller's).

    Args:
        projects: Google Cloud project ids (a list, or one string of ids separated by commas or spaces); default:
            ``[resilient] reconcile_projects``.
        regions: Vertex AI regions to list CustomJobs and tuning jobs in; default ``[resilient] reconcile_regions``.
        zones: Cloud TPU zones to list nodes in; default ``[resilient] reconcile_zones``.
        huaweicloud_conn_ids: Airflow connections (``conn_type`` ``huaweicloud``) whose region's and project's
            ModelArts training jobs are checked; default ``[resilient] reconcile_huaweicloud_conn_ids`` (empty: no
            ModelArts).
        schedule: seconds between runs (a number or a ``timedelta``), or a cron expression / preset; default
            ``[resilient] reconcile_schedule``, else :data:`DEFAULT_SCHEDULE_SECONDS`.
        dag_id: the DAG's id.
        dry_run: log what would be released, release nothing.
        gcp_conn_id, impersonation_chain: as for the training operators (``gcp_conn_id=None``: Application Default
            Credentials).
        dag_kwargs: more arguments of Airflow's ``DAG`` (``tags``, ``default_args``, ``start_date`` ...).

    Returns:
        the ``airflow.sdk.DAG``.

    Raises:
        ValueError: at DAG parse time, when no project, or neither a region nor a zone, is given or configured
            and no Huawei Cloud connection either (the message says where to set them), or a schedule of seconds is
            not > 0.
    """
    from airflow.sdk import DAG

    from .operators.reconcile import ResilientReconcileOperator

    settings = reconcile_settings(projects=projects, regions=regions, zones=zones,
                                  huaweicloud_conn_ids=huaweicloud_conn_ids, schedule=schedule)
    caller = sys._getframe(1).f_code.co_filename  # the DAG's file is the user's, not this module
    options: dict[str, Any] = {"catchup": False, "max_active_runs": MAX_ACTIVE_RUNS,
                               "tags": ["resilient", "maintenance"],
                               "dagrun_timeout": timedelta(minutes=10),
                               "doc_md": "Releases the Vertex AI jobs, Cloud TPU nodes and ModelArts training jobs "
                                         "whose task instance has finished or is gone "
                                         "(airflow_provider_resilient.reconcile)."}
    options.update(dag_kwargs)
    with DAG(dag_id=dag_id, schedule=settings["schedule"], **options) as dag:
        several = len(settings["projects"]) > 1
        for project in settings["projects"]:
            ResilientReconcileOperator(
                task_id=f"release_orphans_{project}" if several else "release_orphans", project_id=project,
                regions=settings["regions"], zones=settings["zones"], dry_run=dry_run, gcp_conn_id=gcp_conn_id,
                impersonation_chain=impersonation_chain, retries=0)
        several = len(settings["huaweicloud_conn_ids"]) > 1
        for conn_id in settings["huaweicloud_conn_ids"]:
            ResilientReconcileOperator(
                task_id=f"release_orphans_modelarts_{conn_id}" if several else "release_orphans_modelarts",
                huaweicloud_conn_id=conn_id, dry_run=dry_run, retries=0)
    dag.fileloc = caller
    return dag


__all__ = ["DEFAULT_DAG_ID", "DEFAULT_SCHEDULE_SECONDS", "MAX_ACTIVE_RUNS", "OPTIONS", "SECTION", "parse_schedule",
           "reconcile_dag", "reconcile_settings", "split_list"]
