"""Huawei Cloud ModelArts training jobs through the official SDK (``huaweicloudsdkmodelarts``'s ``ModelArtsClient``),
with an Airflow connection and transient errors retried (tenacity).

The connection (``conn_type`` ``huaweicloud``, default id ``huaweicloud_default``): ``login`` the access key id (AK),
``password`` the secret access key (SK), extra ``region`` (e.g. ``cn-north-4``), ``project_id`` (the region's project
id, IAM "Obtaining a Project ID": https://support.huaweicloud.com/intl/en-us/api-iam/iam_17_0002.html), optionally
``security_token`` (temporary AK/SK, sent as ``X-Security-Token``) and ``endpoint`` (ModelArts' endpoint URL; default
``https://modelarts.<region>.myhuaweicloud.com``, the SDK's own for the region -- the emulator's address switches
every call to the emulator). A missing connection, AK, SK or region fails the task naming it and the fix, before
anything is created.

Retried: HTTP 429 and 5xx (``ServerResponseException``), a connection or read timeout, and ModelArts' own transient
codes (``ModelArts.2799`` too many requests, ``ModelArts.2878`` job status changed); on create, only answers that
cannot have created a job (a connection refused) -- a lost reply is found by the job's name instead
(:meth:`ResilientModelArtsHook.create_training_job`). The SDK's calls block (``requests``): a trigger calls them in a
worker thread. Importing this module imports no Huawei Cloud library.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from functools import cached_property, partial
from typing import Any

log = logging.getLogger(__name__)

DEFAULT_CONN_ID = "huaweicloud_default"
CONN_TYPE = "huaweicloud"
#: ModelArts error codes worth retrying as they are (ModelArts API reference, "Error Codes":
#: https://support.huaweicloud.com/intl/en-us/api-modelarts/modelarts_03_0095.html).
TRANSIENT_CODES = frozenset({"ModelArts.2799", "ModelArts.2878"})
#: Training jobs per page of the tags listing (``list_training_jobs_by_tags``' ``limit``).
LIST_PAGE_SIZE = 100
#: Training jobs per page of the job searches (``training-job-searches``' ``limit``: at most 50).
SEARCH_PAGE_SIZE = 50


def missing_connection_message(conn_id: str) -> str:
    """What a task says when connection ``conn_id`` does not exist: its name and how to create it."""
    env = "AIRFLOW_CONN_" + conn_id.upper()
    return (f"The Airflow connection {conn_id!r} (huaweicloud_conn_id) does not exist. Create it -- `airflow "
            f"connections add {conn_id} --conn-type {CONN_TYPE} --conn-login <AK> --conn-password <SK> --conn-extra "
            f"'{{\"region\": \"cn-north-4\", \"project_id\": \"<project id>\"}}'`, or the environment variable {env} "
            "with the same as JSON.")


async def aget_connection(conn_id: str) -> Any:
    """Airflow connection ``conn_id`` read on the running event loop (``BaseHook.aget_connection``), for a trigger.

    Raises:
        AirflowNotFoundException: there is no such connection (naming it and the fix).
    """
    from airflow.sdk import BaseHook

    from .base import _not_found_exception

    not_found = _not_found_exception()
    try:
        return await BaseHook.aget_connection(conn_id)
    except not_found as exc:
        raise not_found(missing_connection_message(conn_id)) from exc


def is_transient(exc: BaseException, *, creating: bool = False) -> bool:
    """Whether a ModelArts SDK error is worth retrying as is (see the module docstring)."""
    from huaweicloudsdkcore.exceptions import exceptions as hexc

    if isinstance(exc, hexc.HostUnreachableException):  # nothing reached the service
        return True
    if creating:
        return False
    if isinstance(exc, hexc.ConnectionException | hexc.RequestTimeoutException):
        return True
    if isinstance(exc, hexc.ServiceResponseException):
        return exc.status_code == 429 or exc.status_code >= 500 or exc.error_code in TRANSIENT_CODES
    return False


def job_id_of(name: str) -> str:
    """The training job id of a provider resource name ``modelarts/<region>/<project>/<job id>`` (or a bare id)."""
    return name.rsplit("/", 1)[-1]


def resource_name(region: str, project_id: str, job_id: str) -> str:
    """The provider's name for a training job: ``modelarts/<region>/<project_id>/<job id>`` (the run's history and
    links need the region and project beside ModelArts' job id)."""
    return f"modelarts/{region}/{project_id}/{job_id}"


def region_of(name: str) -> str | None:
    """The region of a resource name (:func:`resource_name`); None for a bare id."""
    parts = name.split("/")
    return parts[1] if len(parts) == 4 and parts[0] == "modelarts" else None


class ResilientModelArtsHook:
    """ModelArts' training job calls, with the connection's credentials and retries.

    Args:
        conn_id: the Airflow connection (``huaweicloud``; see the module docstring).
        region: the region of the calls (None: the connection's extra ``region``).
        api_retry_seconds: how long transient errors are retried before they are raised (seconds).
        sleep: how to wait between retries (injected in tests).
        connection: the connection already read (a trigger reads it on the triggerer's event loop with
            :func:`aget_connection`: read in a worker thread, Airflow 3.1's triggerer would get the secret-masking
            message it sends to its supervisor from that thread, which corrupts their channel); None: read it here.

    The connection is read at the first call (or :attr:`settings`), which raises ``AirflowNotFoundException``
    naming it and the fix when it does not exist, and ``ValueError`` naming the missing field.
    """

    def __init__(self, conn_id: str = DEFAULT_CONN_ID, region: str | None = None, *,
                 api_retry_seconds: float = 600.0, sleep: Callable[[float], Any] = time.sleep,
                 connection: Any = None) -> None:
        self.conn_id = conn_id
        self._region = region
        self._connection = connection
        self.api_retry_seconds = api_retry_seconds
        self._sleep = sleep
        self._client: Any = None

    @cached_property
    def settings(self) -> dict[str, Any]:
        """``{"ak", "sk", "security_token", "region", "project_id", "endpoint"}`` from the connection.

        Raises:
            AirflowNotFoundException: the connection does not exist.
            ValueError: its AK, SK, region or project id is missing (naming the field and the fix).
        """
        from airflow.sdk import BaseHook

        from .base import _not_found_exception

        conn = self._connection
        if conn is None:
            not_found = _not_found_exception()
            try:
                conn = BaseHook.get_connection(self.conn_id)
            except not_found as exc:
                raise not_found(missing_connection_message(self.conn_id)) from exc
        extra = dict(conn.extra_dejson or {})
        region = self._region or extra.get("region")
        settings = {"ak": conn.login, "sk": conn.password, "security_token": extra.get("security_token"),
                    "region": region, "project_id": extra.get("project_id"), "endpoint": extra.get("endpoint")}
        missing = [name for name, field in (("ak", "login (the access key id)"),
                                            ("sk", "password (the secret access key)"),
                                            ("region", "extra 'region'"), ("project_id", "extra 'project_id'"))
                   if not settings[name]]
        if missing:
            fields = ", ".join(dict((("ak", "login"), ("sk", "password"), ("region", "extra.region"),
                                     ("project_id", "extra.project_id")))[m] for m in missing)
            raise ValueError(f"The Airflow connection {self.conn_id!r} has no {fields}: set it (login = AK, password "
                             "= SK, extra {\"region\": \"cn-north-4\", \"project_id\": \"<the region's project "
                             "id>\"})")
        return settings

    @property
    def region(self) -> str:
        return str(self.settings["region"])

    @property
    def project_id(self) -> str:
        return str(self.settings["project_id"])

    @property
    def endpoint(self) -> str:
        """The ModelArts endpoint the calls go to: the connection's ``endpoint``, else the region's."""
        return str(self.settings["endpoint"] or f"https://modelarts.{self.region}.myhuaweicloud.com")

    def endpoint_summary(self) -> str:
        """One line for the top of a task's log: where the calls go, with which connection."""
        return f"Using ModelArts at {self.endpoint} (region {self.region}, connection {self.conn_id})"

    def client(self) -> Any:
        """The SDK's ``ModelArtsClient`` for the connection (made once)."""
        if self._client is None:
            from huaweicloudsdkcore.auth.credentials import BasicCredentials
            from huaweicloudsdkcore.http.http_config import HttpConfig
            from huaweicloudsdkmodelarts.v1 import ModelArtsClient

            s = self.settings
            credentials = BasicCredentials(s["ak"], s["sk"], s["project_id"])
            if s["security_token"]:
                credentials = credentials.with_security_token(s["security_token"])
            config = HttpConfig.get_default_config()
            config.timeout = (10, 60)
            self._client = (ModelArtsClient.new_builder().with_credentials(credentials).with_http_config(config)
                            .with_endpoints([self.endpoint]).build())
        return self._client

    def close(self) -> None:
        """Forget the client (its ``requests`` session closes with it). Idempotent."""
        client, self._client = self._client, None
        session = getattr(getattr(client, "_http_client", None), "_session", None)
        if session is not None:
            session.close()

    def _retrying(self, *, creating: bool = False) -> Any:
        from tenacity import Retrying, retry_if_exception, stop_after_delay, wait_exponential_jitter

        return Retrying(retry=retry_if_exception(lambda e: is_transient(e, creating=creating)),
                        wait=wait_exponential_jitter(initial=1, max=60), stop=stop_after_delay(self.api_retry_seconds),
                        sleep=self._sleep, reraise=True,
                        before_sleep=lambda s: log.warning("ModelArts API error, retrying: %s",
                                                           s.outcome.exception() if s.outcome else None))

    def call(self, fn: Callable[[Any], Any], *, creating: bool = False) -> Any:
        """``fn(client)`` with transient errors retried (:func:`is_transient`)."""
        for attempt in self._retrying(creating=creating):
            with attempt:
                return fn(self.client())
        raise AssertionError("unreachable")  # pragma: no cover

    # ------------------------------------------------------------------ training jobs
    def create_training_job(self, body: Mapping[str, Any]) -> Any:
        """POST training-jobs with ``body`` (the ``Job`` JSON, :func:`~..specs.modelarts.build_training_job`); the
        created job (``CreateTrainingJobResponse``). A call whose reply may have been lost is not retried here: the
        caller finds the job by its name (:meth:`find_by_name`).

        Raises:
            huaweicloudsdkcore.exceptions.exceptions.SdkException: the call was refused or failed.
        """
        from huaweicloudsdkmodelarts.v1 import CreateTrainingJobRequest

        request = CreateTrainingJobRequest(body=dict(body))  # the SDK serializes a dict body as it is
        return self.call(lambda c: c.create_training_job(request), creating=True)

    def get_training_job(self, job_id: str) -> Any:
        """GET training-jobs/{id} (``ShowTrainingJobDetailsResponse``)."""
        from huaweicloudsdkmodelarts.v1 import ShowTrainingJobDetailsRequest

        return self.call(lambda c: c.show_training_job_details(ShowTrainingJobDetailsRequest(job_id_of(job_id))))

    def stop_training_job(self, job_id: str) -> None:
        """POST training-jobs/{id}/actions ``{"action_type": "terminate"}``; a job already over (``ModelArts.2796``,
        HTTP 409) is fine."""
        from huaweicloudsdkcore.exceptions import exceptions as hexc
        from huaweicloudsdkmodelarts.v1 import JobActionType, StopTrainingJobRequest

        from ..policy.codes import MODELARTS_NOT_TERMINABLE

        request = StopTrainingJobRequest(job_id_of(job_id), JobActionType(action_type="terminate"))
        try:
            self.call(lambda c: c.stop_training_job(request))
        except hexc.ServiceResponseException as exc:
            if exc.error_code != MODELARTS_NOT_TERMINABLE:
                raise

    def tag_training_job(self, job_id: str, tags: Mapping[str, str]) -> None:
        """POST modelarts-training-job/{id}/tags/create: ``tags`` as TMS tags (what the provider lists its jobs by)."""
        from huaweicloudsdkmodelarts.v1 import CreateTmsTagsRequest, CreateTrainJobTagsRequest, TmsTag

        body = CreateTmsTagsRequest(tags=[TmsTag(key=k, value=v) for k, v in tags.items()])
        self.call(lambda c: c.create_train_job_tags(CreateTrainJobTagsRequest(job_id_of(job_id), body)))

    def _resources(self, **filters: Any) -> list[Any]:
        """Every training job the TMS filter (``list_training_jobs_by_tags``) returns, page by page."""
        from huaweicloudsdkmodelarts.v1 import ListTrainingJobsByTagsRequest, ResourceInstancesFilterReq

        found: list[Any] = []
        offset = 0
        while True:
            request = ListTrainingJobsByTagsRequest(limit=LIST_PAGE_SIZE, offset=offset,
                                                    body=ResourceInstancesFilterReq(**filters))
            page = self.call(partial(_list_by_tags, request=request))
            items = list(page.resources or [])
            found.extend(items)
            offset += len(items)
            if not items or offset >= (page.total_count or 0):
                return found

    def find_by_name(self, name: str) -> list[Any]:
        """The training jobs named ``name`` (a ``resource_name`` match, then an exact comparison), newest details
        each (``ShowTrainingJobDetailsResponse``)."""
        from huaweicloudsdkmodelarts.v1 import Match

        hits = self._resources(matches=[Match(key="resource_name", value=name)])
        return [self.get_training_job(r.resource_id) for r in hits if r.resource_name == name]

    def find_by_tags(self, tags: Mapping[str, str]) -> list[Any]:
        """The training jobs carrying every tag of ``tags`` (``{key: value}``; an empty value: any), as TMS resource
        instances (``resource_id``, ``resource_name``, ``tags``)."""
        from huaweicloudsdkmodelarts.v1 import MutiValueTag

        return self._resources(tags=[MutiValueTag(key=k, values=[v] if v else []) for k, v in tags.items()])

    def list_live_jobs(self, tag_key: str) -> list[Any]:
        """The live training jobs tagged ``tag_key`` (the provider's: ``resilient-attempt``; phase Creating, Pending,
        Running or Terminating), with their status, from the job searches (``training-job-searches``, pages of
        :data:`SEARCH_PAGE_SIZE`): what a shared poller reads once per cycle for every watched job."""
        from huaweicloudsdkmodelarts.v1 import Filter, JobSearches, ListTagFilter, ListTrainingJobsRequest

        from ..policy.job_states import MODELARTS_TERMINAL_PHASES

        live = sorted({"Creating", "Pending", "Running", "Terminating"} - MODELARTS_TERMINAL_PHASES)
        found: list[Any] = []
        page = 0
        while True:
            body = JobSearches(offset=page, limit=SEARCH_PAGE_SIZE, tags=[ListTagFilter(key=tag_key, values=[])],
                               filters=[Filter(key="phase", operator="in", value=live)])
            reply = self.call(partial(_search, request=ListTrainingJobsRequest(body=body)))
            items = list(reply.items or [])
            found.extend(items)
            page += 1
            if len(items) < SEARCH_PAGE_SIZE:
                return found

    def list_events(self, job_id: str, *, level: str | None = None, limit: int = 50) -> list[Any]:
        """The job's newest events (``Event``: ``time``, ``level``, ``message``, ``source``), newest first."""
        from huaweicloudsdkmodelarts.v1 import ListTrainingJobEventsRequest

        request = ListTrainingJobEventsRequest(job_id_of(job_id), limit=limit, order="desc", level=level)
        return list(self.call(lambda c: c.list_training_job_events(request)).events or [])

    def list_stages(self, job_id: str) -> list[Any]:
        """The job's stage records (``StageRecord``: ``record_order``, ``stages``), one per run of the job."""
        from huaweicloudsdkmodelarts.v1 import ListTrainingJobStagesRequest

        return list(self.call(lambda c: c.list_training_job_stages(
            ListTrainingJobStagesRequest(job_id_of(job_id)))).running_records or [])

    def wait_for_end(self, job_id: str, *, timeout: float, interval: float,
                     clock: Callable[[], float] = time.monotonic) -> Any:
        """Read the job every ``interval`` seconds until its phase is terminal; the job.

        Raises:
            TimeoutError: still not terminal after ``timeout`` seconds, naming its phase.
        """
        from ..policy.job_states import MODELARTS_TERMINAL_PHASES

        deadline = clock() + timeout
        while True:
            job = self.get_training_job(job_id)
            if job.status.phase in MODELARTS_TERMINAL_PHASES:
                return job
            if clock() > deadline:
                raise TimeoutError(f"training job {job_id} is still {job.status.phase} after {timeout:.0f} s")
            self._sleep(interval)


def _search(client: Any, *, request: Any) -> Any:
    return client.list_training_jobs(request)


def _list_by_tags(client: Any, *, request: Any) -> Any:
    return client.list_training_jobs_by_tags(request)


__all__ = [
    "CONN_TYPE",
    "DEFAULT_CONN_ID",
    "ResilientModelArtsHook",
    "aget_connection",
    "is_transient",
    "job_id_of",
    "missing_connection_message",
    "region_of",
    "resource_name",
]
