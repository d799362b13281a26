"""The emulator's small HTTP servers (a TPU VM's metadata server, Secret Manager, the control API): stopped at once."""

from __future__ import annotations

import contextlib
import socket
import socketserver
import threading


def stop_at_once(httpd: socketserver.TCPServer) -> None:
    """Shut ``httpd`` down and close it at once, rather than at its ``serve_forever``'s next 0.5 s poll.

    ``serve_forever`` only looks at a shutdown request when its ``select`` returns; an empty connection wakes
    it (a request handler reads no request line and closes), so a stop costs milliseconds -- each node the TPU
    emulator deletes stops one per worker VM, in the engine's tick.
    """
    host, port = httpd.server_address[:2]
    address = (host.decode() if isinstance(host, bytes) else str(host), int(port))
    stopper = threading.Thread(target=httpd.shutdown, name="emulator-httpd-stop", daemon=True)
    stopper.start()
    while stopper.is_alive():
        with contextlib.suppress(OSError):
            socket.create_connection(address, timeout=0.1).close()
        stopper.join(0.01)
    httpd.server_close()
