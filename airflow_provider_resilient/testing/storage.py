"""Cloud Storage, in process: ``gcp-storage-emulator`` on a free loopback port.

``google-cloud-storage`` and ``gcsfs`` honour ``STORAGE_EMULATOR_HOST``; :meth:`StorageEmulator.env`
gives that and the other variables a client process needs. Buckets are created on demand
(:meth:`StorageEmulator.create_bucket`). Every object listing the server answers is recorded in
:attr:`StorageEmulator.list_calls` so tests can assert *how* a prefix was listed (prefix and
delimiter, never a whole-bucket scan). Writing to a bucket that does not exist creates it.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ListCall:
    """One ``objects.list`` request the emulator answered."""

    bucket: str
    prefix: str | None
    delimiter: str | None
    match_glob: str | None


class StorageEmulator:
    """An in-memory Cloud Storage server for one test session or demo run.

    Args:
        host: interface to bind, loopback by default.
        port: TCP port; 0 picks a free one.
        default_bucket: a bucket created at start, if given.

    Use as a context manager, or call :meth:`start` / :meth:`stop`.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0, default_bucket: str | None = None) -> None:
        from gcp_storage_emulator.server import create_server

        # gcsfs reads this once, at import: with it on, every call against an emulator first waits ~60 s
        # for a bucket-type probe. This process talks to the emulator, so it is set here, process-wide.
        os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")

        self._server = create_server(host, port, in_memory=True, default_bucket=default_bucket)
        self._host = host
        self._lock = threading.Lock()
        self.list_calls: list[ListCall] = []
        storage = self._server._storage
        original = storage.get_file_list

        def recording_get_file_list(bucket_name: str, prefix: str | None = None, delimiter: str | None = None,
                                    match_glob: str | None = None, soft_deleted: bool = False) -> Any:
            with self._lock:
                self.list_calls.append(ListCall(bucket_name, prefix, delimiter, match_glob))
            return original(bucket_name, prefix, delimiter, match_glob, soft_deleted=soft_deleted)

        storage.get_file_list = recording_get_file_list

        # Buckets are created on demand: a workload writing to gs://any-bucket/... just works, as it would
        # in a project where the bucket exists (an emulator has no reason to make users pre-create them).
        for verb in ("create_file", "create_resumable_upload"):
            original_verb = getattr(storage, verb)

            def creating(bucket_name: str, *args: Any, _verb: Any = original_verb, **kwargs: Any) -> Any:
                self.create_bucket(bucket_name)
                return _verb(bucket_name, *args, **kwargs)

            setattr(storage, verb, creating)

    @property
    def port(self) -> int:
        httpd = self._server._api._httpd
        if httpd is None:
            raise RuntimeError("StorageEmulator is not started")
        return int(httpd.server_address[1])

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` -- the value of ``STORAGE_EMULATOR_HOST``."""
        return f"http://{self._host}:{self.port}"

    def env(self) -> dict[str, str]:
        """Environment variables that point google-cloud-storage and gcsfs at this server."""
        return {
            "STORAGE_EMULATOR_HOST": self.url,
            # gcsfs otherwise probes each bucket's hierarchical-namespace type and waits ~60 s.
            "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false",
        }

    def start(self) -> StorageEmulator:
        """Bind and serve in a thread.

        Raises:
            OSError: the port could not be bound (e.g. taken by another process). ``gcp-storage-emulator``'s own
                ``Server.start`` would wait forever then: its thread dies before it signals that it runs.
        """
        api = self._server._api
        api.start()
        while not api.is_running.wait(0.05):
            if not api.is_alive():
                raise OSError(f"the Cloud Storage emulator could not bind {self._host}:{api._port} "
                              "(is the port taken?); its thread printed why above")
        httpd = api._httpd
        if httpd is not None:
            default = httpd.handle_error

            def handle_error(request: Any, client_address: Any) -> None:
                # A client that went away mid-request (a workload killed by an injected fault) is not an
                # error of the server: do not print a traceback for it.
                if not isinstance(sys.exc_info()[1], ConnectionError):
                    default(request, client_address)

            httpd.handle_error = handle_error
        return self

    def stop(self) -> None:
        """Stop the server, at once rather than at its next 0.5 s poll.

        ``serve_forever`` only looks at a shutdown request when its ``select`` returns; an empty connection
        wakes it, so each stop costs milliseconds instead of up to half a second per test.
        """
        if self._server._api._httpd is None:  # never started
            self._server.stop()
            return
        address = (self._host, self.port)
        stopper = threading.Thread(target=self._server.stop, name="storage-emulator-stop", daemon=True)
        stopper.start()
        while stopper.is_alive():
            with contextlib.suppress(OSError):
                socket.create_connection(address, timeout=0.1).close()
            stopper.join(0.01)

    def __enter__(self) -> StorageEmulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def create_bucket(self, name: str) -> None:
        """Create bucket ``name`` unless it exists."""
        from gcp_storage_emulator.handlers import buckets

        if name not in self._server._storage.buckets:
            buckets.create_bucket(name, self._server._storage)

    def put_objects(self, bucket: str, objects: dict[str, bytes]) -> None:
        """Store many objects at once, straight into the server's storage (no HTTP).

        For seeding large trees fast: the emulator rewrites its whole index on every HTTP upload, which
        makes N uploads cost O(N^2). The objects are the same resources an upload would create.
        """
        from gcp_storage_emulator.handlers.objects import _checksums, _make_object_resource

        self.create_bucket(bucket)
        storage = self._server._storage
        bucket_objects = storage.objects.setdefault(bucket, {})
        for name, content in objects.items():
            resource = _make_object_resource(self.url, bucket, name, "application/octet-stream", str(len(content)))
            storage._store.write_bytes(storage._object_path(bucket, name), content)
            bucket_objects[name] = _checksums(content, resource)
        storage._write_config_to_file()

    def wipe(self) -> None:
        """Delete every object and bucket, and forget the recorded listings."""
        self._server.wipe()
        with self._lock:
            self.list_calls.clear()

    def filesystem(self, **kwargs: Any) -> Any:
        """A fresh ``gcsfs.GCSFileSystem`` talking to this server (anonymous, no instance cache)."""
        with patched_environ(self.env()):
            import gcsfs

            return gcsfs.GCSFileSystem(endpoint_url=self.url, token="anon", skip_instance_cache=True, **kwargs)


@contextlib.contextmanager
def patched_environ(values: dict[str, str]) -> Iterator[None]:
    """Set environment variables for the duration of the block, then restore the old values."""
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in old.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
