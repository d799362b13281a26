"""Secret Manager's ``AccessSecretVersion`` over REST, as a worker VM calls it with its service account's token.

Serves ``GET /v1/projects/P/secrets/S/versions/V:access`` (``V``: a version number or ``latest``) with the
answer's REST shape -- ``{"name": ".../versions/N", "payload": {"data": <base64>}}`` -- and Google's error
shape for an unknown secret or version (404 NOT_FOUND) or a call without ``Authorization: Bearer`` (401
UNAUTHENTICATED). Secrets are added by tests and the demo (:meth:`SecretStore.add`); each access is counted.
"""

from __future__ import annotations

import base64
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ACCESS_RE = re.compile(r"^/v1/(?P<secret>projects/[^/]+/secrets/[^/]+)/versions/(?P<version>[^/:]+):access$")


class SecretStore:
    """Secrets by name (``projects/P/secrets/S``), each a list of versions (1-based)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._versions: dict[str, list[str]] = {}
        self.accessed: list[str] = []

    def add(self, secret: str, value: str) -> str:
        """Add a version of ``secret`` (created on first use); returns the version's name."""
        with self._lock:
            versions = self._versions.setdefault(secret, [])
            versions.append(value)
            return f"{secret}/versions/{len(versions)}"

    def access(self, secret: str, version: str) -> tuple[str, str] | None:
        """(version name, value), or None when there is no such secret or version."""
        with self._lock:
            versions = self._versions.get(secret) or []
            number = len(versions) if version == "latest" else int(version) if version.isdigit() else 0
            if not 1 <= number <= len(versions):
                return None
            self.accessed.append(f"{secret}/versions/{number}")
            return f"{secret}/versions/{number}", versions[number - 1]

    def clear(self) -> None:
        with self._lock:
            self._versions.clear()
            self.accessed.clear()


class SecretManagerServer:
    """The REST endpoint over a :class:`SecretStore`, on ``host`` and a free port."""

    def __init__(self, store: SecretStore, host: str = "127.0.0.1") -> None:
        self.store = store
        self._httpd = ThreadingHTTPServer((host, 0), self._handler())
        self._httpd.daemon_threads = True
        threading.Thread(target=self._httpd.serve_forever, name="emulator-secret-manager", daemon=True).start()

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    def stop(self) -> None:
        from .httpd import stop_at_once

        stop_at_once(self._httpd)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        store = self.store

        class Handler(BaseHTTPRequestHandler):
            def _reply(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _error(self, code: int, status: str, message: str) -> None:
                self._reply(code, {"error": {"code": code, "message": message, "status": status}})

            def do_GET(self) -> None:
                if not (self.headers.get("Authorization") or "").startswith("Bearer "):
                    return self._error(401, "UNAUTHENTICATED", "Request is missing required authentication "
                                                               "credential.")
                match = ACCESS_RE.match(self.path.split("?", 1)[0])
                if not match:
                    return self._error(404, "NOT_FOUND", f"no such method: {self.path}")
                found = store.access(match["secret"], match["version"])
                if found is None:
                    return self._error(404, "NOT_FOUND", f"Secret [{match['secret']}] not found or has no "
                                                         "versions.")
                name, value = found
                return self._reply(200, {"name": name,
                                         "payload": {"data": base64.b64encode(value.encode()).decode()}})

            def log_message(self, format: str, *args: Any) -> None:
                return None

        return Handler


__all__ = ["SecretManagerServer", "SecretStore"]
