"""Huawei Cloud OBS, in process: moto's S3 server (``ThreadedMotoServer``) on a free loopback port.

OBS speaks the Amazon S3 API (see :mod:`airflow_provider_resilient.checkpoints.obs`), so an S3 server stands in for
it; clients reach it as they reach OBS, through :class:`~airflow_provider_resilient.checkpoints.obs.ObsFileSystem`
and the variables of :meth:`ObsEmulator.env` (``OBS_ENDPOINT``, ``OBS_ACCESS_KEY_ID``, ``OBS_SECRET_ACCESS_KEY``).
The shape is :class:`~airflow_provider_resilient.testing.storage.StorageEmulator`'s: start / stop or a context
manager, ``url``, ``env()``, ``create_bucket``, ``filesystem()``, ``wipe()``, and every object listing the server
answers recorded in :attr:`ObsEmulator.list_calls`. Unlike that emulator, a bucket must be created
(:meth:`ObsEmulator.create_bucket`) before objects are written to it, as on OBS.

moto keeps its state in this process (its backends are module globals): two emulators in one process share
buckets. It needs no network and no AWS credentials in the environment: it does not check request signatures, and
nothing here changes ``os.environ``.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

#: The fixed fake credentials :meth:`ObsEmulator.env` hands out (moto accepts any).
ACCESS_KEY_ID = "obs-emulator-access-key"
SECRET_ACCESS_KEY = "obs-emulator-secret-key"


@dataclass(frozen=True)
class ListCall:
    """One object listing (``ListObjects`` / ``ListObjectsV2``) the emulator answered."""

    bucket: str
    prefix: str | None
    delimiter: str | None


class ObsEmulator:
    """An in-memory OBS (S3 API) server for one test session or demo run.

    Args:
        host: interface to bind, loopback by default.
        port: TCP port; 0 picks a free one.

    Use as a context manager, or call :meth:`start` / :meth:`stop`.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        try:
            from moto.server import ThreadedMotoServer
        except ImportError as exc:
            raise ImportError("ObsEmulator needs the 'emulator' extra (moto[s3,server] and s3fs): "
                              "pip install 'airflow-provider-resilient[emulator]'") from exc

        self._host = host
        self._moto = ThreadedMotoServer(ip_address=host, port=port, verbose=False)
        self._lock = threading.Lock()
        self.list_calls: list[ListCall] = []

    @property
    def port(self) -> int:
        """The bound TCP port.

        Raises:
            RuntimeError: before :meth:`start`.
        """
        if self._moto._server is None:
            raise RuntimeError("ObsEmulator is not started")
        return int(self._moto.get_host_and_port()[1])

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` -- the value of ``OBS_ENDPOINT``."""
        return f"http://{self._host}:{self.port}"

    def env(self) -> dict[str, str]:
        """Environment variables that point
        :class:`~airflow_provider_resilient.checkpoints.obs.ObsFileSystem` (and ``obs://`` URLs) at this server."""
        return {"OBS_ENDPOINT": self.url, "OBS_ACCESS_KEY_ID": ACCESS_KEY_ID,
                "OBS_SECRET_ACCESS_KEY": SECRET_ACCESS_KEY}

    def start(self) -> ObsEmulator:
        """Bind and serve in a thread.

        Raises:
            OSError: the port could not be bound (e.g. taken by another process). ``ThreadedMotoServer.start`` would
                wait forever then: its thread dies before it signals that the server is made.
        """
        from moto.moto_server.werkzeug_app import MotoRequestHandler

        moto = self._moto
        moto._thread = thread = threading.Thread(target=moto._server_entry, name="obs-emulator", daemon=True)
        thread.start()
        while not moto._server_ready_event.wait(0.05):
            if not thread.is_alive():
                raise OSError(f"the OBS emulator could not bind {self._host}:{moto._port} (is the port taken?); "
                              "its thread printed why above")
        server = moto._server
        assert server is not None

        class QuietHandler(MotoRequestHandler):  # type: ignore[misc, valid-type, unused-ignore]
            def log_request(self, *args: Any, **kwargs: Any) -> None:
                """No line per request (errors are still logged)."""

        server.RequestHandlerClass = QuietHandler
        app = server.app

        def recording_app(environ: dict[str, Any], start_response: Any) -> Any:
            self._record(environ)
            return app(environ, start_response)

        server.app = recording_app
        return self

    def _record(self, environ: dict[str, Any]) -> None:
        """Note a bucket listing: ``GET /bucket`` (path style) with no sub-resource but listing parameters."""
        if environ.get("REQUEST_METHOD") != "GET":
            return
        parts = environ.get("PATH_INFO", "").strip("/").split("/", 1)
        if len(parts) != 1 or not parts[0] or parts[0].startswith("moto-api"):
            return
        query = parse_qs(environ.get("QUERY_STRING", ""), keep_blank_values=True)
        if set(query) - {"list-type", "prefix", "delimiter", "encoding-type", "max-keys", "marker",
                         "continuation-token", "start-after", "fetch-owner"}:
            return  # a sub-resource (?location, ?versioning, ...), not a listing
        with self._lock:
            self.list_calls.append(ListCall(parts[0], (query.get("prefix") or [None])[0],
                                            (query.get("delimiter") or [None])[0]))

    def stop(self) -> None:
        """Stop the server, at once rather than at its next 0.5 s poll (an empty connection wakes ``select``)."""
        server = self._moto._server
        if server is None:
            return
        address = (self._host, self.port)
        stopper = threading.Thread(target=self._moto.stop, name="obs-emulator-stop", daemon=True)
        stopper.start()
        while stopper.is_alive():
            with contextlib.suppress(OSError):
                socket.create_connection(address, timeout=0.1).close()
            stopper.join(0.01)
        self._moto._server = None

    def __enter__(self) -> ObsEmulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _client(self) -> Any:
        import boto3
        from botocore.config import Config

        return boto3.session.Session().client(
            "s3", endpoint_url=self.url, aws_access_key_id=ACCESS_KEY_ID, aws_secret_access_key=SECRET_ACCESS_KEY,
            region_name="us-east-1", config=Config(s3={"addressing_style": "path"}))

    def create_bucket(self, name: str) -> None:
        """Create bucket ``name`` unless it exists."""
        client = self._client()
        if name not in {b["Name"] for b in client.list_buckets().get("Buckets", [])}:
            client.create_bucket(Bucket=name)

    def wipe(self) -> None:
        """Delete every object and bucket (moto's reset: every backend of this process), and forget the recorded
        listings."""
        import urllib.request

        # moto's reset API (https://docs.getmoto.org/en/latest/docs/server_mode.html), never via a proxy.
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        request = urllib.request.Request(f"{self.url}/moto-api/reset", method="POST")
        with opener.open(request, timeout=30) as response:
            response.read()
        with self._lock:
            self.list_calls.clear()

    def filesystem(self, **kwargs: Any) -> Any:
        """A fresh :class:`~airflow_provider_resilient.checkpoints.obs.ObsFileSystem` talking to this server
        (no instance cache); ``kwargs`` are more storage options."""
        from airflow_provider_resilient.checkpoints.obs import ObsFileSystem

        return ObsFileSystem(endpoint_url=self.url, key=ACCESS_KEY_ID, secret=SECRET_ACCESS_KEY,
                             skip_instance_cache=True, **kwargs)
