"""Long-running operations, served through ``google.longrunning.Operations``.

DeleteCustomJob (and later the TPU API) return an ``Operation``. Deletes here finish at once, so the
operation is created done, with ``google.protobuf.Empty`` as its response, and the client's
``operation.result()`` returns without polling; GetOperation still answers for clients that poll.
"""

from __future__ import annotations

import itertools
import threading
from typing import Any

from .errors import NotFound


class OperationStore:
    """Operations by name. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ops: dict[str, Any] = {}
        self._ids = itertools.count(1)

    def done_delete(self, resource_name: str) -> Any:
        """A finished delete of ``resource_name``: Empty response, DeleteOperationMetadata."""
        from google.cloud.aiplatform_v1.types import DeleteOperationMetadata
        from google.longrunning import operations_pb2
        from google.protobuf import any_pb2, empty_pb2

        response = any_pb2.Any()
        response.Pack(empty_pb2.Empty())
        metadata = any_pb2.Any()
        metadata.Pack(DeleteOperationMetadata.pb(DeleteOperationMetadata()))
        with self._lock:
            name = f"{resource_name}/operations/{next(self._ids)}"
            op = operations_pb2.Operation(name=name, done=True, response=response, metadata=metadata)
            self._ops[name] = op
            return op

    def start(self, name: str, metadata: Any) -> Any:
        """A pending operation ``name`` with ``metadata`` (a protobuf message, packed into Any)."""
        from google.longrunning import operations_pb2
        from google.protobuf import any_pb2

        packed = any_pb2.Any()
        packed.Pack(metadata)
        with self._lock:
            op = operations_pb2.Operation(name=name, done=False, metadata=packed)
            self._ops[name] = op
            return op

    def finish(self, name: str, response: Any = None, error: tuple[int, str] | None = None) -> None:
        """Mark ``name`` done with a response message (packed) or an error ``(google.rpc code, message)``."""
        from google.protobuf import any_pb2, empty_pb2

        with self._lock:
            op = self._ops.get(name)
            if op is None or op.done:
                return
            op.done = True
            if error is not None:
                op.error.code, op.error.message = error
            else:
                packed = any_pb2.Any()
                packed.Pack(response if response is not None else empty_pb2.Empty())
                op.response.CopyFrom(packed)

    def next_id(self) -> int:
        with self._lock:
            return next(self._ids)

    def get(self, name: str) -> Any:
        with self._lock:
            if name not in self._ops:
                raise NotFound(f"Operation {name} does not exist.")
            return self._ops[name]

    def list(self, name: str) -> list[Any]:
        with self._lock:
            return [op for n, op in self._ops.items() if n.startswith(name)]

    def delete(self, name: str) -> None:
        with self._lock:
            self._ops.pop(name, None)

    def clear(self) -> None:
        with self._lock:
            self._ops.clear()
