"""Vertex AI JobService hooks, sync and async: CustomJob calls with transient API errors retried
(:mod:`.base`: credentials, the emulator override, retries). A create call is retried only after checking,
by the attempt's labels, that the first call did not create the job after all: a lost reply must not become a
duplicate job.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Sequence
from typing import Any

from ..clients import vertex_job_async_client, vertex_job_client
from .base import (  # noqa: F401 -- importable from here as before
    CLOUD_PLATFORM_SCOPE,
    AsyncGoogleApiHook,
    GoogleApiHook,
    connection_exists,
    connection_extra,
    default_credentials,
    google_credentials,
    is_transient,
)

log = logging.getLogger(__name__)

#: What the async Vertex AI hook imports off the event loop (hooks/loading.py).
VERTEX_ASYNC_MODULES = ("google.api_core.exceptions", "tenacity",
                        "google.cloud.aiplatform_v1.services.job_service.transports.grpc_asyncio")
JOB_NAME_RE = re.compile(r"^projects/(?P<project>[^/]+)/locations/(?P<region>[^/]+)/customJobs/(?P<id>[^/]+)$")


def region_of(job_name: str) -> str:
    """``us-central1`` of ``projects/p/locations/us-central1/customJobs/123``.

    Raises:
        ValueError: when ``job_name`` is not a CustomJob resource name.
    """
    match = JOB_NAME_RE.match(job_name)
    if not match:
        raise ValueError(f"{job_name!r} is not a CustomJob name (projects/P/locations/R/customJobs/ID)")
    return match["region"]


class ResilientVertexAIHook(GoogleApiHook):
    """Vertex AI CustomJob calls with retries of transient errors (arguments: see :class:`GoogleApiHook`)."""

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
        parent = f"projects/{project_id}/locations/{region}"
        first = True
        for attempt in self._retrying(creating=True):
            with attempt:
                if not first and find_filter:
                    existing = self.list_custom_jobs(project_id, region, find_filter)
                    if existing:
                        log.info("Found %s created by an earlier call whose reply was lost", existing[0].name)
                        return existing[0]
                first = False
                return self.client(region).create_custom_job(parent=parent, custom_job=custom_job, retry=None)
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

    def wait_for_end(self, name: str, *, timeout: float, interval: float) -> Any:
        """Read ``name`` every ``interval`` seconds until its state is terminal; the terminal CustomJob.

        Raises:
            concurrent.futures.TimeoutError: it is still not terminal after ``timeout`` seconds.
        """
        from concurrent.futures import TimeoutError as FutureTimeout

        from ..backends.vertex import TERMINAL_STATES

        deadline = time.monotonic() + timeout
        while True:
            job = self.get_custom_job(name)
            if job.state.name in TERMINAL_STATES:
                return job
            if time.monotonic() > deadline:
                raise FutureTimeout(f"{name} is still {job.state.name} {timeout:.0f} s after it was cancelled")
            log.info("Waiting for %s to end (%s)", name, job.state.name)
            self._sleep(interval)

    def cancel_custom_job(self, name: str) -> None:
        """Cancel a job; a job already in a terminal state (FAILED_PRECONDITION) is fine."""
        from google.api_core import exceptions as gexc

        for attempt in self._retrying():
            with attempt:
                try:
                    self.client(region_of(name)).cancel_custom_job(name=name, retry=None)
                except (gexc.FailedPrecondition, gexc.NotFound) as exc:
                    log.info("Not cancelling %s: %s", name, exc.message)
                return


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
