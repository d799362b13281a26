"""Vertex AI JobService hooks, sync and async: CustomJob calls with transient API errors retried
(:mod:`.base`: credentials, the emulator override, retries). A create call is retried only after checking,
by the attempt's labels, that the first call did not create the job after all: a lost reply must not become a
duplicate job.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from ..clients import vertex_job_async_client, vertex_job_client
from ..policy.job_states import TERMINAL_STATES
from .base import AsyncGoogleApiHook, GoogleApiHook

log = logging.getLogger(__name__)


#: What the async Vertex AI hook imports off the event loop (hooks/loading.py).
VERTEX_ASYNC_MODULES = ("google.api_core.exceptions", "tenacity",
                        "google.cloud.aiplatform_v1.services.job_service.transports.grpc_asyncio")
#: The chief replica of a CustomJob: worker pool 0's replica 0, as Cloud Logging's ``task_name`` names it.
CHIEF_TASK = "workerpool0-0"
#: How many of the newest matching log lines :meth:`ResilientVertexAIHook.logged_progress` reads in its one call
#: (ListLogEntries' largest page): a reader that asks for the lines since its last read gets all of them unless the
#: workload logged more steps in between, and then the newest.
STEP_LINES_READ = 1000
JOB_NAME_RE = re.compile(r"^projects/(?P<project>[^/]+)/locations/(?P<region>[^/]+)/customJobs/(?P<id>[^/]+)$")
#: A HyperparameterTuningJob's resource name.
TUNING_JOB_NAME_RE = re.compile(
    r"^projects/(?P<project>[^/]+)/locations/(?P<region>[^/]+)/hyperparameterTuningJobs/(?P<id>[^/]+)$")


def is_tuning_job(name: str) -> bool:
    """Whether ``name`` is a HyperparameterTuningJob's resource name (else a CustomJob's)."""
    return bool(TUNING_JOB_NAME_RE.match(name))


def region_of(job_name: str) -> str:
    """``us-central1`` of ``projects/p/locations/us-central1/customJobs/123`` (or of a HyperparameterTuningJob's
    name, ``.../hyperparameterTuningJobs/123``).

    Raises:
        ValueError: when ``job_name`` is neither a CustomJob's nor a HyperparameterTuningJob's resource name.
    """
    match = JOB_NAME_RE.match(job_name) or TUNING_JOB_NAME_RE.match(job_name)
    if not match:
        raise ValueError(f"{job_name!r} is not a CustomJob name (projects/P/locations/R/customJobs/ID)")
    return match["region"]


class ResilientVertexAIHook(GoogleApiHook):
    """Vertex AI CustomJob and HyperparameterTuningJob calls with retries of transient errors (arguments: see
    :class:`GoogleApiHook`). :meth:`get_job`, :meth:`cancel_job` and :meth:`wait_for_end` take either kind's
    resource name."""

    def client(self, region: str) -> Any:
        """A cached ``JobServiceClient`` for ``region``."""
        if region not in self._clients:
            self._clients[region] = vertex_job_client(region, credentials=self.credentials, emulator=self.emulator)
        return self._clients[region]

    # ------------------------------------------------------------------ calls
    def create_custom_job(self, project_id: str, region: str, custom_job: dict[str, Any],
                          find_filter: str | None = None) -> Any:
        """Create a CustomJob. With ``find_filter`` (the attempt's labels), a retry after a transient error
        first looks for the job the lost call may have created, and returns it instead of creating another."""
        return self._create_once(
            lambda: self.client(region).create_custom_job(parent=f"projects/{project_id}/locations/{region}",
                                                          custom_job=custom_job, retry=None),
            (lambda: self.list_custom_jobs(project_id, region, find_filter)) if find_filter else None)

    def _create_once(self, create: Callable[[], Any], find: Callable[[], list[Any]] | None) -> Any:
        """``create()`` with the hook's retries; before each retry, ``find()`` (the attempt's jobs by its labels)
        returns the job a lost reply created, if there is one, instead of creating another."""
        first = True
        for attempt in self._retrying(creating=True):
            with attempt:
                if not first and find is not None:
                    existing = find()
                    if existing:
                        log.info("Found %s created by an earlier call whose reply was lost", existing[0].name)
                        return existing[0]
                first = False
                return create()
        raise AssertionError("unreachable")  # pragma: no cover

    def get_custom_job(self, name: str) -> Any:
        for attempt in self._retrying():
            with attempt:
                return self.client(region_of(name)).get_custom_job(name=name, retry=None)
        raise AssertionError("unreachable")  # pragma: no cover

    def list_custom_jobs(self, project_id: str, region: str, filter_text: str) -> list[Any]:
        parent = f"projects/{project_id}/locations/{region}"
        for attempt in self._retrying():
            with attempt:
                pager = self.client(region).list_custom_jobs(request={"parent": parent, "filter": filter_text},
                                                             retry=None)
                return list(pager)
        raise AssertionError("unreachable")  # pragma: no cover

    # ------------------------------------------------------------------ HyperparameterTuningJob calls
    def create_hyperparameter_tuning_job(self, project_id: str, region: str, tuning_job: dict[str, Any],
                                         find_filter: str | None = None) -> Any:
        """Create a HyperparameterTuningJob; a retry after a transient error first looks for the job the lost
        call may have created (``find_filter``: the attempt's labels), as :meth:`create_custom_job` does."""
        return self._create_once(
            lambda: self.client(region).create_hyperparameter_tuning_job(
                parent=f"projects/{project_id}/locations/{region}", hyperparameter_tuning_job=tuning_job, retry=None),
            (lambda: self.list_hyperparameter_tuning_jobs(project_id, region, find_filter)) if find_filter else None)

    def get_hyperparameter_tuning_job(self, name: str) -> Any:
        for attempt in self._retrying():
            with attempt:
                return self.client(region_of(name)).get_hyperparameter_tuning_job(name=name, retry=None)
        raise AssertionError("unreachable")  # pragma: no cover

    def list_hyperparameter_tuning_jobs(self, project_id: str, region: str, filter_text: str) -> list[Any]:
        """Every HyperparameterTuningJob of ``projects/project_id/locations/region`` matching ``filter_text``,
        trials included (the listing returns whole jobs)."""
        parent = f"projects/{project_id}/locations/{region}"
        for attempt in self._retrying():
            with attempt:
                pager = self.client(region).list_hyperparameter_tuning_jobs(
                    request={"parent": parent, "filter": filter_text}, retry=None)
                return list(pager)
        raise AssertionError("unreachable")  # pragma: no cover

    def get_job(self, name: str) -> Any:
        """GetCustomJob or GetHyperparameterTuningJob, by the kind of ``name``."""
        return self.get_hyperparameter_tuning_job(name) if is_tuning_job(name) else self.get_custom_job(name)

    def cancel_job(self, name: str) -> None:
        """Cancel a CustomJob or a HyperparameterTuningJob (by the kind of ``name``); one already in a terminal
        state (FAILED_PRECONDITION) or gone is fine."""
        from google.api_core import exceptions as gexc

        for attempt in self._retrying():
            with attempt:
                try:
                    if is_tuning_job(name):
                        self.client(region_of(name)).cancel_hyperparameter_tuning_job(name=name, retry=None)
                    else:
                        self.client(region_of(name)).cancel_custom_job(name=name, retry=None)
                except (gexc.FailedPrecondition, gexc.NotFound) as exc:
                    log.info("Not cancelling %s: %s", name, exc.message)
                return

    def wait_for_end(self, name: str, *, timeout: float, interval: float) -> Any:
        """Read ``name`` (a CustomJob or a HyperparameterTuningJob) every ``interval`` seconds until its state is
        terminal; the terminal job.

        Raises:
            concurrent.futures.TimeoutError: it is still not terminal after ``timeout`` seconds.
        """
        from concurrent.futures import TimeoutError as FutureTimeout

        deadline = time.monotonic() + timeout
        while True:
            job = self.get_job(name)
            if job.state.name in TERMINAL_STATES:
                return job
            if time.monotonic() > deadline:
                raise FutureTimeout(f"{name} is still {job.state.name} {timeout:.0f} s after it was cancelled")
            log.info("Waiting for %s to end (%s)", name, job.state.name)
            self._sleep(interval)

    def logging(self) -> Any:
        """A cached Cloud Logging ``LoggingServiceV2Client`` (the job's replica output is there)."""
        if "logging" not in self._clients:
            from ..logging_clients import logging_gapic_client

            self._clients["logging"] = logging_gapic_client(credentials=self.credentials, emulator=self.emulator)
        return self._clients["logging"]

    def logged_progress(self, job_name: str, since: datetime, task_name: str = CHIEF_TASK,
                        timeout: float = 30.0) -> tuple[list[tuple[float, int, bool]], list[float]]:
        """What CustomJob ``job_name`` logged since ``since`` (an aware datetime: the job's creation) that tells its
        progress, as ``(lines, restarts)``, both oldest first:

        * ``lines``: the ``step N`` lines (:data:`~..worker.protocol.DEFAULT_STEP_PATTERN`) and ``start step N``
          lines (:data:`~..worker.protocol.DEFAULT_START_PATTERN`: a process started, resuming from step N) of
          replica ``task_name``, as ``(time, step, start)``: ``time`` the entry's timestamp (epoch seconds),
          ``start`` True for a start line;
        * ``restarts``: the timestamps (epoch seconds) of the entries that begin a restart while the job stays
          RUNNING: the Vertex AI service's saying a replica -- any replica -- exited with a non-zero status (``The
          replica workerpool0-0 exited with a non-zero status of N``: restarted in place, or the job retried), and
          replica ``task_name``'s worker runner starting the command (:data:`~..worker.protocol.RUNNER_START_TEXT`,
          when the command runs under the runner: ``checkpoint_on_notice``, ``preflight``) -- the one sign of a
          restart that the service does not log, a job retried after an internal error.

        The newest :data:`STEP_LINES_READ` matching entries only: one ``ListLogEntries`` call, not retried (a
        caller that polls looks again later), over what Vertex AI ships of a job's stdout and stderr and its own
        messages to Cloud Logging -- the entries ``gcloud ai custom-jobs stream-logs`` reads:
        ``resource.type="ml_job"``, ``resource.labels.job_id``, ``resource.labels.task_name`` (``service`` for the
        service's). Cloud Logging's read quota is per project (60 ListLogEntries a minute by default): call it
        sparingly.

        Raises:
            ValueError: ``job_name`` is not a CustomJob name.
            google.api_core.exceptions.GoogleAPICallError: the read failed (``PermissionDenied`` without
                ``logging.logEntries.list``, e.g. ``roles/logging.viewer``).
        """
        from ..policy.messages import EXIT_RE
        from ..worker.protocol import DEFAULT_START_PATTERN, DEFAULT_STEP_PATTERN, RUNNER_START_TEXT

        match = JOB_NAME_RE.match(job_name)
        if not match:
            raise ValueError(f"not a CustomJob name: {job_name!r}")
        text = (f'resource.type="ml_job" AND resource.labels.job_id="{match["id"]}" '
                f'AND ((resource.labels.task_name="{task_name}" AND (textPayload=~"step[ =:]+[0-9]+" '
                f'OR textPayload:"{RUNNER_START_TEXT.strip()}")) '
                f'OR (resource.labels.task_name="service" AND textPayload:"exited with a non-zero status")) '
                f'AND timestamp>="{since.isoformat()}"')
        request = {"resource_names": [f"projects/{match['project']}"], "filter": text, "order_by": "timestamp desc",
                   "page_size": STEP_LINES_READ}
        pager = self.logging().list_log_entries(request=request, retry=None, timeout=timeout)
        step, start = re.compile(DEFAULT_STEP_PATTERN), re.compile(DEFAULT_START_PATTERN)
        lines, restarts = [], []
        for entry in next(iter(pager.pages)).entries:  # the newest page only: one call
            at = entry.timestamp.timestamp()
            if entry.resource.labels.get("task_name") == "service":
                if EXIT_RE.search(entry.text_payload):
                    restarts.append(at)
                continue
            if entry.text_payload.startswith(RUNNER_START_TEXT):
                restarts.append(at)
                continue
            for pattern, starting in ((start, True), (step, False)):
                found = pattern.search(entry.text_payload)
                if found:
                    lines.append((at, int(found.group(1)), starting))
                    break
        return sorted(lines), sorted(restarts)

    def cancel_custom_job(self, name: str) -> None:
        """Cancel a job; a job already in a terminal state (FAILED_PRECONDITION) is fine (:meth:`cancel_job`)."""
        self.cancel_job(name)


class AsyncResilientVertexAIHook(AsyncGoogleApiHook):
    """The async face of :class:`ResilientVertexAIHook`, for triggers (same arguments)."""

    MODULES = VERTEX_ASYNC_MODULES

    def __init__(self, gcp_conn_id: str | None = "google_cloud_default",
                 impersonation_chain: str | Sequence[str] | None = None, *, emulator: str | None = None,
                 api_retry_seconds: float = 600.0) -> None:
        super().__init__(ResilientVertexAIHook(gcp_conn_id, impersonation_chain, emulator=emulator,
                                               api_retry_seconds=api_retry_seconds))
        self._clients: dict[str, Any] = {}

    def client(self, region: str) -> Any:
        """A cached ``JobServiceAsyncClient`` for ``region``; after :meth:`open` (the calls await it)."""
        if region not in self._clients:
            self._clients[region] = vertex_job_async_client(region, credentials=self.sync.credentials,
                                                            emulator=self.sync.emulator)
        return self._clients[region]

    async def get_custom_job(self, name: str) -> Any:
        await self.open()
        async for attempt in self._retrying():
            with attempt:
                return await self.client(region_of(name)).get_custom_job(name=name, retry=None)
        raise AssertionError("unreachable")  # pragma: no cover

    async def get_job(self, name: str) -> Any:
        """GetCustomJob or GetHyperparameterTuningJob, by the kind of ``name``."""
        if not is_tuning_job(name):
            return await self.get_custom_job(name)
        await self.open()
        async for attempt in self._retrying():
            with attempt:
                return await self.client(region_of(name)).get_hyperparameter_tuning_job(name=name, retry=None)
        raise AssertionError("unreachable")  # pragma: no cover

    async def list_custom_jobs(self, project_id: str, region: str, filter_text: str, *,
                               page_size: int = 0) -> list[Any]:
        """Every CustomJob in ``projects/project_id/locations/region`` that matches ``filter_text``.

        One ListCustomJobs call per page of ``page_size`` jobs (0: the service's default), each page's call
        retried on its own; the pages are followed until ``next_page_token`` is empty.
        """
        await self.open()
        parent = f"projects/{project_id}/locations/{region}"
        jobs: list[Any] = []
        token = ""
        while True:
            async for attempt in self._retrying():
                with attempt:
                    page = await self.client(region).list_custom_jobs(
                        request={"parent": parent, "filter": filter_text, "page_size": page_size,
                                 "page_token": token}, retry=None)
            jobs.extend(page.custom_jobs)  # the pager reads the first response's fields
            token = page.next_page_token
            if not token:
                return jobs

    async def close(self) -> None:
        """Close the gRPC channels of the clients made so far (call it in the event loop that used them)."""
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            await client.transport.close()


__all__ = ["CHIEF_TASK", "AsyncResilientVertexAIHook", "ResilientVertexAIHook", "is_tuning_job", "region_of"]
