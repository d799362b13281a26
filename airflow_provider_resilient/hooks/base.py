"""What every hook of the provider shares: credentials, the emulator switch, and transient API errors
retried (tenacity), for the sync hooks and the async ones the triggers use.

Transient API errors -- UNAVAILABLE, DEADLINE_EXCEEDED, INTERNAL, ABORTED, 429 / RESOURCE_EXHAUSTED on
reads, 5xx -- are retried with exponential backoff and jitter for up to ``api_retry_seconds``; they never
fail a task by themselves. RESOURCE_EXHAUSTED on create is quota or a stockout: it is raised, for the
policy to classify.

The connection ``gcp_conn_id`` (default ``google_cloud_default``, the Google provider's) must exist: a name that
is no Airflow connection is an error naming it and the fix, never a silent fall-back to whatever credentials the
worker has. ``gcp_conn_id=None`` asks for Application Default Credentials and reads no connection.

The emulator is used only when it is switched on explicitly: the connection's extra ``emulator_host``
(``host:port``), or a hook's ``emulator`` argument. Then no credentials are used. No environment variable switches
it on.

Credentials otherwise: the Google provider's ``GoogleBaseHook`` when that provider is installed (it reads the
connection's key and handles ``impersonation_chain``); without it, Application Default Credentials with the
``cloud-platform`` scope -- refused when the connection holds a key, which only the Google provider reads --
impersonated through google-auth when ``impersonation_chain`` is given (the last account is the target, the ones
before it the delegation chain, as in the Google provider). See Google's "How Application Default Credentials
works" (https://cloud.google.com/docs/authentication/application-default-credentials).
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


#: Connection extras that hold a key or credentials to use (the Google provider's ``google_cloud_platform``
#: connection; each also as ``extra__google_cloud_platform__<name>``): only the Google provider reads them.
KEY_EXTRAS = ("key_path", "keyfile_dict", "key_secret_name", "credential_config_file")


def missing_connection_message(gcp_conn_id: str) -> str:
    """What a task says when connection ``gcp_conn_id`` does not exist: the name and the two fixes."""
    env = "AIRFLOW_CONN_" + gcp_conn_id.upper()
    return (f"The Airflow connection {gcp_conn_id!r} (gcp_conn_id) does not exist. Create it -- e.g. `airflow "
            f"connections add {gcp_conn_id} --conn-type google_cloud_platform`, or the environment variable "
            f"{env}='{{\"conn_type\": \"google_cloud_platform\"}}'; its extra \"emulator_host\": \"host:port\" "
            "points it at the emulator -- or pass gcp_conn_id=None to use Application Default Credentials.")


def get_connection(gcp_conn_id: str) -> Any:
    """Airflow connection ``gcp_conn_id`` (metadata database, secrets backends, ``AIRFLOW_CONN_*`` variables).

    Raises:
        AirflowNotFoundException: there is no such connection; the message names it and the fix
            (:func:`missing_connection_message`).
        Exception: whatever reading the connection raises otherwise (e.g. the API server is unreachable):
            credentials and endpoints never change because a lookup failed.
    """
    from airflow.sdk import BaseHook

    not_found = _not_found_exception()
    try:
        return BaseHook.get_connection(gcp_conn_id)
    except not_found as exc:
        raise not_found(missing_connection_message(gcp_conn_id)) from exc


def _not_found_exception() -> type[Exception]:
    """Airflow's ``AirflowNotFoundException`` (what ``BaseHook.get_connection`` raises for an unknown connection)."""
    import importlib

    for module in ("airflow.sdk.exceptions", "airflow.exceptions"):  # the task SDK's; older Airflow's
        try:
            not_found: type[Exception] = importlib.import_module(module).AirflowNotFoundException
        except (ImportError, AttributeError):  # pragma: no cover - an Airflow release without it there
            continue
        return not_found
    raise ImportError("no AirflowNotFoundException in airflow.sdk.exceptions or airflow.exceptions")


def connection_extra(gcp_conn_id: str | None) -> dict[str, Any]:
    """The extra of Airflow connection ``gcp_conn_id``; {} for ``gcp_conn_id=None`` (no connection).

    Raises:
        AirflowNotFoundException: there is no such connection (see :func:`get_connection`).
    """
    if gcp_conn_id is None:
        return {}
    return dict(get_connection(gcp_conn_id).extra_dejson or {})


def connection_exists(gcp_conn_id: str) -> bool:
    """Whether Airflow knows connection ``gcp_conn_id`` (metadata database, secrets backends, env vars).

    Raises:
        Exception: whatever reading the connection raises other than "not found" (e.g. the API server is
            unreachable): credentials must not silently change because a lookup failed.
    """
    try:
        get_connection(gcp_conn_id)
    except _not_found_exception():
        return False
    return True


def _key_extras(extra: dict[str, Any]) -> list[str]:
    return [name for name in KEY_EXTRAS if extra.get(name) or extra.get(f"extra__google_cloud_platform__{name}")]


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
    """Credentials for Google APIs.

    * ``gcp_conn_id=None``: :func:`default_credentials` (Application Default Credentials, impersonated for
      ``impersonation_chain``).
    * a connection, with the Google provider installed: ``GoogleBaseHook(gcp_conn_id,
      impersonation_chain).get_credentials()`` (its key, or ADC when it holds none).
    * a connection without the Google provider: :func:`default_credentials`, as the Google provider does for a
      connection without a key; a connection that holds a key (:data:`KEY_EXTRAS`) is refused.

    Raises:
        AirflowNotFoundException: connection ``gcp_conn_id`` does not exist (the message names it and the fix).
        ValueError: the connection holds a key and the Google provider is not installed (the message says to
            install ``airflow-provider-resilient[google]`` or to use ``gcp_conn_id=None``).
        google.auth.exceptions.DefaultCredentialsError: ADC are needed and not set up; or what ``GoogleBaseHook``
            raises for a connection it cannot use.
    """
    if gcp_conn_id is None:
        return default_credentials(impersonation_chain)
    extra = connection_extra(gcp_conn_id)  # raises, naming it, when there is no such connection
    try:
        from airflow.providers.google.common.hooks.base_google import GoogleBaseHook
    except ImportError:
        GoogleBaseHook = None
    if GoogleBaseHook is not None:
        return GoogleBaseHook(gcp_conn_id=gcp_conn_id, impersonation_chain=impersonation_chain).get_credentials()
    if keys := _key_extras(extra):
        raise ValueError(
            f"The Airflow connection {gcp_conn_id!r} holds a key ({', '.join(keys)}), which only the Google provider "
            "reads, and it is not installed: pip install 'airflow-provider-resilient[google]' "
            "(apache-airflow-providers-google), or remove the key and use Application Default Credentials "
            "(gcp_conn_id=None).")
    log.info("Connection %r holds no key and the Google provider is not installed: using Application Default "
             "Credentials", gcp_conn_id)
    return default_credentials(impersonation_chain)


class GoogleApiHook:
    """What every hook of the provider shares: credentials, the emulator switch, retried calls.

    Args:
        gcp_conn_id: Airflow connection for credentials (it must exist; see the module docstring); its extra
            ``emulator_host`` (``host:port``) switches the emulator on. None: Application Default Credentials,
            no connection.
        impersonation_chain: a service account email, or a chain of them, to impersonate.
        emulator: ``host:port`` of an emulator (wins over the connection; a trigger gets its operator's).
        api_retry_seconds: how long transient API errors are retried before they are raised (seconds).
        sleep: how to wait between retries (injected in tests).

    The connection is read when :attr:`emulator` or :attr:`credentials` is first asked for, which raises
    ``AirflowNotFoundException`` (naming it and the fix) when it does not exist.
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
        """The emulator address in use (the ``emulator`` argument, else the connection's extra ``emulator_host``),
        or None for Google.

        Raises:
            AirflowNotFoundException: connection ``gcp_conn_id`` does not exist.
        """
        if self._emulator_override:
            return self._emulator_override
        return emulator_host(None, connection_extra(self.gcp_conn_id))

    def endpoint_summary(self) -> str:
        """One line for the top of a task's log: where this hook's calls go and why -- ``Using the Google API
        emulator at HOST (connection X)``, or Google Cloud with the connection's or the default credentials.

        Raises:
            AirflowNotFoundException: connection ``gcp_conn_id`` does not exist.
        """
        if self.emulator:
            why = "emulator argument" if self._emulator_override else f"connection {self.gcp_conn_id}"
            return f"Using the Google API emulator at {self.emulator} ({why}): no call reaches Google Cloud"
        if self.gcp_conn_id is None:
            return "Using Google Cloud APIs with Application Default Credentials (gcp_conn_id=None)"
        return f"Using Google Cloud APIs with the credentials of connection {self.gcp_conn_id}"

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


__all__ = ["CLOUD_PLATFORM_SCOPE", "KEY_EXTRAS", "AsyncGoogleApiHook", "GoogleApiHook", "connection_exists",
           "connection_extra", "default_credentials", "get_connection", "google_credentials", "is_transient",
           "missing_connection_message"]
