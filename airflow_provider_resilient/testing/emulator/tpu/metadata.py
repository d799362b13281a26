"""The metadata server of one TPU worker VM, on loopback: what ``GCE_METADATA_HOST`` points at.

Serves (header ``Metadata-Flavor: Google`` required, as on Google Compute Engine):

* ``GET /computeMetadata/v1/instance/attributes/<key>`` -- the node's ``metadata`` map plus
  ``agent-worker-number``, ``accelerator-type``, ``worker-network-endpoints``;
* ``GET /computeMetadata/v1/instance/{id,hostname,name}``;
* ``GET /computeMetadata/v1/instance/service-accounts/default/token`` -- an access token (JSON), which the
  emulated Secret Manager accepts;
* ``PUT`` / ``GET /computeMetadata/v1/instance/guest-attributes/<namespace>/<key>`` -- what the VM
  reports; the TPU API's GetGuestAttributes reads them per worker (Compute Engine, "Set and query guest
  attributes", https://cloud.google.com/compute/docs/metadata/manage-guest-attributes).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

PREFIX = "/computeMetadata/v1/instance/"


class MetadataServer:
    """One worker's metadata server. ``attributes`` is read at each request (the node may change)."""

    def __init__(self, worker_id: int, attributes: Callable[[], dict[str, str]], host: str = "127.0.0.1") -> None:
        self.worker_id = worker_id
        self.attributes = attributes
        self.guest_attributes: dict[str, str] = {}  # "namespace/key" -> value
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer((host, 0), self._handler())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, name=f"tpu-metadata-{worker_id}",
                                        daemon=True)
        self._thread.start()

    @property
    def address(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"{host.decode() if isinstance(host, bytes) else host}:{port}"

    def stop(self) -> None:
        from ..httpd import stop_at_once

        stop_at_once(self._httpd)

    def guest(self, query_path: str = "") -> dict[str, str]:
        """Guest attributes whose ``namespace/key`` starts with ``query_path`` (``""``: all)."""
        with self._lock:
            return {k: v for k, v in self.guest_attributes.items() if k.startswith(query_path.strip("/"))}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def _reply(self, status: int, body: str = "") -> None:
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Metadata-Flavor", "Google")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _path(self) -> str | None:
                if self.headers.get("Metadata-Flavor") != "Google":
                    self._reply(403, "Missing Metadata-Flavor:Google header.")
                    return None
                if not self.path.startswith(PREFIX):
                    self._reply(404, "not found")
                    return None
                return self.path[len(PREFIX):].split("?", 1)[0]

            def do_GET(self) -> None:
                path = self._path()
                if path is None:
                    return
                attrs = server.attributes()
                if path.startswith("attributes/"):
                    key = path[len("attributes/"):]
                    if key in attrs:
                        return self._reply(200, attrs[key])
                    return self._reply(404, f"no attribute {key}")
                if path.startswith("guest-attributes/"):
                    found = server.guest(path[len("guest-attributes/"):])
                    if len(found) == 1:
                        return self._reply(200, next(iter(found.values())))
                    return self._reply(200 if found else 404, "\n".join(f"{k}={v}" for k, v in found.items()))
                if path == "service-accounts/default/token":
                    return self._reply(200, '{"access_token": "emulated-token", "expires_in": 3599, '
                                            '"token_type": "Bearer"}')
                if path in ("id", "name", "hostname"):
                    return self._reply(200, attrs.get(f"instance-{path}", f"worker-{server.worker_id}"))
                return self._reply(404, "not found")

            def do_PUT(self) -> None:
                path = self._path()
                if path is None:
                    return
                if not path.startswith("guest-attributes/") or path.count("/") != 2:
                    return self._reply(400, "PUT guest-attributes/NAMESPACE/KEY only")
                length = int(self.headers.get("Content-Length") or 0)
                value = self.rfile.read(length).decode("utf-8", "replace")
                with server._lock:
                    server.guest_attributes[path[len("guest-attributes/"):]] = value
                self._reply(200)

            def log_message(self, format: str, *args: Any) -> None:
                return None

        return Handler
