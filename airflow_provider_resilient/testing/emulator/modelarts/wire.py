"""ModelArts' REST API v2 over HTTP: exactly the paths ``huaweicloudsdkmodelarts.v1.ModelArtsClient`` calls for
training jobs (its ``_<operation>_http_info`` methods), each unpacked, handed to :class:`~.service.ModelArtsService`
and packed -- nothing else happens here.

Requests must be signed as the SDK signs them (``Authorization: SDK-HMAC-SHA256 Access=..., SignedHeaders=...,
Signature=...``; an ``X-Auth-Token`` is accepted too); the signature itself is not verified. An unsigned request is
401 ``ModelArts.0201``; an ``X-Project-Id`` header that differs from the path's project is 404 ``ModelArts.2786``.
Errors are ``{"error_code": "ModelArts.XXXX", "error_msg": ...}`` with the HTTP status of :mod:`.errors`. Every call
is recorded in the emulator's :class:`~..calls.CallLog` under its SDK operation name (``CreateTrainingJob``,
``ShowTrainingJobDetails`` ...), ``code`` ``OK`` or the error code.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import uuid
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlparse

from ..calls import CallLog, CallRecord
from . import errors
from .errors import ModelArtsError
from .service import ModelArtsService

log = logging.getLogger(__name__)

_P = r"/v2/(?P<project>[^/]+)"
_J = r"(?P<job>[^/]+)"
Handler = Callable[[ModelArtsService, str, str, Any, dict[str, str]], Any]
#: (HTTP method, path pattern, SDK operation, success status, what the service is asked).
ROUTES: tuple[tuple[str, re.Pattern[str], str, int, Handler], ...] = tuple(
    (method, re.compile(pattern), operation, status, handler) for method, pattern, operation, status, handler in (
        ("POST", f"{_P}/training-jobs", "CreateTrainingJob", 201,
         lambda s, p, j, b, q: s.create_training_job(p, b)),
        ("GET", f"{_P}/training-jobs/{_J}", "ShowTrainingJobDetails", 200,
         lambda s, p, j, b, q: s.show_training_job_details(p, j)),
        ("DELETE", f"{_P}/training-jobs/{_J}", "DeleteTrainingJob", 202,
         lambda s, p, j, b, q: s.delete_training_job(p, j) or {}),
        ("POST", f"{_P}/training-jobs/{_J}/actions", "StopTrainingJob", 202,
         lambda s, p, j, b, q: s.stop_training_job(p, j, b)),
        ("GET", f"{_P}/training-jobs/{_J}/events", "ListTrainingJobEvents", 200,
         lambda s, p, j, b, q: s.list_training_job_events(p, j, q)),
        ("GET", f"{_P}/training-jobs/{_J}/stages", "ListTrainingJobStages", 200,
         lambda s, p, j, b, q: s.list_training_job_stages(p, j)),
        ("GET", f"{_P}/training-jobs/{_J}/tasks", "ListTrainingJobTasks", 200,
         lambda s, p, j, b, q: s.list_training_job_tasks(p, j)),
        ("POST", f"{_P}/training-job-searches", "ListTrainingJobs", 200,
         lambda s, p, j, b, q: s.list_training_jobs(p, b)),
        ("POST", f"{_P}/modelarts-training-job/resource-instances/filter", "ListTrainingJobsByTags", 200,
         lambda s, p, j, b, q: s.list_training_jobs_by_tags(p, b, q)),
        ("POST", f"{_P}/modelarts-training-job/resource-instances/count", "CountTrainingJobsByTags", 200,
         lambda s, p, j, b, q: s.count_training_jobs_by_tags(p, b)),
        ("POST", f"{_P}/modelarts-training-job/{_J}/tags/create", "CreateTrainJobTags", 200,
         lambda s, p, j, b, q: s.create_train_job_tags(p, j, b)),
        ("DELETE", f"{_P}/modelarts-training-job/{_J}/tags/delete", "DeleteTrainJobTags", 200,
         lambda s, p, j, b, q: s.delete_train_job_tags(p, j, b)),
        ("GET", f"{_P}/modelarts-training-job/tags", "ListTrainingJobTags", 200,
         lambda s, p, j, b, q: s.list_training_job_tags(p)),
        ("GET", f"{_P}/modelarts-training-job/{_J}/tags", "ShowTrainJobTags", 200,
         lambda s, p, j, b, q: s.show_train_job_tags(p, j)),
        ("GET", f"{_P}/training-job-flavors", "ShowTrainingJobFlavors", 200,
         lambda s, p, j, b, q: s.show_training_job_flavors(q.get("flavor_type"))),
    ))


def _route(method: str, path: str) -> tuple[str, int, Handler, dict[str, str]]:
    """The operation serving ``method path`` and the path's parameters. Raises 404 / 405 ModelArtsError."""
    allowed = False
    for route_method, pattern, operation, status, handler in ROUTES:
        match = pattern.fullmatch(path)
        if match is None:
            continue
        if route_method == method:
            return operation, status, handler, match.groupdict()
        allowed = True
    raise errors.method_not_allowed(method) if allowed else errors.path_not_found(path)


def _authenticate(headers: Any, project: str) -> None:
    authorization = headers.get("Authorization") or ""
    signed = authorization.startswith("SDK-HMAC-SHA256 ") and "Access=" in authorization \
        and "Signature=" in authorization
    if not signed and not headers.get("X-Auth-Token"):
        raise errors.no_token()
    claimed = headers.get("X-Project-Id")
    if claimed and claimed != project:
        raise errors.project_mismatch()


class ModelArtsServer:
    """The HTTP server of :class:`ModelArtsService` on ``host:port`` (0: a free port)."""

    def __init__(self, service: ModelArtsService, calls: CallLog, host: str = "127.0.0.1", port: int = 0) -> None:
        self._httpd = ThreadingHTTPServer((host, port), _handler(service, calls))
        self._httpd.daemon_threads = True
        self.port = int(self._httpd.server_address[1])
        threading.Thread(target=self._httpd.serve_forever, name="emulator-modelarts", daemon=True).start()

    def stop(self) -> None:
        from ..httpd import stop_at_once

        stop_at_once(self._httpd)


def _handler(service: ModelArtsService, calls: CallLog) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _reply(self, status: int, body: Any) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("X-Request-Id", uuid.uuid4().hex)
            self.end_headers()
            self.wfile.write(data)

        def _serve(self, method: str) -> None:
            url = urlparse(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            operation, resource, code = f"{method} {url.path}", url.path, "OK"
            try:
                operation, status, handler, params = _route(method, url.path)
                resource = params.get("job") or params["project"]
                _authenticate(self.headers, params["project"])
                try:
                    body = json.loads(raw) if raw.strip() else None
                except ValueError:
                    raise errors.invalid_json() from None
                reply = handler(service, params["project"], params.get("job", ""), body, dict(parse_qsl(url.query)))
            except ModelArtsError as exc:
                code, status, reply = exc.code, exc.status, exc.body()
            except Exception:  # a bug in the emulator: the client sees a server error, the log the cause
                log.exception("ModelArts %s failed", operation)
                code, status, reply = "ModelArts.2950", 500, {"error_code": "ModelArts.2950",
                                                               "error_msg": "Unknown error."}
            # recorded before the reply: a client that has its answer finds its call in the log
            calls.add(CallRecord(operation, f"{method} {self.path}", resource, code, calls.clock()))
            self._reply(status, reply)

        def do_GET(self) -> None:
            self._serve("GET")

        def do_POST(self) -> None:
            self._serve("POST")

        def do_DELETE(self) -> None:
            self._serve("DELETE")

        def do_PUT(self) -> None:
            self._serve("PUT")

        def log_message(self, format: str, *args: Any) -> None:
            log.debug("ModelArts API: " + format, *args)

    return Handler
