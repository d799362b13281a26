"""What every hook of the provider shares: credentials, the emulator override, and transient API errors
retried (tenacity), for the sync hooks and the async ones the triggers use.

Transient API errors -- UNAVAILABLE, DEADLINE_EXCEEDED, INTERNAL, ABORTED, 429 / RESOURCE_EXHAUSTED on
reads, 5xx -- are retried with exponential backoff and jitter for up to ``api_retry_seconds``; they never
fail a task by themselves. RESOURCE_EXHAUSTED on create is quota or a stockout: it is raised, for the
policy to classify.

Credentials: none against the emulator; otherwise the Google provider's ``GoogleBaseHook`` when that
provider is installed and the connection ``gcp_conn_id`` exists (it reads the connection and handles
``impersonation_chain``), else Application Default Credentials with the ``cloud-platform`` scope,
impersonated through google-auth when ``impersonation_chain`` is given (the last account is the target,
the ones before it the delegation chain, as in the Google provider).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from functools import cached_property
from typing import Any

from ..clients import emulator_host
from .loading import import_client_modules

log = logging.getLogger(__name__)

CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"


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
        Exception: whatever reading the connection raises other than "not found" (e.g. the API server is
            unreachable): credentials must not silently change because a lookup failed.
    """
    from airflow.sdk import BaseHook

    try:  # not through ..compat: this runs in the triggerer's event loop, where only loaded modules may be imported
        from airflow.sdk.exceptions import AirflowNotFoundException
    except ImportError:  # Airflow 3.1
        from airflow.exceptions import AirflowNotFoundException  # type: ignore[no-redef]

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
        credentials = impersonated_credentials.Credentials(  # type: ignore[no-untyped-call]
            source_credentials=credentials, target_principal=chain[-1], delegates=chain[:-1],
            target_scopes=[CLOUD_PLATFORM_SCOPE])
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
                        before_sleep=lambda s: log.warning("Google API error, retrying: %s",
                                                           s.outcome.exception() if s.outcome else None))

    def call(self, fn: Callable[[], Any], *, creating: bool = False) -> Any:
        """``fn()`` with transient API errors retried (see :func:`is_transient`)."""
        for attempt in self._retrying(creating=creating):
            with attempt:
                return fn()
        raise AssertionError("unreachable")  # pragma: no cover

    def close(self) -> None:
        """Close the gRPC channels of the clients made so far (a hook made for one short task, such as a
        trigger's ``on_kill`` in the long-lived triggerer, should not leave them open). Idempotent."""
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            client.transport.close()


class AsyncGoogleApiHook:
    """The async face of a :class:`GoogleApiHook`, for triggers: the same credentials and emulator, calls
    retried as there. Create and use it inside one event loop (gRPC channels bind to it).

    Subclasses set :attr:`MODULES` (what :meth:`open` imports off the event loop) and build their clients.

    Args:
        sync: the sync hook whose credentials, emulator address and ``api_retry_seconds`` are used.
    """

    #: Modules imported in a worker thread by :meth:`open` (hooks/loading.py).
    MODULES: tuple[str, ...] = ()

    def __init__(self, sync: GoogleApiHook) -> None:
        self.sync = sync
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
        import_client_modules(self.MODULES)
        self.sync.credentials  # noqa: B018 -- resolves (and caches) the emulator address too

    def _retrying(self) -> Any:
        from tenacity import AsyncRetrying, retry_if_exception, stop_after_delay, wait_exponential_jitter

        return AsyncRetrying(retry=retry_if_exception(is_transient), wait=wait_exponential_jitter(initial=1, max=60),
                             stop=stop_after_delay(self.sync.api_retry_seconds), reraise=True)

    async def call(self, fn: Callable[[], Awaitable[Any]]) -> Any:
        """``await fn()`` after :meth:`open`, with transient API errors retried (see :func:`is_transient`)."""
        await self.open()
        async for attempt in self._retrying():
            with attempt:
                return await fn()
        raise AssertionError("unreachable")  # pragma: no cover


__all__ = ["CLOUD_PLATFORM_SCOPE", "AsyncGoogleApiHook", "GoogleApiHook", "connection_exists", "connection_extra",
           "default_credentials", "google_credentials", "is_transient"]
