"""Vertex AI JobService hook: credentials, the emulator override, and transient API errors retried.

Transient API errors -- UNAVAILABLE, DEADLINE_EXCEEDED, INTERNAL, ABORTED, 429 / RESOURCE_EXHAUSTED on
reads, 5xx -- are retried here with exponential backoff and jitter (tenacity) for up to
``api_retry_seconds``; they never fail a task by themselves. A create call is retried only after
checking, by the attempt's labels, that the first call did not create the job after all: a lost reply
must not become a duplicate job. RESOURCE_EXHAUSTED on create is quota or a stockout: it is raised, for
the policy to classify.

Credentials: none against the emulator; otherwise the Google provider's ``GoogleBaseHook`` when that
provider is installed and the connection ``gcp_conn_id`` exists (it reads the connection and handles
``impersonation_chain``), else Application Default Credentials with the ``cloud-platform`` scope,
impersonated through google-auth when ``impersonation_chain`` is given (the last account is the target,
the ones before it the delegation chain, as in the Google provider).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import Callable, Sequence
from functools import cached_property
from typing import Any

from ..clients import emulator_host, vertex_job_async_client, vertex_job_client
from .loading import import_client_modules

log = logging.getLogger(__name__)

CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
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


def is_transient(exc: BaseException, *, creating: bool = False) -> bool:
    """Whether an API error is worth retrying as is. On create, RESOURCE_EXHAUSTED is not (quota/stockout)."""
    from google.api_core import exceptions as gexc

    transient: tuple[type[BaseException], ...] = (gexc.ServiceUnavailable, gexc.DeadlineExceeded,
                                                  gexc.InternalServerError, gexc.Aborted, gexc.BadGateway,
                                                  gexc.GatewayTimeout, gexc.Unknown)
    if not creating:
        transient += (gexc.TooManyRequests, gexc.ResourceExhausted)
    return isinstance(exc, transient)


def connection_extra(gcp_conn_id: str | None) -> dict[str, Any]:
    """The extra of Airflow connection ``gcp_conn_id``, or {} when there is no such connection."""
    if not gcp_conn_id:
        return {}
    try:
        from airflow.sdk import BaseHook

        return dict(BaseHook.get_connection(gcp_conn_id).extra_dejson)
    except Exception:  # no connection defined (offline runs, tests): fine, ADC or the env override apply
        return {}


def connection_exists(gcp_conn_id: str) -> bool:
    """Whether Airflow knows connection ``gcp_conn_id`` (metadata database, secrets backends, env vars).

    Raises:
        whatever reading the connection raises other than "not found" (e.g. the API server is unreachable):
        credentials must not silently change because a lookup failed.
    """
    from airflow.sdk import BaseHook
    from airflow.sdk.exceptions import AirflowNotFoundException

    try:
        BaseHook.get_connection(gcp_conn_id)
    except AirflowNotFoundException:
        return False
    return True


def default_credentials(impersonation_chain: str | Sequence[str] | None) -> Any:
    """Application Default Credentials with the ``cloud-platform`` scope; with ``impersonation_chain``
    (an email, or emails ending with the target), google-auth impersonated credentials for its last
    account through the ones before it.

    Raises:
        google.auth.exceptions.DefaultCredentialsError: no Application Default Credentials are set up.
    """
    import google.auth
    from google.auth import impersonated_credentials

    credentials, _ = google.auth.default(scopes=[CLOUD_PLATFORM_SCOPE])
    if impersonation_chain:
        chain = [impersonation_chain] if isinstance(impersonation_chain, str) else list(impersonation_chain)
        credentials = impersonated_credentials.Credentials(source_credentials=credentials, target_principal=chain[-1],
                                                           delegates=chain[:-1], target_scopes=[CLOUD_PLATFORM_SCOPE])
    return credentials


def google_credentials(gcp_conn_id: str | None, impersonation_chain: str | Sequence[str] | None) -> Any:
    """Credentials for Google APIs: the Google provider's ``GoogleBaseHook(gcp_conn_id,
    impersonation_chain).get_credentials()`` when the provider is installed and the connection exists,
    else :func:`default_credentials` (as :func:`connection_extra` treats a missing connection).

    Raises:
        google.auth.exceptions.DefaultCredentialsError: ADC are needed and not set up; or what
        ``GoogleBaseHook`` raises for a connection it cannot use.
    """
    try:
        from airflow.providers.google.common.hooks.base_google import GoogleBaseHook
    except ImportError:
        GoogleBaseHook = None
    if GoogleBaseHook is not None and gcp_conn_id:
        if connection_exists(gcp_conn_id):
            return GoogleBaseHook(gcp_conn_id=gcp_conn_id, impersonation_chain=impersonation_chain).get_credentials()
        log.info("No Airflow connection %r: using Application Default Credentials", gcp_conn_id)
    return default_credentials(impersonation_chain)


class GoogleApiHook:
    """What every hook of the provider shares: credentials, the emulator override, retried calls.

    Args:
        gcp_conn_id: Airflow connection for credentials; its extra ``emulator_host`` selects an emulator.
        impersonation_chain: a service account email, or a chain of them, to impersonate.
        emulator: ``host:port`` of an emulator (overrides the connection and ``RESILIENT_EMULATOR_HOST``).
        api_retry_seconds: how long transient API errors are retried before they are raised (seconds).
        sleep: how to wait between retries (injected in tests).
    """

    def __init__(self, gcp_conn_id: str | None = "google_cloud_default",
                 impersonation_chain: str | Sequence[str] | None = None, *, emulator: str | None = None,
                 api_retry_seconds: float = 600.0, sleep: Callable[[float], Any] = time.sleep) -> None:
        self.gcp_conn_id = gcp_conn_id
        self.impersonation_chain = impersonation_chain
        self._emulator_override = emulator
        self.api_retry_seconds = api_retry_seconds
        self._sleep = sleep
        self._clients: dict[str, Any] = {}

    @cached_property
    def emulator(self) -> str | None:
        """The emulator address in use, or None for Google."""
        return emulator_host(self._emulator_override, connection_extra(self.gcp_conn_id)
                             if not self._emulator_override else None)

    @cached_property
    def credentials(self) -> Any:
        return None if self.emulator else google_credentials(self.gcp_conn_id, self.impersonation_chain)

    def _retrying(self, *, creating: bool = False) -> Any:
        from tenacity import Retrying, retry_if_exception, stop_after_delay, wait_exponential_jitter

        return Retrying(retry=retry_if_exception(lambda e: is_transient(e, creating=creating)),
                        wait=wait_exponential_jitter(initial=1, max=60), stop=stop_after_delay(self.api_retry_seconds),
                        sleep=self._sleep, reraise=True,
                        before_sleep=lambda s: log.warning("Google API error, retrying: %s", s.outcome.exception()))

    def call(self, fn: Callable[[], Any], *, creating: bool = False) -> Any:
        """``fn()`` with transient API errors retried (see :func:`is_transient`)."""
        for attempt in self._retrying(creating=creating):
            with attempt:
                return fn()
        raise AssertionError("unreachable")  # pragma: no cover


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


class AsyncResilientVertexAIHook:
    """The async face of :class:`ResilientVertexAIHook`, for triggers (same arguments)."""

    def __init__(self, gcp_conn_id: str | None = "google_cloud_default",
                 impersonation_chain: str | Sequence[str] | None = None, *, emulator: str | None = None,
                 api_retry_seconds: float = 600.0) -> None:
        self.sync = ResilientVertexAIHook(gcp_conn_id, impersonation_chain, emulator=emulator,
                                          api_retry_seconds=api_retry_seconds)
        self._clients: dict[str, Any] = {}
        self._opened = False

    async def open(self) -> None:
        """Make every call that follows cheap for the event loop: import the client library (its first
        import takes seconds) and resolve the emulator address (an Airflow connection lookup) and the
        credentials (files, perhaps the metadata server) in a worker thread. The triggerer's event loop runs
        every trigger of its process, so none of this may run in it. Idempotent; every call awaits it."""
        if not self._opened:
            await asyncio.to_thread(self._prepare)
            self._opened = True

    def _prepare(self) -> None:
        import_client_modules(VERTEX_ASYNC_MODULES)
        self.sync.credentials  # noqa: B018 -- resolves (and caches) the emulator address too

    def client(self, region: str) -> Any:
        """A cached ``JobServiceAsyncClient`` for ``region``; after :meth:`open` (the calls await it)."""
        if region not in self._clients:
            self._clients[region] = vertex_job_async_client(region, credentials=self.sync.credentials,
                                                            emulator=self.sync.emulator)
        return self._clients[region]

    def _retrying(self) -> Any:
        from tenacity import AsyncRetrying, retry_if_exception, stop_after_delay, wait_exponential_jitter

        return AsyncRetrying(retry=retry_if_exception(is_transient), wait=wait_exponential_jitter(initial=1, max=60),
                             stop=stop_after_delay(self.sync.api_retry_seconds), reraise=True)

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

    async def cancel_custom_job(self, name: str) -> None:
        await self.open()
        from google.api_core import exceptions as gexc

        async for attempt in self._retrying():
            with attempt:
                with contextlib.suppress(gexc.FailedPrecondition, gexc.NotFound):  # already over
                    await self.client(region_of(name)).cancel_custom_job(name=name, retry=None)
                return
