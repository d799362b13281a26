"""The worker runner as a training machine gets it: ``runner_source()`` (``protocol.py`` inlined) written alone to a
directory of its own, with no package beside it. The runner's tests start this file, so they run the text that
ships."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from functools import cache
from pathlib import Path

from airflow_provider_resilient import worker


@cache
def shipped_runner() -> Path:
    """``runner.py`` as the startup script writes it (once per test process; removed when the process ends)."""
    folder = Path(tempfile.mkdtemp(prefix="shipped-runner-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    path = folder / "runner.py"
    path.write_text(worker.runner_source(), encoding="utf-8")
    return path
